"""A session stays on its proxy: each jar that holds a session is pinned to one proxy.

With ``PROXIES`` set, a site sees a session come from one address, as it
would from a browser, whatever the spider: a jar is pinned to a proxy (its
``~proxy`` field) as soon as it holds a cookie. The first cookie that comes
through a proxy of the pool pins the jar to that proxy, atomically with the
cookie (``lua/update.lua``; ``store.py`` in the worker's copy); a jar that got
cookies some other way (``request.cookies``, a browser page) is pinned by its
first request that goes out with them, to the proxy the pool gives then
(``lua/session.lua``). From then on every request of the jar goes through that
proxy (``meta.PROXY_PIN``, which ProxyMiddleware obeys) while the pool says it
is not banned. A jar without a cookie is not pinned: its requests take the
proxy ``PROXY_MODE`` gives, so a crawl whose sites set no cookie keeps
rotating.

When the pinned proxy is banned (a site blocked it: ``proxies/pool.py``, for
the whole cluster), the session is retired: one script deletes the jar's
cookies, pins it to a proxy the pool gives now and starts its session afresh
(a new version, so every worker's copy empties before its next request of
the jar), and ``cookies/sessions_retired`` counts it once for the cluster.
The jar's next requests go through the new proxy without a session: the site
sets a new one through it, and a spider that logs in again finds its answer
expired and logs in through it (``logins.py``). Cookies that come back
through the old proxy afterwards, or through any proxy but the jar's, are
refused (``store.py``, ``lua/update.lua``): a session never reaches another
proxy.

A jar stays pinned until it is retired, cleared or idle for
``COOKIES_JAR_TTL``, and all of its requests take its proxy, whichever host
they go to: a crawl that wants its hosts on different proxies gives each its
own ``meta["cookiejar"]``.
"""

from __future__ import annotations

import logging

from scrapy import Request
from scrapy.statscollectors import StatsCollector

from spiders_project.cookies.session_store import SessionStore
from spiders_project.cookies.sessions import FAILED, PROXY_FIELD, RETIRED
from spiders_project.cookies.store import LocalJar, ProcessJars
from spiders_project.crawl.meta import PROXY_NAME, PROXY_PIN
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.proxies.pool import ProxyPool

logger = logging.getLogger(__name__)

# A jar retired by another worker at the same moment is read again, then pinned:
# a few turns at most, whatever the others do.
_TURNS = 4


class ProxyPins:
    """Pins each jar that holds a session to a proxy, and retires the session
    when that proxy is banned."""

    def __init__(
        self,
        pool: ProxyPool,
        groups: HostPoliteness,
        sessions: SessionStore,
        store: ProcessJars,
        stats: StatsCollector,
    ) -> None:
        self.pool = pool
        self.groups = groups
        self.sessions = sessions
        self.store = store
        self.stats = stats

    async def pin(self, request: Request, local: LocalJar) -> LocalJar:
        """``request`` pinned to its jar's proxy, if the jar has one or the
        request takes a session out (the jar's copy, read again if its session
        was retired meanwhile)."""
        if "proxy" in request.meta and not request.meta.get(PROXY_NAME):
            return local  # the spider's own proxy
        if self.sessions.session(local).state == FAILED:
            return local  # given up: its requests become dead letters (logins.py)
        for _ in range(_TURNS):
            pinned = local.control.get(PROXY_FIELD, "")
            if not pinned:
                if not request.cookies and not holds_cookie(local):
                    return local  # no session to keep on one address
                chosen = await self.pool.choose(self.groups.key_of(request.url))
                pinned = (await self.sessions.pin(local, chosen.name)).proxy
            await self.pool.refresh()
            if self.pool.usable(pinned):
                request.meta[PROXY_PIN] = pinned
                return local
            new = await self.pool.choose(self.groups.key_of(request.url))
            outcome = await self.sessions.retire(local, pinned, new.name)
            if outcome.what == RETIRED:
                self.stats.inc_value("cookies/sessions_retired")
                logger.warning(
                    "Session of jar %s retired: its proxy %s is banned; its cookies "
                    "dropped, %s from now on",
                    local.id,
                    pinned,
                    outcome.proxy,
                )
            local = await self.store.fresh(local.id)
        # Retired under this worker at every turn: its copy goes with the proxy
        # its cookies came with, banned or not, never with another.
        pinned = local.control.get(PROXY_FIELD, "")
        if pinned:
            request.meta[PROXY_PIN] = pinned
        return local


def holds_cookie(local: LocalJar) -> bool:
    """Whether the copy holds a cookie (expired ones too: they were a session)."""
    return next(iter(local.cookies), None) is not None
