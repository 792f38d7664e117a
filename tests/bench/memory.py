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
