"""Retries wait longer each time, with jitter and a cap (politeness/retries.py)."""

import random

from spiders_project.politeness.retries import Backoff


def test_backoff_doubles_with_jitter_and_a_cap():
    backoff = Backoff(2.0, 30.0, random.Random(1))
    for attempt, base in ((1, 2), (2, 4), (3, 8), (4, 16)):
        for _ in range(50):
            assert base <= backoff.seconds(attempt) <= base * 1.25
    assert backoff.seconds(10) == 30.0
