"""The queue phase of ``make bench``: Redis memory per queued request.

For each size, a fresh Redis queues that many requests of the benchmark
crawl's shape (a followed link of one host: its callback, its parent as
Referer, its depth, and the ``distributed`` spider's meta) on one host:

- *before*: the previous release's entry (long JSON keys, the Referer header
  whole, ``scope`` in meta) in the host's sorted set, scored as its enqueue
  script scored it;
- *after*: the entry this release writes (``serialize.dumps`` of the request
  the spider makes), through the enqueue script workers run (``lua/enqueue.lua``),
  in batches of 5,000.

Bytes per request is ``MEMORY USAGE ... SAMPLES 0`` (every element counted) of
the host's queue keys over N: the queue alone, not the seen-set, which the
seen phase measures. The JSON length of one entry is reported beside it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from scrapy import Request, Spider

from spiders_project.frontier.calls import enqueue_call
from spiders_project.frontier.codec import serialize
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.frontier.seen import EXACT
from spiders_project.keys import RedisKeys
from tests.bench.beside import BESIDE
from tests.support.services import RedisServer

BATCH = 5000
KEYS = RedisKeys("bench")
HOST = "127.0.0.1:43117"
ORIGIN = f"http://{HOST}"


@dataclass
class QueueResult:
    layout: str
    requests: int
    bytes_per_request: float
    entry_bytes: int
    encoding: str


class _Spider(Spider):
    name = "bench"

    def parse(self, response):  # pragma: no cover - never called
        pass


def _link(i: int) -> tuple[str, str]:
    """(URL, parent URL) of the i-th link: ten links a page, as the benchmark site has."""
    return f"{ORIGIN}/page/{i}", f"{ORIGIN}/page/{i // 10}"


def _before(i: int) -> bytes:
    url, parent = _link(i)
    return (
        f'{{"url":"{url}","cb":"parse","headers":{{"Referer":["{parent}"]}},'
        f'"meta":{{"scope":"{HOST}","depth":3}}}}'
    ).encode()


def _after(spider: Spider, i: int) -> bytes:
    url, parent = _link(i)
    request = Request(url, callback=spider.parse, headers={"Referer": parent}, meta={"depth": 3})
    return serialize.dumps(request.to_dict(spider=spider))


def _after_maker(spider: Spider) -> Callable[[int], bytes]:
    """``_after`` for any i, made from one entry by putting the link's numbers in.

    Making 10^6 real requests and serializing them took about a minute of
    ``make bench`` (53 us each on the Intel machine); the entries are the
    same bytes but for the two numbers. Checked against ``_after`` here and
    at the first link of every batch.
    """
    marker = 987_654_321
    text = _after(spider, marker).decode()
    link, parent = f'/page/{marker}"', f'/page/{marker // 10}"'
    assert text.count(link) == 1 and text.count(parent) == 1, text
    template = text.replace("{", "{{").replace("}", "}}")
    template = template.replace(link, '/page/{i}"').replace(parent, '/page/{p}"')

    def make(i: int) -> bytes:
        return template.format(i=i, p=i // 10).encode()

    for i in (0, 1, 9, 10, 12_345, 999_999):
        assert make(i) == _after(spider, i), i
    return make


def _measure(server: RedisServer, layout: str, n: int) -> QueueResult:
    server.reset()
    client = server.client
    spider = _Spider()
    if layout.startswith("before"):
        for start in range(0, n, BATCH):
            client.zadd(
                KEYS.host_queue(HOST), {_before(i): i for i in range(start, min(n, start + BATCH))}
            )
        entry = len(_before(n - 1))
    else:
        sha = client.script_load(FrontierScripts().enqueue.source)
        make = _after_maker(spider)
        for start in range(0, n, BATCH):
            assert make(start) == _after(spider, start), start
            batch = []
            for i in range(start, min(n, start + BATCH)):
                token = EXACT.token(hashlib.sha1(_link(i)[0].encode()).digest())
                batch.append((HOST, token, 0, make(i)))
            keys, args = enqueue_call(KEYS, batch)
            client.evalsha(sha, len(keys), *keys, *args)
        entry = len(_after(spider, n - 1))
    used, encodings = 0, []
    for key in (KEYS.host_queue(HOST), KEYS.host_list(HOST)):
        if client.exists(key):
            used += int(client.memory_usage(key, samples=0) or 0)
            encodings.append(
                f"{client.type(key).decode()} ({client.object('encoding', key).decode()})"
            )
    queued = int(client.zcard(KEYS.host_queue(HOST))) + int(client.llen(KEYS.host_list(HOST)))
    assert queued == n, f"{layout}: {queued} queued of {n}"
    return QueueResult(layout, n, used / n, entry, ", ".join(encodings))


def queue_phase(
    server: RedisServer, sizes: tuple[int, ...] = (100_000, 1_000_000)
) -> list[QueueResult]:
    results = []
    for n in sizes:
        for layout in ("before (sorted set, long JSON)", "after"):
            result = _measure(server, layout, n)
            print(
                f"  {layout}, {n:,} requests: {result.bytes_per_request:.1f} bytes/request "
                f"({result.entry_bytes} bytes of JSON; {result.encoding})",
                flush=True,
            )
            results.append(result)
    server.reset()
    return results


def section(results: list[QueueResult], beside: bool) -> list[str]:
    """The queues' section of docs/BENCHMARKS.md (``beside``: the phase ran beside freshness)."""
    lines = [
        "## The frontier's queues: Redis memory per queued request",
        "",
        "A fresh redis-server queues N requests of the benchmark crawl's shape (a followed"
        " link: callback, parent as Referer, depth) on one host (`tests/bench/queue_entries.py`)."
        " *Before* is the previous release's entry (long JSON keys, the Referer whole, `scope`"
        " in meta) in the host's sorted set; *after* goes through `lua/enqueue.lua` as workers"
        " send it. *Bytes/request* is `MEMORY USAGE` (SAMPLES 0) of the host's queue keys over"
        " N; the seen-set is not counted (its own section)." + (BESIDE if beside else ""),
        "",
        "| Layout | Requests | Bytes/request | JSON bytes | Redis type (encoding) |",
        "|---|---:|---:|---:|---|",
    ]
    lines += [
        f"| {q.layout} | {q.requests:,} | {q.bytes_per_request:.1f} | {q.entry_bytes}"
        f" | {q.encoding} |"
        for q in results
    ]
    return lines
