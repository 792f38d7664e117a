"""How a worker's components find each other: shared objects and subscriber lists.

Scrapy builds each component on its own (``from_crawler``), yet some must
share one object: the Redis context (one call path, one write batcher), the
host delays, the render slots. :func:`shared` is the one way to build such an
object, once per crawler. Components that react to another's events
subscribe to a :class:`Subscribers` list: several may listen, and none can
replace another (an attribute slot such as ``batcher.on_x = f`` would let the
last assignment silently win).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any, Generic, ParamSpec, TypeVar

from scrapy.crawler import Crawler

T = TypeVar("T")
P = ParamSpec("P")

_shared: weakref.WeakKeyDictionary[Crawler, dict[type, tuple[tuple[Hashable, ...], Any]]] = (
    weakref.WeakKeyDictionary()
)


def shared(crawler: Crawler, kind: type[T], build: Callable[[], T], *args: Hashable) -> T:
    """The crawler's one ``kind``, made by ``build()`` at the first call.

    ``args`` are what the object is built for (a size, say). Every later
    caller must ask with the same ``args``: one asking for something else
    would otherwise get, silently, an object built for another caller, so that
    is a ValueError naming both.
    """
    objects = _shared.setdefault(crawler, {})
    found = objects.get(kind)
    if found is None:
        obj = build()
        objects[kind] = (args, obj)
        return obj
    built_for, obj = found
    if built_for != args:
        raise ValueError(
            f"{kind.__name__} of this crawler was built for {built_for!r}, "
            f"a second caller asks for {args!r}"
        )
    return obj


class Subscribers(Generic[P]):
    """Callbacks run in the order they subscribed; subscribing never replaces one."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[P, None]] = []

    def subscribe(self, callback: Callable[P, None]) -> None:
        self._callbacks.append(callback)

    def __len__(self) -> int:
        return len(self._callbacks)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> None:
        for callback in list(self._callbacks):
            callback(*args, **kwargs)
