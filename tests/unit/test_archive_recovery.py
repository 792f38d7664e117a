"""archive/recovery.py: a killed worker's .open file keeps its complete records."""

from __future__ import annotations

import datetime
import gzip
import os
import time

from warcio.archiveiterator import ArchiveIterator

from spiders_project.archive.files import WarcFiles
from spiders_project.archive.naming import OPEN_SUFFIX, file_name
from spiders_project.archive.records import Exchange, RecordBuilder
from spiders_project.archive.recovery import FRESH, complete_length, recover_dead

WHEN = datetime.datetime(2026, 11, 27, tzinfo=datetime.UTC)


def exchange(n: int) -> Exchange:
    return Exchange(
        url=f"http://site.test/page/{n}",
        date=WHEN,
        method="GET",
        request_headers=[("User-Agent", "bot")],
        request_body=b"",
        status=200,
        response_headers=[("Content-Encoding", "gzip")],
        body=gzip.compress(b"<p>%d</p>" % n * 50, mtime=0),
    )


def killed_file(tmp_path, partial: bool):
    """A .open file as a SIGKILL leaves it: warcinfo, 3 fetches, maybe half a member."""
    builder = RecordBuilder()
    name = file_name("crawl", WHEN, 1, "h:1")
    members = [builder.warcinfo(name, {"software": "t"})]
    for n in range(3):
        members += builder.exchange(exchange(n))
    data = b"".join(members)
    last = builder.exchange(exchange(9))[0]
    path = tmp_path / (name + OPEN_SUFFIX)
    path.write_bytes(data + (last[: len(last) // 2] if partial else b""))
    return path, len(data), len(members)


def read_all(path) -> list[str]:
    with path.open("rb") as f:
        return [record.rec_type for record in ArchiveIterator(f)]


def test_complete_length_stops_before_a_partial_member(tmp_path):
    path, size, count = killed_file(tmp_path, partial=True)
    assert complete_length(path) == (size, count)


def test_recovery_cuts_the_partial_record_and_renames(tmp_path, caplog):
    path, size, count = killed_file(tmp_path, partial=True)
    with caplog.at_level("WARNING"):
        done = recover_dead(tmp_path, "crawl")
    assert [d.records for d in done] == [count]
    closed = done[0].path
    assert not path.exists() and closed.name == path.name[: -len(OPEN_SUFFIX)]
    assert closed.stat().st_size == size
    assert read_all(closed) == ["warcinfo"] + ["response", "request"] * 3
    assert len([r for r in caplog.records if "Recovered WARC file" in r.getMessage()]) == 1


def test_a_file_without_a_partial_record_is_renamed_whole(tmp_path):
    path, size, count = killed_file(tmp_path, partial=False)
    done = recover_dead(tmp_path, "crawl")
    assert done[0].cut == 0 and done[0].path.stat().st_size == size


def test_an_empty_open_file_is_removed_unless_it_was_just_created(tmp_path):
    path = tmp_path / (file_name("crawl", WHEN, 1, "h:1") + OPEN_SUFFIX)
    path.write_bytes(b"")
    # Its writer may be between creating and locking it: left alone.
    assert recover_dead(tmp_path, "crawl") == [] and path.exists()
    old = time.time() - FRESH - 1
    os.utime(path, (old, old))
    assert [d.records for d in recover_dead(tmp_path, "crawl")] == [0]
    assert list(tmp_path.iterdir()) == []


def test_a_live_writers_file_and_other_prefixes_are_left_alone(tmp_path):
    files = WarcFiles(tmp_path, "crawl", "h:2", 10_000_000, {"software": "t"})
    files.append(RecordBuilder().exchange(exchange(1)))
    live = files.current
    assert live is not None and live.name.endswith(OPEN_SUFFIX)
    other, _, _ = killed_file(tmp_path, partial=False)
    renamed = other.rename(tmp_path / other.name.replace("crawl-", "other-"))
    assert recover_dead(tmp_path, "crawl") == []
    assert live.exists() and renamed.exists()
    closed = files.close()
    assert closed is not None and read_all(closed) == ["warcinfo", "response", "request"]
