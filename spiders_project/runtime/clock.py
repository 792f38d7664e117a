"""The time the frontier's Lua scripts run at: Redis' own clock, unless a test sets one.

Every time-based script (lease turns and deadlines, renewal, reclaim,
Retry-After pauses, the dispatch gate, stats samples) takes ``now`` as its
first argument. Production always passes "": the script then reads Redis'
``TIME``, one clock for every node whatever the nodes' own clocks say. A test
sets a time here and steps it, so that no test sleeps to cross a deadline
(and none is flaky on a loaded machine because it slept too little).
"""

from __future__ import annotations


class ScriptClock:
    """``now`` for the scripts: "" (Redis' TIME) until ``set`` is called."""

    def __init__(self) -> None:
        self._ms: int | None = None

    def arg(self) -> int | str:
        """The scripts' ``now`` argument: milliseconds since the epoch, or ""."""
        return "" if self._ms is None else self._ms

    def set(self, ms: int | None) -> None:
        """Run the scripts at ``ms`` from now on (None: back to Redis' clock)."""
        self._ms = ms

    def advance(self, ms: int) -> None:
        """Step a set clock forward by ``ms``."""
        if self._ms is None:
            raise RuntimeError("ScriptClock.advance needs a time set first")
        self._ms += ms
