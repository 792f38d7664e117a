"""The second, smaller site, and the ``memory`` phase: one worker crawls all of it.

Until issue 29 (item 6: ``make bench`` in 10 minutes on 2 cores) every crawl
phase ran on one 100,000-page site, and the ``worker`` phase crawled all of it,
about 5 minutes, for the Memory section: the worker's RSS from its first page to
its last, Redis' bytes per seen URL with the frontier empty. Shorter windows of
that site do not give the same figures, because how many new links a page brings
depends on how far into its site a crawl is: at a tenth of the site a worker sends
13 Redis commands a page, at a fifth 10. So:

- plain Scrapy and one worker keep the large site (``--pages``), whose size plain
  Scrapy's cost depends on (it keeps its frontier in the process: 3.0-3.6 ms of CPU
  a page on the large site, 2.65-3.1 on a 20,000-page one, in runs of 2026-11-27);
- every other setup but the jobs phase's (5,000-page windows of the large site, as
  before: docs/BENCHMARKS.md) crawls windows of a second site of ``--small-pages`` pages,
  each window the same fraction of it as before of the large one (a fifth: 3,000 of
  15,000 against 20,000 of 100,000), and the memory phase crawls all of it.
"""

from __future__ import annotations

from tests.bench.crawls import Bench, CrawlResult
from tests.bench.site_proc import Site


def second_bench(bench: Bench, pages: int) -> Bench:
    """``bench``'s Redis, CPUs and settings on a site of ``pages`` pages of its own
    (logs under ``small/``); stop its ``site`` when done."""
    log_dir = bench.log_dir / "small"
    log_dir.mkdir(parents=True, exist_ok=True)
    site = Site(pages, log_dir, bench.service_cpus)
    small = Bench(
        site, bench.redis, log_dir, bench.crawl_cpus, bench.service_cpus, settings=bench.settings
    )
    small.env = dict(bench.env)
    return small


def memory_phase(bench: Bench, window: int) -> CrawlResult:
    """The ``worker`` phase's one worker, pinned the same way, over all of ``bench``'s site;
    its first ``window`` pages give the per-page figures a window would."""
    return bench.worker_phase(min(window, bench.site.pages), 2 * bench.site.pages)


def section(one: CrawlResult | None, stock: CrawlResult | None) -> list[str]:
    """The Memory section of docs/BENCHMARKS.md: ``one``, the memory phase's crawl;
    ``stock``, stock scrapy-redis' (its dupefilter's bytes), if it ran."""
    lines = ["## Memory", ""]
    if one is None or not one.full:
        return lines + ["Not run."]
    full = one.full
    fp = one.dupefilter_bytes_per_fp
    bytes_per_fp = "n/a" if fp is None else f"{fp:.1f} bytes"
    lines += [
        f"One worker crawled the whole of the second site, {one.pages_total - 1:,} pages"
        " (`tests/bench/memory.py`: smaller than the first, to keep `make bench` in 10"
        " minutes; pinned as in the throughput table, same settings) "
        f"(the site served {one.pages_total:,} pages, the worker "
        f"scraped {one.items:,} items; "
        f"{full['pages_per_s']:,.0f} pages/s, {full['cpu_ms_per_page']:.2f} ms CPU/page, "
        f"{full['commands_per_page']:.1f} Redis commands/page, "
        f"{full['redis_cpu_per_10k']:.2f} Redis CPU s/10k pages over the whole crawl).",
        "",
        "| Measure | Value |",
        "|---|---:|",
        f"| Worker RSS when the first page was served | {one.rss_start / 1e6:.0f} MB |",
        f"| Worker RSS after {full['pages']:,.0f} pages | {one.rss_end / 1e6:.0f} MB |",
        f"| Growth | {(one.rss_end - one.rss_start) / 1e6:+.0f} MB |",
        f"| Redis memory per seen URL (used_memory growth without the item buffer, "
        f"/ {full['seen']:,.0f} fingerprints; frontier empty) | "
        f"{full['redis_bytes_per_seen']:.0f} bytes |",
        f"| of which the seen-set's keys, per fingerprint | {bytes_per_fp} |",
    ]
    if stock is not None and stock.dupefilter_bytes_per_fp:
        lines.append(
            f"| stock scrapy-redis dupefilter set, per fingerprint | "
            f"{stock.dupefilter_bytes_per_fp:.0f} bytes |"
        )
    return lines
