"""Where this project departs from scrapy-redis 0.9.1, stated once and enforced.

The worker subclasses scrapy-redis' ``Scheduler``, ``RFPDupeFilter``,
``queue.Base``, ``RedisSpider`` and ``RedisPipeline`` (docs/SPIDERS.md,
"scrapy-redis: what is used, what is replaced"). Its Redis work runs on the asyncio client
and in Lua scripts, so some inherited methods would call the asyncio client
synchronously: they would return a coroutine nobody awaits and silently do
nothing. Those are replaced by :func:`not_here`, which raises and names what
to use instead. Likewise, scrapy-redis settings this project does not honour
(its keys come from ``keys/``, its seeds are a list of URLs or JSON, its
client from ``REDIS_URL``) are refused at start with one line each
(:func:`setting_problems`), instead of being silently ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from scrapy.settings import BaseSettings

# Settings whose value is fixed: the frontier works only with these classes.
FIXED_SETTINGS: dict[str, str] = {
    "SCHEDULER_QUEUE_CLASS": "spiders_project.frontier.queue.JsonPriorityQueue",
    "SCHEDULER_SERIALIZER": "spiders_project.frontier.codec.serialize",
    "DUPEFILTER_CLASS": "spiders_project.frontier.dupefilter.FingerprintDupeFilter",
}

# scrapy-redis settings this project does not read, and what to use instead.
UNSUPPORTED_SETTINGS: dict[str, str] = {
    "SCHEDULER_QUEUE_KEY": (
        "keys are fixed per spider: <spider>:requests:host:<host> (spiders_project/keys)"
    ),
    "SCHEDULER_DUPEFILTER_KEY": (
        "keys are fixed per spider: <spider>:dupefilter (spiders_project/keys)"
    ),
    "SCHEDULER_DUPEFILTER_CLASS": "the dupefilter is DUPEFILTER_CLASS, fixed",
    "SCHEDULER_IDLE_BEFORE_CLOSE": "use MAX_IDLE_TIME_BEFORE_CLOSE (a blocking pop would "
    "freeze the reactor)",
    "REDIS_START_URLS_KEY": "seeds are read from <spider>:start_urls (spiders_project/keys)",
    "REDIS_START_URLS_AS_SET": "seeds are a list; give a priority in a JSON seed instead",
    "REDIS_START_URLS_AS_ZSET": "seeds are a list; give a priority in a JSON seed instead",
    "REDIS_START_URLS_BATCH_SIZE": "use SEED_BATCH_SIZE",
    "REDIS_ITEMS_KEY": "items go to <spider>:items (spiders_project/keys)",
    "REDIS_ITEMS_SERIALIZER": "items are JSON (ScrapyJSONEncoder)",
    "REDIS_HOST": "use REDIS_URL",
    "REDIS_PORT": "use REDIS_URL",
    "REDIS_DB": "use REDIS_URL",
    "REDIS_PARAMS": "use REDIS_URL and REDIS_SOCKET_TIMEOUT",
    "REDIS_ENCODING": "Redis replies are bytes; JSON is UTF-8",
    "REDIS_DECODE_RESPONSES": "Redis replies are bytes; JSON is UTF-8",
}

_REDIS_PIPELINE = "scrapy_redis.pipelines.RedisPipeline"


def load_path(component: Any) -> str:
    """A component's dotted path, whether the setting names it or holds the class."""
    if isinstance(component, str):
        return component
    return f"{component.__module__}.{component.__qualname__}"


# Stats collectors that would talk to Redis synchronously from the reactor.
_REFUSED_STATS = {"scrapy_redis.stats.RedisStatsCollector"}


def setting_problems(settings: BaseSettings) -> list[str]:
    """One line for each scrapy-redis setting that is set but not honoured here."""
    problems = []
    for name, ours in FIXED_SETTINGS.items():
        value = settings.get(name)
        if value != ours:
            problems.append(f"{name} must be {ours!r} with this frontier, not {value!r}")
    for name, instead in UNSUPPORTED_SETTINGS.items():
        if settings.get(name) is not None:
            problems.append(f"{name} is a scrapy-redis setting this project ignores: {instead}")
    if settings.getbool("DUPEFILTER_DEBUG"):
        problems.append(
            "DUPEFILTER_DEBUG is not honoured: duplicates are dropped in Redis in batches "
            "(lua/enqueue.lua); their count is the stat dupefilter/filtered"
        )
    pipelines = settings.getwithbase("ITEM_PIPELINES")
    if any(load_path(name) == _REDIS_PIPELINE for name in pipelines):
        problems.append(
            f"ITEM_PIPELINES has {_REDIS_PIPELINE}: remove it; every item your pipelines keep "
            "is buffered for the db_writer already (spiders_project.item_buffer), and it would "
            "buffer each item twice, blocking the reactor"
        )
    stats_class = settings.get("STATS_CLASS")
    if isinstance(stats_class, str) and stats_class in _REFUSED_STATS:
        problems.append(
            f"STATS_CLASS {stats_class} blocks the reactor; workers publish their stats "
            "to Redis already (STATS_PUBLISH_ENABLED)"
        )
    return problems


class NotSupportedHere(TypeError):
    """An inherited scrapy-redis method that would not work in this project was called."""


def not_here(name: str, instead: str) -> Callable[..., NoReturn]:
    """A method that refuses to run: ``name`` of scrapy-redis, and what to use ``instead``."""

    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        raise NotSupportedHere(f"{name} is not supported here: {instead}")

    refuse.__name__ = name.rpartition(".")[2]
    refuse.__doc__ = f"Not supported: {instead}"
    return refuse
