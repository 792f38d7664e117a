"""Key names of the shared cookie jars (``spiders_project/cookies/``), beside
``keys/__init__.py``. Stdlib only, like it.

Every key here is in the spider's own slot (the hash tag ``{<spider>}`` on a
Redis Cluster), so one script updates a jar, its index and the counts.
"""

from __future__ import annotations

from spiders_project.keys import RedisKeys


def cookie_jar(keys: RedisKeys, jar: str) -> str:
    """Hash of one shared cookie jar: a cookie per field ``<domain>\t<path>\t<name>``
    (its attributes as JSON), and control fields that start with ``~`` (its
    version, pinned proxy, login state).

    Outside the ``<spider>:`` prefix on purpose, in the same slot
    (``cookies:{<spider>}:jar:<jar>`` on a Redis Cluster): the monitor's read-only
    user, whose key pattern is the prefix, cannot read cookie values; the worker and
    operator users are given this pattern too (redis_access/acl.py)."""
    return f"cookies:{keys.prefix}jar:{jar}"


def cookie_jars(keys: RedisKeys) -> str:
    """Sorted set of the spider's shared jars: jar id -> time (ms) of its last update
    or use, so ``COOKIES_JAR_TTL`` can drop idle ones from the index too."""
    return keys.prefix + "cookies:jars"


def cookie_counts(keys: RedisKeys) -> str:
    """Hash jar id -> cookies in it: what the exporter and the console may read
    (no names, no values)."""
    return keys.prefix + "cookies:counts"
