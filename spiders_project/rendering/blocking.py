"""Lean pages: sub-requests of a rendered page that are aborted before they leave the browser."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from urllib.parse import urlsplit

from playwright.async_api import Request as PlaywrightRequest

AbortPredicate = Callable[[PlaywrightRequest], "bool | Awaitable[bool]"]


class ResourceBlocker:
    """Says whether the browser should abort one of a page's sub-requests.

    Aborts requests whose Playwright ``resource_type`` is in ``resource_types``
    (``image``, ``font``, ``media``, ...) or whose host is one of ``domains`` or a
    subdomain of one. Navigations are never aborted, so a page can always load.
    Used as scrapy-playwright's ``abort_request`` hook: every sub-request
    already passes through its route handler.
    """

    def __init__(self, resource_types: Iterable[str], domains: Iterable[str]) -> None:
        self.resource_types = frozenset(resource_types)
        self.domains = frozenset(d.lower().lstrip(".") for d in domains)

    def __bool__(self) -> bool:
        return bool(self.resource_types or self.domains)

    def blocks(self, url: str, resource_type: str) -> bool:
        if resource_type in self.resource_types:
            return True
        if not self.domains:
            return False
        host = (urlsplit(url).hostname or "").lower()
        while host:
            if host in self.domains:
                return True
            _, _, host = host.partition(".")
        return False

    def __call__(self, request: PlaywrightRequest) -> bool:
        if request.is_navigation_request():
            return False
        return self.blocks(request.url, request.resource_type)


# Resource types Chromium can leave unloaded by itself, and the switches that
# do it. A type blocked this way is never requested, so none of its requests
# makes the round trip through Node and scrapy-playwright's route handler to
# be aborted. For fonts that changes nothing a page can see: a remote font
# fails to load either way. Images differ: an aborted image fires "error",
# an unloaded one fires neither "load" nor "error" and never completes, so a
# script that waits for its images waits forever. Images are therefore left
# to the route unless RENDER_IMAGES_UNLOADED (docs/RENDERING.md).
_FONTS_OFF = "--disable-remote-fonts"
_IMAGES_OFF = "imagesEnabled=false"
_BLINK = "--blink-settings="
# Playwright passes its own --blink-settings (a desktop's mouse: hover and a
# fine pointer, for CSS media queries and matchMedia), and Chromium keeps only
# the last --blink-settings of its command line: a new one repeats them.
_PLAYWRIGHT_BLINK = [
    "primaryHoverType=2",
    "availableHoverTypes=2",
    "primaryPointerType=4",
    "availablePointerTypes=4",
]


def with_switches(
    args: Iterable[str], resource_types: Iterable[str], *, images_unloaded: bool = False
) -> list[str]:
    """Chromium's command-line ``args`` plus the switches that keep it from
    loading fonts (if ``resource_types`` blocks them) and, with
    ``images_unloaded``, images; other types are left to the route handler.
    A ``--blink-settings=`` already in ``args`` is extended, else one is added
    with Playwright's own settings first."""
    result = list(args)
    if "font" in set(resource_types) and _FONTS_OFF not in result:
        result.append(_FONTS_OFF)
    if images_unloaded:
        at = next((i for i, arg in enumerate(result) if arg.startswith(_BLINK)), None)
        given = result[at][len(_BLINK) :] if at is not None else ""
        values = [v for v in given.split(",") if v] or list(_PLAYWRIGHT_BLINK)
        if _IMAGES_OFF not in values:
            values.append(_IMAGES_OFF)
        blink = _BLINK + ",".join(values)
        if at is None:
            result.append(blink)
        else:
            result[at] = blink
    return result


def chain(first: AbortPredicate | None, second: ResourceBlocker) -> AbortPredicate | None:
    """One predicate from ``PLAYWRIGHT_ABORT_REQUEST`` (if set) and the blocker."""
    if not second:
        return first
    if first is None:
        return second

    async def either(request: PlaywrightRequest) -> bool:
        if second(request):
            return True
        result = first(request)
        if isinstance(result, Awaitable):
            result = await result
        return bool(result)

    return either
