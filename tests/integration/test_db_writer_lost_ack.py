"""A batch whose acknowledgement Redis lost is written again by the running db_writer.

After a failover, the db_writer's last ack may have been applied on the
master the sentinels had just replaced, and never reached the replica they
promoted: that batch is still at the head of its processing list there,
although the writer holds nothing. The writer notices when it is next idle
and writes it again (its rows upserted), instead of leaving it there until
its next start (tests/e2e/test_jepsen.py and test_tls_sentinel.py fail over
for real).
"""

from __future__ import annotations

import json

from spiders_project.keys.db_writers import processing_of, writers
from tests.support.processes import K, db_writer, items_in_hand, stored_urls, wait_until


def test_a_batch_left_in_processing_is_written_again_when_idle(redis_url, r, tmp_path, procs):
    db_path = tmp_path / "items.db"
    writer = db_writer("dbw", redis_url, f"sqlite:///{db_path}", tmp_path)
    procs.append(writer)
    r.rpush(K.items, json.dumps({"url": "http://lost.test/first"}))
    wait_until(lambda: stored_urls(db_path) == ["http://lost.test/first"], 30, what="a batch")
    wait_until(lambda: items_in_hand(r) == 0, 10, what="its ack")
    # As a promoted replica holds it: taken, stored, acknowledged on the old master only.
    [writer_id] = r.hkeys(writers(K))
    processing = processing_of(K, writer_id.decode())
    r.rpush(processing, json.dumps({"url": "http://lost.test/first", "v": 2}))
    wait_until(lambda: items_in_hand(r) == 0, 10, what="the batch written again")
    assert writer.alive()
    assert sorted(stored_urls(db_path)) == ["http://lost.test/first"]  # upserted, not added
    assert writer.stop(30) == 0
    log = writer.log()
    assert log.count("were taken and never acknowledged") == 1, log[-2000:]
    assert "Traceback" not in log
