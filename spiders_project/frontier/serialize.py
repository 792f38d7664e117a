"""Requests as JSON, never pickle.

Usable as scrapy-redis' ``SCHEDULER_SERIALIZER`` (a module with ``loads`` and
``dumps`` over the dict of ``Request.to_dict()``). ``dumps`` writes a compact
JSON object that omits default values; ``loads`` accepts only that shape and
raises :class:`InvalidEntry` for anything else, so a hostile or corrupt entry
is rejected instead of being turned into code: no pickle, no ``_class`` outside
an allow-list, no callback names starting with ``_``.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

ALLOWED_CLASSES = frozenset(
    {
        "scrapy.http.request.Request",
        "scrapy.http.request.form.FormRequest",
        "scrapy.http.request.json_request.JsonRequest",
    }
)
_METHOD_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,99}$")
_HTTP_METHOD = re.compile(r"^[A-Z]{1,16}$")


class InvalidEntry(ValueError):
    """A Redis entry that is not a request this project wrote."""


def _latin1(value: bytes | str) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value


def dumps(d: dict[str, Any]) -> bytes:
    """Encode the dict of ``Request.to_dict()`` as compact JSON bytes."""
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
    if d.get("meta"):
        out["meta"] = d["meta"]
    if d.get("encoding", "utf-8") != "utf-8":
        out["encoding"] = d["encoding"]
    if d.get("flags"):
        out["flags"] = d["flags"]
    if d.get("cb_kwargs"):
        out["cb_kwargs"] = d["cb_kwargs"]
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


def loads(data: bytes | str) -> dict[str, Any]:
    """Decode an entry written by :func:`dumps` into ``request_from_dict`` input."""
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidEntry(f"not JSON: {exc}") from None
    _expect(isinstance(obj, dict), "not a JSON object")
    url = obj.get("url")
    _expect(isinstance(url, str) and url.startswith(("http://", "https://")), "no http(s) url")
    d: dict[str, Any] = {"url": url}
    for key, name in (("cb", "callback"), ("eb", "errback")):
        if key in obj:
            value = obj[key]
            _expect(isinstance(value, str) and bool(_METHOD_NAME.match(value)), f"bad {name}")
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
