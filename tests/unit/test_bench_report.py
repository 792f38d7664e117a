"""The one writer of docs/BENCHMARKS.md: this run's sections replaced, everything else kept."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.bench.report import Report, merge

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
