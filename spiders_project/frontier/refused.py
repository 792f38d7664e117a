"""Links a feature refused before their queue, counted for their job once per URL.

A seed's scope (``scope/seed_limits.py``: allow, deny, max_depth, a spent
budget) refuses links as pages yield them; the job counts each refused URL,
so that fetched + purged + refused + dead letters is everything the job
discovered. The same link refused from ten pages is one URL, so a refusal
goes to the frontier's enqueue script as an entry that only records a
fingerprint salted with the refusal's group (its job) in the seen-set and
counts "refused" for its job if the fingerprint is new ("~" in
``frontier/lua/enqueue.lua``). The salt keeps the real fingerprint free: a
link refused for one job (too deep there) is still queued when another job,
or a shorter path, finds it.
"""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

from scrapy import Request

from spiders_project.frontier.codec.serialize import InvalidEntry


class Frontier(Protocol):
    """What of the scheduler a refusal uses (the scheduler imports this module)."""

    queue: Any  # its encoder (frontier/queue.py)
    df: Any  # its fingerprinter
    redis: Any  # its WorkerRedis: the seen-set's tokens and the write batcher
    steps: Any  # its steps: the group (queue) of a URL
    stats: Any


# The fingerprint mark of a refusal in an enqueue entry (frontier/lua/enqueue.lua).
REFUSAL = "~"


class RefusedLinks:
    """Turns ``outcomes.link_refused`` signals into refusal entries of the write batcher."""

    def __init__(self, scheduler: Frontier) -> None:
        self.scheduler = scheduler

    def refused(self, request: Request, salt: bytes) -> None:
        """``outcomes.link_refused``: count ``request`` refused for ``salt``'s group, once."""
        scheduler = self.scheduler
        try:
            _, payload = scheduler.queue.encode(request)
        except InvalidEntry:
            return  # never stored, never counted: the encoder's stat says why
        raw = hashlib.sha1(salt + b"\0" + scheduler.df.fingerprint(request)).digest()
        token = REFUSAL + scheduler.redis.seen.token(raw)
        scheduler.redis.batcher.enqueue(scheduler.steps.group_of(request.url), token, 0, payload)
        scheduler.stats.inc_value("frontier/refusals_sent")
