"""A jar's cookies in a browser: a Playwright cookie as an http.cookiejar.Cookie and back,
and what one browser context holds of its jar.

A rendered page's cookies are its browser context's (Chromium's cookie
store), not Scrapy's: Chromium sends them with the navigation, its redirects
and the page's own requests, and drops a Cookie header put on the navigation.
So a context is given its jar's cookies before a page navigates, and after
the page ran, what the context holds against what it was given is the page's
change (what its server, its scripts and its sub-requests set or removed),
which goes into the jar like any other (``ProcessJars.update``).

:class:`BrowserCopy` keeps those books for one context, without Playwright
(``rendering/context_cookies.py`` does the browser's side). Cookies are
compared by what a server or a script sees of them (:data:`Look`: value,
expiry, Secure, HttpOnly), so what only http.cookiejar keeps
(``domain_specified``, ...) and what only the browser says (SameSite
``Lax`` for a cookie that named none) never counts as a change. Nothing here
logs: a cookie's value never leaves the jar and the browser.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.cookiejar import Cookie
from typing import Any

from spiders_project.cookies import codec

# The flag of a rendered response whose cookies were taken from its browser
# context: the cookie middleware leaves its Set-Cookie headers alone (the
# browser applied them, and its redirects' too, which Scrapy never sees).
TAKEN_FROM_BROWSER = "browser-cookies"
# Playwright's expiry of a cookie that ends with the session.
SESSION = -1
# http.cookiejar keeps a host-only cookie of a host without a dot
# ("localhost") under "<host>.local" (its effective request host).
_LOCAL = ".local"
_SAME_SITE = {"strict": "Strict", "lax": "Lax", "none": "None"}

# Where a browser keeps a cookie: (domain as the browser has it, path, name).
BrowserKey = tuple[str, str, str]
# What a server or a page sees of a cookie: value, expiry (None: the
# session's), Secure, HttpOnly.
Look = tuple[str, int | None, bool, bool]


def browser_domain(cookie: Cookie) -> str:
    """The domain a browser is given for a jar's ``cookie``."""
    domain: str = cookie.domain
    if not cookie.domain_specified and domain.endswith(_LOCAL) and domain.count(".") == 1:
        return domain[: -len(_LOCAL)]
    return domain


def jar_domain(domain: str) -> str:
    """The domain a jar keeps a browser's cookie of ``domain`` under (as
    http.cookiejar would have from a Set-Cookie of that host)."""
    return domain + _LOCAL if "." not in domain else domain


def to_browser(cookie: Cookie) -> dict[str, Any]:
    """A jar's ``cookie`` as ``BrowserContext.add_cookies`` takes it."""
    data: dict[str, Any] = {
        "name": cookie.name,
        "value": cookie.value or "",
        "domain": browser_domain(cookie),
        "path": cookie.path or "/",
        "expires": float(cookie.expires) if cookie.expires is not None else SESSION,
        "httpOnly": codec.http_only(cookie),
        "secure": bool(cookie.secure),
    }
    site = _SAME_SITE.get((codec.same_site(cookie) or "").lower())
    if site is not None:
        data["sameSite"] = site
    return data


def expires_of(data: Mapping[str, Any]) -> int | None:
    """A browser cookie's expiry in whole seconds (None: the session's)."""
    expires = data.get("expires", SESSION)
    if not isinstance(expires, (int, float)) or expires < 0:
        return None
    return int(expires)


def from_browser(data: Mapping[str, Any], like: Cookie | None = None) -> Cookie:
    """The jar's cookie for one cookie of ``BrowserContext.cookies()``.

    What a browser does not keep (whether the server named the domain and the
    path, the cookie's version, SameSite as the server spelt it) comes from
    ``like``, the jar's cookie of the same field, when there is one.
    """
    domain = jar_domain(str(data["domain"]))
    expires = expires_of(data)
    rest: dict[str, Any] = {}
    if data.get("httpOnly"):
        rest["HttpOnly"] = None
    reported = data.get("sameSite")
    known = codec.same_site(like) if like is not None else None
    if reported in ("Strict", "None"):
        rest["SameSite"] = reported
    elif known is not None and known.lower() == "lax":
        rest["SameSite"] = known
    return Cookie(
        version=like.version if like is not None else 0,
        name=str(data["name"]),
        value=str(data.get("value", "")),
        port=None,
        port_specified=False,
        domain=domain,
        domain_specified=like.domain_specified if like is not None else domain.startswith("."),
        domain_initial_dot=like.domain_initial_dot if like is not None else False,
        path=str(data.get("path") or "/"),
        path_specified=like.path_specified if like is not None else True,
        secure=bool(data.get("secure")),
        expires=expires,
        discard=expires is None,
        comment=None,
        comment_url=None,
        rest=rest,
    )


def look(cookie: Cookie) -> Look:
    return (cookie.value or "", cookie.expires, bool(cookie.secure), codec.http_only(cookie))


def browser_look(data: Mapping[str, Any]) -> Look:
    return (
        str(data.get("value", "")),
        expires_of(data),
        bool(data.get("secure")),
        bool(data.get("httpOnly")),
    )


def browser_key(data: Mapping[str, Any]) -> BrowserKey:
    return (str(data["domain"]), str(data.get("path") or "/"), str(data["name"]))


def key_for(cookie: Cookie) -> BrowserKey:
    """Where a browser given a jar's ``cookie`` keeps it (see ``BrowserCopy.given``)."""
    return (browser_domain(cookie), cookie.path or "/", cookie.name)


@dataclass
class _Held:
    """One cookie of the jar as its context was given it (or as a page left it)."""

    key: BrowserKey  # where the browser keeps it
    given: Look  # the jar's cookie as the context last got it from the jar, or gave it back
    seen: Look | None  # as the browser showed it then; None: not there (refused)


@dataclass
class Give:
    """What to do to a context before a page: cookies to add (or change), cookies to remove."""

    add: list[Cookie] = field(default_factory=list)
    remove: list[BrowserKey] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)  # the jar's fields no longer in the jar

    def __bool__(self) -> bool:
        return bool(self.add or self.gone)


@dataclass
class Taken:
    """What the pages of a context changed: cookies set, and cookies removed as
    (domain, path, name) of the jar."""

    cookies: list[Cookie] = field(default_factory=list)
    removed: list[tuple[str, str, str]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.cookies or self.removed)

    @property
    def names(self) -> list[str]:
        """The names of the cookies it changed (for COOKIES_DEBUG; never values)."""
        return sorted({c.name for c in self.cookies} | {name for _, _, name in self.removed})


class BrowserCopy:
    """What one browser context holds of its jar, as this worker last gave or read it.

    Every giving and reading of one context must be serialized by the caller
    (a browser call sits between :meth:`to_give` and :meth:`given`).
    """

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}  # the jar's field -> the cookie in the context

    def __len__(self) -> int:
        return len(self._held)

    def to_give(self, jar: Iterable[Cookie], now: float) -> Give:
        """What the context lacks of ``jar`` (its cookies that ``now`` has not
        expired): cookies the jar changed since the context was last given or
        read, and cookies the jar no longer holds. Empty when the jar did not change."""
        wanted: dict[str, Cookie] = {}
        for cookie in jar:
            if not cookie.is_expired(int(now)):
                wanted[codec.field_of(cookie)] = cookie
        give = Give()
        for name, cookie in wanted.items():
            held = self._held.get(name)
            if held is None or held.given != look(cookie):
                give.add.append(cookie)
        for name, held in self._held.items():
            if name not in wanted:
                give.gone.append(name)
                if held.seen is not None:
                    give.remove.append(held.key)
        return give

    def given(self, give: Give, browser: Iterable[Mapping[str, Any]]) -> list[Cookie]:
        """``give`` was done; ``browser`` is what the context holds now. The
        cookies the browser did not take (not there, or with another value)."""
        shown = {browser_key(data): data for data in browser}
        for name in give.gone:
            self._held.pop(name, None)
        refused = []
        for cookie in give.add:
            key = self._found(cookie, shown)
            seen = browser_look(shown[key]) if key is not None else None
            if seen is None or seen[0] != look(cookie)[0]:
                refused.append(cookie)
            self._held[codec.field_of(cookie)] = _Held(key or key_for(cookie), look(cookie), seen)
        return refused

    def forget(self, give: Give) -> None:
        """``give`` failed part way: what it touched is in an unknown state, so
        it is given again before the next page, and read as the page's if the
        browser has it then."""
        for name in give.gone:
            self._held.pop(name, None)
        for cookie in give.add:
            self._held.pop(codec.field_of(cookie), None)

    def taken(self, browser: Iterable[Mapping[str, Any]], jar: Iterable[Cookie]) -> Taken:
        """What the context's pages changed: ``browser`` (what the context holds
        now) against what it was given, less what ``jar`` holds already."""
        shown = {browser_key(data): data for data in browser}
        by_key = {held.key: name for name, held in self._held.items()}
        in_jar = {codec.field_of(cookie): cookie for cookie in jar}
        taken = Taken()
        for key, data in shown.items():
            now = browser_look(data)
            name = by_key.get(key)
            if name is not None and self._held[name].seen == now:
                continue
            if name is None:
                name = codec.field_of(from_browser(data))
            self._held[name] = _Held(key, now, now)
            like = in_jar.get(name)
            if like is not None and look(like) == now:
                continue  # the jar has it already (another page of the jar's read it)
            taken.cookies.append(from_browser(data, like))
        for name, held in list(self._held.items()):
            if held.seen is not None and held.key not in shown:
                del self._held[name]
                if name in in_jar:
                    taken.removed.append(codec.split_field(name))
        return taken

    @staticmethod
    def _found(cookie: Cookie, shown: Mapping[BrowserKey, Any]) -> BrowserKey | None:
        """Where the browser keeps a cookie it was given: where it was put, or
        as a host cookie when its domain cannot have any other (a domain
        cookie of an IP address or of a host without a dot)."""
        key = key_for(cookie)
        if key in shown:
            return key
        host_only = (key[0].lstrip("."), key[1], key[2])
        return host_only if host_only in shown else None
