"""Redis replies, whichever way the client parsed them.

The readers of the contract (:mod:`spiders_project.read_model.contract`,
:mod:`spiders_project.read_model.cluster_view`) send their commands through their own
call path: redis-py parses some replies (HGETALL into a dict, TIME into a
tuple of ints, INFO into a dict), while a raw connection hands back flat
lists and "name:value" lines. These functions turn either into one shape, so
the readers do not depend on the client. Standard library only: the monitor
imports them without Scrapy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def text(value: Any) -> str:
    """A string, from bytes (a raw reply) or anything else."""
    return value.decode() if isinstance(value, bytes) else str(value)


def redis_time(reply: Any) -> float:
    """TIME: [seconds, microseconds] (redis-py makes it a tuple of ints)."""
    seconds, micros = reply
    return int(seconds) + int(micros) / 1e6


def info(reply: Any) -> dict[str, Any]:
    """INFO: redis-py parses it into a dict; a raw reply is "name:value" lines."""
    if isinstance(reply, Mapping):
        return dict(reply)
    fields = {}
    for line in text(reply).splitlines():
        name, sep, value = line.partition(":")
        if sep and not name.startswith("#"):
            fields[name] = value.strip()
    return fields


def fullest(infos: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Of several nodes' INFO memory, the one nearest its maxmemory (the
    largest used_memory among nodes without a limit); {} for none."""

    def fill(node: Mapping[str, Any]) -> tuple[float, int]:
        used, limit = int(node.get("used_memory", 0)), int(node.get("maxmemory", 0))
        return (used / limit if limit else 0.0, used)

    parsed = [info(node) for node in infos]
    return max(parsed, key=fill) if parsed else {}


def hash_fields(reply: Any) -> Mapping[Any, Any]:
    """HGETALL: redis-py gives a dict; a raw reply is a flat [field, value, ...] list.
    HRANDFIELD ... WITHVALUES: redis-py gives [field, value] pairs."""
    if isinstance(reply, Mapping):
        return reply
    if reply and isinstance(reply[0], list | tuple):
        return {field: value for field, value in reply}
    return dict(zip(reply[::2], reply[1::2], strict=True))


def scored(reply: Any) -> list[tuple[Any, float]]:
    """ZRANGE ... WITHSCORES: (member, score) pairs, or a flat [member, score, ...] list."""
    if reply and isinstance(reply[0], list | tuple):
        return [(member, float(score)) for member, score in reply]
    return [(member, float(score)) for member, score in zip(reply[::2], reply[1::2], strict=True)]


def numbers(fields: Mapping[Any, Any]) -> dict[str, float]:
    """The fields of a hash whose values are numbers, as floats; the others left out."""
    found = {}
    for name, value in fields.items():
        try:
            found[text(name)] = float(value)
        except ValueError:
            continue
    return found
