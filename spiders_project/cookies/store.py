"""Where a worker keeps its copy of each cookie jar, and how the copy stays causal.

:class:`ProcessJars` is Scrapy's behaviour: one jar per ``meta["cookiejar"]``
in this process (``COOKIES_SHARED=False``). :class:`SharedJars` keeps the same
jars as copies of the jars in Redis (``keys/cookies.py``):

- **Reads, coalesced.** A request leased at time t (``crawl/meta.LEASED_AT``)
  goes out only once a read of its jar that started after t has completed.
  The requests of one lease call share one read, and a read is one HGET of
  the jar's version, then an HGETALL only when the version moved: a jar that
  did not change costs one command per lease call, well under one per page.
  Since the update of the page a request was found on went into Redis no
  later than the request itself (below), that read sees it.
- **Reads that ride with lease calls.** On one Redis, a lease call carries the
  version of each jar in use (``LEASE_READ_IDLE``), read by the lease script
  after its leases (``frontier/context.LeaseRead``): a jar that did not
  move is then fresh for the call's requests at no round trip (a read of its
  own cost Redis 6-18% more CPU a page, docs/BENCHMARKS.md, issue 41 item 9).
  A jar that moved is read at once; so is every jar in use on a Redis Cluster.
- **Writes, ahead of the page.** A response (or ``request.cookies``) that
  changed the copy sends the difference as one script (``lua/update.lua``) that
  the write batcher sends as a prior write, in the same transaction as the
  page's links and ack and before them on a sharded frontier
  (``frontier/write_behind``). A response with no Set-Cookie writes nothing.
- **This worker's own changes** stay in its copy until a read taken after
  Redis had them replaces it: a read that raced with them gets them added back.
- **Time to live.** ``COOKIES_JAR_TTL`` after the last update; a worker that
  uses a jar renews it at most once a ``TOUCH_INTERVAL``.

For the features that build on a jar (a browser page's cookies, a login per
jar, a proxy per jar), :func:`cookie_jars` gives any component the crawler's
jars; :meth:`ProcessJars.cookies_for` gives a jar's cookies for a URL (pass
the request's ``LEASED_AT``, so a browser page is as causal as a plain
request) and :meth:`ProcessJars.update` applies a set of cookies as a change
(called before the page's response is returned, it travels ahead of the
page's links like a Set-Cookie); ``LocalJar.control`` holds the jar's ``~``
fields as last read, which ``lua/update.lua`` sets and deletes like cookies
and ``lua/session.lua`` changes for a jar's login and proxy (``sessions.py``).
A change whose cookies came through a proxy of the pool (``via``) pins a jar
that holds no session yet to that proxy, and is refused once the jar is
pinned to another: a session stays with the proxy it was made through, and
the cookies of a retired session never come back (``pins.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.cookiejar import Cookie, DefaultCookiePolicy
from pathlib import Path
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http.cookies import CookieJar, WrappedRequest
from scrapy.statscollectors import StatsCollector

from spiders_project.cookies import codec
from spiders_project.cookies.codec import VERSION, Change, Snapshot
from spiders_project.cookies.config import (
    LEASE_READ_IDLE,
    LEASE_READ_JARS,
    TOUCH_INTERVAL,
    CookiesConfig,
)
from spiders_project.cookies.limits import bounded
from spiders_project.cookies.sessions import PROXY_FIELD
from spiders_project.frontier.context import LeaseRead, WorkerRedis
from spiders_project.frontier.write_behind.ops import Prior
from spiders_project.keys import cookies as cookie_keys
from spiders_project.plumbing.wiring import shared
from spiders_project.redis_access import load_lua

logger = logging.getLogger(__name__)

LUA_DIR = Path(__file__).with_name("lua")


@dataclass(eq=False)
class Pending:
    """A change this worker sent, until a copy read after Redis took it holds it."""

    change: Change
    # The proxy its cookies came through, or None: a copy read after the jar
    # was pinned to another proxy does not take it back (pins.py).
    via: str | None = None
    delivered_at: float | None = None  # time.monotonic() once Redis took it


@dataclass(eq=False)
class LocalJar:
    """This worker's copy of one jar."""

    id: str
    cookies: CookieJar = field(default_factory=CookieJar)
    # The jar's "~v" when this copy was read (0: no jar in Redis).
    version: int = 0
    # The jar's other "~" fields as last read (~proxy, ~login: later features).
    control: dict[str, str] = field(default_factory=dict)
    # time.monotonic() at which the last completed read started, and the read
    # under way with its start.
    synced_at: float = float("-inf")
    syncing: asyncio.Future[None] | None = None
    sync_started: float = float("-inf")
    lease_read: float = float("nan")  # LEASED_AT of the last call whose read found .version
    used: float = float("-inf")  # time.monotonic() of the last request that asked for it
    pending: list[Pending] = field(default_factory=list)
    touched: float = float("-inf")

    def sync_ended(self, _: object) -> None:
        self.syncing = None


class ProcessJars:
    """Jars of this process alone (Scrapy's behaviour), with the bounds of ``limits.py``."""

    def __init__(self, stats: StatsCollector | None = None) -> None:
        self.stats = stats
        self._jars: dict[str, LocalJar] = {}
        # (jar, field or cookie) already reported, so a site that sends the same
        # bad cookie with every page is one line, not one per page.
        self._reported: set[tuple[str, str, str]] = set()

    def jar(self, jar: str) -> LocalJar:
        """This worker's copy of ``jar`` (made empty at first use)."""
        local = self._jars.get(jar)
        if local is None:
            local = self._jars[jar] = LocalJar(jar)
        return local

    def local_jars(self) -> list[LocalJar]:
        """This worker's copies of the jars it used."""
        return list(self._jars.values())

    async def fresh(self, jar: str, since: float | None = None) -> LocalJar:
        """The copy of ``jar`` to send a request with (here: as it is)."""
        return self.jar(jar)

    def changed(self, local: LocalJar, before: Snapshot, via: str | None = None) -> Change:
        """What changed in ``local`` since ``before``, within the bounds (the rest undone);
        ``via``: the pool's proxy the cookies came through, if any: none are kept
        once the jar is pinned to another (its session made through that one, or
        retired), and a jar not pinned yet is pinned to it by its first cookie
        (pins.py; ``lua/update.lua`` does the same in Redis)."""
        after = codec.snapshot(local.cookies)
        change = codec.diff(before, after)
        pinned = local.control.get(PROXY_FIELD)
        if change and via and pinned and pinned != via:
            codec.apply(local.cookies, codec.diff(after, before))
            self._inc("cookies/refused_other_proxy")
            return Change()
        if change.sets:
            for dropped in bounded(local.cookies, change, before, after):
                self._inc("cookies/dropped")
                self._report(
                    local.id,
                    f"{dropped.domain}\t{dropped.name}",
                    "Cookie %s of %s not kept in jar %s: %s",
                    dropped.name,
                    dropped.domain,
                    local.id,
                    dropped.reason,
                )
            if via and not pinned and change.sets:
                local.control[PROXY_FIELD] = via
        return change

    async def cookies_for(self, jar: str, url: str, since: float | None = None) -> list[Cookie]:
        """The cookies of ``jar`` that a request to ``url`` sends (domain, path,
        Secure and expiry as Scrapy applies them), the jar read as for a
        request leased at ``since`` (None: now): what a browser page about to
        navigate to ``url`` is given."""
        local = await self.fresh(jar, since)
        request: Any = WrappedRequest(Request(url))
        policy = local.cookies.policy
        now = int(time.time())
        if not isinstance(policy, DefaultCookiePolicy):
            return []
        return [
            cookie
            for cookie in local.cookies
            if not cookie.is_expired(now)
            and policy.domain_return_ok(cookie.domain, request)
            and policy.path_return_ok(cookie.path, request)
            and policy.return_ok_domain(cookie, request)
            and policy.return_ok_secure(cookie, request)
        ]

    def update(
        self,
        jar: str,
        cookies: Iterable[Cookie],
        removed: Iterable[tuple[str, str, str]] = (),
    ) -> Change:
        """Set ``cookies`` and remove ``removed`` ((domain, path, name)) in ``jar``,
        as one change (a browser page's cookies after it ran): within the bounds,
        shared like a response's."""
        local = self.jar(jar)
        before = codec.snapshot(local.cookies)
        for domain, path, name in removed:
            try:
                local.cookies.clear(domain, path, name)
            except KeyError:
                pass
        for cookie in cookies:
            local.cookies.set_cookie(cookie)
        return self.changed(local, before)

    def _inc(self, name: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(name)

    def _report(self, jar: str, what: str, message: str, *args: Any) -> None:
        """One warning per jar and ``what`` (names and domains only, never values)."""
        key = (jar, what, message)
        if key in self._reported:
            return
        if len(self._reported) > 10_000:
            self._reported.clear()
        self._reported.add(key)
        logger.warning(message, *args)


class SharedJars(ProcessJars):
    """Jars shared by the cluster through Redis (see the module docstring)."""

    def __init__(
        self, redis: WorkerRedis, config: CookiesConfig, stats: StatsCollector | None = None
    ) -> None:
        super().__init__(stats)
        self.redis = redis
        self.calls = redis.calls
        self.keys = redis.keys
        self.batcher = redis.batcher
        self.ttl_ms = config.jar_ttl_ms
        self.touch_interval = min(TOUCH_INTERVAL, config.jar_ttl / 2)
        self.script = load_lua(LUA_DIR, "update")
        redis.batcher.priors_delivered.subscribe(self._delivered)
        redis.lease_readers.append(self._lease_read)

    @classmethod
    def of(cls, crawler: Crawler) -> SharedJars:
        """The crawler's shared jars (one per worker process)."""

        def build() -> SharedJars:
            config = CookiesConfig.from_settings(crawler.settings)
            return cls(WorkerRedis.of(crawler), config, crawler.stats)

        return shared(crawler, cls, build)

    # --- reading ------------------------------------------------------------------------
    async def fresh(self, jar: str, since: float | None = None) -> LocalJar:
        """The copy of ``jar`` once a read that started after ``since`` (a
        ``time.monotonic()``; None: now), or rode with the lease call that
        answered at ``since``, completed, shared by every request that waits."""
        local = self.jar(jar)
        local.used = now = time.monotonic()
        if since is None:
            since = now
        while local.synced_at <= since and local.lease_read != since:
            task = local.syncing
            if task is not None and local.sync_started <= since:
                # A read under way started too early for this request: after it, another.
                await asyncio.wait([task])
                continue
            if task is None:
                task = self._start_sync(local)
            await asyncio.shield(task)
        self._touch(local)
        return local

    def _start_sync(self, local: LocalJar) -> asyncio.Future[None]:
        local.sync_started = time.monotonic()
        task = local.syncing = asyncio.ensure_future(self._sync(local))
        task.add_done_callback(local.sync_ended)
        return task

    def _lease_read(self, ride: bool) -> LeaseRead:
        """What the lease call about to be sent carries: the versions of the jars in
        use, if its reads can ride with it (see the module docstring)."""
        started = time.monotonic()
        jars = [j for j in self._jars.values() if started - j.used <= LEASE_READ_IDLE]
        if len(jars) > LEASE_READ_JARS:
            jars = sorted(jars, key=lambda j: j.used, reverse=True)[:LEASE_READ_JARS]
        fields: list[tuple[str, str]] = []
        if ride:
            fields = [(cookie_keys.cookie_jar(self.keys, j.id), VERSION) for j in jars]

        def answered(at: float, replies: list[Any] | None) -> None:
            for i, local in enumerate(jars):
                reply = None if replies is None else replies[i]
                if replies is not None:
                    if codec.version_of(reply) == local.version:
                        # Read after the call's leases (and after ``started``): unchanged.
                        local.synced_at = max(local.synced_at, started)
                        local.lease_read = at
                        continue
                if local.syncing is None and local.synced_at <= at:  # read before it is asked
                    self._start_sync(local).add_done_callback(_log_failure)

        return LeaseRead(fields, answered)

    async def _sync(self, local: LocalJar) -> None:
        started = local.sync_started
        key = cookie_keys.cookie_jar(self.keys, local.id)
        self._inc("cookies/version_reads")
        version = codec.version_of(await self.calls.command("HGET", key, VERSION, writes=False))
        if version != local.version:
            fields = await self.calls.command("HGETALL", key, writes=False)
            self._load(local, fields or {}, started)
        local.synced_at = max(local.synced_at, started)

    def _load(self, local: LocalJar, fields: dict[Any, Any], started: float) -> None:
        """``local`` made the jar as read, with this worker's changes that the
        read may have missed added back."""
        self._inc("cookies/reads")
        loaded = codec.load(fields)
        for problem in loaded.bad:
            self._report(local.id, problem, "Jar %s: %s; left out", local.id, problem)
        codec.fill(local.cookies, loaded.cookies)
        local.version = loaded.version
        local.control = loaded.control
        # Taken before the read started: in what it read (or overwritten since).
        # Through a proxy the jar is no longer pinned to: refused (update.lua).
        proxy = local.control.get(PROXY_FIELD)
        local.pending = [
            p
            for p in local.pending
            if (p.delivered_at is None or p.delivered_at >= started)
            and (p.via is None or proxy is None or p.via == proxy)
        ]
        for pending in local.pending:
            codec.apply(local.cookies, pending.change)
            # The pin its first cookie makes in Redis, which the read missed.
            if proxy is None and pending.via and pending.change.sets:
                proxy = local.control[PROXY_FIELD] = pending.via

    # --- writing ------------------------------------------------------------------------
    def changed(self, local: LocalJar, before: Snapshot, via: str | None = None) -> Change:
        """What changed in ``local`` since ``before``, sent to Redis as a prior write."""
        change = super().changed(local, before, via)
        if change:
            self._send(local, change, via)
        return change

    def _send(self, local: LocalJar, change: Change, via: str | None = None) -> None:
        args: list[Any] = [self.redis.clock.arg(), local.id, self.ttl_ms, via or ""]
        args.append(len(change.sets))
        for name, value in change.sets.items():
            args += [name, value]
        args += change.deletes
        pending = Pending(change, via)
        local.pending.append(pending)
        local.touched = time.monotonic()
        self.batcher.prior(self.script, self.script_keys(local.id), args, tag=pending)
        self._inc("cookies/updates")

    def _touch(self, local: LocalJar) -> None:
        """Renew the time to live of a jar in use (one that exists), at most once a
        ``touch_interval``: a crawl that never gets a cookie writes nothing."""
        if not local.version:
            return
        now = time.monotonic()
        if now - local.touched < self.touch_interval:
            return
        local.touched = now
        args = [self.redis.clock.arg(), local.id, self.ttl_ms, "", 0]
        self.batcher.script(self.script, self.script_keys(local.id), args)

    def script_keys(self, jar: str) -> list[str]:
        """The keys of every script on ``jar``: the jar, the spider's jars and their counts."""
        return [
            cookie_keys.cookie_jar(self.keys, jar),
            cookie_keys.cookie_jars(self.keys),
            cookie_keys.cookie_counts(self.keys),
        ]

    def _delivered(self, priors: list[Prior]) -> None:
        now = time.monotonic()
        for prior in priors:
            if isinstance(prior.tag, Pending):
                prior.tag.delivered_at = now


def _log_failure(task: asyncio.Future[None]) -> None:
    """A read ahead that no request awaited yet failed: one line, not an unretrieved error."""
    if not task.cancelled() and task.exception() is not None:
        logger.warning("Reading a cookie jar ahead failed: %r", task.exception())


def cookie_jars(crawler: Crawler) -> ProcessJars:
    """The crawler's jars, one object per crawler for every component that
    reads or sets cookies: shared through Redis (``COOKIES_SHARED``), or this
    process' own."""
    if CookiesConfig.from_settings(crawler.settings).shared:
        return SharedJars.of(crawler)
    return shared(crawler, ProcessJars, lambda: ProcessJars(crawler.stats))
