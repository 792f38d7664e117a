"""When to write a batch as new rows only, learnt from how the last tries went.

PostgresStore COPYs a batch straight into its table when it can, and upserts
it when a row of it is there already (``stores.PostgresStore._insert``). A
try that fails costs the COPY up to the first existing row; a recrawl sends
mostly existing rows, so trying every batch would waste about as much as it
saves. After each miss the next tries are skipped for twice as many batches
as after the one before (1, 2, 4 ... MAX_SKIP); a try that goes in whole
starts over. A recrawl then wastes one COPY in MAX_SKIP + 1 batches, and a
crawl that turns from old pages to new ones is back to COPYs within
MAX_SKIP batches.
"""

from __future__ import annotations

MAX_SKIP = 64


class Optimism:
    """The schedule of tries; one per store (its connection's batches)."""

    def __init__(self, max_skip: int = MAX_SKIP) -> None:
        self.max_skip = max_skip
        self._skip = 0  # batches to upsert before the next try
        self._penalty = 0  # the skip set by the last miss; doubled by the next

    def should_try(self) -> bool:
        """Whether this batch is tried as new rows (counts the skipped ones down)."""
        if self._skip:
            self._skip -= 1
            return False
        return True

    def missed(self) -> None:
        """A try found an existing row: skip the next tries for a while."""
        self._penalty = min(max(1, self._penalty * 2), self.max_skip)
        self._skip = self._penalty

    def held(self) -> None:
        """A try went in whole: try the next batch too."""
        self._penalty = 0
