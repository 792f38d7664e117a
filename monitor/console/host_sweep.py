"""The busiest hosts of the whole frontier, and every host's name, from a sweep in the background.

The frontier keeps no index of its hosts by queue length, and no page may walk
it (a crawl may have hundreds of thousands of hosts). So the monitor walks it
in the background, a bounded chunk at a time, and the hosts page renders from
what the last full pass left (:class:`SweepResult`) and a few live reads
(``host_reads.py``).

A pass goes through every host registry of each spider, in each frontier shard
and lane: the ready-set (ZSCAN), and the hosts with downloads in flight and
those at their cap (HSCAN), which sit outside the ready-set while they wait
for a slot. Each call reads ``SCAN_COUNT`` entries, then the queue sizes of the
hosts this pass had not met yet in one pipelined round trip of O(1) commands
(ZCARD, LLEN: :func:`host_reads.queued_reads`), in the lanes that hold any
host. Its pace is at most ``CONSOLE_HOST_SWEEP_RATE`` hosts a second, so its
load on Redis is bounded whatever the frontier's size: 3 reads a host and lane
(6,000 a second at the default 2,000 in an HTTP-only crawl), and 50 s for a
pass of 100,000 hosts. A pass of a few hosts is a
few round trips: the first ends within a second of the monitor starting, and
passes start every ``PASS_EVERY`` seconds at most.

What a pass keeps: the ``TOP_KEPT`` hosts with the most requests queued, and
every host's name (:class:`HostNames`: 1.5 MB for 100,000 hosts; 10 MB more
while a pass runs, the set of names it met) for the search.
Redis away: the step is tried again after ``RETRY_AFTER`` seconds (the call
path logs the state change; the page says the sweep is failing). A chunk's
sizes refused (a key of the wrong type): those hosts go unranked this pass,
one log line when it starts or stops happening. Any other error ends the loop,
and the monitor with it (``plumbing/tasks.py``): a console that silently
stopped ranking would show stale hosts as current.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from monitor.console.host_reads import queued_reads
from spiders_project.keys import LANES, RedisKeys
from spiders_project.read_model.contract import Send
from spiders_project.read_model.replies import hash_fields, scored
from spiders_project.redis_access import RedisUnavailable

logger = logging.getLogger("monitor.console")

# Entries a SCAN call asks for (a hint: a small set answers whole).
SCAN_COUNT = 1000
# The least time from the start of a pass to the start of the next, seconds.
PASS_EVERY = 5.0
# Seconds before a step Redis did not answer is tried again.
RETRY_AFTER = 2.0
# Hosts with the most requests queued a pass keeps (the page shows fewer).
TOP_KEPT = 100


class HostNames:
    """The host names of a pass, searched by part of a name.

    One string with a name a line, lower case (``host_of`` names hosts in lower
    case): ``str.find`` goes through 100,000 names in about a millisecond, and
    the names take about their length in memory.
    """

    def __init__(self, names: Iterable[str]) -> None:
        folded = sorted({name.lower() for name in names if "\n" not in name})
        self._count = len(folded)
        self._text = "\n" + "\n".join(folded) + "\n" if folded else ""

    def __len__(self) -> int:
        return self._count

    def containing(self, part: str, limit: int) -> tuple[list[str], bool]:
        """The first ``limit`` names (in name order) that contain ``part``, ignoring
        case, and whether there are more."""
        part = part.lower()
        if not part or "\n" in part:
            return [], False
        found: list[str] = []
        at = 0
        while (hit := self._text.find(part, at)) >= 0:
            if len(found) == limit:
                return found, True
            start = self._text.rfind("\n", 0, hit) + 1
            end = self._text.find("\n", hit)
            found.append(self._text[start:end])
            at = end
        return found, False


@dataclass(frozen=True)
class SweepResult:
    """What the last full pass over one spider's hosts found."""

    finished_at: float  # Unix time (this node's clock)
    took_s: float
    top: tuple[tuple[str, int], ...]  # (host, requests queued then), most first
    names: HostNames
    refused: str = ""  # the last refusal of a chunk's sizes in the pass, if any

    @property
    def hosts(self) -> int:
        """Hosts the pass read."""
        return len(self.names)


@dataclass(frozen=True)
class SweepProgress:
    """A pass under way, or the trouble that stops it, as the page says it."""

    started_at: float  # Unix time
    hosts: int  # read so far
    failing: str  # "" or the error its last step met


def _members(command: str, page: Any) -> list[str]:
    """The hosts of one ZSCAN or HSCAN page, whichever way the client parsed it."""
    raw = [m for m, _ in scored(page)] if command == "ZSCAN" else list(hash_fields(page))
    return [m if isinstance(m, str) else m.decode("utf-8", "surrogateescape") for m in raw]


class SweepPass:
    """One pass over a spider's host registries, a chunk a step (blocking: run it in a thread)."""

    def __init__(self, send: Send, keys: RedisKeys, kept: int = TOP_KEPT) -> None:
        self.send = send
        self.keys = keys
        self.kept = kept
        self._queues = [lane for shard in keys.all_shards for lane in shard.all_lanes]
        self._registries: list[tuple[str, str]] = [("ZSCAN", q.hosts) for q in self._queues]
        for q in self._queues:
            self._registries += [("HSCAN", q.in_flight), ("HSCAN", q.cap_waiters)]
        self._lanes: list[str] | None = None  # those holding any host: read at the first step
        self._at = 0
        self._cursor = 0
        self._seen: set[str] = set()
        self._top: list[tuple[int, str]] = []  # a min-heap of (queued, host), at most ``kept``
        self.started = time.time()
        self.refused = ""  # the last refusal of a chunk's sizes this pass, if any

    @property
    def done(self) -> bool:
        return self._at >= len(self._registries)

    @property
    def hosts(self) -> int:
        return len(self._seen)

    def _busy_lanes(self) -> list[str]:
        """The lanes with a host in a registry of any shard: a lane with none has
        nothing queued, and its queues need no read (an HTTP-only crawl: half)."""
        reads: list[tuple[Any, ...]] = []
        for q in self._queues:
            reads += [("EXISTS", q.hosts), ("EXISTS", q.in_flight), ("EXISTS", q.cap_waiters)]
        replies = self.send("console host sweep lanes", reads)
        busy = {q.lane for i, q in enumerate(self._queues) if any(replies[3 * i : 3 * i + 3])}
        return [lane for lane in LANES if lane in busy]

    def step(self) -> int:
        """One SCAN call of the current registry, and the sizes of the hosts new to
        this pass (one round trip each); the entries it scanned."""
        if self._lanes is None:
            self._lanes = self._busy_lanes()
        command, key = self._registries[self._at]
        [(cursor, page)] = self.send(
            "console host sweep", [(command, key, self._cursor, "COUNT", SCAN_COUNT)]
        )
        found = _members(command, page)
        new = [h for h in dict.fromkeys(found) if h not in self._seen]
        if new and self._lanes:
            self._rank(new, self._lanes)
        # Marked seen once read: a step Redis did not answer is tried again whole.
        self._seen.update(new)
        self._cursor = int(cursor)
        if self._cursor == 0:
            self._at += 1
        return len(found)

    def _rank(self, hosts: list[str], lanes: list[str]) -> None:
        reads = [r for host in hosts for r in queued_reads(self.keys, host, lanes)]
        try:
            replies = self.send("console host sweep sizes", reads)
        except RedisUnavailable as exc:
            if not isinstance(exc.cause, redis.ResponseError):
                raise  # not answered: the step is tried again
            # Refused (a key of the wrong type, planted or corrupted): these
            # hosts go unranked this pass, rather than the pass stopping here.
            self.refused = f"{type(exc.cause).__name__}: {exc.cause}"
            return
        per_host = len(reads) // len(hosts)
        for i, host in enumerate(hosts):
            queued = sum(int(n) for n in replies[i * per_host : (i + 1) * per_host])
            if queued:
                entry = (queued, host)
                if len(self._top) < self.kept:
                    heapq.heappush(self._top, entry)
                elif entry > self._top[0]:
                    heapq.heapreplace(self._top, entry)

    def result(self) -> SweepResult:
        now = time.time()
        top = sorted(self._top, key=lambda e: (-e[0], e[1]))
        ranked = tuple((h, q) for q, h in top)
        return SweepResult(now, now - self.started, ranked, HostNames(self._seen), self.refused)


class HostSweep:
    """Sweeps every spider's hosts, one pass after another, for as long as it runs."""

    def __init__(
        self,
        send: Send,
        spiders: Sequence[str],
        keys_of: Callable[[str], RedisKeys],
        rate: float,
    ) -> None:
        self.send = send
        self.spiders = tuple(spiders)
        self.keys_of = keys_of
        self.rate = rate
        self._results: dict[str, SweepResult] = {}
        self._progress: dict[str, SweepProgress] = {}

    def result(self, spider: str) -> SweepResult | None:
        """The last full pass over ``spider``'s hosts; None before the first ends."""
        return self._results.get(spider)

    def progress(self, spider: str) -> SweepProgress | None:
        """The pass over ``spider``'s hosts under way; None between passes."""
        return self._progress.get(spider)

    async def run(self) -> None:
        """Pass after pass, never returning (see the module docstring)."""
        while True:
            began = time.monotonic()
            for spider in self.spiders:
                await self._sweep(spider)
            await asyncio.sleep(max(0.0, began + PASS_EVERY - time.monotonic()))

    async def _sweep(self, spider: str) -> None:
        sweep: SweepPass | None = None
        started = time.time()
        self._progress[spider] = SweepProgress(started, 0, "")
        while sweep is None or not sweep.done:
            step_began = time.monotonic()
            try:
                if sweep is None:
                    # keys_of reads the shard count on a Redis Cluster.
                    sweep = SweepPass(self.send, await asyncio.to_thread(self.keys_of, spider))
                scanned = await asyncio.to_thread(sweep.step)
            except RedisUnavailable as exc:
                cause = f"{type(exc.cause).__name__}: {exc.cause}"
                self._progress[spider] = SweepProgress(started, sweep.hosts if sweep else 0, cause)
                await asyncio.sleep(RETRY_AFTER)
                continue
            self._progress[spider] = SweepProgress(started, sweep.hosts, "")
            pace = max(scanned, 1) / self.rate
            await asyncio.sleep(max(0.0, pace - (time.monotonic() - step_began)))
        result = sweep.result()
        before = self._results.get(spider)
        self._results[spider] = result
        del self._progress[spider]
        if before is None:
            logger.info(
                "console: first sweep of %s's hosts done: %d hosts in %.1f s",
                spider,
                result.hosts,
                result.took_s,
            )
        if result.refused != (before.refused if before else ""):
            if result.refused:
                logger.warning(
                    "console: the sweep of %s's hosts left some unranked: %s",
                    spider,
                    result.refused,
                )
            else:
                logger.info("console: the sweep of %s's hosts ranks every host again", spider)
