"""The WARC archive with real workers: what each fetch leaves, a SIGKILL, write errors, replay."""

from __future__ import annotations

import gzip
import io
import json
import re
import signal
import socket
import time

import psutil
import pytest
from warcio.archiveiterator import ArchiveIterator

from spiders_project.archive.recovery import complete_length
from spiders_project.crawl.digests import content_digest
from spiders_project.crawl.meta import PAGE_STATE
from tests.support.archive import GzipSite, Pywb, records, warc_paths
from tests.support.processes import K, published_stats, scrapy_command, stat, wait_until, worker
from tests.support.site import TRACKER_HOST, JsSite, TestSite

pytestmark = pytest.mark.slow
BLOCK_TRACKER = f"RENDER_BLOCK_DOMAINS={TRACKER_HOST}"


def archiving(warc_dir, *more: str) -> tuple[str, ...]:
    return ("WARC_ENABLED=true", f"WARC_DIR={warc_dir}", *more)


def stored_pages(r) -> set[str]:
    return {json.loads(entry)["url"] for entry in r.lrange(K.items, 0, -1)}


def test_two_workers_archive_every_page_as_received_and_pywb_replays_them(
    redis_url, r, tmp_path, procs
):
    warc_dir = tmp_path / "warc"
    settings = archiving(warc_dir, "WARC_MAX_SIZE=200000", "MAX_IDLE_TIME_BEFORE_CLOSE=3")
    with GzipSite(pages=300, seed=28, offsite_links=False) as site:
        r.lpush(K.start_urls, site.url)
        workers = [worker(f"w{i}", redis_url, tmp_path, *settings) for i in (1, 2)]
        procs += workers
        for w in workers:
            assert w.wait(120) == 0, w.log()[-3000:]
        pages = stored_pages(r)
        assert pages == site.page_urls()

        files = warc_paths(warc_dir)
        assert files and not [p for p in files if p.name.endswith(".open")]
        responses: dict[str, list[tuple[object, bytes]]] = {}
        writers = set()
        for path in files:  # warcio reads every file, every record whole
            found = list(records(path))
            info = found[0][0]
            assert info.rec_type == "warcinfo"
            fields = dict(line.split(": ", 1) for line in found[0][1].decode().splitlines() if line)
            assert fields["spider"] == "distributed"
            assert fields["software"].startswith("spiders_project/")
            writers.add(fields["worker"])
            for record, payload in found[1:]:
                assert record.rec_type in ("response", "request"), record.rec_type
                if record.rec_type == "response":
                    url = record.rec_headers.get_header("WARC-Target-URI")
                    responses.setdefault(url, []).append((record, payload))
        assert writers == {f"{socket.gethostname()}:{w.pid}" for w in workers}
        for url in pages:
            ((record, payload),) = responses[url]  # exactly one response record
            assert record.http_headers.get_header("Content-Encoding") == "gzip"
            (sent,) = site.sent(url)
            assert payload == sent  # byte-identical, still gzip-encoded
            assert record.rec_headers.get_header("WARC-Payload-Digest") == content_digest(sent)
        total = sum(stat(r, w, "warc/records") for w in workers)
        assert total == sum(len(list(records(p))) for p in files)
        assert sum(stat(r, w, "warc/bytes") for w in workers) == sum(
            p.stat().st_size for p in files
        )

        # scrapy warc index: the file and offset of a page's capture.
        url = sorted(pages)[5]
        done = scrapy_command(
            redis_url, "warc", "index", url, "--json", "-s", f"WARC_DIR={warc_dir}"
        )
        assert done.returncode == 0, done.stderr[-3000:]
        where = json.loads(done.stdout)
        with open(where["file"], "rb") as f:
            f.seek(where["offset"])
            record = next(iter(ArchiveIterator(f)))
            assert record.rec_headers.get_header("WARC-Target-URI") == url
            assert record.raw_stream.read() == site.sent(url)[0]
        missing = scrapy_command(
            redis_url, "warc", "index", url + "?nope", "-s", f"WARC_DIR={warc_dir}"
        )
        assert missing.returncode == 1

    # The site is gone: pywb serves three pages from the archive alone.
    replay = Pywb(files, tmp_path / "pywb", tmp_path)
    procs.append(replay.proc)
    try:
        for url in sorted(pages)[:3]:
            ((record, _),) = responses[url]
            stamp = re.sub(r"\D", "", record.rec_headers.get_header("WARC-Date"))[:14]
            status, headers, body = replay.replay(url, stamp)
            assert status == 200, body[:500]
            if headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            assert body == gzip.decompress(site.sent(url)[0])
        status, _, body = replay.replay(
            sorted(pages)[0], stamp, mode="mp_"
        )  # rewritten for a browser
        assert status == 200 and b"<h1>Site 0, page" in body
    finally:
        replay.close()


def test_sigkill_leaves_complete_records_and_the_restart_closes_the_file(
    redis_url, r, tmp_path, procs
):
    warc_dir = tmp_path / "warc"
    settings = archiving(warc_dir, "FRONTIER_LEASE_TIMEOUT=3", "CONCURRENT_REQUESTS=8")
    with TestSite(pages=300, seed=29, latency=0.02, offsite_links=False) as site:
        r.lpush(K.start_urls, site.url)
        victim = worker("victim", redis_url, tmp_path, *settings)
        procs.append(victim)
        wait_until(lambda: r.llen(K.items) > 60, 60, what="a fifth of the crawl")
        victim.signal(signal.SIGKILL)
        assert victim.wait(10) == -signal.SIGKILL
        (left,) = [p for p in warc_paths(warc_dir) if p.name.endswith(".open")]
        # Every complete record reads back with warcio, and nothing else is there
        # but at most the one being written at the kill.
        good, count = complete_length(left)
        assert count > 60 and left.stat().st_size - good < 64 * 1024
        kept = io.BytesIO(left.read_bytes()[:good])
        types = [rec.rec_type for rec in ArchiveIterator(kept) if rec.raw_stream.read() != b"!"]
        assert types[0] == "warcinfo" and len(types) == count
        assert set(types[1:]) <= {"response", "request"}

        again = worker("again", redis_url, tmp_path, *settings, "MAX_IDLE_TIME_BEFORE_CLOSE=3")
        procs.append(again)
        assert again.wait(120) == 0, again.log()[-3000:]
        assert stored_pages(r) == site.page_urls()
    closed = left.with_name(left.name[: -len(".open")])
    assert not left.exists() and closed.exists()
    assert [rec for rec, _ in records(closed)][0].rec_type == "warcinfo"
    lines = [line for line in again.log().splitlines() if "Recovered WARC file" in line]
    assert len(lines) == 1 and closed.name in lines[0], lines
    assert stat(r, again, "warc/files_recovered") == 1
    assert not [p for p in warc_paths(warc_dir) if p.name.endswith(".open")]


def fsize_limited(limit: int) -> tuple[str, ...]:
    """``prlimit``: files this worker writes stop growing at ``limit`` bytes (EFBIG),
    as on a full disk; its log stays far below it. A soft limit only, so the test
    can lift it again without privileges."""
    return ("prlimit", f"--fsize={limit}:unlimited", "--")


@pytest.mark.parametrize("on_error", ["pause", "continue"])
def test_a_write_error_pauses_fetching_or_goes_on(on_error, redis_url, r, tmp_path, procs):
    warc_dir = tmp_path / "warc"
    settings = archiving(
        warc_dir,
        f"WARC_ON_ERROR={on_error}",
        "WARC_RETRY_INTERVAL=0.3",
        "STATS_PUBLISH_INTERVAL=0.5",
        "MAX_IDLE_TIME_BEFORE_CLOSE=3",
    )
    with TestSite(pages=200, seed=30, latency=0.01, offsite_links=False) as site:
        r.lpush(K.start_urls, site.url)
        w = worker("w", redis_url, tmp_path, *settings, prefix=fsize_limited(100_000))
        procs.append(w)
        wait_until(
            lambda: int(published_stats(r, w).get("warc/write_errors", 0)) > 0,
            60,
            what="a failed WARC write",
        )
        lines = [line for line in w.log().splitlines() if "WARC write failed" in line]
        assert lines
        if on_error == "pause":
            assert len(lines) == 1, lines
            assert "fetching paused" in lines[0]
            # Downloads under way at the failure end; then nothing more is fetched
            # while the write is tried again and again.
            wait_until(lambda: stat(r, w, "warc/write_errors") >= 4, 30, what="retries")
            fetched = sum(site.hits().values())
            errors = stat(r, w, "warc/write_errors")
            wait_until(lambda: stat(r, w, "warc/write_errors") >= errors + 4, 30, what="retries")
            assert sum(site.hits().values()) == fetched
            assert w.alive() and len(stored_pages(r)) < len(site.page_urls())
            # Room on the "disk" again: the same records are written, fetching resumes.
            psutil.Process(w.pid).rlimit(psutil.RLIMIT_FSIZE, (psutil.RLIM_INFINITY,) * 2)
        assert w.wait(120) == 0, w.log()[-3000:]
        assert stored_pages(r) == site.page_urls()
    archived = {
        rec.rec_headers.get_header("WARC-Target-URI")
        for path in warc_paths(warc_dir)
        for rec, _ in records(path)
        if rec.rec_type == "response"
    }
    if on_error == "pause":
        assert len([ln for ln in w.log().splitlines() if "WARC write failed" in ln]) == 1
        assert site.page_urls() <= archived  # nothing fetched and not archived
        assert stat(r, w, "warc/records_dropped") == 0
        assert "WARC writing works again: fetching resumes" in w.log()
    else:
        assert "goes on without archiving" in lines[0]
        assert stat(r, w, "warc/records_dropped") > 0
        assert len(site.page_urls() - archived) > 0


def captures_of(warc_dir, url: str) -> list[tuple[object, bytes]]:
    """(record, payload) of every record of ``url`` in the archive, in file order."""
    return [
        (rec, payload)
        for path in warc_paths(warc_dir)
        for rec, payload in records(path)
        if rec.rec_headers.get_header("WARC-Target-URI") == url
    ]


def test_an_unchanged_page_gives_a_revisit_record(redis_url, r, tmp_path, procs):
    """A revisit request's PAGE_STATE (written by the revisit scheduler; here by a seed)
    holding the page's digest: the same content, sent with other gzip bytes, is an
    identical-payload-digest revisit; a 304 a server-not-modified one."""
    warc_dir = tmp_path / "warc"
    settings = archiving(warc_dir, "MAX_IDLE_TIME_BEFORE_CLOSE=2")
    with GzipSite(
        pages=5, seed=31, offsite_links=False, dead_links=False, not_modified=["/page/2"]
    ) as site:
        r.lpush(K.start_urls, site.url)
        first = worker("first", redis_url, tmp_path, *settings)
        procs.append(first)
        assert first.wait(60) == 0, first.log()[-3000:]
        same, changed, not_modified = site.url, site.url + "page/1", site.url + "page/2"
        digest = content_digest(gzip.decompress(site.sent(same)[0]))
        seen = {"digest": digest, "fetched_at": "2026-11-26T10:00:00+00:00"}
        other = {"digest": content_digest(b"what it was before"), "fetched_at": None}
        for url, state in ((same, seen), (changed, other), (not_modified, seen)):
            r.lpush(K.start_urls, json.dumps({"url": url, "meta": {PAGE_STATE: state}}))
        again = worker("again", redis_url, tmp_path, *settings)
        procs.append(again)
        assert again.wait(60) == 0, again.log()[-3000:]
        assert len(site.sent(same)) == 2 and site.sent(same)[0] != site.sent(same)[1]
    kinds = [rec.rec_type for rec, _ in captures_of(warc_dir, same)]
    assert kinds == ["response", "request", "revisit", "request"]
    revisit, payload = captures_of(warc_dir, same)[2]
    headers = revisit.rec_headers
    assert headers.get_header("WARC-Profile").endswith("/revisit/identical-payload-digest")
    assert headers.get_header("WARC-Refers-To-Target-URI") == same
    assert headers.get_header("WARC-Refers-To-Date") == "2026-11-26T10:00:00Z"
    assert revisit.http_headers.statusline == "200 OK" and payload == b""
    kinds = [rec.rec_type for rec, _ in captures_of(warc_dir, changed)]
    assert kinds == ["response", "request", "response", "request"]
    found = captures_of(warc_dir, not_modified)
    assert [rec.rec_type for rec, _ in found] == ["response", "request", "revisit", "request"]
    revisit, payload = found[2]
    assert revisit.rec_headers.get_header("WARC-Profile").endswith("/revisit/server-not-modified")
    assert revisit.rec_headers.get_header("WARC-Refers-To-Date") == "2026-11-26T10:00:00Z"
    assert revisit.http_headers.statusline == "304 Not Modified" and payload == b""
    at_dir = ("-s", f"WARC_DIR={warc_dir}")
    done = scrapy_command(redis_url, "warc", "index", same, "--json", *at_dir)
    assert json.loads(done.stdout)["type"] == "revisit"
    every = scrapy_command(redis_url, "warc", "index", "--all", *at_dir)
    lines = [line.split() for line in every.stdout.splitlines()]
    assert [(line[4], line[6]) for line in lines if line[6] == same] == [
        ("response", same),
        ("revisit", same),
    ]


def test_a_rendered_page_keeps_its_document_and_its_dom(redis_url, r, tmp_path, procs):
    warc_dir = tmp_path / "warc"
    settings = archiving(warc_dir, "MAX_IDLE_TIME_BEFORE_CLOSE=2", BLOCK_TRACKER)
    with JsSite(pages=3, plain_pages=0, slow_pages=0) as site:
        r.lpush(K.start_urls, json.dumps({"url": site.url, "meta": {"playwright": True}}))
        w = worker("w", redis_url, tmp_path, *settings)
        procs.append(w)
        assert w.wait(120) == 0, w.log()[-3000:]
        urls = site.js_urls()
    assert len(urls) == 3
    for url in urls:
        found = captures_of(warc_dir, url)
        assert [rec.rec_type for rec, _ in found] == ["response", "request", "conversion"]
        (response, document), _, (dom, built) = found
        # The response holds the document the site sent: the shell, no content yet.
        assert b"<script" in document and b'id="content"' not in document
        # The conversion holds what the spider parsed, and points at its response.
        assert b'id="content"' in built
        assert dom.rec_headers.get_header("WARC-Refers-To") == response.rec_headers.get_header(
            "WARC-Record-ID"
        )
        assert dom.rec_headers.get_header("Content-Type").startswith("text/html")


def test_a_worker_whose_grace_period_runs_out_still_closes_its_file(redis_url, r, tmp_path, procs):
    """SIGTERM with downloads that outlast SHUTDOWN_GRACE_PERIOD: the worker ends with
    os._exit, without spider_closed; its WARC file is closed all the same."""
    warc_dir = tmp_path / "warc"
    settings = archiving(warc_dir, "SHUTDOWN_GRACE_PERIOD=1", "CONCURRENT_REQUESTS=4")
    with TestSite(pages=60, seed=32, latency=4.0, offsite_links=False) as site:
        r.lpush(K.start_urls, site.url)
        w = worker("w", redis_url, tmp_path, *settings)
        procs.append(w)
        wait_until(
            lambda: r.llen(K.items) >= 1 and r.zcard(K.leases) >= 2, 60, what="requests in flight"
        )
        started = time.monotonic()
        w.signal(signal.SIGTERM)
        assert w.wait(30) == 0, w.log()[-3000:]
        assert time.monotonic() - started < 10
    assert "Grace period over" in w.log()
    (path,) = warc_paths(warc_dir)
    assert not path.name.endswith(".open")
    found = [rec.rec_type for rec, _ in records(path)]
    assert found[0] == "warcinfo" and "response" in found
    assert stat(r, w, "warc/records") == len(found)
