"""A jar's bounds (RFC 6265, 6.1): what a change may add, and what it must leave out.

A site that sets a cookie past a bound has it ignored, as a browser would:
a cookie over MAX_COOKIE_BYTES keeps its previous value (or stays unset), a
new cookie past MAX_COOKIES_PER_DOMAIN of its domain or MAX_COOKIES_PER_JAR
of its jar is not kept. Each is reported by name and domain; its value never.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from scrapy.http.cookies import CookieJar

from spiders_project.cookies.codec import Change, decode, size_of, split_field
from spiders_project.cookies.config import (
    MAX_COOKIE_BYTES,
    MAX_COOKIES_PER_DOMAIN,
    MAX_COOKIES_PER_JAR,
)


@dataclass(frozen=True)
class Dropped:
    """A cookie a change could not keep: its name, its domain, why (never its value)."""

    name: str
    domain: str
    reason: str


def bounded(
    jar: CookieJar, change: Change, before: Mapping[str, str], after: Mapping[str, str]
) -> list[Dropped]:
    """Take out of ``change`` (and undo in ``jar``) what passes a bound; what was taken out.

    ``before`` and ``after`` are the jar's snapshots around the change.
    """
    dropped: list[Dropped] = []
    for name, value in list(change.sets.items()):
        cookie = decode(name, value)
        if size_of(cookie) > MAX_COOKIE_BYTES:
            reason = f"over {MAX_COOKIE_BYTES} bytes"
            dropped.append(Dropped(cookie.name, cookie.domain, reason))
            _undo(jar, change, name, before)
    new = [name for name in change.sets if name not in before]
    if new:
        per_domain = Counter(
            _domain(name) for name in after if name in change.sets or name in before
        )
        total = sum(per_domain.values())
        for name in reversed(new):  # the last set first, as they came
            domain = _domain(name)
            if per_domain[domain] > MAX_COOKIES_PER_DOMAIN:
                reason = f"over {MAX_COOKIES_PER_DOMAIN} cookies for its domain"
            elif total > MAX_COOKIES_PER_JAR:
                reason = f"over {MAX_COOKIES_PER_JAR} cookies in its jar"
            else:
                continue
            per_domain[domain] -= 1
            total -= 1
            _, _, cookie_name = split_field(name)
            dropped.append(Dropped(cookie_name, domain, reason))
            _undo(jar, change, name, before)
    return dropped


def _domain(name: str) -> str:
    return split_field(name)[0].lstrip(".")


def _undo(jar: CookieJar, change: Change, name: str, before: Mapping[str, str]) -> None:
    """``name`` back as it was before the change, in ``jar`` and out of ``change``."""
    del change.sets[name]
    domain, path, cookie_name = split_field(name)
    old = before.get(name)
    if old is not None:
        jar.set_cookie(decode(name, old))
        return
    try:
        jar.clear(domain, path, cookie_name)
    except KeyError:
        pass
