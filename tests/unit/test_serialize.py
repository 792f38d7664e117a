import json
import pickle

import pytest
from scrapy import Request, Spider
from scrapy.http import FormRequest
from scrapy.utils.request import request_from_dict

from spiders_project.frontier.codec import serialize
from spiders_project.frontier.codec.serialize import InvalidEntry


class _Spider(Spider):
    name = "t"

    def parse(self, response):
        pass

    def failed(self, failure):
        pass


def _roundtrip(request: Request, spider: Spider) -> Request:
    data = serialize.dumps(request.to_dict(spider=spider))
    assert isinstance(data, bytes)
    return request_from_dict(serialize.loads(data), spider=spider)


def test_request_json_round_trip_keeps_every_field():
    spider = _Spider()
    original = Request(
        "http://example.com/a?x=1",
        callback=spider.parse,
        errback=spider.failed,
        method="POST",
        headers={"X-Token": "abc", "Accept": ["a", "b"]},
        body=b"\x00\xffbinary",
        cookies={"k": "v"},
        meta={"scope": "example.com", "depth": 2, "nested": {"a": [1, 2]}},
        priority=7,
        dont_filter=True,
        cb_kwargs={"page": 3},
        flags=["f"],
    )
    copy = _roundtrip(original, spider)
    for attr in (
        "url",
        "method",
        "body",
        "cookies",
        "meta",
        "priority",
        "dont_filter",
        "cb_kwargs",
        "flags",
        "encoding",
    ):
        assert getattr(copy, attr) == getattr(original, attr), attr
    assert copy.headers.getlist("Accept") == [b"a", b"b"]
    assert copy.callback == spider.parse and copy.errback == spider.failed


def test_defaults_are_left_out_so_entries_stay_small():
    data = serialize.dumps(Request("http://example.com/").to_dict())
    assert data == b'{"u":"http://example.com/"}'


def test_form_request_class_survives():
    spider = _Spider()
    copy = _roundtrip(FormRequest("http://e.com/", formdata={"a": "1"}), spider)
    assert type(copy) is FormRequest and copy.body == b"a=1"


@pytest.mark.parametrize(
    "data",
    [
        pickle.dumps({"url": "http://e.com/"}),
        b"\x80\x04garbage",
        b"[1, 2]",
        b'{"no_url": 1}',
        b'{"url": "file:///etc/passwd"}',
        b'{"url": "http://e.com/", "_class": "os.system"}',
        b'{"url": "http://e.com/", "cb": "__init__"}',
        b'{"url": "http://e.com/", "method": "get; rm"}',
        b'{"url": "http://e.com/", "meta": "x"}',
        b'{"url": "http://e.com/", "priority": 1.5}',
        b'{"url": "http://e.com/", "body": "***"}',
        b'{"u": "ftp://e.com/"}',
        b'{"u": "http://e.com/", "r": 1}',
        b'{"u": "http://e.com/", "d": "2"}',
        b'{"u": "http://e.com/", "d": true}',
        b'{"u": "http://e.com/", "t": "os.system"}',
        b'{"u": "http://e.com/", "c": "__init__"}',
    ],
)
def test_hostile_or_foreign_entries_are_rejected(data):
    with pytest.raises(InvalidEntry):
        serialize.loads(data)


def test_unserializable_meta_is_a_clear_error():
    with pytest.raises(serialize.Unserializable, match=r"meta\['obj'\]: a builtins.object") as e:
        serialize.dumps(Request("http://e.com/", meta={"obj": object()}).to_dict())
    assert (e.value.where, e.value.type_name) == ("meta['obj']", "builtins.object")


def test_a_followed_link_of_the_benchmark_shape_fits_in_few_bytes():
    """Referer as a path on the same origin, depth out of meta, one-letter keys."""
    spider = _Spider()
    parent = "http://127.0.0.1:37883/page/443"
    request = Request(
        "http://127.0.0.1:37883/page/15138",
        callback=spider.parse,
        headers={"Referer": parent},
        meta={"depth": 3},
    )
    data = serialize.dumps(request.to_dict(spider=spider))
    assert data == b'{"u":"http://127.0.0.1:37883/page/15138","c":"parse","r":"/page/443","d":3}'
    copy = request_from_dict(serialize.loads(data), spider=spider)
    assert copy.headers.getlist("Referer") == [parent.encode()]
    assert copy.meta == {"depth": 3} and copy.callback == spider.parse


@pytest.mark.parametrize(
    "referer",
    [
        "https://other.example/x",  # another origin: kept whole
        "http://127.0.0.1:37883",  # the origin alone, no path
        "http://127.0.0.1:3788/page",  # a prefix of the origin, not the origin
    ],
)
def test_a_referer_of_another_origin_is_kept_whole(referer):
    request = Request("http://127.0.0.1:37883/a", headers={"Referer": referer})
    data = serialize.dumps(request.to_dict())
    copy = request_from_dict(serialize.loads(data))
    assert copy.headers.getlist("Referer") == [referer.encode()]


def test_two_referer_values_stay_headers():
    request = Request("http://e.com/a", headers={"Referer": ["http://e.com/1", "http://e.com/2"]})
    copy = request_from_dict(serialize.loads(serialize.dumps(request.to_dict())))
    assert copy.headers.getlist("Referer") == [b"http://e.com/1", b"http://e.com/2"]


def test_a_depth_that_is_not_an_integer_stays_in_meta():
    request = Request("http://e.com/a", meta={"depth": "deep"})
    data = serialize.dumps(request.to_dict())
    assert b'"m":{"depth":"deep"}' in data
    assert request_from_dict(serialize.loads(data)).meta == {"depth": "deep"}


def test_entries_of_the_previous_release_are_still_read():
    """Queued before an upgrade: long keys, Referer in headers, depth in meta."""
    spider = _Spider()
    old = (
        b'{"url":"http://e.com/p","cb":"parse","eb":"failed","method":"POST",'
        b'"headers":{"Referer":["http://e.com/"]},"body":"AAE=","meta":{"scope":"e.com",'
        b'"depth":2},"flags":["f"],"dont_filter":true,"priority":3}'
    )
    copy = request_from_dict(serialize.loads(old), spider=spider)
    assert (copy.url, copy.method, copy.body, copy.priority) == (
        "http://e.com/p",
        "POST",
        b"\0\1",
        3,
    )
    assert copy.callback == spider.parse and copy.errback == spider.failed
    assert copy.meta == {"scope": "e.com", "depth": 2} and copy.dont_filter
    assert copy.headers.getlist("Referer") == [b"http://e.com/"] and copy.flags == ["f"]
    assert serialize.url_of(json.loads(old)) == "http://e.com/p"
