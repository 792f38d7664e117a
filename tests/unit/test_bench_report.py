"""The one writer of docs/BENCHMARKS.md: this run's sections replaced, everything else kept."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.bench.crawls import CrawlResult
from tests.bench.report import Report, merge, targets

BEFORE = """# Benchmarks

`python -m tests.bench` (what `make bench` runs), an older run.

## Against the targets

old targets

## Rendering

the last run that rendered

## How it is measured

old method

## Cost of owned leases and the one call path (issue 9)

Written by hand; `make bench` keeps it.
"""


def test_a_run_replaces_its_sections_and_keeps_skipped_phases_and_notes():
    report = Report(command="python -m tests.bench --skip rendering", started=datetime.now(UTC))
    report.seconds = 60
    text = merge(BEFORE, report)
    assert text.startswith("# Benchmarks\n\n`python -m tests.bench --skip rendering`")
    assert "old targets" not in text and "old method" not in text
    assert text.count("## Against the targets") == 1 and text.count("## How it is measured") == 1
    # Rendering was skipped: its section stays as the last run wrote it; the notes stay too.
    assert "the last run that rendered" in text
    assert "Written by hand; `make bench` keeps it." in text
    assert merge(text, report) == text, "merging again changes nothing"


def _whole_crawl(pages: int) -> CrawlResult:
    result = CrawlResult("distributed, 1 worker", 1, 4_000, 300.0, 3.0, 0.02, 0.0, 60.0)
    result.rss_start, result.rss_end, result.pages_total = 100_000_000, 120_000_000, pages
    result.full = {"pages": pages, "pages_per_s": 300.0, "cpu_ms_per_page": 3.0}
    result.full |= {"commands_per_page": 4.0, "redis_cpu_per_10k": 0.5, "seen": pages - 1}
    result.full["redis_bytes_per_seen"] = 60.0
    return result


def test_the_rss_row_names_the_pages_of_the_memory_phase_crawl():
    """The memory phase crawls a smaller site than the windows' (issue 29, item 6): the
    target row says over how many pages, and a crawl too short is not called met."""
    report = Report(command="python -m tests.bench", started=datetime.now(UTC))
    report.memory = _whole_crawl(15_001)
    assert "| Worker RSS growth over 15,001 pages < 100 MB | +20 MB (100 → 120 MB) | met |" in (
        targets(report)
    )
    report.memory = _whole_crawl(5_001)
    assert "| Worker RSS growth over 5,001 pages < 100 MB | +20 MB (100 → 120 MB) | — |" in (
        targets(report)
    )
