"""How a leased request ended (frontier/outcomes.py): the one map from an Outcome to the
number lua/ack.lua counts."""

from __future__ import annotations

import re

import pytest

from spiders_project.frontier.outcomes import Outcome, ack_code
from spiders_project.frontier.scripts import LUA_DIR

# The count ack.lua's ``finish`` adds for each outcome it reads as a number.
COUNTED = {
    Outcome.DEAD_LETTER: "dead_letters",
    Outcome.REFUSED: "refused",
    Outcome.DROPPED: "purged",
}


def test_a_page_is_its_item_count_and_no_page_sends_the_id_alone() -> None:
    assert ack_code(Outcome.PAGE, 0) == 0
    assert ack_code(Outcome.PAGE, 12) == 12
    assert ack_code(Outcome.NO_PAGE, 12) is None


def test_every_other_outcome_acked_has_its_own_negative_code() -> None:
    codes = [ack_code(outcome, 5) for outcome in COUNTED]
    assert all(code is not None and code < 0 for code in codes)
    assert len(set(codes)) == len(codes)
    assert set(Outcome) == set(COUNTED) | {Outcome.PAGE, Outcome.NO_PAGE, Outcome.HELD}


def test_a_held_lease_has_no_code() -> None:
    """Held leases go back to their queue (handoff.py): acking one is a bug."""
    with pytest.raises(ValueError, match="never acked"):
        ack_code(Outcome.HELD)


def test_ack_lua_counts_each_code_as_its_outcome() -> None:
    """ack.lua keeps its numbers; they must be the ones ack_code sends (the counts
    themselves: tests/integration/test_job_counts.py)."""
    source = (LUA_DIR / "ack.lua").read_text()
    for outcome, count in COUNTED.items():
        pattern = rf"items == {ack_code(outcome)} then\s+changes\.{count} ="
        assert re.search(pattern, source), (outcome, pattern)
