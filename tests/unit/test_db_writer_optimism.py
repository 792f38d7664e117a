"""The schedule by which PostgresStore tries batches as new rows only (db_writer/optimism.py)."""

from __future__ import annotations

from spiders_project.db_writer.optimism import Optimism


def tries(optimism: Optimism, outcomes: list[bool]) -> list[bool]:
    """Which batches are tried; a tried batch goes in whole if its outcome is True."""
    pattern = []
    found = iter(outcomes)
    for _ in outcomes:
        tried = optimism.should_try()
        pattern.append(tried)
        if tried:
            if next(found):
                optimism.held()
            else:
                optimism.missed()
        else:
            next(found)
    return pattern


def test_new_batches_are_all_tried() -> None:
    assert tries(Optimism(), [True] * 5) == [True] * 5


def test_misses_back_off_doubling_up_to_the_bound() -> None:
    pattern = tries(Optimism(max_skip=4), [False] * 20)
    # Skips after each miss: 1, 2, 4, 4, 4 ...
    tried_at = [i for i, tried in enumerate(pattern) if tried]
    assert tried_at == [0, 2, 5, 10, 15]


def test_a_try_that_holds_starts_over() -> None:
    optimism = Optimism(max_skip=64)
    tries(optimism, [False] * 8)  # misses at 0, 2, 5, each skipping 1, 2, 4 batches
    assert [optimism.should_try() for _ in range(3)] == [False, False, True]  # batches 8-10
    optimism.held()
    assert optimism.should_try()
    optimism.missed()  # after a hold the first miss skips one batch again, not eight
    assert [optimism.should_try(), optimism.should_try()] == [False, True]
