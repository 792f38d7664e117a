import pickle

import pytest
from scrapy import Request, Spider
from scrapy.http import FormRequest
from scrapy.utils.request import request_from_dict

from spiders_project.frontier import serialize
from spiders_project.frontier.serialize import InvalidEntry


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
    assert data == b'{"url":"http://example.com/"}'


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
    ],
)
def test_hostile_or_foreign_entries_are_rejected(data):
    with pytest.raises(InvalidEntry):
        serialize.loads(data)


def test_unserializable_meta_is_a_clear_error():
    with pytest.raises(serialize.Unserializable, match=r"meta\['obj'\]: a builtins.object") as e:
        serialize.dumps(Request("http://e.com/", meta={"obj": object()}).to_dict())
    assert (e.value.where, e.value.type_name) == ("meta['obj']", "builtins.object")
