"""The ``archive`` phase: what WARC writing costs a page (issue 28, "Cost").

The ``worker`` phase's one-worker crawl of the same site, pinned the same
way, until ``--archive-window`` pages, alternately without and with
``WARC_ENABLED`` (``--archive-pairs`` rounds, the order rotated each round,
as the ``jobs`` phase does): the worker's CPU per page with and without, and
the disk bytes per page of the ``.warc.gz`` files the archiving worker left
(their size once it stopped, over the pages the site served it, each page a
request and a response record). The writer thread's CPU is the worker's
process CPU, so it is counted.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tests.bench.crawls import Bench, CrawlResult


@dataclass
class ArchivePair:
    without: CrawlResult
    with_warc: CrawlResult
    warc_bytes: int
    warc_files: int

    @property
    def cpu_ratio(self) -> float:
        return self.with_warc.cpu_ms_per_page / self.without.cpu_ms_per_page

    @property
    def bytes_per_page(self) -> float:
        return self.warc_bytes / max(1, self.with_warc.pages_total)


@dataclass
class ArchiveResult:
    window: int
    pairs: list[ArchivePair] = field(default_factory=list)


def archive_phase(bench: Bench, window: int, pairs: int) -> ArchiveResult:
    result = ArchiveResult(window=window)
    for i in range(pairs):
        runs: dict[bool, CrawlResult] = {}
        size = files = 0
        for warc in (False, True) if i % 2 == 0 else (True, False):
            folder = Path(tempfile.mkdtemp(prefix="bench-warc-"))
            try:
                runs[warc] = bench.windowed_worker(
                    f"1 worker, WARC {'on' if warc else 'off'}",
                    f"archive-{'on' if warc else 'off'}-{i}",
                    window,
                    f"WARC_ENABLED={warc}",
                    f"WARC_DIR={folder}",
                )
                if warc:
                    written = list(folder.glob("*.warc.gz"))
                    files = len(written)
                    size = sum(p.stat().st_size for p in written)
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            run = runs[warc]
            print(
                f"  {run.name}: {run.cpu_ms_per_page:.2f} ms CPU/page, {run.pages_per_s:,.0f} p/s"
            )
        result.pairs.append(ArchivePair(runs[False], runs[True], size, files))
        print(f"  WARC: {result.pairs[-1].bytes_per_page:,.0f} bytes/page in {files} files")
    return result


def section(result: ArchiveResult) -> list[str]:
    """The section of docs/BENCHMARKS.md."""
    pairs = result.pairs
    cpu_off = [p.without.cpu_ms_per_page for p in pairs]
    cpu_on = [p.with_warc.cpu_ms_per_page for p in pairs]
    return [
        "## WARC archive: what it costs per page",
        "",
        "The `worker` phase's one-worker crawl (pinned the same way, same site and settings),"
        f" {result.window:,}-page windows, without and with `WARC_ENABLED=true`, alternately"
        " (`tests/bench/archive.py`). Bytes are the `.warc.gz` files' size once the worker"
        " stopped over the pages the site served it (a request and a response record each,"
        " one gzip member per record).",
        "",
        "| Per page | Without WARC | With WARC | With / without |",
        "|---|---:|---:|---:|",
        f"| Worker CPU ms/page, median | {statistics.median(cpu_off):.2f} "
        f"| {statistics.median(cpu_on):.2f} "
        f"| {statistics.median(p.cpu_ratio for p in pairs):.3f} |",
        f"| Pages/s, median | {statistics.median(p.without.pages_per_s for p in pairs):,.0f} "
        f"| {statistics.median(p.with_warc.pages_per_s for p in pairs):,.0f} "
        f"| {statistics.median(p.with_warc.pages_per_s / p.without.pages_per_s for p in pairs):.3f}"
        " |",
        f"| Disk bytes/page, median | – "
        f"| {statistics.median(p.bytes_per_page for p in pairs):,.0f} | – |",
        "",
        "Each round, CPU ms/page without / with: "
        + ", ".join(
            f"{p.without.cpu_ms_per_page:.2f} / {p.with_warc.cpu_ms_per_page:.2f}" for p in pairs
        )
        + ".",
    ]
