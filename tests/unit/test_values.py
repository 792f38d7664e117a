"""Values in meta and cb_kwargs survive the frontier's JSON; only allow-listed classes return."""

from __future__ import annotations

import dataclasses
import datetime as dt
import sys
from decimal import Decimal

import attrs
import pytest
import scrapy
from scrapy import Request, Spider
from scrapy.settings import Settings

from spiders_project.config import ConfigError
from spiders_project.frontier.codec import serialize
from spiders_project.frontier.codec.serialize import InvalidEntry, Unserializable
from spiders_project.frontier.codec.values import ValueCodec, item_classes_in
from spiders_project.frontier.queue import JsonPriorityQueue


class ProductItem(scrapy.Item):
    sku = scrapy.Field()
    name = scrapy.Field()
    price = scrapy.Field()


@dataclasses.dataclass
class Offer:
    shop: str
    price: Decimal
    seen: list[dt.date] = dataclasses.field(default_factory=list)
    note: str = dataclasses.field(default="", init=False)


@attrs.define
class Review:
    stars: int
    _secret: str = "x"


class NotListed(scrapy.Item):
    x = scrapy.Field()


CODEC = ValueCodec([ProductItem, Offer, Review])


class _Spider(Spider):
    name = "t"

    def parse(self, response):
        pass


def _queue() -> JsonPriorityQueue:
    return JsonPriorityQueue(None, _Spider(), "k", serialize, CODEC)


def _through(request: Request) -> Request:
    queue = _queue()
    _, payload = queue.encode(request)
    return queue.decode(payload)


def test_items_and_python_values_come_back_as_the_same_types():
    offer = Offer("a", Decimal("9.99"), [dt.date(2026, 1, 2)])
    offer.note = "set after init"
    meta = {
        "item": ProductItem(sku="S1", price=Decimal("1.50")),
        "offer": offer,
        "review": Review(4, "hidden"),
        "when": dt.datetime(2026, 11, 24, 18, 0, 1, 5, tzinfo=dt.UTC),
        "naive": dt.datetime(2026, 11, 24, 18, 0),
        "day": dt.date(2026, 11, 24),
        "raw": b"\x00\xff",
        "pair": (1, ("nested", 2.5)),
        "tags": {"a", "b"},
        "frozen": frozenset({3}),
        "by_id": {1: "one", (2, 3): "tuple key"},
        "tagged_key": {"__t": "not a tag"},
        "deep": [{"x": [Decimal("0.1"), None, True]}],
    }
    copy = _through(Request("http://e.com/", meta=meta, cb_kwargs={"item": meta["item"]}))
    for key, value in meta.items():
        assert copy.meta[key] == value, key
        assert type(copy.meta[key]) is type(value), key
    assert type(copy.meta["pair"][1]) is tuple
    assert copy.meta["offer"].note == "set after init"
    assert copy.meta["review"]._secret == "hidden"
    assert copy.meta["when"].tzinfo is not None and copy.meta["naive"].tzinfo is None
    assert type(copy.cb_kwargs["item"]) is ProductItem
    assert dict(copy.cb_kwargs["item"]) == {"sku": "S1", "price": Decimal("1.50")}


def test_text_of_a_str_subclass_is_text():
    from lxml import etree

    text = etree.fromstring("<a>link</a>").xpath("//a/text()")[0]
    assert type(text) is not str
    copy = _through(Request("http://e.com/", meta={"link_text": text}))
    assert copy.meta["link_text"] == "link" and type(copy.meta["link_text"]) is str


def test_plain_meta_is_written_as_plain_json():
    _, payload = _queue().encode(Request("http://e.com/", meta={"scope": "e.com", "depth": 1}))
    assert payload == b'{"u":"http://e.com/","d":1,"m":{"scope":"e.com"}}'


@pytest.mark.parametrize(
    ("meta", "where", "type_name"),
    [
        ({"lock": object()}, "meta['lock']", "builtins.object"),
        ({"items": [1, {"x": NotListed(x=1)}]}, "meta['items'][1]['x']", "test_values.NotListed"),
        ({"offer": Offer("a", Decimal(1), [object()])}, "meta['offer'].seen[0]", "builtins.object"),
        ({1: "int key"}, "meta[1]", "builtins.int"),
    ],
)
def test_a_value_that_cannot_be_stored_is_named_with_its_key_and_type(meta, where, type_name):
    with pytest.raises(Unserializable) as e:
        _queue().encode(Request("http://e.com/", meta=meta))
    assert e.value.where == where
    assert e.value.type_name.endswith(type_name)


def test_an_item_class_outside_the_allow_list_is_refused_with_the_fix():
    with pytest.raises(Unserializable, match="ITEM_CLASSES"):
        _queue().encode(Request("http://e.com/", cb_kwargs={"x": NotListed(x=1)}))


@pytest.mark.parametrize(
    "meta",
    [
        b'{"__t":"obj","c":"os.system","v":{}}',
        b'{"__t":"obj","c":"tests.unit.never_imported.Boom","v":{}}',
        b'{"__t":"obj","c":"test_values.ProductItem","v":{"no_such_field":1}}',
        b'{"__t":"obj","c":"' + Offer.__module__.encode() + b'.Offer","v":{"shop":"a","evil":1}}',
        b'{"__t":"dt","v":"yesterday"}',
        b'{"__t":"b","v":"***"}',
        b'{"__t":"dict","v":[[[1],2]]}',
        b'{"__t":"exec","v":"print(1)"}',
    ],
)
def test_hostile_tagged_values_are_rejected_and_nothing_is_imported(meta):
    payload = b'{"url":"http://e.com/","meta":{"x":' + meta + b"}}"
    with pytest.raises(InvalidEntry):
        _queue().decode(payload)
    assert "tests.unit.never_imported" not in sys.modules


def test_the_allow_list_is_the_spider_modules_and_item_classes():
    found = item_classes_in(["tests.unit.test_values"])
    assert {c.__name__ for c in found.values()} >= {"ProductItem", "Offer", "Review", "NotListed"}
    codec = ValueCodec.from_settings(
        Settings(
            {
                "SPIDER_MODULES": ["spiders_project.spiders"],
                "ITEM_CLASSES": ["tests.unit.test_values.Offer"],
            }
        )
    )
    assert Offer in codec.classes.values()
    assert NotListed not in codec.classes.values()
    assert "spiders_project.items.PageItem" in codec.classes  # imported by distributed.py
    # Dataclasses the spider modules import that are not items stay out.
    assert "spiders_project.scope.seeds.Seed" not in codec.classes
    assert "spiders_project.frontier.config.FrontierConfig" not in codec.classes


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (["no.such.Module"], "cannot import"),
        (["scrapy.Request"], "is not a scrapy.Item, dataclass or attrs class"),
    ],
)
def test_a_bad_item_classes_setting_is_one_line(value, problem):
    with pytest.raises(ConfigError, match=f"ITEM_CLASSES=.*{problem}"):
        ValueCodec.from_settings(Settings({"SPIDER_MODULES": [], "ITEM_CLASSES": value}))
