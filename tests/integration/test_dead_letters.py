"""Dead letters: real workers, a real redis-server, a site whose pages keep failing."""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import redis
from scrapy import Request, Spider
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import HtmlResponse
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler
from twisted.internet.error import ConnectionRefusedError

from spiders_project.dead_letters.letters import DeadLetter, make_dead_letter
from spiders_project.dead_letters.middleware import DeadLetterMiddleware, DeadLetters
from spiders_project.dead_letters.requeue import requeue
from spiders_project.frontier.codec import serialize
from tests.support.crawlers import project_crawler
from tests.support.processes import PYTHON, ROOT, K, Proc, stat, worker

REFUSED = "http://127.0.0.1:1/"
OK, FAIL = range(1, 6), range(1, 4)
WORKER_SETTINGS = (
    "MAX_IDLE_TIME_BEFORE_CLOSE=2",
    "RETRY_TIMES=2",
    "DEAD_LETTERS_ENABLED=True",
)


class FailingSite:
    """``/`` links to /ok/1..5 (200), /fail/1..3 (always 503) and /missing/1 (404)."""

    def __init__(self) -> None:
        self.hits: collections.Counter[str] = collections.Counter()
        lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
                with lock:
                    site.hits[self.path] += 1
                if self.path == "/":
                    links = [f"/ok/{n}" for n in OK] + [f"/fail/{n}" for n in FAIL]
                    links.append("/missing/1")
                    body = "".join(f'<a href="{href}">{href}</a> ' for href in links)
                    self._answer(200, f"<html><title>Home</title><body>{body}</body></html>")
                elif self.path.startswith("/ok/"):
                    self._answer(200, f"<html><title>{self.path}</title></html>")
                elif self.path.startswith("/fail/"):
                    self._answer(503, "<html><title>down</title></html>")
                else:
                    self._answer(404, "<html><title>not found</title></html>")

            def _answer(self, status: int, html: str) -> None:
                data = html.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FailingSite:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def fail_urls(self) -> set[str]:
        return {f"{self.url}fail/{n}" for n in FAIL}


@pytest.fixture
def site() -> Iterator[FailingSite]:
    with FailingSite() as s:
        yield s


def crawl(name, redis_url, tmp_path, procs) -> Proc:
    """Run one worker until the cluster is idle."""
    w = worker(name, redis_url, tmp_path, *WORKER_SETTINGS)
    procs.append(w)
    assert w.wait(120) == 0, w.log()[-3000:]
    log = w.log()
    # The only errors: RetryMiddleware giving up, and Scrapy's own traceback
    # for the refused connection, which has no errback.
    errors = [line for line in log.splitlines() if " ERROR: " in line]
    expected = ("Gave up retrying", f"Error downloading <GET {REFUSED}>")
    assert all(any(e in line for e in expected) for line in errors), errors
    return w


def dead_letters(r) -> dict[str, DeadLetter]:
    letters = [DeadLetter.loads(raw) for raw in r.lrange(K.dead, 0, -1)]
    by_url = {letter.url: letter for letter in letters}
    assert len(by_url) == len(letters), "a request was dead-lettered twice"
    return by_url


def deadletters(redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "scrapy", "deadletters", *args],
        cwd=ROOT,
        env={**os.environ, "REDIS_URL": redis_url},
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_dead_after_three_attempts(r, site: FailingSite) -> None:
    letters = dead_letters(r)
    assert set(letters) == site.fail_urls() | {REFUSED}
    for url, letter in letters.items():
        assert letter.attempts == 3
        if url == REFUSED:
            assert "refused" in letter.error.lower(), letter.error
        else:
            assert letter.error == "HTTP 503"
        # The embedded request is the frontier's JSON, ready to be enqueued again.
        request = serialize.loads(json.dumps(letter.request))
        assert request["url"] == url and request["meta"]["retry_times"] == 2
        assert re.fullmatch(r"[^:]+:\d+", letter.worker)
        assert datetime.fromisoformat(letter.failed_at).utcoffset().total_seconds() == 0


def test_requests_that_fail_for_good_become_dead_letters(redis_url, r, site, tmp_path, procs):
    r.lpush(K.start_urls, site.url, REFUSED)
    w = crawl("w", redis_url, tmp_path, procs)

    assert_dead_after_three_attempts(r, site)
    # Each failing page was asked for exactly 1 + RETRY_TIMES times; the rest once.
    for n in FAIL:
        assert site.hits[f"/fail/{n}"] == 3
    assert site.hits["/missing/1"] == 1  # a 404 is neither retried nor dead
    assert all(site.hits[f"/ok/{n}"] == 1 for n in OK)
    assert stat(r, w, "dead_letters/count") == 4
    # Dead requests were acked like any other: nothing left leased or queued.
    assert r.zcard(K.leases) == 0 and int(r.get(K.requests_size) or 0) == 0
    assert r.llen(K.items) == 1 + len(OK)


def test_list_requeue_and_crawl_them_again(redis_url, r, site, tmp_path, procs):
    r.lpush(K.start_urls, site.url, REFUSED)
    crawl("w1", redis_url, tmp_path, procs)
    assert r.llen(K.dead) == 4

    listed = deadletters(redis_url, "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[-1].startswith("4 dead letters in distributed:dead")
    assert {line.split("  ")[-1] for line in lines[:-1]} == site.fail_urls() | {REFUSED}
    assert all(line.split("  ")[1] == "3" for line in lines[:-1])
    assert sum("  HTTP 503  " in line for line in lines) == 3
    # Newest first, as stored.
    stored = [DeadLetter.loads(raw).url for raw in r.lrange(K.dead, 0, -1)]
    assert [line.split("  ")[-1] for line in lines[:-1]] == stored

    as_json = deadletters(redis_url, "list", "--json", "--limit", "2")
    assert as_json.returncode == 0, as_json.stderr
    doc = json.loads(as_json.stdout)
    assert doc["total"] == 4 and len(doc["entries"]) == 2
    assert [e["url"] for e in doc["entries"]] == stored[:2]

    # A garbage entry in the middle is set aside; the rest are requeued.
    r.linsert(K.dead, "BEFORE", r.lindex(K.dead, 2), b"not a dead letter")
    fingerprints = int(r.get(K.seen) or 0)
    requeued = deadletters(redis_url, "requeue", "--all")
    assert requeued.returncode == 0, requeued.stderr
    assert "Requeued 4 dead letters" in requeued.stdout
    assert "distributed:dead:rejected" in requeued.stdout
    assert r.llen(K.dead) == 0
    assert r.lrange(K.dead_rejected, 0, -1) == [b"not a dead letter"]
    assert int(r.get(K.requests_size)) == 4
    assert int(r.get(K.seen) or 0) == fingerprints
    # Back in the frontier with a fresh retry budget and the priority retries took.
    for host in (h.decode() for h in r.zrange(K.hosts, 0, -1)):
        for payload in r.zrange(K.host_queue(host), 0, -1):
            request = json.loads(payload)
            assert "retry_times" not in request.get("meta", {})
            assert "priority" not in request

    before = collections.Counter(site.hits)
    crawl("w2", redis_url, tmp_path, procs)
    gained = collections.Counter(site.hits)
    gained.subtract(before)
    assert +gained == {f"/fail/{n}": 3 for n in FAIL}
    assert_dead_after_three_attempts(r, site)


def test_requeue_limit_takes_the_oldest_and_skips_garbage(r):
    def letter(n: int) -> bytes:
        payload = serialize.dumps(
            {"url": f"http://a.test/{n}", "meta": {"retry_times": 2}, "priority": -2}
        )
        return make_dead_letter(
            payload, error="HTTP 503", attempts=3, failed_at=datetime.now(UTC), worker="h:1"
        ).dumps()

    garbage = [b"\xff", b"{}", b'{"request": {"url": "ftp://x"}}', b"[1]"]
    # LPUSH: the last pushed is the newest; requeue takes from the oldest end.
    r.lpush(K.dead, letter(0), garbage[0], letter(1), *garbage[1:], letter(2), letter(3))
    # The same failure written twice (a resent batch) is requeued once.
    r.lpush(K.dead, twice := letter(4), twice)
    rejected = []
    result = requeue(
        r, K, 6, retry_priority_adjust=-1, on_rejected=lambda raw, why: rejected.append(raw)
    )
    assert (result.requeued, result.rejected) == (2, 4)
    assert rejected == garbage
    assert r.zrange(K.host_queue("a.test"), 0, -1) == [
        b'{"u":"http://a.test/0"}',
        b'{"u":"http://a.test/1"}',
    ]
    assert [DeadLetter.loads(x).url for x in r.lrange(K.dead, 0, -1)] == [
        "http://a.test/4",
        "http://a.test/4",
        "http://a.test/3",
        "http://a.test/2",
    ]
    assert requeue(r, K, 100, retry_priority_adjust=-1).requeued == 3
    assert r.llen(K.dead) == 0 and int(r.get(K.requests_size)) == 5


def test_requeue_that_fails_in_redis_keeps_the_dead_letters(r):
    payload = serialize.dumps({"url": "http://b.test/1"})
    entries = [
        make_dead_letter(
            payload, error=f"HTTP 50{n}", attempts=3, failed_at=datetime.now(UTC), worker="h:1"
        ).dumps()
        for n in range(3)
    ]
    r.lpush(K.dead, *entries)
    r.set(K.host_queue("b.test"), "not a sorted set")  # the enqueue script fails on it
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        requeue(r, K, 10, retry_priority_adjust=-1)
    assert r.lrange(K.dead, 0, -1) == entries[::-1]
    assert not r.exists(K.requests_size)


def test_purge_and_one_line_errors(redis_url, r):
    r.lpush(K.dead, b"x", b"y")
    purged = deadletters(redis_url, "purge")
    assert purged.returncode == 0 and "Purged 2 dead letters" in purged.stdout
    assert not r.exists(K.dead)
    assert deadletters(redis_url, "requeue").returncode == 2  # needs --limit or --all

    down = deadletters("redis://:s3cret@127.0.0.1:9/0", "list")
    assert down.returncode == 1
    assert down.stdout == ""
    [line] = down.stderr.splitlines()
    assert line.startswith("ERROR: cannot connect to Redis at redis://:***@127.0.0.1:9/0: ")
    assert "s3cret" not in down.stderr


@pytest.fixture
def own_redis(start_redis) -> Iterator[tuple[str, redis.Redis]]:
    """A redis-server of this test alone, on a free port: its maxmemory is this test's."""
    _, url = start_redis("--maxmemory-policy", "noeviction")
    client = redis.Redis.from_url(url)
    yield url, client
    client.close()


def test_requeue_when_redis_refuses_writes_is_one_line_and_keeps_the_letters(own_redis):
    """Out of memory: requeue says so in one line, exits 1 and moves nothing; list still works."""
    url, r = own_redis
    entries = [
        make_dead_letter(
            serialize.dumps({"url": f"http://c.test/{n}"}),
            error="HTTP 503",
            attempts=3,
            failed_at=datetime.now(UTC),
            worker="h:1",
        ).dumps()
        for n in range(3)
    ]
    r.lpush(K.dead, *entries)
    r.config_set("maxmemory", 1)  # below what Redis uses: every write that adds data is OOM
    try:
        refused = deadletters(url, "requeue", "--all")
        listed = deadletters(url, "list")  # plain reads are still answered
        limited = deadletters(url, "requeue", "--limit", "1")
    finally:
        r.config_set("maxmemory", 0)
    assert refused.returncode == 1 and refused.stdout == ""
    [line] = refused.stderr.splitlines()
    assert line == (
        "ERROR: Redis refuses writes (OOM command not allowed when used memory > 'maxmemory'.) "
        f"at {url}; entries not requeued are still in distributed:dead"
    )
    assert limited.returncode == 1 and "Redis refuses writes (OOM" in limited.stderr
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[-1].startswith("3 dead letters in distributed:dead")
    assert r.lrange(K.dead, 0, -1) == entries[::-1]
    assert not r.exists(K.requests_size)

    done = deadletters(url, "requeue", "--all")
    assert done.returncode == 0, done.stderr
    assert "Requeued 3 dead letters" in done.stdout
    assert r.llen(K.dead) == 0 and int(r.get(K.requests_size)) == 3


class _Spider(Spider):
    name = "t"

    def parse(self, response):
        pass


def test_middleware_keeps_only_what_retry_gave_up_on():
    crawler = get_crawler(_Spider)
    stats = MemoryStatsCollector(crawler)
    sink: list[bytes] = []
    letters = DeadLetters(sink.append, stats, worker="h:1", key="t:dead")
    letters.spider = _Spider()
    mw = DeadLetterMiddleware(
        letters,
        retry_exceptions=(ConnectionRefusedError,),
        retry_http_codes=frozenset({503}),
    )

    def response(status: int, request: Request) -> HtmlResponse:
        return HtmlResponse(request.url, status=status, request=request)

    gave_up = Request("http://a.test/1", callback=letters.spider.parse, meta={"retry_times": 2})
    mw.process_response(gave_up, response(503, gave_up))
    mw.process_response(gave_up, response(404, gave_up))
    mw.process_response(gave_up, response(200, gave_up))
    mw.process_exception(gave_up, IgnoreRequest())
    no_retry = Request("http://a.test/2", meta={"dont_retry": True, "obj": object()})
    mw.process_exception(no_retry, ConnectionRefusedError("nope"))

    first, second = (DeadLetter.loads(x) for x in sink)
    assert (first.error, first.attempts, first.request["c"]) == ("HTTP 503", 3, "parse")
    assert second.attempts == 1 and second.error.startswith("ConnectionRefusedError: ")
    assert second.request["m"] == {"dont_retry": True}  # what JSON cannot hold is left out
    assert stats.get_value("dead_letters/count") == 2


def test_middleware_switch_and_retry_settings():
    with pytest.raises(NotConfigured):
        DeadLetterMiddleware.from_crawler(get_crawler(_Spider, {"DEAD_LETTERS_ENABLED": False}))
    crawler = project_crawler(
        _Spider,
        {
            "REDIS_RECONNECT_BACKOFF": 0.2,
            "REDIS_SOCKET_TIMEOUT": 10.0,
            "REDIS_RECONNECT_BACKOFF_MAX": 5.0,
            "DEAD_LETTERS_ENABLED": True,
            "REDIS_URL": "redis://127.0.0.1:9/0",
            "RETRY_HTTP_CODES": [599],
        },
    )
    mw = DeadLetterMiddleware.from_crawler(crawler)
    assert mw.retry_http_codes == {599}
    assert issubclass(ConnectionRefusedError, mw.retry_exceptions)
    assert mw.letters.key == "t:dead"
