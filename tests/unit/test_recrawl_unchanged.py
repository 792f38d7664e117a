"""recrawl/unchanged.py: the one "unchanged since the last fetch" rule the
conditional-request middleware and the WARC archive both call."""

from __future__ import annotations

import pytest

from spiders_project.archive.revisits import PROFILES
from spiders_project.recrawl.unchanged import Unchanged, unchanged

STATE = {"etag": '"1"', "digest": "sha1:A", "fetched_at": "2026-11-24T10:00:00+00:00"}


def never() -> str:
    raise AssertionError("the body's digest was asked for with nothing to compare it with")


def test_a_304_is_unchanged_whatever_the_state_says():
    for state in (STATE, {}, None):
        assert unchanged(304, state, never) is Unchanged.NOT_MODIFIED


@pytest.mark.parametrize("status", [200, 203, 299])
def test_a_2xx_with_the_last_digest_is_unchanged_and_another_is_not(status):
    assert unchanged(status, STATE, lambda: "sha1:A") is Unchanged.SAME_DIGEST
    assert unchanged(status, STATE, lambda: "sha1:B") is None
    # A body whose digest cannot be known (it does not decode) is not unchanged.
    assert unchanged(status, STATE, lambda: None) is None


@pytest.mark.parametrize("status", [101, 199, 301, 302, 404, 500])
def test_only_a_2xx_is_compared(status):
    assert unchanged(status, STATE, never) is None


@pytest.mark.parametrize(
    "state", [None, [], "sha1:A", {}, {"digest": None}, {"digest": ""}, {"digest": 5}]
)
def test_without_a_last_digest_nothing_is_unchanged_and_no_body_is_hashed(state):
    assert unchanged(200, state, never) is None


def test_every_reason_has_a_warc_revisit_profile():
    assert set(PROFILES) == set(Unchanged)
    assert len(set(PROFILES.values())) == len(Unchanged)
