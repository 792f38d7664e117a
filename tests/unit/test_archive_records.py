"""archive/records.py and revisits.py: the records of one fetch, read back with warcio."""

from __future__ import annotations

import datetime
import gzip
import io

import brotli
from backports import zstd
from warcio.archiveiterator import ArchiveIterator

from spiders_project.archive.records import (
    IDENTICAL,
    NOT_MODIFIED,
    Exchange,
    RecordBuilder,
    Revisit,
    status_line,
)
from spiders_project.archive.revisits import decoded, refers_to_date, revisit_of
from spiders_project.crawl.digests import content_digest

WHEN = datetime.datetime(2026, 11, 27, 1, 2, 3, 456789, tzinfo=datetime.UTC)
HTML = b"<html><body>hello</body></html>"
GZ = gzip.compress(HTML, mtime=0)


def exchange(**changes) -> Exchange:
    fields = dict(
        url="http://site.test/p/1?q=2",
        date=WHEN,
        method="GET",
        request_headers=[("User-Agent", "bot"), ("Accept-Encoding", "gzip")],
        request_body=b"",
        status=200,
        response_headers=[
            ("Content-Type", "text/html"),
            ("Content-Encoding", "gzip"),
            ("Transfer-Encoding", "chunked"),
            ("Set-Cookie", "a=1"),
            ("Set-Cookie", "b=2"),
        ],
        body=GZ,
        ip="127.0.0.1",
    )
    fields.update(changes)
    return Exchange(**fields)


def read(members: list[bytes]) -> list:
    records = []
    for record in ArchiveIterator(io.BytesIO(b"".join(members))):
        records.append((record, record.content_stream().read(), record.raw_stream.read()))
    return records


def test_each_record_is_one_gzip_member():
    members = RecordBuilder().exchange(exchange())
    assert len(members) == 2
    for member in members:
        assert gzip.decompress(member).startswith(b"WARC/1.1\r\n")


def test_response_keeps_the_encoded_body_and_its_payload_digest():
    (response, content, _), (request, _, _) = read(RecordBuilder().exchange(exchange()))
    assert response.rec_type == "response"
    headers = response.rec_headers
    assert headers.get_header("WARC-Target-URI") == "http://site.test/p/1?q=2"
    assert headers.get_header("WARC-Date") == "2026-11-27T01:02:03.456789Z"
    assert headers.get_header("WARC-IP-Address") == "127.0.0.1"
    assert headers.get_header("WARC-Payload-Digest") == content_digest(GZ)
    assert response.http_headers.statusline == "200 OK"
    assert response.http_headers.get_header("Content-Encoding") == "gzip"
    assert response.http_headers.get_header("Transfer-Encoding") is None
    cookies = [v for k, v in response.http_headers.headers if k == "Set-Cookie"]
    assert cookies == ["a=1", "b=2"]
    # content_stream() undoes Content-Encoding; the raw payload is as received
    assert content == HTML
    assert request.rec_type == "request"
    assert request.rec_headers.get_header("WARC-Concurrent-To") == headers.get_header(
        "WARC-Record-ID"
    )
    assert request.http_headers.protocol == "GET"
    assert request.http_headers.statusline == "/p/1?q=2 HTTP/1.1"
    assert request.http_headers.get_header("Host") == "site.test"


def test_raw_payload_is_byte_identical():
    members = RecordBuilder().exchange(exchange())
    it = ArchiveIterator(io.BytesIO(b"".join(members)), no_record_parse=False)
    record = next(iter(it))
    assert record.raw_stream.read() == GZ


def test_not_modified_and_identical_revisits():
    builder = RecordBuilder()
    nm = Revisit(NOT_MODIFIED, "http://site.test/p/1?q=2", "2026-11-26T00:00:00Z")
    (rec, content, _), _ = read(builder.exchange(exchange(status=304, body=b"", revisit=nm)))
    assert rec.rec_type == "revisit"
    assert rec.rec_headers.get_header("WARC-Profile") == NOT_MODIFIED
    assert rec.rec_headers.get_header("WARC-Refers-To-Date") == "2026-11-26T00:00:00Z"
    assert rec.http_headers.statusline == "304 Not Modified"
    same = Revisit(IDENTICAL, "http://site.test/p/1?q=2", None)
    (rec, content, _), _ = read(builder.exchange(exchange(revisit=same)))
    assert rec.rec_headers.get_header("WARC-Profile") == IDENTICAL
    assert rec.rec_headers.get_header("WARC-Payload-Digest") == content_digest(GZ)
    assert content == b""  # a revisit holds the headers only


def test_rendered_dom_refers_to_its_response():
    dom = b"<html><body>built by a script</body></html>"
    response, request, conversion = read(RecordBuilder().exchange(exchange(rendered=dom)))
    assert conversion[0].rec_type == "conversion"
    assert conversion[1] == dom
    assert conversion[0].rec_headers.get_header("WARC-Refers-To") == response[
        0
    ].rec_headers.get_header("WARC-Record-ID")


def test_warcinfo_names_what_wrote_it():
    member = RecordBuilder().warcinfo("f.warc.gz", {"software": "x/1", "spider": "s"})
    (rec, content, _) = read([member])[0]
    assert rec.rec_type == "warcinfo"
    assert rec.rec_headers.get_header("WARC-Filename") == "f.warc.gz"
    assert b"software: x/1\r\n" in content and b"spider: s\r\n" in content


def test_status_line_of_an_unknown_status():
    assert status_line(299) == "299"


def test_revisit_rule():
    state = {"digest": content_digest(HTML), "fetched_at": "2026-11-26T10:00:00+00:00"}
    url = "http://site.test/"
    assert revisit_of(url, 304, "", b"", None) == Revisit(NOT_MODIFIED, url, None)
    got = revisit_of(url, 200, "gzip", GZ, state)
    assert got == Revisit(IDENTICAL, url, "2026-11-26T10:00:00Z")
    assert revisit_of(url, 200, "", HTML, state) is not None
    assert revisit_of(url, 200, "gzip", gzip.compress(b"changed"), state) is None
    assert revisit_of(url, 200, "gzip", GZ, None) is None
    assert revisit_of(url, 200, "br", brotli.compress(HTML), state) is not None
    assert revisit_of(url, 200, "zstd", zstd.compress(HTML), state) is not None
    assert revisit_of(url, 200, "br", b"?", state) is None  # cannot tell: a full record
    assert revisit_of(url, 200, "compress", b"?", state) is None
    assert revisit_of(url, 404, "", HTML, state) is None


def test_decoded_and_dates():
    import zlib

    assert decoded(zlib.compress(HTML), "deflate") == HTML
    assert decoded(GZ, "identity, gzip") == HTML
    assert decoded(b"not gzip", "gzip") is None
    assert refers_to_date({"fetched_at": "nonsense"}) is None
    assert refers_to_date({"fetched_at": "2026-11-26T10:00:00Z"}) == "2026-11-26T10:00:00Z"
