"""page_state: a revisit's state checked, its conditional headers, a fetch's outcome, its time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from spiders_project.recrawl.page_state import (
    BLOCKED,
    FETCH_ERROR,
    FETCHED,
    NOT_MODIFIED,
    REDIRECT,
    InvalidPageState,
    check_page_state,
    last_fetched,
    outcome_of,
    validator_headers,
)

STATE = {
    "etag": '"v1"',
    "last_modified": "Tue, 24 Nov 2026 10:00:00 GMT",
    "digest": "sha1:ABC",
    "fetched_at": "2026-11-24T10:00:00.000000+00:00",
    "interval": 60.0,
    "changes": 2,
    "failures": 0,
}


def test_a_page_state_passes_and_every_field_is_optional():
    assert check_page_state(STATE) is STATE
    assert check_page_state({}) == {}
    assert check_page_state({"etag": None}) == {"etag": None}


@pytest.mark.parametrize(
    "bad",
    [
        [],
        "x",
        {"other": 1},
        {"etag": 5},
        {"etag": 'a"\r\nX-Injected: 1'},
        {"etag": "x" * 2000},
        {"interval": -1},
        {"interval": True},
        {"changes": 1.5},
        {"failures": -1},
    ],
)
def test_anything_else_is_refused_with_a_reason(bad):
    with pytest.raises(InvalidPageState):
        check_page_state(bad)


def test_validators_become_conditional_headers():
    assert validator_headers(STATE) == {
        "If-None-Match": '"v1"',
        "If-Modified-Since": "Tue, 24 Nov 2026 10:00:00 GMT",
    }
    assert validator_headers({"etag": '"v1"'}) == {"If-None-Match": '"v1"'}
    assert validator_headers({"etag": None, "last_modified": ""}) == {}
    assert validator_headers(None) == {}
    assert validator_headers({"etag": "a\nb"}) == {}


@pytest.mark.parametrize(
    ("status", "blocked", "conditional", "outcome"),
    [
        (200, False, False, FETCHED),
        (200, False, True, FETCHED),
        (304, False, True, NOT_MODIFIED),
        (304, False, False, REDIRECT),
        (301, False, False, REDIRECT),
        (404, False, False, FETCH_ERROR),
        (503, False, True, FETCH_ERROR),
        (403, True, False, BLOCKED),
        (200, True, True, BLOCKED),
    ],
)
def test_an_answer_s_outcome(status, blocked, conditional, outcome):
    assert outcome_of(status, blocked=blocked, conditional=conditional) == outcome


def test_the_last_fetch_s_time_reads_in_any_iso_form_or_not_at_all():
    at = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
    assert last_fetched(STATE) == at
    assert last_fetched({"fetched_at": "2026-11-24T10:00:00Z"}) == at
    assert last_fetched({"fetched_at": "2026-11-24T10:00:00"}) == at  # no zone: UTC
    plus_two = last_fetched({"fetched_at": "2026-11-24T12:00:00+02:00"})
    assert plus_two == at and plus_two.utcoffset() == timedelta(hours=2)  # kept as sent
    for state in (None, {}, {"fetched_at": "nonsense"}, {"fetched_at": 5}, ["fetched_at"]):
        assert last_fetched(state) is None
