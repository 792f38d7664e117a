"""job_progress: the counts of every shard summed, the rate from ack.lua's marks, the ETA."""

import json

from scrapy import Request

from spiders_project.frontier.codec.serialize import dumps
from spiders_project.read_model.job_progress import FIELDS, _job_in, details, job_progress, summary

NOW = 1_700_000_060_000


def test_counts_of_every_shard_add_up_and_the_record_gives_state_and_seeds():
    records = {b"a": json.dumps({"state": "running", "started_at": NOW, "seeds": ["http://x/"]})}
    shards = [
        {
            b"a|queued": b"10",
            b"a|leased": b"2",
            b"a|slots": b"1",
            b"a|pages": b"30",
            b"b|later": b"1",
        },
        {b"a|queued": b"5", b"a|pages": b"20", b"a|purged": b"3", b"a|items": b"7"},
        {b"a|dead_letters": b"1", b"a|refused": b"2"},
    ]
    a, b = job_progress(records, shards, NOW)
    assert tuple(a.as_dict()) == FIELDS
    assert (a.queued, a.in_flight, a.leased, a.pages, a.purged, a.items) == (15, 1, 1, 50, 3, 7)
    assert (a.dead_letters, a.refused, a.seeds, a.state) == (1, 2, ["http://x/"], "running")
    assert a.started_at == "2023-11-14T22:14:20+00:00" and a.finished_at is None
    assert b.id == "b" and b.backing_off == 1 and b.state == "running"


def test_leases_split_into_downloads_and_the_rest():
    """``<job>|slots`` are the leases holding a download slot: in_flight; the other
    leases are leased (spares, prefetched, awaiting their ack)."""
    shards = [
        {b"a|leased": b"50", b"a|slots": b"12", b"b|leased": b"3"},
        {b"a|leased": b"30", b"a|slots": b"4", b"b|slots": b"-2"},
    ]
    a, b = job_progress({}, shards, NOW)
    assert (a.in_flight, a.leased, a.leases) == (16, 64, 80)
    assert (b.in_flight, b.leased) == (0, 3)  # a count below 0 shows as none
    assert a.active and b.active
    assert a.as_dict()["leased"] == 64 and "leases" not in a.as_dict()
    assert "16 in flight, 64 leased" in summary(a)
    assert not job_progress({}, [{b"c|slots": b"0", b"c|acked": b"4"}], NOW)[0].active


def test_rate_sums_the_shards_and_is_zero_a_minute_after_the_last_page():
    t0 = NOW - 40_000
    shards = [
        {b"a|pages": b"100", b"a|queued": b"60", b"a|rate": f"{t0} 20 {t0} 20 {NOW - 1000}"},
        {b"a|pages": b"40", b"a|rate": f"{t0} 0 {t0} 0 {NOW - 1000}".encode()},
    ]
    (a,) = job_progress({}, shards, NOW)
    assert a.pages_per_s == 3.0  # (80 + 40) pages in 40 s
    assert a.eta_s == 20.0
    assert "ETA ~20 s (estimate" in summary(a)
    (idle,) = job_progress({}, shards, NOW + 60_000)
    assert idle.pages_per_s == 0 and idle.eta_s is None
    assert "ETA unknown" in details(idle)


def test_a_members_job_is_read_as_the_scripts_read_it():
    """``_job_in`` mirrors job_counts.lua: the job right after the URL, never a
    "crawl_job" of a cookie or a nested dict, nor a value that is no job id."""

    def member(**kw) -> bytes:
        return dumps(Request("http://a.test/x", **kw).to_dict())

    assert _job_in(member(meta={"crawl_job": "j.1-a_b", "x": {"crawl_job": "n"}})) == "j.1-a_b"
    assert _job_in(member(meta={"x": {"crawl_job": "nested"}})) == "default"
    assert _job_in(member(cookies={"crawl_job": "cookie"})) == "default"
    assert _job_in(member(meta={"crawl_job": 'a"b'})) == "default"
    assert _job_in(b"-3 6 a.test" + member(meta={"crawl_job": "held"})) == "held"
