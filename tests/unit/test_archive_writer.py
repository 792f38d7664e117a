"""archive/files.py and writer.py: rotation, closing, and what a write error does."""

from __future__ import annotations

import datetime
import gzip
import random
import threading

from warcio.archiveiterator import ArchiveIterator

from spiders_project.archive.config import CONTINUE, PAUSE
from spiders_project.archive.files import WarcFiles
from spiders_project.archive.naming import OPEN_SUFFIX, parse
from spiders_project.archive.records import Exchange
from spiders_project.archive.writer import ArchiveWriter, Dropped, Failed, Restored, Written

WHEN = datetime.datetime(2026, 11, 27, tzinfo=datetime.UTC)


def exchange(n: int, size: int = 2000) -> Exchange:
    return Exchange(
        url=f"http://site.test/page/{n}",
        date=WHEN,
        method="GET",
        request_headers=[],
        request_body=b"",
        status=200,
        response_headers=[],
        body=random.Random(n).randbytes(size),  # does not compress
    )


def types(path) -> list[str]:
    with path.open("rb") as f:
        return [r.rec_type for r in ArchiveIterator(f)]


def files_in(tmp_path, max_size: int = 10_000_000) -> WarcFiles:
    return WarcFiles(tmp_path, "crawl", "h:1", max_size, {"software": "t"})


def test_files_close_at_max_size_and_every_one_starts_with_warcinfo(tmp_path):
    files = files_in(tmp_path, max_size=65_536)
    for n in range(60):
        files.append(files.builder.exchange(exchange(n)))
    files.close()
    closed = sorted(tmp_path.iterdir())
    assert len(closed) > 1 and closed == files.closed
    assert not any(p.name.endswith(OPEN_SUFFIX) for p in closed)
    assert [parse(p.name).serial for p in closed] == list(range(1, len(closed) + 1))
    count = 0
    for path in closed:
        found = types(path)
        assert found[0] == "warcinfo" and "warcinfo" not in found[1:]
        count += found.count("response")
        assert path.stat().st_size < 65_536 + 10_000  # closed at the first fetch past it
    assert count == 60


def test_each_record_is_a_gzip_member(tmp_path):
    files = files_in(tmp_path)
    files.append(files.builder.exchange(exchange(1)))
    path = files.close()
    data = path.read_bytes()
    assert gzip.decompress(data).count(b"WARC/1.1\r\n") == 3


class Events:
    def __init__(self) -> None:
        self.seen: list = []
        self.changed = threading.Condition()

    def __call__(self, event) -> None:
        with self.changed:
            self.seen.append(event)
            self.changed.notify_all()

    def wait_for(self, kind, count: int = 1) -> None:
        with self.changed:
            assert self.changed.wait_for(
                lambda: sum(isinstance(e, kind) for e in self.seen) >= count, 10
            ), self.seen


def blocked_dir(tmp_path):
    """A WARC_DIR that cannot be created (a file stands there): every open fails."""
    target = tmp_path / "warc"
    target.write_text("not a folder")
    return target


def test_pause_retries_the_same_fetch_until_it_is_written(tmp_path):
    target = blocked_dir(tmp_path)
    events = Events()
    files = WarcFiles(target, "crawl", "h:1", 10_000_000, {})
    writer = ArchiveWriter(files, queue_size=10, on_error=PAUSE, report=events, retry_interval=0.05)
    writer.start()
    assert writer.submit(exchange(1)) and writer.submit(exchange(2))
    events.wait_for(Failed, 3)  # tried again and again, never dropped
    failed = [e for e in events.seen if isinstance(e, Failed)]
    assert failed[0].first and not any(e.first for e in failed[1:])
    assert "Error" in failed[0].error
    assert not any(isinstance(e, Written | Dropped) for e in events.seen)
    target.unlink()  # the disk has room again
    events.wait_for(Written, 2)
    assert sum(isinstance(e, Restored) for e in events.seen) == 1
    assert writer.stop(10)
    (path,) = target.iterdir()
    assert types(path) == ["warcinfo", "response", "request", "response", "request"]


def test_continue_drops_what_cannot_be_written_and_goes_on(tmp_path):
    target = blocked_dir(tmp_path)
    events = Events()
    writer = ArchiveWriter(
        WarcFiles(target, "crawl", "h:1", 10_000_000, {}),
        queue_size=10,
        on_error=CONTINUE,
        report=events,
    )
    writer.start()
    writer.submit(exchange(1))
    events.wait_for(Dropped)
    assert [e.records for e in events.seen if isinstance(e, Dropped)] == [2]
    target.unlink()
    writer.submit(exchange(2))
    events.wait_for(Written)
    assert writer.stop(10)
    (path,) = target.iterdir()
    assert types(path) == ["warcinfo", "response", "request"]


def test_a_full_queue_refuses_without_blocking(tmp_path):
    events = Events()
    writer = ArchiveWriter(files_in(tmp_path), queue_size=2, on_error=PAUSE, report=events)
    # not started: nothing takes from the queue
    assert writer.submit(exchange(1)) and writer.submit(exchange(2))
    assert not writer.submit(exchange(3)) and writer.room == 0
    writer.start()
    events.wait_for(Written, 2)
    assert writer.stop(10)


def test_a_bug_in_the_thread_is_reported_as_fatal(tmp_path):
    events = Events()
    writer = ArchiveWriter(files_in(tmp_path), queue_size=2, on_error=PAUSE, report=events)
    writer.start()
    broken = Exchange(
        url="http://site.test/",
        date=WHEN,
        method="GET",
        request_headers=[],
        request_body=b"",
        status=200,
        response_headers=[],
        body="not bytes",  # type: ignore[arg-type]
    )
    writer.submit(broken)
    events.wait_for(Failed)
    (failed,) = [e for e in events.seen if isinstance(e, Failed)]
    assert failed.fatal and failed.first
    assert writer.stop(10)  # the thread has ended; stopping it is harmless
