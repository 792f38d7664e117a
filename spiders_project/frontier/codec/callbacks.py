"""Which method names a frontier entry may name as its callback or errback.

Scrapy stores a callback by name and finds it again with ``getattr(spider,
name)``. Read from Redis, that name comes from whoever wrote the entry: it
must not reach ``close``, ``from_crawler`` or any other part of the spider's
machinery. A name is accepted when it is a plain function defined on the
spider's class or one of its bases (CrawlSpider's ``_callback`` and
``_errback``, SitemapSpider's ``_parse_sitemap``, the user's own methods),
is not a dunder, and is not a name of ``scrapy.Spider`` or of the
seed-reading base classes (``parse`` and ``_parse`` excepted: they are the
callbacks every spider has).
"""

from __future__ import annotations

import inspect
from functools import cache

from scrapy import Spider
from scrapy_redis.spiders import RedisMixin

# Every spider has these as callbacks; they are methods of scrapy.Spider too, or
# (_parse_sitemap_seed) of our seed-reading base, for "sitemap": true seeds.
_ALWAYS = frozenset({"parse", "_parse", "_parse_sitemap_seed"})


# A class that sets this in its own body is machinery, like scrapy.Spider:
# none of its names (nor those of its bases) may be a callback read from
# Redis. The seed-reading spider (``spiders/base.py``) sets it; this module
# does not import the spiders, which import the frontier.
MACHINERY_FLAG = "_callback_machinery"


@cache
def _machinery(spidercls: type) -> frozenset[str]:
    names: set[str] = set()
    roots = [Spider, RedisMixin]
    roots += [k for k in spidercls.__mro__ if vars(k).get(MACHINERY_FLAG)]
    for cls in roots:
        for klass in cls.__mro__:
            names.update(vars(klass))
    return frozenset(names - _ALWAYS)


# Verdicts already reached; bounded, as names read from Redis are whatever an entry says.
_verdicts: dict[tuple[type, str], str | None] = {}
_MAX_VERDICTS = 4096


def refusal(spidercls: type, name: str) -> str | None:
    """Why ``name`` cannot be a callback of ``spidercls``; None when it can."""
    key = (spidercls, name)
    if key in _verdicts:
        return _verdicts[key]
    why = _judge(spidercls, name)
    if len(_verdicts) < _MAX_VERDICTS:
        _verdicts[key] = why
    return why


def _judge(spidercls: type, name: str) -> str | None:
    if name.startswith("__") and name.endswith("__"):
        return f"callback {name!r} is a dunder name"
    if name in _machinery(spidercls):
        return f"callback {name!r} is part of the spider's machinery"
    if not inspect.isfunction(inspect.getattr_static(spidercls, name, None)):
        return f"callback {name!r} is not a method of {spidercls.__name__}"
    return None
