"""The jobs' state decisions (issue 27, items 2 and 6), pure: the records a change
writes, and the workers' verdict on each job after a look at its counts."""

import json

from spiders_project.jobs.finish import Verdict, judge, seeds_pending
from spiders_project.jobs.states import (
    FINISHED,
    RUNNING,
    control_of,
    new_record,
    shown_state,
    state_of,
)
from spiders_project.read_model.job_progress import JobProgress

GRACE = 30_000


def running(**counts) -> str:
    return json.dumps({"id": "j", "state": "running", "started_at": 1, **counts})


def test_a_change_keeps_the_record_and_sets_its_times():
    paused = json.loads(new_record(running(seeds=["http://a/"]), "j", "paused", 50, "pause"))
    assert paused == {"id": "j", "state": "paused", "started_at": 1, "seeds": ["http://a/"]}
    done = json.loads(new_record(running(), "j", FINISHED, 90, "nothing left"))
    assert done["finished_at"] == 90 and done["started_at"] == 1
    again = json.loads(new_record(json.dumps(done), "j", RUNNING, 120, "seeded again"))
    assert again["started_at"] == 120 and "finished_at" not in again
    fresh = json.loads(new_record(None, "j", RUNNING, 7, "seeded"))
    assert fresh == {"id": "j", "via": "seeded", "seeds": [], "started_at": 7, "state": "running"}
    assert state_of(b"not json") is None and state_of(None) is None
    assert control_of("paused") == "paused" and control_of(FINISHED) == ""


def test_a_job_finishes_after_the_grace_with_nothing_done_in_between():
    quiet = JobProgress("j", acked=10, purged=2)
    first = judge(quiet, running(), None, 1_000, GRACE)
    assert first == Verdict(quiet="1000 12")
    assert judge(quiet, running(), first.quiet, 30_999, GRACE) == Verdict()
    assert judge(quiet, running(), first.quiet, 31_000, GRACE).state == FINISHED


def test_activity_between_two_looks_starts_the_grace_again():
    # A request queued and fetched between two looks: never seen active, but
    # its lease ended, so the ended count moved.
    later = JobProgress("j", acked=11, purged=2)
    assert judge(later, running(), "1000 12", 40_000, GRACE) == Verdict(quiet="40000 13")
    active = JobProgress("j", queued=1)
    assert judge(active, running(), "1000 12", 40_000, GRACE) == Verdict(clear_quiet=True)
    assert judge(active, running(), None, 40_000, GRACE) == Verdict()


def test_a_finished_job_seeded_again_runs_and_a_raw_job_gets_its_record():
    active = JobProgress("j", queued=2)
    finished = json.dumps({"id": "j", "state": "finished"})
    assert judge(active, finished, None, 5, GRACE) == Verdict(state=RUNNING, why="seeded again")
    assert judge(active, None, None, 5, GRACE) == Verdict(state=RUNNING, why="seeded")
    # Paused or cancelled jobs are the operator's: no verdict.
    idle = JobProgress("j")
    assert judge(idle, json.dumps({"state": "paused"}), "1 0", 10**9, GRACE) == Verdict()
    assert judge(idle, finished, None, 10**9, GRACE) == Verdict()


def test_a_raw_job_that_no_look_saw_active_still_finishes():
    """Seeded raw and crawled between two looks: listed running, so it ends like one
    (its record is written then, with the finish)."""
    done = JobProgress("r", acked=5)
    first = judge(done, None, None, 1_000, GRACE)
    assert first == Verdict(quiet="1000 5")
    assert judge(done, None, first.quiet, 31_000, GRACE) == Verdict(
        state=FINISHED, why="nothing left"
    )
    record = json.loads(new_record(None, "r", FINISHED, 31_000, "nothing left"))
    assert record["via"] == "seeded" and record["state"] == FINISHED


def test_the_state_jobs_list_shows_is_the_one_the_operator_changes_from():
    assert shown_state(None, listed=True) == RUNNING  # seeded raw: counts, no record yet
    assert shown_state(None, listed=False) is None  # unknown
    assert shown_state(json.dumps({"state": "paused"}), listed=True) == "paused"
    assert shown_state(b"not ours", listed=True) is None
    paused = json.loads(new_record(None, "r", "paused", 9, "pause"))
    assert paused == {"id": "r", "via": "seeded", "seeds": [], "started_at": 9, "state": "paused"}


def test_seeds_waiting_in_start_urls_are_found_by_job():
    entries = [
        b"http://plain/",
        b'{"url": "http://x/", "job": "j"}',
        b'{"url":"http://y/","job":"j2"}',
    ]
    assert seeds_pending(entries, "j")
    assert seeds_pending(entries, "j2")
    assert not seeds_pending(entries, "j3")
    assert seeds_pending(entries, "default")
    assert not seeds_pending(entries[1:], "default")


def test_a_run_counts_its_own_pages_from_the_base_in_its_record():
    from spiders_project.read_model.job_progress import job_progress

    counts = {b"j|pages": b"30", b"j|items": b"25", b"j|acked": b"31", b"j|queued": b"4"}
    record = json.dumps({"id": "j", "state": "running", "base": {"pages": 20, "items": 18}})
    (run,) = job_progress({b"j": record}, [counts], 0)
    assert (run.pages, run.items, run.queued, run.acked) == (10, 7, 4, 31)
    assert run.totals["pages"] == 30
    # It ends with its totals kept; seeded again, the next run counts from them.
    ended = new_record(record, "j", FINISHED, 5, "nothing left", run.totals)
    assert json.loads(ended)["final"]["pages"] == 30
    again = json.loads(new_record(ended, "j", RUNNING, 9, "seeded again"))
    assert again["base"]["pages"] == 30 and "final" not in again
