"""The WARC archive's metrics: what each worker's archive wrote, and its write errors."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, Metric

from spiders_project.read_model.cluster_view import SpiderView
from spiders_project.read_model.contract import WARC

# crawler_warc_<name>_total: what each worker's archive wrote (WARC_ENABLED), from
# its warc:<name> counters (archive/stats.py), and HELP for each.
WARC_FAMILIES = {
    "records": "WARC records written (warcinfo, request, response, revisit, rendered DOM).",
    "bytes": "Bytes of WARC files written (gzip members as on disk).",
    "write_errors": "Failed attempts to write WARC records (a full disk, an I/O error); "
    "with WARC_ON_ERROR=pause the worker fetches nothing while they fail.",
    "records_dropped": "WARC records not archived (WARC_ON_ERROR=continue while writes fail).",
}


def warc_metrics(spiders: Sequence[SpiderView]) -> Iterator[Metric]:
    """The archive's counters, per worker and per spider (all workers ever)."""
    per_worker = {
        name: CounterMetricFamily(f"crawler_warc_{name}", text, labels=["spider", "worker"])
        for name, text in WARC_FAMILIES.items()
    }
    per_spider = {
        name: CounterMetricFamily(
            f"crawler_spider_warc_{name}", text + " All workers ever.", labels=["spider"]
        )
        for name, text in WARC_FAMILIES.items()
    }
    for view in spiders:
        for name, family in per_spider.items():
            family.add_metric([view.spider], view.totals.get(WARC + name, 0))
        for w in view.workers:
            for name, family in per_worker.items():
                if WARC + name in w.counters:
                    family.add_metric([view.spider, w.worker], w.counters[WARC + name])
    # Per-worker series only for workers that archive (WARC_ENABLED), as the
    # per-proxy families only for crawls with proxies.
    yield from (family for family in per_worker.values() if family.samples)
    yield from per_spider.values()
