"""Seed intake against a real Redis: spread over workers, duplicates read once."""

from __future__ import annotations

import asyncio

from spiders_project.settings import SEED_SPREAD
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import project_crawler
from tests.support.processes import K


def peek_twice(redis_url: str) -> tuple[list[bytes], list[bytes]]:
    overrides = {"REDIS_URL": redis_url, "SEED_BATCH_SIZE": 16}

    async def main() -> tuple[list[bytes], list[bytes]]:
        spiders = []
        for _ in range(2):  # two workers
            crawler = project_crawler(DistributedSpider, overrides)
            spider = DistributedSpider.from_crawler(crawler)
            spiders.append(spider)
        first, second = [await s._peek_seeds() for s in spiders]
        for s in spiders:
            await s.redis.client.aclose()
        return first, second

    return asyncio.run(main())


def test_workers_polling_together_claim_different_seeds(redis_url, r):
    # LPUSH puts the newest on the left; workers read from the right (oldest).
    r.lpush(K.start_urls, *(f"http://s{i}.test/".encode() for i in range(1000)))
    first, second = peek_twice(redis_url)
    oldest = {f"http://s{i}.test/".encode() for i in range(16 * SEED_SPREAD)}
    assert len(first) == len(second) == 16
    assert set(first) <= oldest and set(second) <= oldest
    # 16 of 128 each: the same 16 would be a 1 in 10^19 draw; a large overlap
    # would mean they race for the same seeds again.
    assert len(set(first) & set(second)) < 12
    assert r.llen(K.start_urls) == 1000, "peeking never removes a seed"


def test_a_seed_pushed_three_times_is_read_once_per_poll(redis_url, r):
    r.lpush(K.start_urls, b"http://a.test/", b"http://a.test/", b"http://a.test/")
    first, _ = peek_twice(redis_url)
    assert first == [b"http://a.test/"]


def test_a_bad_seed_read_by_two_workers_is_rejected_and_counted_once(redis_url, r):
    """Both workers peek the same bad seed and ask to reject it: Redis moves
    it once, and only the worker whose reject moved it logs and counts it."""
    r.lpush(K.start_urls, b"not a url")

    async def main() -> list[int]:
        spiders = [
            DistributedSpider.from_crawler(
                project_crawler(DistributedSpider, {"REDIS_URL": redis_url})
            )
            for _ in range(2)
        ]
        for s in spiders:
            [raw] = await s._peek_seeds()
            s._reject_seed(raw, "not a URL")
        for s in spiders:
            await s.redis.batcher.flush()
            await s.redis.client.aclose()
        return [s.crawler.stats.get_value("seeds/rejected", 0) for s in spiders]

    counts = asyncio.run(main())
    assert sorted(counts) == [0, 1]
    assert r.lrange(K.start_urls_rejected, 0, -1) == [b"not a url"]
    assert r.llen(K.start_urls) == 0
