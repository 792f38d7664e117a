"""The archive's counters on their way to the exporter: stats -> published fields -> metrics."""

from __future__ import annotations

from types import SimpleNamespace

from monitor.archive_metrics import warc_metrics
from spiders_project.read_model.contract import counters_of
from spiders_project.worker.heartbeat import metric_counters


def test_warc_stats_become_published_counters():
    stats = {
        "warc/records": 7,
        "warc/bytes": 4096,
        "warc/write_errors": 2,
        "warc/records_dropped": 0,
        "warc/files_recovered": 1,  # a stat, not a metric
    }
    counters = metric_counters(stats)
    assert {k: v for k, v in counters.items() if k.startswith("warc:")} == {
        "warc:records": 7,
        "warc:bytes": 4096,
        "warc:write_errors": 2,
        "warc:records_dropped": 0,
    }
    assert counters_of({b"warc:records": b"7", b"warc/other": b"1"}) == {"warc:records": 7}


def test_the_exporter_shows_them_per_worker_and_per_spider():
    worker = SimpleNamespace(worker="h:1", counters={"warc:records": 7, "warc:write_errors": 2})
    idle = SimpleNamespace(worker="h:2", counters={})
    view = SimpleNamespace(
        spider="s", totals={"warc:records": 9, "warc:bytes": 10}, workers=[worker, idle]
    )
    families = {f.name: f for f in warc_metrics([view])}
    samples = {
        (f.name, tuple(sorted(s.labels.items()))): s.value
        for f in families.values()
        for s in f.samples
        if s.name.endswith("_total")
    }
    assert samples[("crawler_warc_records", (("spider", "s"), ("worker", "h:1")))] == 7
    assert samples[("crawler_warc_write_errors", (("spider", "s"), ("worker", "h:1")))] == 2
    assert ("crawler_warc_records", (("spider", "s"), ("worker", "h:2"))) not in samples
    assert samples[("crawler_spider_warc_records", (("spider", "s"),))] == 9
    assert samples[("crawler_spider_warc_write_errors", (("spider", "s"),))] == 0
