"""The compact seen-set (frontier/lua/seen.lua) against a real redis-server."""

import hashlib

import pytest
import redis
from scrapy import Request

from spiders_project.frontier.calls import enqueue_call, seen_add_call, seen_migrate_call
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.frontier.seen import EXACT, SeenConfig, mode_mismatch
from spiders_project.keys import RedisKeys
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import project_crawler

K = RedisKeys("t")
SCRIPTS = FrontierScripts()


def add(r, config: SeenConfig, tokens: list[str]) -> list[int]:
    """seen_add.lua for ``tokens``, in batches; 1 for each new one."""
    out: list[int] = []
    for i in range(0, len(tokens), 5000):
        keys, args = seen_add_call(K, config.spec, tokens[i : i + 5000])
        out += r.eval(SCRIPTS.seen_add.source, len(keys), *keys, *args)
    return out


def fingerprints(n: int, salt: str = "") -> list[bytes]:
    return [hashlib.sha1(f"{salt}{i}".encode()).digest() for i in range(n)]


def buckets(r) -> dict[bytes, int]:
    return {k: r.scard(k) for k in r.scan_iter(f"{K.seen}:*:*", count=10_000)}


def test_scrapys_fingerprints_are_deduplicated_exactly(redis_url, r):
    crawler = project_crawler(DistributedSpider, {"REDIS_URL": redis_url})
    urls = [f"http://example.com/p/{i}?a=1&b={i % 7}" for i in range(3000)]
    raw = [crawler.request_fingerprinter.fingerprint(Request(u)) for u in urls]
    tokens = [EXACT.token(f) for f in raw]
    assert add(r, EXACT, tokens) == [1] * 3000
    # The same requests, written otherwise: all seen.
    again = [Request(f"http://example.com/p/{i}?b={i % 7}&a=1") for i in range(3000)]
    assert add(r, EXACT, [EXACT.token(crawler.request_fingerprinter.fingerprint(q)) for q in again])
    assert add(r, EXACT, tokens) == [0] * 3000
    assert int(r.get(K.seen)) == 3000
    # A POST of the same URL is another request.
    post = crawler.request_fingerprinter.fingerprint(Request(urls[0], method="POST"))
    assert add(r, EXACT, [EXACT.token(post)]) == [1]


def test_buckets_split_as_the_set_grows_and_stay_compact_intsets(r):
    """Past 256 x 512 fingerprints the level goes up: every bucket met is split,
    nothing is lost or doubled, and every bucket stays an intset (8 bytes a member)."""
    first = [EXACT.token(f) for f in fingerprints(300_000)]
    assert sum(add(r, EXACT, first)) == 300_000
    more = [EXACT.token(f) for f in fingerprints(300_000, "more")]
    # Level 1 from 131,072 on, 2 from 262,144, 3 from 524,288: every bucket met was split.
    assert sum(add(r, EXACT, more)) == 300_000
    assert int(r.get(K.seen)) == 600_000
    sizes = buckets(r)
    levels = {k.split(b":")[-2] for k in sizes}
    assert levels == {b"3"} and len(sizes) == 8 * 512
    assert sum(sizes.values()) == 600_000, "every member kept once, across levels"
    assert max(sizes.values()) < 512
    sample = list(sizes)[:: max(1, len(sizes) // 50)]
    assert {r.object("encoding", k) for k in sample} == {b"intset"}
    # Everything is still found, whichever level it was stored at.
    assert sum(add(r, EXACT, first)) == 0 and sum(add(r, EXACT, more)) == 0
    memory = sum(r.memory_usage(k) for k in sizes)
    assert memory / 600_000 < 12


def test_bloom_mode_has_no_false_negatives_and_its_error_rate(r):
    bloom = SeenConfig("bloom", 20_000, 1e-3)
    blocks, bits, hashes = bloom.bloom_shape()
    assert (blocks, hashes) == (1, 10) and bits == 287_552
    stored = [bloom.token(f) for f in fingerprints(20_000)]
    new = add(r, bloom, stored)
    assert sum(new) >= 20_000 - 60  # a new one may collide: the error rate while filling
    assert add(r, bloom, stored) == [0] * 20_000
    # New ones, a few (each one added fills it further): about 1e-3 taken for seen.
    fresh = add(r, bloom, [bloom.token(f) for f in fingerprints(5000, "fresh")])
    assert fresh.count(0) <= 15, fresh.count(0)
    assert r.strlen(f"{K.seen}:b:0") == (bits + 7) // 8


def test_migration_moves_hex_fingerprints_without_losing_or_doubling(r):
    raw = fingerprints(5000)
    r.sadd(K.dupefilter, *(f.hex() for f in raw[:4000]))
    # Workers of this release read the old set while it exists.
    assert add(r, EXACT, [EXACT.token(f, legacy=True) for f in raw[:10]]) == [0] * 10
    assert add(r, EXACT, [EXACT.token(f, legacy=True) for f in raw[4000:4010]]) == [1] * 10
    members = [m for m in r.smembers(K.dupefilter)]
    pairs = [(EXACT.token(bytes.fromhex(m.decode())), m) for m in members]
    keys, args = seen_migrate_call(K, EXACT.spec, pairs)
    assert r.eval(SCRIPTS.seen_migrate.source, len(keys), *keys, *args) == [4000, 4000]
    assert not r.exists(K.dupefilter)
    assert add(r, EXACT, [EXACT.token(f) for f in raw]) == [0] * 4010 + [1] * 990


def test_a_token_of_another_release_is_refused_loudly(r):
    keys, args = seen_add_call(K, EXACT.spec, ["not-a-token"])
    with pytest.raises(redis.ResponseError, match="not a seen-set token"):
        r.eval(SCRIPTS.seen_add.source, len(keys), *keys, *args)


def test_a_bad_token_mid_batch_leaves_every_link_before_it_queued(r):
    """enqueue.lua pushes a batch's new links after its loop: an error in the
    loop must still push (and count) the links it already marked seen."""
    good = [EXACT.token(f) for f in fingerprints(3, "before")]
    entries = [("h", t, 0, f"request {t}".encode()) for t in [*good, "not-a-token"]]
    keys, args = enqueue_call(K, entries, seen=EXACT.spec)
    with pytest.raises(redis.ResponseError, match="not a seen-set token"):
        r.eval(SCRIPTS.enqueue.source, len(keys), *keys, *args)
    assert r.lrange(K.host_list("h"), 0, -1) == [f"request {t}".encode() for t in good]
    assert int(r.get(K.requests_size)) == 3
    assert add(r, EXACT, good) == [0, 0, 0], "seen, and queued"


# --- RECRAWL_AFTER: the seen-set keeps times --------------------------------------------
TIMED = SeenConfig("exact", 1, 0.5, recrawl_after=16)  # a unit of 1 s


def enqueue_at(r, now: int, tokens: list[str], config: SeenConfig = TIMED) -> int:
    """enqueue.lua at time ``now`` (ms) of one request per token; how many it queued."""
    entries = [("h", t, 0, f"request {t}".encode()) for t in tokens]
    keys, args = enqueue_call(K, entries, seen=config.spec, now=now)
    return r.eval(SCRIPTS.enqueue.source, len(keys), *keys, *args)[0]


def test_a_url_seen_longer_ago_than_recrawl_after_is_enqueued_again(r):
    t0 = 1_800_000_000_000
    fp, other = fingerprints(2)
    assert TIMED.spec == "timed 1000"
    assert enqueue_at(r, t0, [TIMED.token(fp)]) == 1
    assert r.get(K.seen_mode) == f"timed 1000 {t0}".encode(), "the first call records the epoch"
    assert enqueue_at(r, t0 + 15_000, [TIMED.token(fp)]) == 0, "seen 15 s ago"
    assert enqueue_at(r, t0 + 16_000, [TIMED.token(fp)]) == 1, "seen 16 s ago: again"
    assert enqueue_at(r, t0 + 17_000, [TIMED.token(fp)]) == 0, "its time is the last enqueue"
    # A seed's own recrawl_after (2 s), and 0: never again.
    assert enqueue_at(r, t0 + 18_000, [TIMED.token(fp, recrawl_after=2)]) == 1
    assert enqueue_at(r, t0 + 19_000, [TIMED.token(fp, recrawl_after=2)]) == 0
    assert enqueue_at(r, t0 + 99_000, [TIMED.token(fp, recrawl_after=0)]) == 0
    assert enqueue_at(r, t0 + 99_000, [TIMED.token(other, recrawl_after=0)]) == 1, "new"
    assert int(r.get(K.seen)) == 2, "the counter counts URLs, not enqueues"
    # A worker with another RECRAWL_AFTER keeps the recorded unit and epoch.
    longer = SeenConfig("exact", 1, 0.5, recrawl_after=160)
    assert enqueue_at(r, t0 + 100_000, [longer.token(fp)], longer) == 0
    assert enqueue_at(r, t0 + 259_000, [longer.token(fp)], longer) == 1
    assert r.get(K.seen_mode) == f"timed 1000 {t0}".encode()


def test_timed_buckets_split_and_stay_listpacks_under_16_bytes_a_url(r):
    first = [TIMED.token(f) for f in fingerprints(80_000)]
    more = [TIMED.token(f) for f in fingerprints(80_000, "more")]
    assert sum(add(r, TIMED, first)) == 80_000
    assert sum(add(r, TIMED, more)) == 80_000
    # Everything is found again, whichever level it was stored at (splitting what is met).
    assert sum(add(r, TIMED, first)) == 0 and sum(add(r, TIMED, more)) == 0
    sizes = {k: r.hlen(k) for k in r.scan_iter(f"{K.seen}:t:*", count=10_000)}
    # 64 x 512 a level: level 3 from 131,072 on.
    assert {k.split(b":")[-2] for k in sizes} == {b"3"} and len(sizes) == 8 * 512
    assert sum(sizes.values()) == 160_000 and max(sizes.values()) <= 128
    sample = list(sizes)[:: max(1, len(sizes) // 50)]
    assert {r.object("encoding", k) for k in sample} == {b"listpack"}
    memory = sum(r.memory_usage(k) for k in sizes)
    assert memory / 160_000 < 16, memory / 160_000


def test_a_worker_without_recrawl_after_is_refused_on_a_timed_seen_set():
    recorded = b"timed 1000 1800000000000"
    assert mode_mismatch(K, EXACT.spec, recorded) is not None
    assert mode_mismatch(K, TIMED.spec, b"exact") is not None
    assert mode_mismatch(K, SeenConfig("exact", 1, 0.5, recrawl_after=99).spec, recorded) is None
