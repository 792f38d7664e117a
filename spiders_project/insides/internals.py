"""Every private attribute of Scrapy and Playwright we use, behind one adapter that fails loudly.

Scrapy has no public API for three things a shared frontier needs: "which
requests is the engine still processing" (to acknowledge a lease only after
the page's items and links are handed over), "wake the engine now" (it polls
an empty scheduler only every 5 s), and "no per-process download delay" (the
cluster spaces a host's requests); nor for "which Public Suffix List the
cookie middleware uses" (its own downloads one from the internet). Playwright
has none for "the Node driver exited" (the rendering handler starts a new
one). They live in private attributes. Read with ``getattr(..., None)`` and a
fallback, a renamed attribute would make every request look finished and be
acknowledged before its items: silent loss. So every reach-in is here,
checked at start by :func:`check_engine`, :func:`check_cookies` and
:func:`check_playwright` (the ``InternalsCheck`` extension refuses to start
the worker), and any access that finds an attribute missing raises
:class:`InternalsMissing` instead of guessing.

The supported versions are the pins of requirements.txt, repeated in
``PINNED`` (a unit test keeps the two equal); any other version may work, but
only these were read.
"""

from __future__ import annotations

import asyncio
import dis
import importlib
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as installed_version
from typing import Any

from scrapy import Request
from tldextract import TLDExtract

# Library name in messages -> (distribution, version pinned in requirements.txt).
PINNED: dict[str, tuple[str, str]] = {
    "Scrapy": ("scrapy", "2.19.0"),
    "Playwright": ("playwright", "1.65.2"),
    "scrapy-playwright": ("scrapy-playwright", "0.0.48"),
}

_MISSING = object()


class InternalsMissing(RuntimeError):
    """A private attribute this worker relies on is not there: refuse to run.

    Its message is one line naming the attribute, the installed version and
    the supported one, e.g. ``Scrapy 2.20.0 has no ExecutionEngine._slot.inprogress;
    this worker supports scrapy==2.19.0 (requirements.txt)``.
    """

    def __init__(self, path: str, library: str = "Scrapy") -> None:
        distribution, pinned = PINNED[library]
        try:
            version = installed_version(distribution)
        except PackageNotFoundError:
            version = "(not installed)"
        super().__init__(
            f"{library} {version} has no {path}; "
            f"this worker supports {distribution}=={pinned} (requirements.txt)"
        )
        self.path = path
        self.library = library


def _get(obj: Any, attr: str, path: str, library: str = "Scrapy") -> Any:
    """``obj.<attr>``, or InternalsMissing naming ``path``; never a default."""
    value = getattr(obj, attr, _MISSING)
    if value is _MISSING:
        raise InternalsMissing(path, library)
    return value


def _method(obj: Any, name: str, path: str, library: str = "Scrapy") -> Callable[..., Any]:
    method: Callable[..., Any] = _get(obj, name, path, library)
    if not callable(method):
        raise InternalsMissing(path, library)
    return method


# --- Scrapy ---------------------------------------------------------------------------
# ExecutionEngine._slot is created by open_spider_async() (before spider_opened)
# and set back to None at the end of close_spider_async().


def _slot(engine: Any) -> Any:
    """``engine._slot``: None before the spider opens and after it closed."""
    return _get(engine, "_slot", "ExecutionEngine._slot")


def check_engine(engine: Any) -> None:
    """Raise InternalsMissing unless every Scrapy internal used here exists.

    ``engine`` must be open (from ``spider_opened`` on): the slots only exist then.
    """
    slot = _slot(engine)
    if slot is None:
        raise InternalsMissing("ExecutionEngine._slot (None with the spider open)")
    if not isinstance(_get(slot, "inprogress", "ExecutionEngine._slot.inprogress"), set):
        raise InternalsMissing("ExecutionEngine._slot.inprogress as a set of requests")
    nextcall = _get(slot, "nextcall", "ExecutionEngine._slot.nextcall")
    _method(nextcall, "schedule", "ExecutionEngine._slot.nextcall.schedule()")
    if _get(engine, "scheduler", "ExecutionEngine.scheduler") is None:
        raise InternalsMissing("ExecutionEngine.scheduler (None with the spider open)")
    downloader = _get(engine, "downloader", "ExecutionEngine.downloader")
    _get(downloader, "_delay", "Downloader._delay")
    scraper = _get(engine, "scraper", "ExecutionEngine.scraper")
    scraper_slot = _get(scraper, "slot", "Scraper.slot")
    if scraper_slot is None:
        raise InternalsMissing("Scraper.slot (None with the spider open)")
    _method(scraper_slot, "is_idle", "Scraper.slot.is_idle()")


def requests_in_progress(engine: Any) -> set[Request]:
    """The requests the engine has not finished with (downloading, or being scraped).

    A request leaves this set only once its response was scraped, its items
    went through the pipelines and its links were scheduled (or its download
    failed for good). Never an empty set by default: without the slot (the
    spider is not open) nothing can be known, so that raises too. It is the
    engine's own set: read it, never change it.
    """
    slot = _slot(engine)
    if slot is None:
        raise InternalsMissing(
            "ExecutionEngine._slot (None: requests in progress asked for "
            "before the spider opened or after it closed)"
        )
    inprogress: set[Request] = _get(slot, "inprogress", "ExecutionEngine._slot.inprogress")
    return inprogress


def wake_engine(engine: Any) -> None:
    """Make the engine ask the scheduler for requests now, not at its next 5 s poll.

    Does nothing while there is no engine or no slot (not open yet, or
    closed): there is nothing to wake, and nothing will be lost.
    """
    if engine is None:
        return
    slot = _slot(engine)
    if slot is not None:
        nextcall = _get(slot, "nextcall", "ExecutionEngine._slot.nextcall")
        _method(nextcall, "schedule", "ExecutionEngine._slot.nextcall.schedule()")()


def scheduler_of(engine: Any) -> Any:
    """The engine's scheduler, or None while it has no slot (not open, or closed).

    Public in the pinned Scrapy (``ExecutionEngine.scheduler``), but read here
    all the same, so that :func:`check_engine` covers it.
    """
    return _get(engine, "scheduler", "ExecutionEngine.scheduler")


def scraper_is_idle(engine: Any) -> bool:
    """True when no response is being scraped and no item is in the pipelines.

    Not ``Scraper.is_idle()``, which only says whether the spider is closed.
    True as well while the scraper has no slot (spider not open, or closed).
    """
    scraper = _get(engine, "scraper", "ExecutionEngine.scraper")
    slot = _get(scraper, "slot", "Scraper.slot")
    if slot is None:
        return True
    return bool(_method(slot, "is_idle", "Scraper.slot.is_idle()")())


def set_download_delay(engine: Any, seconds: float) -> None:
    """The delay of the downloader's new slots (AutoThrottle sets the same attribute).

    Without it Scrapy's ``DOWNLOAD_DELAY``, which the frontier enforces
    cluster-wide, would also delay each worker's own fetches.
    """
    downloader = _get(engine, "downloader", "ExecutionEngine.downloader")
    _get(downloader, "_delay", "Downloader._delay")
    downloader._delay = seconds


# --- Scrapy's cookie middleware ----------------------------------------------------------
# scrapy.downloadermiddlewares.cookies builds a module-level
# ``_split_domain = TLDExtract(include_psl_private_domains=True)``, whose
# first use (the first cookie of a crawl) downloads the Public Suffix List
# from publicsuffix.org. Its ``_is_public_domain`` reads that global at each
# call, so replacing the global gives every CookiesMiddleware of the process
# (ours subclass it) an offline list. Checked in the bytecode too: were the
# function to keep the extractor elsewhere, the replacement would silently
# change nothing.

COOKIES_MODULE = "scrapy.downloadermiddlewares.cookies"


def _cookies_module() -> Any:
    module = importlib.import_module(COOKIES_MODULE)
    splitter = _get(module, "_split_domain", f"{COOKIES_MODULE}._split_domain")
    if not isinstance(splitter, TLDExtract):
        raise InternalsMissing(f"{COOKIES_MODULE}._split_domain as a tldextract.TLDExtract")
    is_public = _method(module, "_is_public_domain", f"{COOKIES_MODULE}._is_public_domain()")
    code = getattr(is_public, "__code__", None)
    if code is None or not any(
        instruction.opname == "LOAD_GLOBAL" and instruction.argval == "_split_domain"
        for instruction in dis.get_instructions(code)
    ):
        raise InternalsMissing(f"{COOKIES_MODULE}._is_public_domain() reading _split_domain")
    return module


def check_cookies() -> None:
    """Raise InternalsMissing unless Scrapy's cookie middleware keeps its suffix list
    where :func:`use_public_suffixes` replaces it."""
    _cookies_module()


def use_public_suffixes(extractor: TLDExtract) -> None:
    """Make Scrapy's cookie middleware split domains with ``extractor`` (process-wide)."""
    _cookies_module()._split_domain = extractor


def cookie_public_suffixes() -> TLDExtract:
    """The extractor Scrapy's cookie middleware splits domains with now."""
    splitter: TLDExtract = _cookies_module()._split_domain
    return splitter


# --- Playwright -------------------------------------------------------------------------
# The rendering handler restarts Playwright's Node driver when it exits.
# Playwright has no public event for that: the connection to the driver
# (Playwright._impl_obj._connection) emits "close", and the error that ended
# the transport (PlaywrightContextManager._client._transport.on_error_future)
# must be read, or asyncio logs it as never retrieved. These objects only
# exist once a driver runs, so check_playwright() checks that the classes
# still assign them (in their bytecode, without starting anything), and
# on_driver_exit() checks them again on the started objects.

# Methods of ScrapyPlaywrightDownloadHandler that rendering/handler.py overrides,
# calls or unsubscribes: if one were renamed, our override would silently never run.
SCRAPY_PLAYWRIGHT_METHODS = (
    "_apply_page_methods",
    "_close",
    "_create_page",
    "_download_request",
    "_download_request_with_page",
    "_get_response_and_download",
    "_increment_request_stats",
    "_increment_response_stats",
    "_launch",
    "_maybe_launch_browser",
    "_maybe_launch_in_thread",
)


def _import(module: str, name: str, library: str) -> Any:
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        raise InternalsMissing(f"{module}.{name}", library) from None


def _stores(cls: type, method: str, attribute: str) -> bool:
    """Whether ``cls.<method>`` assigns ``<something>.<attribute>`` (read from its bytecode)."""
    function = getattr(cls, method, None)
    code = getattr(function, "__code__", None)
    if code is None:
        return False
    return any(
        instruction.opname == "STORE_ATTR" and instruction.argval == attribute
        for instruction in dis.get_instructions(code)
    )


def _emitted(cls: type) -> set[str]:
    """The event names ``cls.close`` passes to ``self.emit`` (string constants)."""
    code = getattr(getattr(cls, "close", None), "__code__", None)
    return {c for c in (code.co_consts if code else ()) if isinstance(c, str)}


def check_playwright() -> None:
    """Raise InternalsMissing unless Playwright and scrapy-playwright have what we use.

    Checked on the classes, so that no driver and no browser start: a worker
    that never renders pays nothing for it.
    """
    pw = "Playwright"
    impl_wrapper = _import("playwright._impl._impl_to_api_mapping", "ImplWrapper", pw)
    async_playwright = _import("playwright.async_api", "Playwright", pw)
    if not issubclass(async_playwright, impl_wrapper) or not _stores(
        impl_wrapper, "__init__", "_impl_obj"
    ):
        raise InternalsMissing("Playwright._impl_obj", pw)
    channel_owner = _import("playwright._impl.channel_owner", "ChannelOwner", pw)
    if not _stores(channel_owner, "__init__", "_connection"):
        raise InternalsMissing("ChannelOwner._connection", pw)
    connection = _import("playwright._impl.connection", "Connection", pw)
    _method(connection, "on", "Connection.on()", pw)
    if "close" not in _emitted(connection):
        raise InternalsMissing('Connection.close() emitting "close"', pw)
    manager = _import("playwright.async_api", "PlaywrightContextManager", pw)
    if not _stores(manager, "__aenter__", "_client"):
        raise InternalsMissing("PlaywrightContextManager._client", pw)
    client = _import("playwright._impl.out_of_process", "PlaywrightClient", pw)
    if not _stores(client, "__init__", "_transport"):
        raise InternalsMissing("PlaywrightClient._transport", pw)
    transport = _import("playwright._impl.transport", "Transport", pw)
    if not _stores(transport, "__init__", "on_error_future"):
        raise InternalsMissing("Transport.on_error_future", pw)

    spw = "scrapy-playwright"
    handler = _import("scrapy_playwright.handler", "ScrapyPlaywrightDownloadHandler", spw)
    for name in SCRAPY_PLAYWRIGHT_METHODS:
        _method(handler, name, f"ScrapyPlaywrightDownloadHandler.{name}()", spw)


def on_driver_exit(playwright: Any, context_manager: Any, callback: Callable[[], None]) -> None:
    """Call ``callback()`` when the Node driver behind a started Playwright exits.

    ``playwright`` is what ``context_manager.start()`` returned. Raises
    InternalsMissing at once (the first rendered page) if an object is
    missing, rather than on the driver's death days later. The transport's
    error is read before ``callback`` runs, so asyncio never logs it as
    "exception was never retrieved".
    """
    pw = "Playwright"
    impl = _get(playwright, "_impl_obj", "Playwright._impl_obj", pw)
    connection = _get(impl, "_connection", "Playwright._impl_obj._connection", pw)
    subscribe = _method(connection, "on", "Playwright._impl_obj._connection.on()", pw)
    client = _get(context_manager, "_client", "PlaywrightContextManager._client", pw)
    if client is None:
        raise InternalsMissing("PlaywrightContextManager._client (None after start)", pw)
    transport = _get(client, "_transport", "PlaywrightClient._transport", pw)
    error = _get(transport, "on_error_future", "Transport.on_error_future", pw)
    if not isinstance(error, asyncio.Future):
        raise InternalsMissing("Transport.on_error_future as an asyncio.Future", pw)

    def closed() -> None:
        if error.done() and not error.cancelled():
            error.exception()
        callback()

    subscribe("close", closed)
