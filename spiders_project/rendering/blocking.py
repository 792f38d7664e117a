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
