"""A crawl job's run as it is submitted: its seeds and its record (jobs/submit.py)."""

from __future__ import annotations

import json

import pytest

from spiders_project.jobs.submit import (
    MAX_SEEDS,
    SUBMIT,
    InvalidJob,
    JobSpec,
    rerun_recrawl_after,
    resubmit_recrawl_after,
    run_args,
)
from spiders_project.scope.seeds import parse_seed


def test_every_seed_of_a_run_shares_one_budget_and_names_its_job():
    spec = JobSpec("shop", ("http://a/", "http://b/"), max_pages=50, allow=("^http://",))
    seeds = [parse_seed(entry) for entry in spec.seed_entries("r1")]
    assert [s.url for s in seeds] == ["http://a/", "http://b/"]
    assert {s.job for s in seeds} == {"shop"}
    # One scope id for the run: one page counter in Redis for both seeds.
    assert seeds[0].scope["id"] == seeds[1].scope["id"]
    assert seeds[0].scope["id"].startswith("job.shop.r1.")
    assert seeds[0].scope["max_pages"] == 50
    # Another run of the job has a budget of its own.
    again = parse_seed(spec.seed_entries("r2")[0])
    assert again.scope["id"] != seeds[0].scope["id"]


def test_a_job_without_limits_writes_plain_job_seeds():
    entries = JobSpec("j", ("http://a/",), priority=3).seed_entries("r")
    assert [json.loads(e) for e in entries] == [{"url": "http://a/", "job": "j", "priority": 3}]
    assert parse_seed(entries[0]).scope == {}


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        (JobSpec("bad id", ("http://a/",)), "job must be"),
        (JobSpec("j", ()), "at least one URL"),
        (JobSpec("j", ("http://a/", "ftp://b/")), "scheme"),
        (JobSpec("j", ("http://a/",), allow=("(",)), "bad regex"),
        (JobSpec("j", ("http://a/",), max_pages=0), "max_pages"),
        (JobSpec("j", ("http://a/",), max_depth=-1), "max_depth"),
        (JobSpec("j", ("http://a/",) * (MAX_SEEDS + 1)), "at most"),
    ],
)
def test_a_job_that_workers_would_reject_is_refused_first(spec, reason):
    with pytest.raises(InvalidJob, match=reason):
        spec.check()


def test_a_spec_round_trips_through_json_and_unknown_fields_are_refused():
    spec = JobSpec("j", ("http://a/",), max_pages=5, max_depth=2, deny=("x",), priority=-1)
    assert JobSpec.from_dict("j", json.loads(json.dumps(spec.to_dict()))) == spec
    with pytest.raises(InvalidJob, match="unknown"):
        JobSpec.from_dict("j", {"urls": ["http://a/"], "python": "os.system"})
    with pytest.raises(InvalidJob, match="urls"):
        JobSpec.from_dict("j", {"urls": "http://a/"})
    with pytest.raises(InvalidJob, match="max_pages"):
        JobSpec.from_dict("j", {"urls": ["http://a/"], "max_pages": True})


def test_the_record_keeps_the_first_seeds_only():
    spec = JobSpec("j", tuple(f"http://h/{i}" for i in range(150)))
    args = run_args(spec, "r", via=SUBMIT, events_max=10)
    job, run, via, record, total, events_max, by, *entries = args
    assert (job, run, via, total, events_max, by, len(entries)) == (
        "j",
        "r",
        SUBMIT,
        150,
        10,
        "",
        150,
    )
    record = json.loads(record)
    assert len(record["seeds"]) == 100 and record["seeds_total"] == 150
    assert record["state"] == "running" and "started_at" not in record  # the script adds it


def test_a_runs_recrawl_after_goes_on_every_seed_and_its_pages_inherit_it():
    spec = JobSpec("j", ("http://a/", "http://b/"))
    entries = spec.seed_entries("r", recrawl_after=1800.0)
    assert json.loads(entries[0]) == {"url": "http://a/", "job": "j", "recrawl_after": 1800.0}
    # The seed's scope (copied to every link below it) carries it.
    assert {parse_seed(e).scope["recrawl_after"] for e in entries} == {1800.0}
    record = json.loads(run_args(spec, "r", via=SUBMIT, events_max=1, recrawl_after=1800.0)[3])
    assert record["recrawl_after"] == 1800.0


def test_a_rerun_recrawls_what_was_fetched_over_half_the_interval_ago():
    assert rerun_recrawl_after(86_400_000) == 43_200
    assert rerun_recrawl_after(3) == 0.001
    assert rerun_recrawl_after(1) is None  # 0 would mean "never again"
    assert rerun_recrawl_after(-5) is None


def test_a_job_submitted_again_recrawls_only_with_a_timed_seen_set():
    record = json.dumps({"id": "j", "state": "finished", "started_at": 1_000_000})
    timed = b"timed 225000 999"
    assert resubmit_recrawl_after(record.encode(), timed, 1_000_000 + 7_200_000) == 3600
    assert resubmit_recrawl_after(None, timed, 2_000_000) is None  # it never ran
    assert resubmit_recrawl_after(record, b"exact", 2_000_000) is None
    assert resubmit_recrawl_after(record, None, 2_000_000) is None
    for bad in (b"\x80", b"[1]", b'{"started_at": "yesterday"}', b'{"started_at": true}'):
        assert resubmit_recrawl_after(bad, timed, 2_000_000) is None
