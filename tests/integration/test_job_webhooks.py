"""Job webhooks' delivery against a real redis-server and a real HTTP receiver, in-process:
each event to every URL once, a failing URL's retries (the others not repeated), an
entry of a dead consumer taken over, old and trimmed entries dropped, the group made
again after Redis lost it, the worker's Redis user enough for all of it; and the
workers' looks writing one "stalled" event per stall.

Workers themselves (two of them, SIGKILL, a crawl) are tests/e2e/test_job_webhooks.py.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter

import redis
import redis.asyncio
from scrapy.statscollectors import MemoryStatsCollector

from spiders_project.config import load_settings
from spiders_project.jobs.control import change_state
from spiders_project.jobs.stalls import stalled_call, stalled_script
from spiders_project.jobs.state_loop import JobWatch
from spiders_project.jobs.submit import JobSpec, submit_call, submit_script
from spiders_project.jobs.webhook_delivery import GROUP, WebhookDelivery
from spiders_project.jobs.webhooks import DROPPED, WebhookConfig, url_tag
from spiders_project.keys.jobs import job_counts, job_stalls, webhook_marks
from spiders_project.read_model.job_progress import read_jobs
from spiders_project.redis_access import RedisCalls, RedisState, SyncRedisCalls
from spiders_project.redis_access.acl_check import permission_problem
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.acl_users import AclRedis, acl_text
from tests.support.crawlers import project_crawler
from tests.support.processes import K
from tests.support.webhooks import FAIL, HANG, OK, Receiver

SECRET = "s3cret"
LOG = logging.getLogger("test.webhooks")


def make_config(receiver: Receiver, **knobs: float) -> WebhookConfig:
    settings = {"JOB_WEBHOOK_URLS": receiver.urls(), "JOB_WEBHOOK_SECRET": SECRET}
    settings.update({f"JOB_WEBHOOK_{k.upper()}": v for k, v in knobs.items()})
    return WebhookConfig.from_settings(load_settings(settings))


class Deliveries:
    """Consumers of one Redis, each a WebhookDelivery as a worker runs it, stepped by the test."""

    def __init__(self, url: str, config: WebhookConfig) -> None:
        self.url = url
        self.config = config
        self.counted: Counter[str] = Counter()
        self._consumers: dict[str, WebhookDelivery] = {}

    def consumer(self, name: str) -> WebhookDelivery:
        if name not in self._consumers:
            calls = RedisCalls(
                redis.asyncio.Redis.from_url(self.url), RedisState(self.url, 0.1, 1.0, LOG)
            )
            self._consumers[name] = WebhookDelivery(
                calls, K, name, self.config, lambda stat: self.counted.update([stat])
            )
        return self._consumers[name]

    async def step(self, name: str = "w1") -> int:
        return await self.consumer(name).step()

    async def until(self, check, name: str = "w1", timeout: float = 10.0) -> None:
        """Step ``name`` until ``check()``: a retry comes once its delay has passed."""
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, "timed out"
            await self.step(name)
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        for delivery in self._consumers.values():
            await delivery.aclose()
            await delivery.calls.client.aclose()


def run(deliveries: Deliveries, steps) -> None:
    async def main() -> None:
        try:
            await steps()
        finally:
            await deliveries.close()

    asyncio.run(main())


def submit(r, job: str) -> str:
    """``scrapy jobs submit``'s script; the id of its "running" event."""
    spec = JobSpec(job, (f"http://{job}.test/",)).check()
    keys, args = submit_call(K, spec, "run1", events_max=100)
    SyncRedisCalls(r, RedisState("redis://", 0.1, 1.0, LOG)).script(submit_script(), keys, args)
    return r.xrevrange(K.jobs_events, count=1)[0][0].decode()


def stream(r) -> dict[str, dict[str, str]]:
    return {
        i.decode(): {k.decode(): v.decode() for k, v in fields.items()}
        for i, fields in r.xrange(K.jobs_events)
    }


def pending(r) -> int:
    return int(r.xpending(K.jobs_events, GROUP)["pending"])


def as_sent(event_id: str, fields: dict[str, str]) -> dict:
    numbers = {"at", "seeds", "pages", "items", "queued", "in_flight", "leased"}
    numbers |= {"backing_off", "dead_letters", "refused", "purged", "since"}
    body = {k: int(v) if k in numbers else v for k, v in fields.items()}
    return {"id": event_id, "spider": "distributed", **body}


def test_every_event_reaches_every_url_once_signed_with_its_id(redis_url, r):
    with Receiver(SECRET, "a", "b") as hooks:
        deliveries = Deliveries(redis_url, make_config(hooks))
        changes = []

        async def steps() -> None:
            assert await deliveries.step("w2") == 0  # the group, before any event
            changes.append(submit(r, "A"))
            change_state(
                SyncRedisCalls(r, RedisState("redis://", 0.1, 1, LOG)),
                K,
                "A",
                "paused",
                why="pause",
                events_max=100,
            )
            # Two consumers look: each event goes to one of them, to every URL.
            assert await deliveries.step("w1") + await deliveries.step("w2") == 2
            assert await deliveries.step("w1") + await deliveries.step("w2") == 0

        run(deliveries, steps)
        events = stream(r)
        assert len(events) == 2
        expected = [as_sent(i, f) for i, f in events.items()]
        assert hooks.received("a") == hooks.received("b") == expected
        assert [b["state"] for b in expected] == ["running", "paused"]
        assert hooks.bad_signatures == 0
    assert pending(r) == 0
    assert deliveries.counted == {"webhooks/posted": 4, "webhooks/delivered": 2}


def test_a_failing_url_gets_the_event_later_with_backoff_and_the_other_no_repeat(
    redis_url, r, caplog
):
    with Receiver(SECRET, "a", "b") as hooks:
        config = make_config(hooks, timeout=0.2, retry_delay=0.3, retry_max_delay=0.6)
        deliveries = Deliveries(redis_url, config)
        hooks.set("a", FAIL)

        async def steps() -> None:
            await deliveries.step()
            event = submit(r, "A")
            await deliveries.until(lambda: len(hooks.tried("a")) == 1)
            # b took it: marked, so its retries skip b.
            assert r.smembers(webhook_marks(K, event)) == {url_tag(hooks.url("b")).encode()}
            await deliveries.until(lambda: len(hooks.tried("a")) == 3)
            hooks.set("a", HANG)  # no answer: each try ends at the timeout
            await deliveries.until(lambda: len(hooks.tried("a")) == 5)
            hooks.set("a", OK)
            await deliveries.until(lambda: len(hooks.received("a")) == 1)
            assert not r.exists(webhook_marks(K, event))

        with caplog.at_level(logging.INFO, logger="spiders_project.jobs.webhook_delivery"):
            run(deliveries, steps)
        [event] = stream(r)
        assert [p.body["id"] for p in hooks.tried("a")] == [event] * 6
        assert [b["id"] for b in hooks.received("b")] == [event]
        # Each retry waited its delay at least (0.3, 0.6, then 0.6: the cap), from its try.
        times = [p.at for p in hooks.tried("a")]
        gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
        for gap, delay in zip(gaps, [0.3, 0.6, 0.6, 0.6, 0.6], strict=True):
            assert gap >= delay - 0.02, gaps
    assert pending(r) == 0
    lines = [rec.getMessage() for rec in caplog.records if "created the group" not in rec.msg]
    # One line when a failing begins, one when it ends: not one per try.
    assert len(lines) == 2, lines
    assert "failed (HTTP 500)" in lines[0] and lines[1].endswith("/a answers again")


def test_an_entry_a_dead_consumer_held_is_taken_over_after_the_first_delay(redis_url, r):
    with Receiver(SECRET, "a") as hooks:
        deliveries = Deliveries(redis_url, make_config(hooks, timeout=0.2, retry_delay=0.5))

        async def steps() -> None:
            await deliveries.step("w1")
            event = submit(r, "A")
            # "dead" reads it and dies before any POST.
            r.xreadgroup(GROUP, "dead", {K.jobs_events: ">"})
            assert await deliveries.step("w1") == 0
            assert hooks.tried("a") == []
            started = time.monotonic()
            await deliveries.until(lambda: len(hooks.received("a")) == 1)
            assert time.monotonic() - started >= 0.45
            assert hooks.received("a")[0]["id"] == event

        run(deliveries, steps)
    assert pending(r) == 0


def test_an_event_past_the_window_is_dropped_with_one_line_and_the_counter(redis_url, r, caplog):
    with Receiver(SECRET, "a", "b") as hooks:
        config = make_config(hooks, timeout=0.2, retry_delay=0.3, retry_max_delay=0.3, max_age=1)
        deliveries = Deliveries(redis_url, config)
        hooks.set("a", FAIL)

        async def steps() -> None:
            await deliveries.step()
            submit(r, "A")
            await deliveries.until(lambda: deliveries.counted[DROPPED] == 1)
            for _ in range(3):
                await deliveries.step()

        with caplog.at_level(logging.ERROR, logger="spiders_project.jobs.webhook_delivery"):
            run(deliveries, steps)
        [event] = stream(r)
        assert len(hooks.received("b")) == 1 and hooks.received("a") == []
        assert len(hooks.tried("a")) >= 3
    assert deliveries.counted[DROPPED] == 1
    [line] = [rec.getMessage() for rec in caplog.records]
    assert line.startswith(f"Job webhooks: dropped event {event}: A running: not delivered to ")
    assert "/a within JOB_WEBHOOK_MAX_AGE (1 s)" in line and "/b" not in line
    assert pending(r) == 0 and not r.exists(webhook_marks(K, event))


def test_the_group_starts_a_window_back_and_drops_unsent_what_it_has_not_read_past_it(
    redis_url, r, caplog
):
    seconds, _ = r.time()
    now = seconds * 1000
    for ms in (now - 7_200_000, now - 3_000_000, now - 5_000):
        r.xadd(K.jobs_events, {"job": "A", "state": "running"}, id=f"{ms}-0")
    with Receiver(SECRET, "a") as hooks:
        deliveries = Deliveries(redis_url, make_config(hooks))

        async def steps() -> None:
            await deliveries.step()

        run(deliveries, steps)
        # Created at the events of the last hour: the one from two hours back is never sent.
        assert [b["id"] for b in hooks.received("a")] == [
            f"{now - 3_000_000}-0",
            f"{now - 5_000}-0",
        ]

        # A group that has not read for a while (webhooks were off): what is past the
        # window goes unsent, counted, in one line; what is within it is sent.
        r.xgroup_setid(K.jobs_events, GROUP, "0")
        deliveries = Deliveries(redis_url, make_config(hooks, max_age=60))
        with caplog.at_level(logging.ERROR, logger="spiders_project.jobs.webhook_delivery"):
            run(deliveries, steps)
        assert [b["id"] for b in hooks.received("a")][2:] == [f"{now - 5_000}-0"]
    assert deliveries.counted[DROPPED] == 2
    [line] = [rec.getMessage() for rec in caplog.records]
    assert line.startswith("Job webhooks: dropped 2 events older than JOB_WEBHOOK_MAX_AGE (60 s)")
    assert pending(r) == 0


def test_a_pending_entry_trimmed_from_the_stream_is_dropped_with_one_line(redis_url, r, caplog):
    with Receiver(SECRET, "a") as hooks:
        deliveries = Deliveries(redis_url, make_config(hooks, timeout=0.2, retry_delay=0.3))
        hooks.set("a", FAIL)

        async def steps() -> None:
            await deliveries.step()
            event = submit(r, "A")
            await deliveries.until(lambda: len(hooks.tried("a")) == 1)
            r.xtrim(K.jobs_events, maxlen=0)
            await deliveries.until(lambda: deliveries.counted[DROPPED] == 1)
            assert pending(r) == 0 and len(hooks.tried("a")) == 1
            assert caplog.records[-1].getMessage() == (
                f"Job webhooks: dropped event {event}: trimmed from {K.jobs_events} "
                "(JOBS_EVENTS_MAX) before delivery"
            )

        with caplog.at_level(logging.ERROR, logger="spiders_project.jobs.webhook_delivery"):
            run(deliveries, steps)


def test_the_group_is_made_again_when_redis_lost_it(redis_url, r):
    with Receiver(SECRET, "a") as hooks:
        deliveries = Deliveries(redis_url, make_config(hooks))

        async def steps() -> None:
            await deliveries.step()
            submit(r, "A")
            await deliveries.step()
            r.flushdb()  # a Redis restarted without persistence
            submit(r, "B")
            await deliveries.step()  # NOGROUP: made again at the next look
            await deliveries.step()

        run(deliveries, steps)
        assert [b["job"] for b in hooks.received("a")] == ["A", "B"]
    assert pending(r) == 0


def test_the_workers_redis_user_may_do_all_of_it(tmp_path):
    server = AclRedis(tmp_path / "redis", acl_text("distributed"))
    admin = server.admin
    try:
        with Receiver(SECRET, "a", "b") as hooks:
            config = make_config(hooks, timeout=0.2, retry_delay=0.3, max_age=2)
            deliveries = Deliveries(server.url("worker"), config)
            hooks.set("a", FAIL)

            async def steps() -> None:
                # A consumer gone for longer than the window, holding nothing, goes.
                admin.xgroup_create(K.jobs_events, GROUP, id="0", mkstream=True)
                admin.xgroup_createconsumer(K.jobs_events, GROUP, "gone")
                await deliveries.step()
                submit(admin, "A")
                await deliveries.until(lambda: len(hooks.tried("a")) == 2)  # marks, a retry
                hooks.set("a", OK)
                await deliveries.until(lambda: len(hooks.received("a")) == 1)
                submit(admin, "B")
                hooks.set("a", FAIL)
                await deliveries.until(lambda: deliveries.counted[DROPPED] == 1)
                # "gone" has now been idle for longer than the window (2 s).
                await deliveries.consumer("w1").ensure_group()

            run(deliveries, steps)
        names = [c["name"] for c in admin.xinfo_consumers(K.jobs_events, GROUP)]
        assert names == [b"w1"]
        assert server.denials() == []
        settings = load_settings({"REDIS_URL": server.url("worker")})
        assert permission_problem(settings, "worker", [K]) is None
    finally:
        server.close()


# --- The "stalled" event (jobs/stalls.py, JobWatch.look) -------------------------------


def backdate(r, job: str, ms: int) -> None:
    since, said, seen = r.hget(job_stalls(K), job).decode().split(" ")
    r.hset(job_stalls(K), job, f"{int(since) - ms} {said} {seen}")


def test_the_looks_write_one_stalled_event_per_stall(redis_url, r):
    crawler = project_crawler(DistributedSpider, {"REDIS_URL": redis_url, "JOB_STALL_AFTER": "600"})
    crawler.stats = crawler.stats or MemoryStatsCollector(crawler)
    watch = JobWatch.of(crawler)
    submit(r, "A")
    r.hset(job_counts(K), mapping={"A|queued": 3, "A|pages": 1})

    def stalled() -> list[dict[str, str]]:
        return [e for e in stream(r).values() if e["state"] == "stalled"]

    async def looks() -> None:
        try:
            await watch.look()
            assert r.hget(job_stalls(K), "A").split(b" ")[1] == b"0" and stalled() == []
            backdate(r, "A", 599_000)
            await watch.look()
            assert stalled() == []
            backdate(r, "A", 1_000)  # 10 minutes with nothing fetched, as the look saw
            await watch.look()
            await watch.look()
            assert len(stalled()) == 1
            r.hincrby(job_counts(K), "A|pages", 1)  # a page: the stall ends
            await watch.look()
            backdate(r, "A", 600_000)
            await watch.look()
            assert len(stalled()) == 2  # a new stall, its own event
            change_state(
                SyncRedisCalls(r, RedisState("redis://", 0.1, 1, LOG)),
                K,
                "A",
                "paused",
                why="pause",
                events_max=100,
            )
            await watch.look()
            assert r.hget(job_stalls(K), "A") is None  # paused: no stall
        finally:
            await watch.redis.aclose()

    asyncio.run(looks())
    first, second = stalled()
    assert first["job"] == "A" and first["via"] == "nothing fetched"
    assert int(first["queued"]) == 3 and int(first["pages"]) == 1
    assert int(second["pages"]) == 2 and int(second["since"]) > int(first["since"])
    assert crawler.stats.get_value("jobs/stalled") == 2
    [progress] = read_jobs(SyncRedisCalls(r, RedisState("redis://", 0.1, 1, LOG)), K)
    assert progress.state == "paused"  # stalled is an event, never a state


def test_two_looks_that_read_the_same_mark_write_one_stalled_event(r):
    submit(r, "A")
    r.hset(job_counts(K), "A|queued", 3)
    calls = SyncRedisCalls(r, RedisState("redis://", 0.1, 1, LOG))
    [progress] = read_jobs(calls, K)
    mark = "1000 0 -|0"
    r.hset(job_stalls(K), "A", mark)
    record = r.hget(K.jobs, "A")
    keys, args = stalled_call(K, progress, record, mark, 700_000, 100)
    assert [calls.script(stalled_script(), keys, args) for _ in range(2)] == [1, 0]
    # A record changed since the look read it (paused meanwhile): no event.
    r.hset(job_stalls(K), "B", mark)
    progress.id = "B"
    keys, args = stalled_call(K, progress, b"{}", mark, 700_000, 100)
    assert calls.script(stalled_script(), keys, args) == 0
    states = [json.dumps(e) for e in stream(r).values() if e["state"] == "stalled"]
    assert len(states) == 1
