"""What the console's pages read from Redis: bounded reads through the monitor's own
read-only connection, never a whole queue, never SCAN or KEYS.

Each read is a few pipelined round trips whose size depends on the number of
workers, jobs and steered hosts (what :func:`read_cluster` reads for the
exporter), or on a fixed sample (``*_READ`` below), never on the number of
hosts or URLs in the frontier. Blocking: the application runs them in a thread.
Hosts are read in :mod:`monitor.console.host_reads`.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from monitor.console.history import KEEP, MARGIN
from spiders_project.keys import RedisKeys
from spiders_project.keys.stats import stats_history
from spiders_project.read_model.cluster_view import (
    ClusterView,
    SpiderView,
    parse_samples,
    read_cluster,
)
from spiders_project.read_model.contract import ROLE, Send
from spiders_project.read_model.replies import hash_fields, info, text
from spiders_project.redis_access import SyncRedisCalls

# Dead letters read to group by reason: the newest ones (the list is the
# failures' log, newest first; its length is read exactly).
DEAD_READ = 500
# Events of the spider's jobs stream read for one job's page (newest first),
# and how many of that job's are shown.
EVENTS_READ = 1000
EVENTS_SHOWN = 20
# A worker's stats shown as its render pool: Scrapy stats with these prefixes.
RENDER_STATS = ("render/", "playwright/")
# The workers' coarse samples read for the chart: those of the last hour and the
# margin before it (history.py), at most HISTORY_READ of them, the newest (one a
# minute by default: about 62; STATS_HISTORY_INTERVAL set lower leaves the chart
# the newest only).
HISTORY_S = KEEP + MARGIN
HISTORY_READ = 400


@dataclass(frozen=True)
class WorkerRow:
    """One listed worker, with what its stats hash says beyond the counters."""

    worker: str
    alive: bool
    last_seen: float
    role: str
    cut_off: bool
    counters: dict[str, int]
    render: dict[str, str]  # its render pool's stats (RENDER_STATS)
    stats: dict[str, str]  # every stat it published


@dataclass(frozen=True)
class Snapshot:
    """One read of a spider for the overview, the jobs and the workers pages."""

    view: ClusterView
    spider: SpiderView
    keys: RedisKeys
    workers: list[WorkerRow] = field(default_factory=list)
    redis_cpu: float | None = None  # Redis' CPU seconds so far (INFO cpu, user + sys)
    # The workers' (time, pages total) samples of the last hour (stats:history), oldest first.
    history: list[tuple[float, int]] = field(default_factory=list)


@dataclass(frozen=True)
class DeadLetters:
    """The dead list's length and its newest entries grouped by reason."""

    total: int
    read: int
    by_reason: list[tuple[str, int]]  # (error, count among those read), most first
    newest: list[dict[str, Any]]  # url, error, attempts, failed_at of the newest few


class Reads:
    """The console's reads through the monitor's call path (``retry=False``: a
    page says "Redis unavailable" now rather than waiting)."""

    def __init__(
        self,
        calls: SyncRedisCalls,
        spiders: Sequence[str],
        *,
        worker_retention: float,
        keys_of: Callable[[str], RedisKeys] = RedisKeys,
        masters_memory: Callable[[], Sequence[Mapping[str, Any]]] | None = None,
    ) -> None:
        self.calls = calls
        self.spiders = tuple(spiders)
        self.worker_retention = worker_retention
        self.keys_of = keys_of
        self.masters_memory = masters_memory
        self.send: Send = functools.partial(calls.pipelined, retry=False)

    def keys(self, spider: str) -> RedisKeys:
        return self.keys_of(spider)

    def snapshot(self, spider: str, *, workers: bool = True, history: bool = False) -> Snapshot:
        """The spider's cluster view (``read_cluster``, with the pages samples),
        its workers' hashes, Redis' CPU and (``history``) the workers' samples
        of the last hour: three round trips."""
        view = read_cluster(
            self.send,
            [spider],
            worker_retention=self.worker_retention,
            samples=True,
            keys_of=self.keys_of,
            masters_memory=self.masters_memory,
        )
        keys = self.keys_of(spider)
        spider_view = view.spiders[0]
        rows: list[WorkerRow] = []
        reads: list[tuple[Any, ...]] = [("INFO", "cpu")]
        if workers:
            reads += [("HGETALL", keys.worker_stats(w.worker)) for w in spider_view.workers]
        if history:
            since = f"({view.time - HISTORY_S:.3f}"
            newest = ("BYSCORE", "REV", "LIMIT", 0, HISTORY_READ)
            reads.append(("ZRANGE", stats_history(keys), "+inf", since, *newest))
        replies = self.send("console workers", reads)
        hour = parse_samples(replies.pop())[::-1] if history else []
        cpu = info(replies[0])
        used = float(cpu.get("used_cpu_user", 0)) + float(cpu.get("used_cpu_sys", 0))
        for w, raw in zip(spider_view.workers, replies[1:], strict=False):
            stats = {text(k): text(v) for k, v in hash_fields(raw).items()}
            rows.append(
                WorkerRow(
                    worker=w.worker,
                    alive=w.alive,
                    last_seen=w.last_seen,
                    role=stats.get(ROLE, "?"),
                    cut_off=w.cut_off,
                    counters=w.counters,
                    render={k: v for k, v in sorted(stats.items()) if k.startswith(RENDER_STATS)},
                    stats=dict(sorted(stats.items())),
                )
            )
        return Snapshot(view, spider_view, keys, rows, used, hour)

    def totals(self) -> tuple[float, dict[str, dict[str, int]]]:
        """Redis' clock and each spider's all-time pages and items (the history's sample)."""
        reads: list[tuple[Any, ...]] = [("TIME",)]
        reads += [("HGETALL", self.keys_of(s).stats_totals) for s in self.spiders]
        replies = self.send("console totals", reads)
        seconds, micros = replies[0]
        out: dict[str, dict[str, int]] = {}
        for spider, raw in zip(self.spiders, replies[1:], strict=True):
            fields = {text(k): text(v) for k, v in hash_fields(raw).items()}
            out[spider] = {
                name: int(float(fields.get(name, 0) or 0)) for name in ("pages", "items")
            }
        return int(seconds) + int(micros) / 1e6, out

    def job_events(self, spider: str, job: str) -> list[dict[str, str]]:
        """The newest events of ``job`` among the stream's newest ``EVENTS_READ``."""
        keys = self.keys_of(spider)
        [entries] = self.send(
            "console job events", [("XREVRANGE", keys.jobs_events, "+", "-", "COUNT", EVENTS_READ)]
        )
        found = []
        for entry_id, raw in entries:
            fields = {text(k): text(v) for k, v in hash_fields(raw).items()}
            if fields.get("job") == job:
                fields["id"] = text(entry_id)
                found.append(fields)
                if len(found) == EVENTS_SHOWN:
                    break
        return found

    def dead_letters(self, spider: str, newest: int = 20) -> DeadLetters:
        """The dead list's length and its newest ``DEAD_READ`` entries by reason."""
        keys = self.keys_of(spider)
        total, raw = self.send(
            "console dead letters",
            [("LLEN", keys.dead), ("LRANGE", keys.dead, 0, DEAD_READ - 1)],
        )
        reasons: Counter[str] = Counter()
        shown: list[dict[str, Any]] = []
        for entry in raw:
            try:
                letter = json.loads(entry)
                reason = str(letter["error"])
            except (ValueError, KeyError, TypeError):
                letter, reason = None, "(not a dead letter)"
            reasons[reason] += 1
            if len(shown) < newest:
                if isinstance(letter, dict):
                    shown.append(
                        {k: letter.get(k) for k in ("url", "error", "attempts", "failed_at")}
                    )
                else:
                    shown.append({"url": text(entry)[:200], "error": reason})
        by_reason = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        return DeadLetters(int(total), len(raw), by_reason, shown)
