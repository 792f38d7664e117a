"""Entries of the frontier that no worker can use: set aside, logged once, counted.

Whatever a Redis key holds was written by someone else: another release, an
operator, a bug, an attacker. A bad entry must harm only itself: it goes to
``requests:rejected`` (kept for an operator to inspect) with one log line and
a ``frontier/rejected`` stat, and the rest of the batch, and the worker,
carry on. Before this rule, one entry with ``"encoding": "nope"`` ended the
refill loop of every worker that leased it.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from scrapy import Request
from scrapy.statscollectors import StatsCollector

from spiders_project.frontier.codec.serialize import InvalidEntry, Unserializable
from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.lease_id import Lease
from spiders_project.frontier.queue import JsonPriorityQueue
from spiders_project.keys import RedisKeys

logger = logging.getLogger(__name__)

# Names of hosts already set aside, kept so that one is logged once while its
# removal is on its way; bounded, as the names come from Redis.
_MAX_REMEMBERED = 1000


class BadEntries:
    """Decodes leased entries and ready-set host names, setting bad ones aside."""

    def __init__(self, redis: WorkerRedis, stats: StatsCollector) -> None:
        self.redis = redis
        self.keys = redis.keys
        self.stats = stats
        self._bad_hosts: set[bytes] = set()

    def decode(self, queue: JsonPriorityQueue, lease: Lease) -> Request | None:
        """The request of ``lease``, or None after setting a bad entry aside.

        Whatever the entry makes decoding or ``Request()`` raise (not JSON, an
        unknown codec, a URL Scrapy refuses, anything) rejects that entry, and
        its lease is acked so that no worker leases it again.
        """
        member = lease.request
        try:
            return queue.decode(member)
        except Exception as exc:  # noqa: BLE001 - any bad entry, see the docstring
            rejected = self.redis.keys_of_lease(lease).requests_rejected
            logger.warning(
                "Rejected a frontier entry (%s: %s), kept in %s: %.200r",
                type(exc).__name__,
                exc,
                rejected,
                member,
            )
            self.stats.inc_value("frontier/rejected")
            self.redis.batcher.push(rejected, member)
            self.redis.batcher.ack(lease)
            return None

    def unserializable(self, request: Request, problem: InvalidEntry) -> None:
        """Keep a request the frontier cannot store in ``requests:unserializable``.

        Found at enqueue, before its fingerprint reaches the dupefilter, so the
        same link found again after the spider is fixed is crawled. The entry
        is JSON for an operator: the request's url, callback and meta with
        every value JSON cannot hold shown as its repr, and the reason.
        """
        where = problem.where if isinstance(problem, Unserializable) else ""
        type_name = problem.type_name if isinstance(problem, Unserializable) else ""
        logger.error(
            "Unserializable request %s%s: %s; kept in %s",
            request,
            f" ({where} is a {type_name})" if where else "",
            problem,
            self.keys.requests_unserializable,
        )
        self.stats.inc_value("frontier/unserializable")
        entry = {
            "url": request.url,
            "method": request.method,
            "callback": _name(request.callback),
            "errback": _name(request.errback),
            "meta": request.meta,
            "cb_kwargs": request.cb_kwargs,
            "priority": request.priority,
            "reason": str(problem),
            "where": where,
            "type": type_name,
            "at": self.redis.time.now_datetime().isoformat(timespec="milliseconds"),
            "worker": self.redis.worker,
        }
        text = json.dumps(entry, default=_shown, skipkeys=True, ensure_ascii=False)
        self.redis.batcher.push(self.keys.requests_unserializable, text.encode())

    def host_names(self, names: list[bytes], keys: RedisKeys | None = None) -> list[str]:
        """Ready hosts as text; a name that is not UTF-8 (not ours) is set aside.

        Host names are written by ``host_of``, always valid UTF-8; anything
        else in the ready-set was planted or corrupted. It leaves the
        ready-set (of the shard ``keys`` names) for requests:rejected, and the
        other hosts are served.
        """
        keys = keys or self.keys
        hosts = []
        for name in names:
            try:
                hosts.append(name.decode("utf-8"))
            except UnicodeDecodeError:
                if name in self._bad_hosts:
                    continue  # already set aside; the removal is on its way
                if len(self._bad_hosts) > _MAX_REMEMBERED:
                    self._bad_hosts.clear()
                self._bad_hosts.add(name)
                logger.warning(
                    "Rejected a host name in %s that is not UTF-8, kept in %s: %.200r",
                    keys.hosts,
                    keys.requests_rejected,
                    name,
                )
                self.stats.inc_value("frontier/rejected")
                script_keys = [keys.hosts, keys.requests_rejected]
                self.redis.batcher.script(self.redis.scripts.reject_host, script_keys, [name])
        return hosts


def _name(func: Any) -> str | None:
    return None if func is None else getattr(func, "__name__", repr(func))


def _shown(value: Any) -> str:
    """A value JSON cannot hold, as an operator reads it."""
    return f"<{type(value).__module__}.{type(value).__qualname__}: {repr(value)[:200]}>"
