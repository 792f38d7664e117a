"""How a leased request ended, as its ack tells its job (``lua/ack.lua``).

The frontier acks leases without knowing what features did with them; a
feature that ends a request in a way its job counts (a dead letter) says so
with a Scrapy signal (:data:`request_dead_lettered`,
:data:`request_refused`), and the frontier's
handoff sends the outcome with the lease's ack. The ack script counts it only
as it removes the lease, so a resent transaction counts nothing twice.

In the ack's (lease id, outcome) pairs: an outcome >= 0 is a page fetched
with that many items; :data:`DEAD_LETTER` a request that failed for good;
:data:`REFUSED` one refused after its lease (robots.txt); :data:`DROPPED` one a
frontier step dropped after its lease (a blocked host's), which its job counts
as purged, like the host's queued requests the block dropped.
"""

from __future__ import annotations

# Scrapy signal, sent with ``request`` when a dead letter of it is written.
request_dead_lettered = object()

# Scrapy signal, sent with ``request`` when it is refused after its lease (robots.txt).
request_refused = object()

# Scrapy signal, sent with ``request`` and ``salt`` (bytes: its job) when a
# feature refuses a link before it is queued (a seed's scope): the frontier
# counts it refused for its job, once per URL and salt (frontier/refused.py).
link_refused = object()

# Scrapy signals, sent with ``request`` by a downloader middleware that stops a
# leased request just before its download: ``request_held`` (its job was paused:
# the lease goes back to its queue, nothing is counted) and ``request_dropped``
# (its job was cancelled: counted purged, like DROPPED).
request_held = object()
request_dropped = object()

DEAD_LETTER = -1
REFUSED = -2
DROPPED = -3
# Never sent to Redis: the handoff hands such a lease back instead of acking it.
HELD = -4

# Scrapy signal, sent with ``request`` when a downloader middleware ends a
# fetched response before the spider because its page did not change since the
# last fetch (a 304, or the same content digest: recrawl/middleware.py). No
# response reaches the spider, yet its lease's job counts a page fetched, with
# no item.
request_unchanged = object()
