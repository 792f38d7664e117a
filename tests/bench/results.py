"""``results.json``: every figure of a ``make bench`` run, raw, beside its logs."""

from __future__ import annotations

import dataclasses
from typing import Any

from tests.bench.crawls import describe
from tests.bench.report import Report


def results(report: Report) -> dict[str, Any]:
    """What the run measured, as JSON-ready values (anything else is ``str``'d)."""
    return {
        "crawls": {k: describe(v) for k, v in report.crawls.items()},
        "memory": describe(report.memory) if report.memory else None,
        "writers": [w.__dict__ for w in report.writers],
        "seen": [s.__dict__ for s in report.seen],
        "queue": [q.__dict__ for q in report.queue],
        "phases": report.phases,
        "cluster": (
            {
                "masters": [dataclasses.asdict(m) for m in report.cluster.masters],
                "pages_by_shard": report.cluster.pages_by_shard,
                "seen_bytes_per_url": report.cluster.seen_bytes_per_url,
            }
            if report.cluster
            else None
        ),
        "distance": (
            [
                {"workers": p.workers, "ratio": p.ratio}
                | {k: describe(getattr(p, k)) for k in ("loopback", "relay")}
                for p in report.distance.pairs
            ]
            if report.distance
            else None
        ),
        "jobs": (
            {
                "baselines": report.jobs.baselines,
                "pairs": [
                    {"baseline": p.baseline, "job_pages": p.job_pages}
                    | {k: describe(getattr(p, k)) for k in ("with_jobs", "without")}
                    for p in report.jobs.pairs
                ],
            }
            if report.jobs
            else None
        ),
        "archive": (
            [
                {"warc_bytes": p.warc_bytes, "warc_files": p.warc_files}
                | {k: describe(getattr(p, k)) for k in ("without", "with_warc")}
                for p in report.archive.pairs
            ]
            if report.archive
            else None
        ),
        "freshness": (
            {
                "ratios": [report.freshness.ratio(0), report.freshness.ratio(1)],
                "windows": {
                    k: [dataclasses.asdict(w) for w in v]
                    for k, v in report.freshness.windows.items()
                },
            }
            if report.freshness
            else None
        ),
        "seconds": report.seconds,
        "rendering": dataclasses.asdict(report.rendering) if report.rendering else None,
    }
