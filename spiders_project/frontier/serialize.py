"""Requests as JSON, never pickle.

Usable as scrapy-redis' ``SCHEDULER_SERIALIZER`` (a module with ``loads`` and
``dumps`` over the dict of ``Request.to_dict()``). ``dumps`` writes a compact
JSON object that omits default values; ``loads`` accepts only that shape and
raises :class:`InvalidEntry` for anything else, so a hostile or corrupt entry
is rejected instead of being turned into code: no pickle, no ``_class`` outside
an allow-list, no callback name that is not a plain identifier (which names a
spider may use is :mod:`~spiders_project.frontier.callbacks`' business).

``meta`` and ``cb_kwargs`` go through a :class:`~.values.ValueCodec`, so
items, datetimes, Decimals, bytes, tuples and sets come back as they went
in, and only allow-listed item classes are rebuilt. A value it cannot store
raises :class:`Unserializable`, which names the key and the type.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from spiders_project.frontier.values import TAG_MARK, BadValue, Unstorable, ValueCodec

ALLOWED_CLASSES = frozenset(
    {
        "scrapy.http.request.Request",
        "scrapy.http.request.form.FormRequest",
        "scrapy.http.request.json_request.JsonRequest",
    }
)
# An identifier; CrawlSpider's own callbacks are ``_callback`` and ``_errback``.
_METHOD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
_HTTP_METHOD = re.compile(r"^[A-Z]{1,16}$")


# No item class is rebuilt unless the caller passes the project's codec.
PLAIN = ValueCodec()


class InvalidEntry(ValueError):
    """A Redis entry that is not a request this project wrote."""


class Unserializable(InvalidEntry):
    """A request whose meta or cb_kwargs hold a value the frontier cannot store.

    ``where`` names the value (``meta['when'][0]``), ``type_name`` its type.
    """

    def __init__(self, url: str, problem: Unstorable) -> None:
        self.where = problem.where
        self.type_name = problem.type_name
        super().__init__(f"request {url} cannot be stored: {problem}")


def _latin1(value: bytes | str) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value


def dumps(d: dict[str, Any], values: ValueCodec = PLAIN) -> bytes:
    """Encode the dict of ``Request.to_dict()`` as compact JSON bytes.

    Raises :class:`Unserializable` for a value of meta or cb_kwargs that
    ``values`` cannot store, :class:`InvalidEntry` for anything else JSON
    cannot hold.
    """
    out: dict[str, Any] = {"url": d["url"]}
    if d.get("callback"):
        out["cb"] = d["callback"]
    if d.get("errback"):
        out["eb"] = d["errback"]
    if d.get("method", "GET") != "GET":
        out["method"] = d["method"]
    if d.get("headers"):
        out["headers"] = {_latin1(k): [_latin1(v) for v in vs] for k, vs in d["headers"].items()}
    if d.get("body"):
        out["body"] = base64.b64encode(d["body"]).decode("ascii")
    if d.get("cookies"):
        out["cookies"] = d["cookies"]
    try:
        if d.get("meta"):
            out["meta"] = values.encode_fields(d["meta"], "meta")
        if d.get("cb_kwargs"):
            out["cb_kwargs"] = values.encode_fields(d["cb_kwargs"], "cb_kwargs")
    except Unstorable as exc:
        raise Unserializable(d["url"], exc) from None
    if d.get("encoding", "utf-8") != "utf-8":
        out["encoding"] = d["encoding"]
    if d.get("flags"):
        out["flags"] = d["flags"]
    if d.get("dont_filter"):
        out["dont_filter"] = True
    if d.get("priority"):
        out["priority"] = d["priority"]
    if d.get("_class") and d["_class"] != "scrapy.http.request.Request":
        out["_class"] = d["_class"]
    try:
        return json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode()
    except TypeError as exc:
        raise InvalidEntry(f"request {d['url']} cannot be stored as JSON: {exc}") from exc


def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise InvalidEntry(what)


def loads(data: bytes | str, values: ValueCodec = PLAIN) -> dict[str, Any]:
    """Decode an entry written by :func:`dumps` into ``request_from_dict`` input."""
    tagged = TAG_MARK in data if isinstance(data, bytes) else TAG_MARK.decode() in data
    try:
        if tagged:
            obj = json.loads(data, object_hook=values.object_hook)
        else:
            obj = json.loads(data)
    except BadValue as exc:
        raise InvalidEntry(str(exc)) from None
    except RecursionError:
        raise InvalidEntry("nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidEntry(f"not JSON: {exc}") from None
    _expect(isinstance(obj, dict), "not a JSON object")
    url = obj.get("url")
    _expect(isinstance(url, str) and url.startswith(("http://", "https://")), "no http(s) url")
    d: dict[str, Any] = {"url": url}
    for key, name in (("cb", "callback"), ("eb", "errback")):
        if key in obj:
            value = obj[key]
            _expect(
                isinstance(value, str)
                and bool(_METHOD_NAME.match(value))
                and not value.startswith("__"),
                f"bad {name}",
            )
            d[name] = value
    method = obj.get("method", "GET")
    _expect(isinstance(method, str) and bool(_HTTP_METHOD.match(method)), "bad method")
    d["method"] = method
    headers = obj.get("headers", {})
    _expect(
        isinstance(headers, dict)
        and all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in headers.values()
        ),
        "bad headers",
    )
    d["headers"] = {
        k.encode("latin-1"): [x.encode("latin-1") for x in v] for k, v in headers.items()
    }
    if "body" in obj:
        _expect(isinstance(obj["body"], str), "bad body")
        try:
            d["body"] = base64.b64decode(obj["body"], validate=True)
        except ValueError:
            raise InvalidEntry("bad body") from None
    for key, kind in (
        ("cookies", (dict, list)),
        ("meta", dict),
        ("cb_kwargs", dict),
        ("flags", list),
    ):
        if key in obj:
            _expect(isinstance(obj[key], kind), f"bad {key}")
            d[key] = obj[key]
    encoding = obj.get("encoding", "utf-8")
    _expect(isinstance(encoding, str), "bad encoding")
    d["encoding"] = encoding
    d["dont_filter"] = obj.get("dont_filter") is True
    priority = obj.get("priority", 0)
    _expect(isinstance(priority, int) and not isinstance(priority, bool), "bad priority")
    d["priority"] = priority
    if "_class" in obj:
        _expect(obj["_class"] in ALLOWED_CLASSES, "request class not allowed")
        d["_class"] = obj["_class"]
    return d
