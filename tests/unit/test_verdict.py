"""Node health's verdict: a streak of failures against the other workers' counters."""

from __future__ import annotations

from spiders_project.node_health.verdict import (
    MIN_STREAK,
    Streak,
    Verdict,
    counts_of,
    judge,
)

A, B, C = ("a.example", 443), ("b.example", 80), ("c.example", 80)


def test_a_streak_is_due_at_its_count_or_after_its_window():
    streak = Streak(failures=50, window=30.0)
    for n in range(49):
        streak.failed(100.0 + n * 0.01, A)
        assert not streak.due(100.5)
    streak.failed(100.6, A)
    assert streak.due(100.6)
    streak.reached()
    assert streak.count == 0 and not streak.due(200.0)
    # Slow failures: the window judges, once there are a few.
    for n in range(MIN_STREAK - 1):
        streak.failed(200.0 + n, A)
    assert not streak.due(240.0)
    streak.failed(241.0, A)
    assert streak.due(241.0) and not streak.due(229.0)


def test_a_streak_of_timeouts_counts_from_the_first_failed_send():
    """Dropped packets fail fetches only at their timeout (here 25 s): the window
    counts from when the first of them was sent, not from its failure."""
    streak = Streak(failures=50, window=30.0)
    streak.reached(99.0)
    for n in range(4):  # sent at 100-103, each times out 25 s later
        streak.failed(125.0 + n, A, sent=100.0 + n)
    assert streak.since == 100.0
    assert not streak.due(128.0) and streak.due(130.0)
    # An answer that came after a failed fetch was sent: the streak starts then.
    streak.reached(140.0)
    streak.failed(160.0, B, sent=130.0)
    assert streak.since == 140.0
    # A send time unknown (the request came from elsewhere): its failure's time.
    streak.reached()
    streak.failed(170.0, C)
    assert streak.since == 170.0


def test_others_get_answers_this_node_is_cut_off():
    before = {"w2": (100, 3), "w3": (50, 0)}
    assert judge(before, {"w2": (130, 3), "w3": (50, 0)}) is Verdict.NODE


def test_others_fail_too_the_sites_are_down():
    before = {"w2": (100, 3)}
    assert judge(before, {"w2": (100, 9)}) is Verdict.SITES


def test_nobody_else_fetched_is_undecided():
    before = {"w2": (100, 3)}
    assert judge(before, {"w2": (100, 3)}) is Verdict.UNDECIDED
    assert judge({}, {"w2": (100, 3)}) is Verdict.UNDECIDED  # it started meanwhile
    assert judge(before, {}) is Verdict.UNDECIDED  # it stopped meanwhile
    assert judge(before, {"w2": (90, 0)}) is Verdict.UNDECIDED  # restarted: counters reset


def test_a_streak_on_one_site_of_many_is_that_sites_fault():
    before, after = {"w2": (100, 3)}, {"w2": (130, 3)}
    assert judge(before, after, comparable=False) is Verdict.SITES


def test_a_streak_remembers_the_last_sites_it_failed_on():
    streak = Streak(failures=50, window=30.0)
    for target in (A, B, A, C, B):
        streak.failed(1.0, target)
    assert streak.latest_targets() == [B, C, A]
    assert streak.latest_targets(2) == [B, C]
    streak.restart(2.0)
    assert streak.latest_targets() == [] and streak.since == 2.0


def test_counts_come_from_published_stats_text():
    fields = {"response_received_count": "12", "downloader/exception_count": "3"}
    assert counts_of(fields) == (12, 3)
    assert counts_of({"response_received_count": "x"}) == (0, 0)


def test_a_streak_on_the_only_site_left_is_its_fault_when_the_others_fail_it_too():
    """The crawl's last host is a dead one: the others fail the requests this node
    handed back, while their last pages of other hosts still got answers."""
    before, after = {"w2": (100, 3)}, {"w2": (104, 5)}
    assert judge(before, after, comparable=True, one_site=True) is Verdict.SITES
    # Only answers: they reach the site this node cannot.
    assert judge(before, {"w2": (104, 3)}, one_site=True) is Verdict.NODE
    # A streak on several sites stays this node's fault, whatever else fails.
    assert judge(before, after) is Verdict.NODE
