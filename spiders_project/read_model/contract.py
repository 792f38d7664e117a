"""What workers leave in Redis and how anyone reads it back: the one contract.

Workers publish their stats and heartbeats (``worker/heartbeat.py``), and
the frontier, the item buffer and the db_writer keep their state under
``keys.py``'s names. The exporter (``monitor``), ``scrapy crawlstatus``, the
demo and the spider's own idle check all read that state through this
module set, so a field renamed or a queue added changes one place, and "is
the cluster idle?" has one answer (:attr:`Work.idle`):

- here, the names of what workers publish (the fields of their stats hash,
  the labels of the queues) and the unfinished work of a spider, which the
  spider's idle check and the demo read on their own;
- :mod:`spiders_project.read_model.cluster_view`, the snapshot of a whole
  cluster that the monitor and ``scrapy crawlstatus`` read
  (:func:`~spiders_project.read_model.cluster_view.read_cluster`);
- :mod:`spiders_project.read_model.replies`, the replies of either client in one shape;
- :mod:`spiders_project.read_model.writers`, what the db_writers hold.

Standard library only, on purpose: the monitor imports these modules without
importing Scrapy, Twisted or the worker. Nothing here talks to Redis either.
A reader sends the commands these modules list through its own call path
(sync or asyncio, ``redis_calls``' ``pipelined``) and hands the replies back
to be read; ``read_cluster`` takes that sender as an argument.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spiders_project.keys import HTTP, RENDER, RedisKeys
from spiders_project.keys.db_writers import writers
from spiders_project.read_model.replies import text
from spiders_project.read_model.writers import held_by_writers

# --- Fields of a worker's stats hash and of the spider's totals ---------------
# Metric counters: the exporter reads these (and only these) for the
# crawler_*_total metrics; heartbeat.metric_counters() derives them.
PAGES = "pages"  # responses that reached the spider (Scrapy's response_received_count)
ITEMS = "items"  # items scraped (item_scraped_count)
ERRORS = "errors:"  # errors:<kind>
RESPONSES = "responses:"  # responses:<HTTP status>, every response the downloader got
PROXY_REQUESTS = "proxy_requests:"  # proxy_requests:<proxy name>, requests sent through it
PROXY_BANS = "proxy_bans:"  # proxy_bans:<proxy name>, bans this worker gave it
# warc:records, warc:bytes, warc:write_errors, warc:records_dropped: the WARC
# archive's records and bytes written, failed writes, records not archived.
WARC = "warc:"
# cookies:relogins, cookies:sessions_retired: logins done again after a session
# expired, sessions dropped with their banned proxy (the shared cookie jars).
COOKIES = "cookies:"
# Fields the publish script adds to the worker hash (it takes their names from
# here: worker/heartbeat.py passes them in), and the one the last publish adds.
WORKER_FIELD = "_worker"  # the worker's id, host:pid
RUN_FIELD = "_run"  # unique per process: tells it from an earlier one with the same id
STATE_FIELD = "_state"  # RUNNING, or CLOSED after its last publish
LAST_SEEN_FIELD = "_last_seen"  # Unix time of the last publish, Redis clock
FINISH_REASON_FIELD = "_finish_reason"  # Scrapy's close reason, with the last publish
RUNNING, CLOSED = "running", "closed"
# A Scrapy stat of the worker's (published with the others): 1 while node
# health found this node cut off from the sites the cluster reaches.
CUT_OFF = "node/cut_off"
# A Scrapy stat of the worker's: its WORKER_ROLE (all, http or render), for the console.
ROLE = "worker/role"

# Labels of crawler_queue_length, in display order. "requests" are all queued
# requests, "render" those of them in the render queue (waiting for a worker
# that renders: WORKER_ROLE all or render); "leases" are requests a worker is
# fetching; "rejected" is the sum of the four :rejected lists; "unserializable"
# holds requests a spider made that the frontier cannot store.
QUEUES = (
    "start_urls",
    "requests",
    "render",
    "leases",
    "items",
    "items_processing",
    "dead",
    "rejected",
    "unserializable",
)
# Lists of entries set aside as unreadable, by what they were meant to be.
REJECTED = ("start_urls", "requests", "items", "dead")

Command = tuple[Any, ...]  # the arguments of one Redis command, as execute_command takes them
# Sends a named batch of commands in one round trip and returns their replies.
Send = Callable[[str, list[Command]], list[Any]]


def counters_of(fields: Mapping[Any, Any]) -> dict[str, int]:
    """The metric counters among a hash's fields (pages, items, errors:*, responses:*,
    proxy_requests:*, proxy_bans:*, warc:*, cookies:*)."""
    counters = {}
    for raw_name, raw_value in fields.items():
        name = text(raw_name)
        if name in (PAGES, ITEMS) or name.startswith(
            (ERRORS, RESPONSES, PROXY_REQUESTS, PROXY_BANS, WARC, COOKIES)
        ):
            try:
                counters[name] = int(raw_value)
            except ValueError:
                continue
    return counters


# --- Unfinished work, and the one idle rule -----------------------------------
@dataclass(frozen=True)
class Work:
    """Everything in Redis that is not finished yet, for one spider."""

    seeds: int  # start_urls entries not yet claimed
    queued: int  # requests in the host queues (requests:size)
    leased: int  # requests a worker is fetching
    items: int  # items buffered for the db_writers
    processing: int  # items the db_writers hold in their batches

    @property
    def idle(self) -> bool:
        """No seed, no queued request and no lease anywhere: no worker can get work.

        The item buffer does not count: workers may close while the db_writer
        still drains it. A worker adds its own engine (nothing downloading or
        scraping) before it calls the cluster idle.
        """
        return not (self.seeds or self.queued or self.leased)

    @property
    def drained(self) -> bool:
        """Idle, and every item is in the database: the crawl is over."""
        return self.idle and not (self.items or self.processing)


def work_reads(keys: RedisKeys) -> list[Command]:
    """The commands whose replies :func:`work_of` reads (one round trip)."""
    first = keys.in_lane(HTTP).all_shards[0]
    return [
        ("LLEN", keys.start_urls),
        ("GET", first.requests_size),
        ("ZCARD", first.leases),
        ("LLEN", keys.items),
        ("HGETALL", writers(keys)),
        *queues_work(keys),
    ]


def more_queues(keys: RedisKeys) -> list[RedisKeys]:
    """Every queue of the frontier but the first shard's HTTP queue: the other
    shards' (a sharded frontier), then each shard's render queue."""
    shards = keys.in_lane(HTTP).all_shards
    return shards[1:] + [shard.in_lane(RENDER) for shard in shards]


def queues_work(keys: RedisKeys) -> list[Command]:
    """The queued and leased requests of each of :func:`more_queues`."""
    reads: list[Command] = []
    for queue in more_queues(keys):
        reads += [("GET", queue.requests_size), ("ZCARD", queue.leases)]
    return reads


def work_of(replies: Sequence[Any]) -> Work:
    """The replies to :func:`work_reads`; a missing counter (None) is 0, and so is
    a negative one: a count that drifted below zero on one shard (a write lost in
    a failover, until ``frontier/reconcile.py`` corrects it) must not hide the
    work counted on another."""
    seeds, queued, leased, items = (max(0, int(reply or 0)) for reply in replies[:4])
    processing = held_by_writers(replies[4] or {})
    others = [max(0, int(reply or 0)) for reply in replies[5:]]
    return Work(seeds, queued + sum(others[::2]), leased + sum(others[1::2]), items, processing)
