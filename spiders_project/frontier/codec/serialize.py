"""Requests as JSON, never pickle.

Usable as scrapy-redis' ``SCHEDULER_SERIALIZER`` (a module with ``loads`` and
``dumps`` over the dict of ``Request.to_dict()``). ``dumps`` writes a compact
JSON object with one-letter keys that omits default values (see ``dumps`` for
what else it shortens); ``loads`` accepts only that shape and
raises :class:`InvalidEntry` for anything else, so a hostile or corrupt entry
is rejected instead of being turned into code: no pickle, no ``_class`` outside
an allow-list, no callback name that is not a plain identifier (which names a
spider may use is :mod:`~spiders_project.frontier.codec.callbacks`' business).

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

from spiders_project.crawl.meta import JOB
from spiders_project.frontier.codec.values import TAG_MARK, BadValue, Unstorable, ValueCodec

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


# The stored entry's keys: one letter each, defaults left out, so a queued request
# costs Redis as few bytes as it can (docs/BENCHMARKS.md, Redis memory).
URL, CALLBACK, ERRBACK, METHOD, HEADERS, BODY, COOKIES = "u", "c", "e", "v", "h", "b", "k"
META, CB_KWARGS, ENCODING, FLAGS, DONT_FILTER, PRIORITY, CLASS = "m", "a", "n", "f", "x", "p", "t"
# Two values every followed link carries, lifted out of headers and meta:
# the Referer (a path when it shares the request's origin) and meta["depth"].
REFERER, DEPTH = "r", "d"
# The previous release's keys, still read (its entries stay queued through an upgrade).
_OLD_KEYS = {
    "url": URL,
    "cb": CALLBACK,
    "eb": ERRBACK,
    "method": METHOD,
    "headers": HEADERS,
    "body": BODY,
    "cookies": COOKIES,
    "meta": META,
    "cb_kwargs": CB_KWARGS,
    "encoding": ENCODING,
    "flags": FLAGS,
    "dont_filter": DONT_FILTER,
    "priority": PRIORITY,
    "_class": CLASS,
}


def _origin(url: str) -> str:
    """``scheme://netloc`` of an absolute http(s) URL (the part before its path)."""
    scheme, _, rest = url.partition("//")
    return f"{scheme}//{rest.split('/', 1)[0]}"


def url_of(entry: dict[str, Any]) -> str:
    """The URL of a stored entry, decoded (either release's shape); raises InvalidEntry."""
    url = entry.get(URL, entry.get("url"))
    _expect(isinstance(url, str), "no url")
    return str(url)


def dumps(d: dict[str, Any], values: ValueCodec = PLAIN) -> bytes:
    """Encode the dict of ``Request.to_dict()`` as compact JSON bytes.

    What is kept, and how: every field of the request, with one-letter keys
    and defaults left out; a single ``Referer`` header as its path when it
    has the request's origin (``"r":"/page/443"``), else whole; an integer
    ``meta["depth"]`` as ``"d"``. :func:`loads` gives back the same dict.

    Raises :class:`Unserializable` for a value of meta or cb_kwargs that
    ``values`` cannot store, :class:`InvalidEntry` for anything else JSON
    cannot hold.
    """
    url = d["url"]
    out: dict[str, Any] = {URL: url}
    if d.get("callback"):
        out[CALLBACK] = d["callback"]
    if d.get("errback"):
        out[ERRBACK] = d["errback"]
    if d.get("method", "GET") != "GET":
        out[METHOD] = d["method"]
    if d.get("headers"):
        headers = {_latin1(k): [_latin1(v) for v in vs] for k, vs in d["headers"].items()}
        referer = headers.get("Referer")
        if referer is not None and len(referer) == 1:
            del headers["Referer"]
            origin = _origin(url)
            value = referer[0]
            out[REFERER] = value[len(origin) :] if value.startswith(origin + "/") else value
        if headers:
            out[HEADERS] = headers
    if d.get("body"):
        out[BODY] = base64.b64encode(d["body"]).decode("ascii")
    if d.get("cookies"):
        out[COOKIES] = d["cookies"]
    meta = d.get("meta")
    if meta:
        depth = meta.get("depth")
        if type(depth) is int:
            out[DEPTH] = depth
            meta = {k: v for k, v in meta.items() if k != "depth"}
    try:
        if meta and JOB in meta:
            # The job first, and the meta right after the URL: the frontier's
            # scripts read the job from the first ',"m":{"crawl_job":"' of the
            # entry (frontier/lua/job_counts.lua), so no nested meta and no
            # cookie dict may come before it.
            meta = {JOB: meta[JOB], **meta}
            out = {URL: url, META: values.encode_fields(meta, "meta"), **out}
        elif meta:
            out[META] = values.encode_fields(meta, "meta")
        if d.get("cb_kwargs"):
            out[CB_KWARGS] = values.encode_fields(d["cb_kwargs"], "cb_kwargs")
    except Unstorable as exc:
        raise Unserializable(url, exc) from None
    if d.get("encoding", "utf-8") != "utf-8":
        out[ENCODING] = d["encoding"]
    if d.get("flags"):
        out[FLAGS] = d["flags"]
    if d.get("dont_filter"):
        out[DONT_FILTER] = True
    if d.get("priority"):
        out[PRIORITY] = d["priority"]
    if d.get("_class") and d["_class"] != "scrapy.http.request.Request":
        out[CLASS] = d["_class"]
    try:
        return json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode()
    except TypeError as exc:
        raise InvalidEntry(f"request {url} cannot be stored as JSON: {exc}") from exc


def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise InvalidEntry(what)


def loads(data: bytes | str, values: ValueCodec = PLAIN) -> dict[str, Any]:
    """Decode an entry written by :func:`dumps` (or by the previous release,
    with long keys) into ``request_from_dict`` input."""
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
    if URL not in obj and "url" in obj:
        obj = {_OLD_KEYS[k]: v for k, v in obj.items() if k in _OLD_KEYS}
    url = obj.get(URL)
    _expect(isinstance(url, str) and url.startswith(("http://", "https://")), "no http(s) url")
    d: dict[str, Any] = {"url": url}
    for key, name in ((CALLBACK, "callback"), (ERRBACK, "errback")):
        if key in obj:
            value = obj[key]
            _expect(
                isinstance(value, str)
                and bool(_METHOD_NAME.match(value))
                and not value.startswith("__"),
                f"bad {name}",
            )
            d[name] = value
    method = obj.get(METHOD, "GET")
    _expect(isinstance(method, str) and bool(_HTTP_METHOD.match(method)), "bad method")
    d["method"] = method
    headers = obj.get(HEADERS, {})
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
    if REFERER in obj:
        referer = obj[REFERER]
        _expect(isinstance(referer, str), "bad referer")
        if referer.startswith("/"):
            referer = _origin(url) + referer
        d["headers"][b"Referer"] = [referer.encode("latin-1")]
    if BODY in obj:
        _expect(isinstance(obj[BODY], str), "bad body")
        try:
            d["body"] = base64.b64decode(obj[BODY], validate=True)
        except ValueError:
            raise InvalidEntry("bad body") from None
    for key, name, kind in (
        (COOKIES, "cookies", (dict, list)),
        (META, "meta", dict),
        (CB_KWARGS, "cb_kwargs", dict),
        (FLAGS, "flags", list),
    ):
        if key in obj:
            _expect(isinstance(obj[key], kind), f"bad {name}")
            d[name] = obj[key]
    if DEPTH in obj:
        depth = obj[DEPTH]
        _expect(type(depth) is int, "bad depth")
        d["meta"] = {**d.get("meta", {}), "depth": depth}
    encoding = obj.get(ENCODING, "utf-8")
    _expect(isinstance(encoding, str), "bad encoding")
    d["encoding"] = encoding
    d["dont_filter"] = obj.get(DONT_FILTER) is True
    priority = obj.get(PRIORITY, 0)
    _expect(isinstance(priority, int) and not isinstance(priority, bool), "bad priority")
    d["priority"] = priority
    if CLASS in obj:
        _expect(obj[CLASS] in ALLOWED_CLASSES, "request class not allowed")
        d["_class"] = obj[CLASS]
    return d
