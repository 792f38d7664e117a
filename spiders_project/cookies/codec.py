"""A cookie as one field of a jar's Redis hash, and the change between two states of a jar.

A field is ``<domain>\\t<path>\\t<name>`` (the domain exactly as
http.cookiejar keeps it: a leading dot for a domain cookie), its value the
JSON of what rebuilds the :class:`http.cookiejar.Cookie`; fields that start
with ``~`` are the jar's own (``~v`` its version). Nothing here is ever
logged: a field names a cookie, its value holds the cookie's value.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.cookiejar import Cookie
from typing import Any

from scrapy.http.cookies import CookieJar

SEPARATOR = "\t"
# Fields of the jar itself, not cookies: its version (HINCRBY on every
# change), and the fields later features keep beside it (``~proxy``, ``~login``).
CONTROL = "~"
VERSION = "~v"
# The jar of requests without meta["cookiejar"].
DEFAULT_JAR = "default"

# A field's value -> cookie, and what each attribute must be.
_FLAGS = ("secure", "http_only", "domain_specified", "domain_initial_dot", "path_specified")


class BadCookie(ValueError):
    """A jar field that is not a cookie this project wrote (named; never its value)."""


def jar_id(key: object) -> str:
    """The shared jar of a request's ``meta["cookiejar"]`` (None: the default jar).

    Scrapy keys its jars by the value itself; across processes only text
    travels, so ``1`` and ``"1"`` are one jar here.
    """
    return DEFAULT_JAR if key is None else str(key)


def field_of(cookie: Cookie) -> str:
    return f"{cookie.domain}{SEPARATOR}{cookie.path}{SEPARATOR}{cookie.name}"


def split_field(name: str) -> tuple[str, str, str]:
    """(domain, path, name) of a cookie field; raises BadCookie."""
    parts = name.split(SEPARATOR, 2)
    if len(parts) != 3 or not parts[0] or not parts[1].startswith("/") or not parts[2]:
        raise BadCookie(f"field {name!r} is not <domain> <path> <name>")
    return parts[0], parts[1], parts[2]


# http.cookiejar keeps an attribute it does not know (HttpOnly, SameSite) as
# the server spelt it, and reads it back by that exact name only.
_HTTP_ONLY = ("HttpOnly", "httponly", "Httponly", "HTTPOnly", "HTTPONLY", "httpOnly")
_SAME_SITE = ("SameSite", "samesite", "Samesite", "SAMESITE", "sameSite")


def http_only(cookie: Cookie) -> bool:
    """Whether ``cookie`` is HttpOnly, however its server spelt the attribute."""
    return any(cookie.has_nonstandard_attr(name) for name in _HTTP_ONLY)


def same_site(cookie: Cookie) -> str | None:
    """``cookie``'s SameSite as its server spelt it, or None."""
    for name in _SAME_SITE:
        value = cookie.get_nonstandard_attr(name)
        if isinstance(value, str):
            return value
    return None


def encode(cookie: Cookie) -> str:
    """The field value of ``cookie``: compact JSON, the same text for the same cookie."""
    data: dict[str, Any] = {
        "value": cookie.value,
        "expires": cookie.expires,
        "secure": bool(cookie.secure),
        "http_only": http_only(cookie),
        "domain_specified": bool(cookie.domain_specified),
        "domain_initial_dot": bool(cookie.domain_initial_dot),
        "path_specified": bool(cookie.path_specified),
        "version": cookie.version,
    }
    site = same_site(cookie)
    if site is not None:
        data["same_site"] = site
    return json.dumps(data, separators=(",", ":"))


def decode(name: str, value: str | bytes) -> Cookie:
    """The cookie of one jar field; raises BadCookie for anything this module did not write."""
    domain, path, cookie_name = split_field(name)
    try:
        data = json.loads(value)
    except ValueError:
        raise BadCookie(f"field {name!r} is not JSON") from None
    if not isinstance(data, dict):
        raise BadCookie(f"field {name!r} is not a JSON object")
    cookie_value = data.get("value")
    expires = data.get("expires")
    version = data.get("version", 0)
    site = data.get("same_site")
    if (
        not (cookie_value is None or isinstance(cookie_value, str))
        or not (expires is None or (type(expires) is int))
        or not (version is None or type(version) is int)
        or not (site is None or isinstance(site, str))
        or not all(isinstance(data.get(flag, False), bool) for flag in _FLAGS)
    ):
        raise BadCookie(f"field {name!r} has an attribute of the wrong type")
    # http.cookiejar keeps a flag attribute (HttpOnly) with the value None.
    rest: dict[str, Any] = {}
    if data.get("http_only"):
        rest["HttpOnly"] = None
    if site is not None:
        rest["SameSite"] = site
    return Cookie(
        version=version,
        name=cookie_name,
        value=cookie_value,
        port=None,
        port_specified=False,
        domain=domain,
        domain_specified=data.get("domain_specified", False),
        domain_initial_dot=data.get("domain_initial_dot", False),
        path=path,
        path_specified=data.get("path_specified", False),
        secure=data.get("secure", False),
        expires=expires,
        discard=expires is None,
        comment=None,
        comment_url=None,
        rest=rest,
    )


def size_of(cookie: Cookie) -> int:
    """Bytes a cookie counts against MAX_COOKIE_BYTES: name, value, domain and path."""
    parts = (cookie.name, cookie.value or "", cookie.domain, cookie.path)
    return sum(len(part.encode("utf-8", "surrogateescape")) for part in parts)


# A jar's cookies: field -> encoded value.
Snapshot = dict[str, str]


def snapshot(jar: CookieJar) -> Snapshot:
    """Every cookie of ``jar``, as fields (one pass; taken only around a change)."""
    return {field_of(cookie): encode(cookie) for cookie in jar}


@dataclass
class Change:
    """What changed in a jar: fields to set (field -> value), fields to delete."""

    sets: dict[str, str] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.sets or self.deletes)


def diff(before: Mapping[str, str], after: Mapping[str, str]) -> Change:
    """The change that turns ``before`` into ``after``."""
    return Change(
        sets={f: v for f, v in after.items() if before.get(f) != v},
        deletes=[f for f in before if f not in after],
    )


def apply(jar: CookieJar, change: Change) -> None:
    """Make ``change`` in ``jar`` (a change of this worker not yet in a copy read from Redis)."""
    for name in change.deletes:
        domain, path, cookie_name = split_field(name)
        try:
            jar.clear(domain, path, cookie_name)
        except KeyError:
            pass
    for name, value in change.sets.items():
        jar.set_cookie(decode(name, value))


@dataclass
class Loaded:
    """A jar's hash, read: its version, its other control fields, its cookies, the bad fields."""

    version: int = 0
    control: dict[str, str] = field(default_factory=dict)
    cookies: list[Cookie] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)  # why each bad field is bad (names only)


def _text(value: str | bytes) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def load(fields: Mapping[Any, Any], now: float | None = None) -> Loaded:
    """What an HGETALL of a jar holds; cookies expired by ``now`` left out."""
    now = time.time() if now is None else now
    loaded = Loaded()
    for raw_name, raw_value in fields.items():
        name = _text(raw_name)
        if name.startswith(CONTROL):
            value = _text(raw_value)
            if name == VERSION:
                loaded.version = version_of(value)
            else:
                loaded.control[name] = value
            continue
        try:
            cookie = decode(name, raw_value)
        except BadCookie as exc:
            loaded.bad.append(str(exc))
            continue
        if cookie.expires is not None and cookie.expires <= now:
            continue
        loaded.cookies.append(cookie)
    return loaded


def version_of(raw: object) -> int:
    """A jar's ``~v`` (None, no jar: 0)."""
    if raw is None:
        return 0
    try:
        return int(_text(raw) if isinstance(raw, (str, bytes)) else str(raw))
    except ValueError:
        return -1  # not ours: never equal to a copy's, so the jar is read whole


def fill(jar: CookieJar, cookies: Iterable[Cookie]) -> None:
    """``jar`` holding exactly ``cookies``."""
    jar.clear()
    for cookie in cookies:
        jar.set_cookie(cookie)
