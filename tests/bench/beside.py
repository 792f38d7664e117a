"""A phase that mostly waits, run in a process of its own beside other phases.

The freshness phase (``freshness.py``) spends its run asleep on a scaled clock:
about two and a half minutes of wall time at 3 s a minute, 20 fetches a scaled
minute, a few tenths of one core. Run alone it added all of that to ``make bench``
(issue 29, item 6: the whole run in 10 minutes on 2 cores); beside the seen-set
and the queued requests, which only measure Redis' bytes and Redis' own CPU
time, it costs almost nothing. So it runs in a spawned process pinned to the
crawlers' core (CPU 0), while those phases keep the services' core (CPU 1):
neither takes the other's core, and its sites, which are threads of the process
that starts them, stay off the benchmark's GIL.

Only where there are two cores: on one, the phases run one after the other.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Generic, TypeVar

T = TypeVar("T")


def _pin(cpus: set[int]) -> None:
    os.sched_setaffinity(0, cpus)


class Beside(Generic[T]):
    """One phase in a child process pinned to ``cpus``; :meth:`result` waits for it."""

    def __init__(self, cpus: set[int], fn: Callable[..., T], *args: object) -> None:
        # spawn, not fork: the benchmark holds Redis clients and sockets a fork would share.
        self._pool = ProcessPoolExecutor(
            1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_pin,
            initargs=(cpus,),
        )
        self._future: Future[T] = self._pool.submit(fn, *args)

    def result(self) -> T:
        try:
            return self._future.result()
        finally:
            self._pool.shutdown()


# Said of the phases that ran beside freshness, in their sections of docs/BENCHMARKS.md.
BESIDE = (
    " The freshness phase ran at the same time on the other core (CPU 0; this on CPU 1),"
    " as `tests/bench/beside.py` explains."
)
