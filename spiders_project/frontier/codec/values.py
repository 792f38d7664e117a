"""What spiders put in ``meta`` and ``cb_kwargs``, through JSON and back, without pickle.

scrapy-redis stores requests with pickle, so any object survives the queue,
and any object planted in Redis runs code when a worker reads it. The
frontier stores JSON, and JSON alone turns a ``datetime`` into an error, a
tuple into a list and a half-filled ``scrapy.Item`` into nothing. This module
keeps both promises: the Python values spiders pass between callbacks come
back as the same types, and only classes the project itself lists are ever
rebuilt.

A value that JSON holds as it is (str, int, float, bool, None, lists, dicts
with string keys) is written as it is, so the usual entry is unchanged. Any
other value is a tagged object ``{"__t": tag, ...}``:

==========  ===================================================
``dt``      datetime, ISO-8601 (offset kept when aware)
``date``    date, ISO-8601
``dec``     Decimal, as text
``b``       bytes, base64
``tuple``   tuple, ``v`` is the list of its values
``set``     set (``fset``: frozenset), ``v`` is a list
``dict``    a dict JSON cannot hold as an object (keys that are not
            strings, or a key ``__t``), ``v`` is the list of [key, value]
``obj``     an item: ``c`` names the class, ``v`` holds its fields
==========  ===================================================

Items are Scrapy ``Item`` subclasses, dataclasses and attrs classes. A class
is rebuilt only when it is in the allow-list: the item classes the modules of
``SPIDER_MODULES`` define, or import (``scrapy.Item`` subclasses, and items of
an ``items`` module), and those named in ``ITEM_CLASSES``. Nothing else is imported or called on
behalf of an entry: an unknown class name rejects the entry.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import inspect
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, cast

import attrs
from scrapy import Item
from scrapy.crawler import Crawler
from scrapy.settings import BaseSettings
from scrapy.utils.misc import load_object, walk_modules_iter

from spiders_project.config import SettingsReader
from spiders_project.plumbing.wiring import shared

TAG = "__t"
# Marks an entry that needs the tag decoder: plain entries skip it.
TAG_MARK = b'"__t"'
_PLAIN = (str, int, float, bool, type(None))


class Unstorable(TypeError):
    """A value of a type the frontier cannot store (or rebuild): ``path`` says where it is."""

    def __init__(self, value: Any, reason: str = "") -> None:
        self.type_name = _class_name(type(value))
        self.path: list[str] = []
        self.reason = reason or f"a {self.type_name} cannot be stored"
        super().__init__(self.reason)

    def at(self, part: str) -> Unstorable:
        """Record one more step of the path, outermost last (``add`` as it unwinds)."""
        self.path.append(part)
        return self

    @property
    def where(self) -> str:
        """``meta['item'].price`` style path of the value, outermost first."""
        return "".join(reversed(self.path))

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}" if self.path else self.reason


class BadValue(ValueError):
    """A tagged object in an entry that this project did not write (or cannot rebuild)."""


def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def is_item_class(obj: Any) -> bool:
    """A class whose instances are items: ``scrapy.Item``, dataclass or attrs."""
    return inspect.isclass(obj) and (
        issubclass(obj, Item) or dataclasses.is_dataclass(obj) or attrs.has(obj)
    )


def item_classes_in(module_names: Iterable[str]) -> dict[str, type]:
    """The item classes the spider modules named (and their submodules) use.

    Every item class defined in one of them; and, imported into one, every
    ``scrapy.Item`` subclass and the dataclass and attrs items of a module
    named ``items`` (Scrapy's project layout). Other dataclasses a spider
    module imports (configuration, helpers) are not items and stay out.
    """
    found: dict[str, type] = {}
    for name in module_names:
        for module in walk_modules_iter(name):
            for value in vars(module).values():
                if not is_item_class(value) or value is Item:
                    continue
                home = value.__module__
                if (
                    home == module.__name__
                    or home.startswith(f"{name}.")
                    or issubclass(value, Item)
                    or home.rpartition(".")[2] == "items"
                ):
                    found[_class_name(value)] = value
    return found


class ValueCodec:
    """Encodes and decodes request values, rebuilding only the classes it was given."""

    def __init__(self, classes: Mapping[str, type] | Iterable[type] = ()) -> None:
        if isinstance(classes, Mapping):
            self.classes = dict(classes)
        else:
            self.classes = {_class_name(cls): cls for cls in classes}
        self._names = {cls: name for name, cls in self.classes.items()}

    @classmethod
    def of(cls, crawler: Crawler) -> ValueCodec:
        """The crawler's codec (the frontier's and the dead letters' alike), built once."""
        return shared(crawler, cls, lambda: cls.from_settings(crawler.settings))

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> ValueCodec:
        read = SettingsReader(settings)
        classes = item_classes_in(read.getlist("SPIDER_MODULES"))
        for path in read.getlist("ITEM_CLASSES"):
            try:
                obj = load_object(path)
            except (ImportError, NameError, ValueError) as exc:
                read.fail("ITEM_CLASSES", f"cannot import {path}: {exc}")
            if not is_item_class(obj):
                read.fail("ITEM_CLASSES", f"{path} is not a scrapy.Item, dataclass or attrs class")
            classes[_class_name(obj)] = obj
        return cls(classes)

    # --- encoding ---------------------------------------------------------------

    def encode_fields(self, values: Mapping[str, Any], name: str) -> dict[str, Any]:
        """``meta`` or ``cb_kwargs`` as a JSON object; raises Unstorable naming the key."""
        out: dict[str, Any] = {}
        for key, value in values.items():
            if type(key) is not str:
                raise Unstorable(key, f"a key of type {_class_name(type(key))}").at(
                    f"{name}[{key!r}]"
                )
            try:
                out[key] = self.encode(value)
            except Unstorable as exc:
                raise exc.at(f"{name}[{key!r}]") from None
        return out

    def encode(self, value: Any) -> Any:
        """``value`` as JSON-ready data; raises :class:`Unstorable`."""
        kind = type(value)
        if kind in _PLAIN:
            return value
        if kind is list:
            return [self._at(i, v) for i, v in enumerate(value)]
        if kind is dict:
            if TAG not in value and all(type(k) is str for k in value):
                return {k: self._at_key(k, v) for k, v in value.items()}
            pairs = [[self.encode(k), self._at_key(k, v)] for k, v in value.items()]
            return {TAG: "dict", "v": pairs}
        if kind is tuple:
            return {TAG: "tuple", "v": [self._at(i, v) for i, v in enumerate(value)]}
        if kind is set or kind is frozenset:
            return {
                TAG: "set" if kind is set else "fset",
                "v": [self._at(i, v) for i, v in enumerate(value)],
            }
        if kind is bytes:
            return {TAG: "b", "v": base64.b64encode(value).decode("ascii")}
        if kind is dt.datetime:
            return {TAG: "dt", "v": value.isoformat()}
        if kind is dt.date:
            return {TAG: "date", "v": value.isoformat()}
        if kind is Decimal:
            return {TAG: "dec", "v": str(value)}
        if isinstance(value, str):
            # Text of a str subclass (lxml's _ElementUnicodeResult: CrawlSpider's
            # link_text) is stored, and comes back, as text, as JSON would.
            return str(value)
        name = self._names.get(kind)
        if name is not None:
            return {TAG: "obj", "c": name, "v": self._fields_of(value)}
        if is_item_class(kind):
            raise Unstorable(
                value,
                f"item class {_class_name(kind)} is not in the allow-list: define or import it"
                " in a module of SPIDER_MODULES, or add it to ITEM_CLASSES",
            )
        raise Unstorable(value)

    def _at(self, index: int, value: Any) -> Any:
        try:
            return self.encode(value)
        except Unstorable as exc:
            raise exc.at(f"[{index}]") from None

    def _at_key(self, key: Any, value: Any) -> Any:
        try:
            return self.encode(value)
        except Unstorable as exc:
            raise exc.at(f"[{key!r}]") from None

    def _fields_of(self, item: Any) -> dict[str, Any]:
        if isinstance(item, Item):
            fields = dict(item)
        elif dataclasses.is_dataclass(item):
            fields = {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}
        else:
            fields = {a.name: getattr(item, a.name) for a in attrs.fields(type(item))}
        out = {}
        for key, value in fields.items():
            try:
                out[key] = self.encode(value)
            except Unstorable as exc:
                raise exc.at(f".{key}") from None
        return out

    # --- decoding ---------------------------------------------------------------

    def object_hook(self, obj: dict[str, Any]) -> Any:
        """``json.loads`` hook: a tagged object as its value; raises :class:`BadValue`."""
        tag = obj.get(TAG)
        if tag is None:
            return obj
        value = obj.get("v")
        try:
            if tag == "dt":
                return dt.datetime.fromisoformat(_text(value))
            if tag == "date":
                return dt.date.fromisoformat(_text(value))
            if tag == "dec":
                return Decimal(_text(value))
            if tag == "b":
                return base64.b64decode(_text(value), validate=True)
            if tag == "tuple":
                return tuple(_list(value))
            if tag == "set":
                return set(_list(value))
            if tag == "fset":
                return frozenset(_list(value))
            if tag == "dict":
                return {_hashable(pair[0]): pair[1] for pair in map(_pair, _list(value))}
            if tag == "obj":
                return self._rebuild(obj.get("c"), value)
        except (ValueError, TypeError, InvalidOperation, KeyError) as exc:
            raise BadValue(f"bad {tag!r} value: {exc}") from None
        raise BadValue(f"unknown tag {tag!r}")

    def _rebuild(self, name: Any, fields: Any) -> Any:
        """An allow-listed item class, filled with ``fields``; nothing else is called."""
        cls = self.classes.get(name) if isinstance(name, str) else None
        if cls is None:
            raise BadValue(f"class {str(name)[:200]!r} is not in the allow-list")
        if not isinstance(fields, dict):
            raise BadValue(f"fields of {name} are not an object")
        if issubclass(cls, Item):
            item = cls()
            for key, value in fields.items():
                item[key] = value  # KeyError for a field the class does not declare
            return item
        if dataclasses.is_dataclass(cls):
            declared = {f.name: f for f in dataclasses.fields(cls)}
            _check_names(name, fields, declared)
            made = cast(Any, cls)(**{k: v for k, v in fields.items() if declared[k].init})
            for key, value in fields.items():
                if not declared[key].init:
                    object.__setattr__(made, key, value)
            return made
        by_name = {a.name: a for a in attrs.fields(cls)}
        _check_names(name, fields, by_name)
        made = cls(**{by_name[k].alias: v for k, v in fields.items() if by_name[k].init})
        for key, value in fields.items():
            if not by_name[key].init:
                object.__setattr__(made, key, value)
        return made


def _check_names(name: str, fields: dict[str, Any], declared: Mapping[str, Any]) -> None:
    unknown = set(fields) - set(declared)
    if unknown:
        raise BadValue(f"{name} has no field {sorted(unknown)[0]!r}")


def _text(value: Any) -> str:
    if type(value) is not str:
        raise TypeError("not text")
    return value


def _list(value: Any) -> list[Any]:
    if type(value) is not list:
        raise TypeError("not a list")
    return value


def _pair(value: Any) -> list[Any]:
    if type(value) is not list or len(value) != 2:
        raise TypeError("not a [key, value] pair")
    return value


def _hashable(key: Any) -> Any:
    hash(key)  # TypeError for a list or dict key
    return key
