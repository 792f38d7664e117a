"""Whether this node, or the sites, are failing: a streak of failures against the other workers.

Pure (no Scrapy, no Redis): the middleware feeds it each fetch's outcome and
the other workers' published counters, with the time, so a test steps the
time instead of sleeping.

The evidence is what the other workers publish every STATS_PUBLISH_INTERVAL:
their answers (``response_received_count``) and their failed fetches
(``downloader/exception_count``). While this node pauses to judge, the
requests it failed are queued again, so the others fetch them: if their
answers grow, they reach what this node cannot (this node is cut off); if
only their failures grow, the sites are down for everyone; if neither moves
(nobody else is crawling), nobody can tell yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

# The fewest failures in a row that the window alone may judge: one slow
# failure in 30 s is a bad page, not a broken node.
MIN_STREAK = 3
# A worker's counters in its published stats: answers, failed fetches.
ANSWERS = "response_received_count"
FAILURES = "downloader/exception_count"

Counts = Mapping[str, tuple[int, int]]  # worker id -> (answers, failed fetches)


class Verdict(Enum):
    UNDECIDED = "undecided"
    NODE = "node"  # only this node fails: take it out
    SITES = "sites"  # everyone fails: the sites are down


class Streak:
    """This node's current run of failed fetches, and when a verdict is due."""

    def __init__(self, failures: int, window: float) -> None:
        self.failures = failures  # NODE_FAILURES
        self.window = window  # NODE_FAILURE_WINDOW, seconds
        self.count = 0
        # Redis time the streak began: when its first failed fetch was sent (or
        # the last answer came, if later). A dropped packet fails a fetch only
        # at DOWNLOAD_TIMEOUT, so counting from the failure would judge a
        # silently cut node one timeout late; counting from the send judges it
        # NODE_FAILURE_WINDOW after its network broke, whatever the timeout.
        self.since: float | None = None
        self.reached_at: float | None = None  # Redis time of the last answer
        # The sites (host, port) that failed in this streak, the latest last.
        self.targets: dict[tuple[str, int], None] = {}

    def reached(self, now: float | None = None) -> None:
        """A fetch got an answer (any status) at ``now``: the node reaches the sites."""
        self.count = 0
        self.since = None
        self.targets.clear()
        if now is not None:
            self.reached_at = now

    def failed(self, now: float, target: tuple[str, int], sent: float | None = None) -> None:
        """A fetch ``sent`` at that time (if known) failed at ``now``."""
        self.count += 1
        if self.since is None:
            began = now if sent is None else min(now, sent)
            if self.reached_at is not None:
                began = max(began, min(now, self.reached_at))
            self.since = began
        self.targets.pop(target, None)
        self.targets[target] = None

    def due(self, now: float) -> bool:
        """Time to judge: NODE_FAILURES in a row, or NODE_FAILURE_WINDOW of failures."""
        if self.since is None:
            return False
        if self.count >= self.failures:
            return True
        return self.count >= MIN_STREAK and now - self.since >= self.window

    def restart(self, now: float) -> None:
        """The sites were down for everyone: count a new streak from ``now``."""
        self.count = 0
        self.since = now
        self.targets.clear()

    def latest_targets(self, n: int = 3) -> list[tuple[str, int]]:
        """The last ``n`` distinct sites that failed, the latest first (what a probe tries)."""
        return list(reversed(self.targets))[:n]


def judge(
    before: Counts, after: Counts, *, comparable: bool = True, one_site: bool = False
) -> Verdict:
    """The verdict from the other workers' counters when judging began and now.

    Only workers in both are compared (one that started or stopped meanwhile
    tells nothing). ``comparable``: this node's failures tell about the sites
    the others fetch, because it failed on two sites or more, or the frontier
    has only one; a streak on one site of many says that site is down,
    whatever the others fetch elsewhere. ``one_site``: the streak failed on
    one site only (comparable because the frontier has no other): the others
    fetch the requests this node failed, so their failures growing too says
    the site is down even if some of their pages got answers meanwhile (the
    last pages of a crawl whose only host left is a dead one).
    """
    answers = failures = 0
    for worker, (answers_after, failures_after) in after.items():
        if worker in before:
            answers_before, failures_before = before[worker]
            answers += max(0, answers_after - answers_before)
            failures += max(0, failures_after - failures_before)
    if answers and comparable and not (one_site and failures):
        return Verdict.NODE
    if answers or failures:
        return Verdict.SITES
    return Verdict.UNDECIDED


def counts_of(fields: Mapping[str, str]) -> tuple[int, int]:
    """(answers, failed fetches) in one worker's published stats; 0 where absent or bad."""

    def number(name: str) -> int:
        try:
            return int(float(fields.get(name, 0)))
        except ValueError:
            return 0

    return number(ANSWERS), number(FAILURES)
