"""Job webhooks' delivery: each job event POSTed to every URL, once for the whole cluster.

Every process that delivers (each worker, through ``webhook_extension.py``)
reads the jobs' events stream (``<spider>:jobs:events``) as one consumer,
named by its worker id, of one Redis consumer group (:data:`GROUP`), so each
entry goes to one process, however many run:

- **New entries** (XREADGROUP ``>``, every :data:`POLL` second): the body
  (``webhooks.event_body``) is POSTed to every URL at once, and the entry is
  acknowledged (XACK) once every URL answered 2xx.
- **Retries.** An entry not acknowledged stays pending in the group. Any
  process takes it over (XCLAIM) once it has waited ``webhooks.retry_delay``
  of its tries since its last one: 10 s, 20 s, ... 5 min. XCLAIM's min-idle
  makes the take-over one process' even when two ask together, and the same
  rule takes over what a killed process held. A try lasts at most
  ``JOB_WEBHOOK_TIMEOUT``, shorter than the first delay, so no try is doubled.
- **One URL failing.** The URLs that took an entry are marked
  (``keys.jobs.webhook_marks``, expiring with the delivery window) and its
  retries skip them: a receiver sees an event again only when its 2xx was
  lost or a process died between the POST and the XACK, and always with the
  same ``id``.
- **Dropped.** An entry older than ``JOB_WEBHOOK_MAX_AGE`` on Redis' clock
  (its id's milliseconds against TIME) is acknowledged and dropped at its
  next try, with one log line and ``webhooks/dropped``; so is one trimmed from
  the stream (``JOBS_EVENTS_MAX``) while it waited.
- **Where the group starts.** Created (MKSTREAM) at the events of the last
  ``JOB_WEBHOOK_MAX_AGE``: events written shortly before the first delivering
  process started are sent, older ones never, so turning webhooks on does not
  replay the stream's history. A group that exists is kept (its pending
  entries too); events older than the window that it has not read yet (no
  process delivered for a while) are dropped unsent, one line per batch.

Events may arrive out of order (two processes send at once, a retry comes
after later events): the ``id`` orders them. Scrapy-free: plain asyncio and
the call path, so any process with a ``RedisCalls`` can deliver.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

import aiohttp
import redis

from spiders_project.jobs.webhooks import (
    DELIVERED,
    DROPPED,
    FAILED,
    POSTED,
    SIGNATURE_HEADER,
    WebhookConfig,
    event_body,
    retry_delay,
    shown,
    sign,
    url_tag,
)
from spiders_project.keys import RedisKeys
from spiders_project.keys.jobs import webhook_marks
from spiders_project.plumbing.tasks import repeat
from spiders_project.redis_access import RedisCalls
from spiders_project.redis_access.errors import error_code

logger = logging.getLogger(__name__)

# The consumer group of every delivering process, on the jobs' events stream.
GROUP = "webhooks"
# Seconds between two looks at the stream: the most an event waits to be sent.
POLL = 1.0
# Entries read or taken over at once; batches a look reads at most; pages of
# pending entries a look reads at most (a receiver down for the whole window
# leaves one entry per event of that hour pending: a few hundred at most).
BATCH = 20
READS = 10
PENDING_PAGES = 10
# Said by a group command when the stream or the group is gone (Redis emptied).
_NO_GROUP = object()

Counter = Callable[[str], None]


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


class WebhookDelivery:
    """This process' share of the cluster's webhook delivery (module docstring)."""

    def __init__(
        self,
        calls: RedisCalls,
        keys: RedisKeys,
        consumer: str,
        config: WebhookConfig,
        count: Counter | None = None,
    ) -> None:
        self.calls = calls
        self.keys = keys
        self.stream = keys.jobs_events
        self.consumer = consumer
        self.config = config
        self._count: Counter = count or (lambda name: None)
        self._ready = False
        self._session: aiohttp.ClientSession | None = None
        # URL -> why it failed, while it fails: one line when it starts, one when it ends.
        self._failing: dict[str, str] = {}
        self._max_age_ms = int(config.max_age * 1000)

    async def run(self) -> None:
        """Deliver until cancelled (``spawn_loop``): Redis being away is the call
        path's to log, any other failure one line until it changes (``repeat``)."""

        async def look() -> None:
            await self.step()

        try:
            await repeat(look, POLL, "Delivering job webhooks", logger)
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP session (a try under way is cut: its entry stays pending)."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def step(self) -> int:
        """One look: the group made if needed, pending entries due for a retry
        taken over, then the new ones; the entries this process acknowledged."""
        if not self._ready:
            await self.ensure_group()
        now_ms = await self._now_ms()
        done = await self._retry_due(now_ms)
        for _ in range(READS):
            entries = await self._group_call(
                "XREADGROUP",
                lambda: self.calls.client.xreadgroup(
                    GROUP, self.consumer, {self.stream: ">"}, count=BATCH
                ),
            )
            if entries is _NO_GROUP:
                break
            read = [(_text(i), fields) for _, items in entries or [] for i, fields in items]
            done += await self._old_unsent(read, now_ms)
            fresh = [(i, f) for i, f in read if not self._too_old(i, now_ms)]
            done += await self._each([self._deliver(i, f, 1, now_ms) for i, f in fresh])
            if len(read) < BATCH:
                break
        return done

    async def ensure_group(self) -> bool:
        """Create the group unless it exists (module docstring); True if created.
        Consumers of processes gone for the whole window, holding nothing, go."""
        now_ms = await self._now_ms()
        start = f"{max(now_ms - self._max_age_ms, 0)}-0"
        client = self.calls.client

        async def send() -> bool:
            try:
                await client.xgroup_create(self.stream, GROUP, id=start, mkstream=True)
            except redis.ResponseError as exc:
                if error_code(exc) == "BUSYGROUP":
                    return False
                raise
            return True

        created = await self.calls.call("XGROUP CREATE", send, retry=False)
        if created:
            logger.info(
                "Job webhooks: created the group %r of %s, from the events of the last %g s",
                GROUP,
                self.stream,
                self.config.max_age,
            )
        consumers = await self._group_call(
            "XINFO CONSUMERS", lambda: client.xinfo_consumers(self.stream, GROUP)
        )
        for consumer in [] if consumers is _NO_GROUP else consumers:
            name = _text(consumer["name"])
            gone = int(consumer["idle"]) > self._max_age_ms and not int(consumer["pending"])
            if gone and name != self.consumer:
                await self.calls.call(
                    "XGROUP DELCONSUMER",
                    partial(client.xgroup_delconsumer, self.stream, GROUP, name),
                    retry=False,
                )
        self._ready = True
        return created

    async def _now_ms(self) -> int:
        seconds, micros = await self.calls.command("TIME", retry=False, writes=False)
        return int(seconds) * 1000 + int(micros) // 1000

    def _too_old(self, entry_id: str, now_ms: int) -> bool:
        return _id_key(entry_id)[0] < now_ms - self._max_age_ms

    async def _group_call(self, name: str, send: Callable[[], Awaitable[Any]]) -> Any:
        """``send()`` through the call path; ``_NO_GROUP`` if the stream or the group
        is gone (Redis emptied, restarted without persistence): made again next look."""

        async def guarded() -> Any:
            try:
                return await send()
            except redis.ResponseError as exc:
                if error_code(exc) == "NOGROUP":
                    return _NO_GROUP
                raise

        reply = await self.calls.call(name, guarded, retry=False)
        if reply is _NO_GROUP and self._ready:
            self._ready = False
            logger.warning("Job webhooks: %s or its group is gone; making it again", self.stream)
        return reply

    async def _each(self, tries: Sequence[Awaitable[int]]) -> int:
        """Run ``tries`` at once (each is bounded by the POST timeout); the first
        failure is raised once all are done, so none is left running."""
        results = await asyncio.gather(*tries, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return sum(int(r) for r in results if isinstance(r, int))

    async def _retry_due(self, now_ms: int) -> int:
        """Take over the pending entries whose retry is due, and try them."""
        client = self.calls.client
        first = int(self.config.retry_delay * 1000)
        pending: list[dict[str, Any]] = []
        start = "-"
        for _ in range(PENDING_PAGES):
            page = await self._group_call(
                "XPENDING",
                partial(client.xpending_range, self.stream, GROUP, start, "+", BATCH, idle=first),
            )
            if page is _NO_GROUP:
                return 0
            pending += page
            if len(page) < BATCH:
                break
            start = "(" + _text(page[-1]["message_id"])
        if not pending:
            return 0
        oldest = await self.calls.command(
            "XRANGE", self.stream, "-", "+", "COUNT", 1, retry=False, writes=False
        )
        head = _id_key(_text(oldest[0][0])) if oldest else None
        done = 0
        due: dict[int, list[tuple[str, int]]] = {}
        for entry in pending:
            entry_id, tries = _text(entry["message_id"]), int(entry["times_delivered"])
            if head is None or _id_key(entry_id) < head:
                await self._drop(
                    entry_id, f"trimmed from {self.stream} (JOBS_EVENTS_MAX) before delivery"
                )
                done += 1
                continue
            wait = int(
                retry_delay(tries, self.config.retry_delay, self.config.retry_max_delay) * 1000
            )
            if int(entry["time_since_delivered"]) >= wait:
                due.setdefault(wait, []).append((entry_id, tries))
        for wait, entries in due.items():
            tries_of = dict(entries)
            claimed = await self._group_call(
                "XCLAIM",
                partial(client.xclaim, self.stream, GROUP, self.consumer, wait, list(tries_of)),
            )
            if claimed is _NO_GROUP:
                break
            done += await self._each(
                [
                    self._deliver(_text(i), fields, tries_of[_text(i)] + 1, now_ms)
                    for i, fields in claimed
                    if fields is not None
                ]
            )
        return done

    async def _old_unsent(self, read: list[tuple[str, Any]], now_ms: int) -> int:
        """Acknowledge, unsent, the new entries already past the window (no process
        delivered when they were written): one line for the batch."""
        old = [i for i, _ in read if self._too_old(i, now_ms)]
        if old:
            await self.calls.command("XACK", self.stream, GROUP, *old, retry=False)
            for _ in old:
                self._count(DROPPED)
            logger.error(
                "Job webhooks: dropped %d events older than JOB_WEBHOOK_MAX_AGE (%g s) unsent, "
                "%s to %s: no process delivered webhooks when they were written",
                len(old),
                self.config.max_age,
                old[0],
                old[-1],
            )
        return len(old)

    async def _deliver(self, entry_id: str, fields: Any, tries: int, now_ms: int) -> int:
        """Try ``entry_id`` (its ``tries``-th try) on the URLs that have not taken it;
        1 once it is acknowledged (every URL took it, or it was dropped)."""
        marks = webhook_marks(self.keys, entry_id)
        took: set[str] = set()
        if tries > 1:
            members = await self.calls.command("SMEMBERS", marks, retry=False, writes=False)
            took = {_text(m) for m in members}
        targets = [u for u in self.config.urls if url_tag(u) not in took]
        if self._too_old(entry_id, now_ms):
            what = " ".join(_text(fields.get(k, b"?")) for k in (b"job", b"state"))
            missing = ", ".join(shown(u) for u in targets)
            await self._drop(
                entry_id,
                f"{what}: not delivered to {missing} within JOB_WEBHOOK_MAX_AGE "
                f"({self.config.max_age:g} s), {tries - 1} tries",
            )
            return 1
        body = event_body(self.keys.spider, entry_id, fields)
        answers = await asyncio.gather(*(self._post(u, body) for u in targets))
        ok = [u for u, answered in zip(targets, answers, strict=True) if answered]
        deadline = asyncio.get_running_loop().time() + self.config.retry_delay
        if len(ok) == len(targets):
            await self.calls.command("XACK", self.stream, GROUP, entry_id, deadline=deadline)
            if tries > 1:
                await self.calls.command("DEL", marks, retry=False)
            self._count(DELIVERED)
            return 1
        if ok:
            keep_ms = self._max_age_ms + int(self.config.retry_max_delay * 1000)
            await self.calls.command("SADD", marks, *map(url_tag, ok), deadline=deadline)
            await self.calls.command("PEXPIRE", marks, keep_ms, deadline=deadline)
        return 0

    async def _drop(self, entry_id: str, why: str) -> None:
        await self.calls.command("XACK", self.stream, GROUP, entry_id, retry=False)
        await self.calls.command("DEL", webhook_marks(self.keys, entry_id), retry=False)
        self._count(DROPPED)
        logger.error("Job webhooks: dropped event %s: %s", entry_id, why)

    def _session_now(self) -> aiohttp.ClientSession:
        if self._session is None:
            timeout = aiohttp.ClientTimeout(total=self.config.timeout)
            self._session = aiohttp.ClientSession(timeout=timeout)
        return self._session

    async def _post(self, url: str, body: bytes) -> bool:
        """One POST; True if answered 2xx (a redirect is not followed: a failure)."""
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: sign(body, self.config.secret),
        }
        try:
            async with self._session_now().post(
                url, data=body, headers=headers, allow_redirects=False
            ) as response:
                ok = 200 <= response.status < 300
                why = f"HTTP {response.status}"
        except TimeoutError:
            ok, why = False, f"no answer within {self.config.timeout:g} s"
        except (aiohttp.ClientError, OSError) as exc:
            ok, why = False, f"{type(exc).__name__}: {exc}"
        self._count(POSTED if ok else FAILED)
        self._note(url, ok, why)
        return ok

    def _note(self, url: str, ok: bool, why: str) -> None:
        """One line when a URL starts failing, one when it answers again."""
        if ok:
            if self._failing.pop(url, None) is not None:
                logger.info("Job webhook %s answers again", shown(url))
        elif url not in self._failing:
            self._failing[url] = why
            logger.warning(
                "Job webhook %s failed (%s): its events are tried again with backoff "
                "for up to %g s",
                shown(url),
                why,
                self.config.max_age,
            )
