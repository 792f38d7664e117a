"""archive/naming.py: WARC file names."""

from __future__ import annotations

import datetime

from spiders_project.archive.naming import OPEN_SUFFIX, file_name, parse, worker_part

WHEN = datetime.datetime(2026, 11, 27, 1, 2, 3, 456789, tzinfo=datetime.UTC)


def test_name_has_prefix_utc_time_serial_and_worker():
    name = file_name("crawl", WHEN, 7, "node-1:4242")
    assert name == "crawl-20261127010203456-00007-node-1-4242.warc.gz"


def test_time_is_utc_whatever_the_zone_given():
    cet = WHEN.astimezone(datetime.timezone(datetime.timedelta(hours=1)))
    assert file_name("p", cet, 1, "h:1") == file_name("p", WHEN, 1, "h:1")


def test_worker_part_has_no_separator():
    assert worker_part("a/b:12") == "a-b-12"


def test_parse_reads_closed_and_open_names():
    name = file_name("my.crawl", WHEN, 12, "h:9")
    for text in (name, name + OPEN_SUFFIX):
        parsed = parse(text)
        assert parsed is not None
        assert (parsed.prefix, parsed.serial, parsed.worker) == ("my.crawl", 12, "h-9")
    assert parse("notes.txt") is None
    assert parse("crawl-2026-1-h.warc.gz") is None


def test_names_sort_by_time_then_serial():
    later = WHEN + datetime.timedelta(milliseconds=1)
    names = [file_name("p", later, 1, "h:1"), file_name("p", WHEN, 2, "h:1")]
    assert sorted(names)[0] == names[1]
