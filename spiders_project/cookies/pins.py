"""A session stays on its proxy: each jar of a spider that logs in is pinned to one proxy.

With ``PROXIES`` set, a site sees a session come from one address, as it
would from a browser: the first request of a jar pins it (its ``~proxy``
field, ``lua/session.lua``) to the proxy the pool gives, and every request
of the jar goes through that proxy (``meta.PROXY_PIN``, which
ProxyMiddleware obeys) while the pool says it is not banned.

When it is banned (a site blocked it: ``proxies/pool.py``, for the whole
cluster), the session is retired: one script deletes the jar's cookies, pins
it to a proxy the pool gives now and starts its session afresh (a new
version, so every worker's copy empties before its next request of the jar),
and ``cookies/sessions_retired`` counts it once for the cluster. The jar's
next request goes through the new proxy without a session, its answer is
expired, and the spider logs in again through the new proxy (``logins.py``).
Cookies that come back through the old proxy afterwards are refused
(``store.py``): the old session never reaches the new proxy.

Only the jars of a spider that can log in again are pinned: without a way
to make a new session, a banned proxy would end the crawl's session; those
spiders keep PROXY_MODE's choice per request.
"""

from __future__ import annotations

import logging

from scrapy import Request
from scrapy.statscollectors import StatsCollector

from spiders_project.cookies.session_store import SessionStore
from spiders_project.cookies.sessions import PROXY_FIELD, RETIRED
from spiders_project.cookies.store import LocalJar, ProcessJars
from spiders_project.crawl.meta import PROXY_NAME, PROXY_PIN
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.proxies.pool import ProxyPool

logger = logging.getLogger(__name__)

# A jar retired by another worker at the same moment is read again, then pinned:
# a few turns at most, whatever the others do.
_TURNS = 4


class ProxyPins:
    """Pins each jar to a proxy and retires its session when that proxy is banned."""

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
        """``request`` pinned to its jar's proxy (the jar's copy, read again if its
        session was retired meanwhile)."""
        if "proxy" in request.meta and not request.meta.get(PROXY_NAME):
            return local  # the spider's own proxy
        group = self.groups.key_of(request.url)
        for _ in range(_TURNS):
            pinned = local.control.get(PROXY_FIELD, "")
            if not pinned:
                chosen = await self.pool.choose(group)
                pinned = (await self.sessions.pin(local, chosen.name)).proxy
            await self.pool.refresh()
            if self.pool.usable(pinned):
                request.meta[PROXY_PIN] = pinned
                return local
            new = await self.pool.choose(group)
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
