"""The dispatch gate: one send per host and delay, for the whole cluster (politeness/turns.py).

The gate runs at a time the test sets (``ScriptClock``): a turn is granted
once the test steps the clock past it, never by sleeping.
"""

from __future__ import annotations

import asyncio

import pytest

from spiders_project.politeness.turns import HostTurns
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import project_crawler
from tests.support.processes import K

T0 = 1_700_000_000_000  # the scripts' clock at the start (ms since the epoch)


@pytest.mark.redis
def test_the_gate_grants_one_send_per_delay_on_the_scripts_clock(redis_url, r):
    async def main() -> None:
        crawler = project_crawler(
            DistributedSpider,
            {"REDIS_URL": redis_url, "DOWNLOAD_DELAY": 0.2, "POLITENESS_GUARD": 0},
        )
        turns = HostTurns.of(crawler)
        turns.redis.clock.set(T0)
        try:
            assert await turns.wait("http://a.example/1") < 0.05  # the first send goes at once
            second = asyncio.create_task(turns.wait("http://a.example/2"))
            await asyncio.sleep(0.05)
            assert not second.done(), "the next send waits for the host's turn"
            assert r.get(K.host_turn("a.example")) == str(T0).encode()
            turns.redis.clock.advance(200)
            assert await asyncio.wait_for(second, 5) >= 0.05
            assert r.get(K.host_turn("a.example")) == str(T0 + 200).encode()
            # Another host has a turn of its own.
            assert await turns.wait("http://b.example/1") < 0.05
        finally:
            await turns.redis.client.aclose()

    asyncio.run(main())
