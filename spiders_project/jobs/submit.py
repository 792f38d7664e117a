"""One run of a crawl job: what it submits, and the script that starts it (``lua/submit.lua``).

A run is the job's seeds written to ``<spider>:start_urls``, its record in
``<spider>:jobs`` (state ``running``, its run id, when it started, its first
seeds and its options) and one event in ``<spider>:jobs:events``, all in one
script: an operator never sees a job without seeds, nor seeds of a job nobody
recorded.

``max_pages`` is one budget for the whole run, across its seeds and all
workers: every seed of a run carries the same limits and ``"scope_id":
"job.<id>.<run>"``, so they share one page counter in Redis
(``scope/seed_limits.py``, exact across workers). Each run has its own id, so
a job submitted again, or run again by its schedule, gets a fresh budget.

A run fetches its pages again (:func:`rerun_recrawl_after`): its seeds may
carry ``"recrawl_after"``, which every link below them inherits
(``scope/seed_limits.py`` copies the seed's scope to its links,
``scope/steps.py`` puts it on the enqueue, and the seen-set enqueues a URL
again only if it was last enqueued longer ago than that). Without it, only a
run's seeds are fetched again (seeds are enqueued even if seen): every link
below them is a duplicate of the previous run's.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spiders_project.keys import RedisKeys
from spiders_project.redis_access import LuaScript, load_lua
from spiders_project.scope.seeds import InvalidSeed, check_job_id, parse_seed

LUA_DIR = Path(__file__).with_name("lua")
# A job's record keeps its first seeds, for ``scrapy jobs show``; the record
# is read whole, so it stays small however many seeds a run has.
SEEDS_SHOWN = 100
# URLs one run may have: a schedule stores them all in one hash field that
# every worker reads each second, and the script pushes them in one step.
MAX_SEEDS = 10_000
# How a run was started, in its record and event.
SUBMIT = "submit"
SCHEDULE = "schedule"


class InvalidJob(ValueError):
    """A job that cannot be submitted as given (its id, a URL, a limit)."""


def submit_script() -> LuaScript:
    """``lua/submit.lua``."""
    return load_lua(LUA_DIR, "submit")


def new_run_id() -> str:
    """An id for a submitted run, unique enough to give it its own budget."""
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True)
class JobSpec:
    """What a run of a job submits: its URLs, and the limits and priority they share."""

    job: str
    urls: tuple[str, ...]
    max_pages: int | None = None
    max_depth: int | None = None
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    priority: int = 0

    def options(self) -> dict[str, Any]:
        """The options given, as a JSON seed spells them (none: an empty object)."""
        found: dict[str, Any] = {}
        if self.max_pages is not None:
            found["max_pages"] = self.max_pages
        if self.max_depth is not None:
            found["max_depth"] = self.max_depth
        if self.allow:
            found["allow"] = list(self.allow)
        if self.deny:
            found["deny"] = list(self.deny)
        if self.priority:
            found["priority"] = self.priority
        return found

    def seed_entries(self, run: str, recrawl_after: float | None = None) -> list[str]:
        """The JSON seeds of run ``run``, one per URL, in order; with ``recrawl_after``
        (seconds) its pages last fetched longer ago than that are fetched again."""
        shared: dict[str, Any] = {"job": self.job, **self.options()}
        if recrawl_after is not None:
            shared["recrawl_after"] = recrawl_after
        if self.max_pages is not None or self.max_depth is not None or self.allow or self.deny:
            shared["scope_id"] = f"job.{self.job}.{run}"
        return [json.dumps({"url": url, **shared}, separators=(",", ":")) for url in self.urls]

    def check(self) -> JobSpec:
        """This spec, if every seed it writes is one a worker takes; raises InvalidJob.

        The seeds are checked by the workers' own parser, so nothing the
        command accepts is later rejected.
        """
        try:
            check_job_id(self.job)
        except InvalidSeed as exc:
            raise InvalidJob(str(exc)) from None
        if not self.urls:
            raise InvalidJob("a job needs at least one URL")
        if len(self.urls) > MAX_SEEDS:
            raise InvalidJob(f"at most {MAX_SEEDS} URLs a job, not {len(self.urls)}")
        for url, entry in zip(self.urls, self.seed_entries("check"), strict=True):
            try:
                parse_seed(entry)
            except InvalidSeed as exc:
                raise InvalidJob(f"{url[:200]!r}: {exc}") from None
        return self

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON fields (a schedule stores it: :meth:`from_dict` reads it back)."""
        return {"urls": list(self.urls), **self.options()}

    @classmethod
    def from_dict(cls, job: str, data: dict[str, Any]) -> JobSpec:
        """The spec ``to_dict`` wrote, checked (allow-listed fields); raises InvalidJob."""
        unknown = set(data) - {"urls", "max_pages", "max_depth", "allow", "deny", "priority"}
        if unknown:
            raise InvalidJob(f"unknown fields {sorted(unknown)}")
        urls, allow, deny = data.get("urls"), data.get("allow", []), data.get("deny", [])
        for name, value in (("urls", urls), ("allow", allow), ("deny", deny)):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise InvalidJob(f"{name} must be a list of strings")
        numbers = {}
        for name in ("max_pages", "max_depth", "priority"):
            value = data.get(name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise InvalidJob(f"{name} must be an integer")
            numbers[name] = value
        assert isinstance(urls, list) and isinstance(allow, list) and isinstance(deny, list)
        return cls(
            job,
            tuple(urls),
            max_pages=numbers["max_pages"],
            max_depth=numbers["max_depth"],
            allow=tuple(allow),
            deny=tuple(deny),
            priority=numbers["priority"] or 0,
        ).check()


def rerun_recrawl_after(interval_ms: int) -> float | None:
    """The ``recrawl_after`` (seconds) of a run started ``interval_ms`` after the one before.

    Half the interval: a page the previous run fetched in its first half
    interval is due again when this run finds it, and a page this run
    fetched is not due again for half an interval, so a run that ends within
    that fetches each page once (once per run, never twice in one). Half is
    the most both sides can have: a run that finds a page later than the
    previous run did needs it shorter, one that takes longer needs it longer.

    The seen-set keeps times in units of the first worker's RECRAWL_AFTER / 16
    (recorded in ``seen:mode``): a page is due again between this and one
    unit later, and may be taken for due up to a unit early, so both margins
    lose up to a unit (``JobSchedules`` says once when a unit is over half of
    this). A seed's recrawl_after needs RECRAWL_AFTER set; the caller gives
    None without it (workers would refuse the seeds). None for an interval
    of 1 ms or less: 0 would mean "never again".
    """
    half = interval_ms // 2
    return half / 1000 if half > 0 else None


def resubmit_recrawl_after(
    record: bytes | str | None, seen_mode: bytes | str | None, now_ms: int
) -> float | None:
    """The ``recrawl_after`` of a job submitted again at ``now_ms`` (Redis' clock).

    ``record``: the job's record (HGET ``jobs``), whose ``started_at`` is the
    previous run's start; ``seen_mode``: GET ``seen:mode``, which says
    whether the seen-set keeps times. None (only the seeds are fetched again)
    for a job that never ran, a record without a start, or a seen-set
    without times, whose workers would refuse a seed with recrawl_after.
    """
    mode = seen_mode.decode("ascii", "replace") if isinstance(seen_mode, bytes) else seen_mode
    if record is None or not mode or not mode.startswith("timed "):
        return None
    try:
        started = json.loads(record).get("started_at")
    except (ValueError, UnicodeDecodeError, AttributeError):
        return None
    if not isinstance(started, int) or isinstance(started, bool):
        return None
    return rerun_recrawl_after(now_ms - started)


def run_args(
    spec: JobSpec,
    run: str,
    *,
    via: str,
    events_max: int,
    tick: int | None = None,
    recrawl_after: float | None = None,
    base: dict[str, int] | None = None,
    by: str = "",
) -> list[Any]:
    """The run's arguments to ``lua/submit_job.lua`` (its header gives the order).

    ``by``: who asked for the run (the console's user), carried by its event.

    ``base``: the job's counts when the run starts (``job_progress.job_totals``),
    so ``scrapy jobs show`` and the events count this run's pages, not every run's.
    """
    record: dict[str, Any] = {
        "id": spec.job,
        "state": "running",
        "run": run,
        "via": via,
        "seeds": list(spec.urls[:SEEDS_SHOWN]),
        "seeds_total": len(spec.urls),
        "options": spec.options(),
    }
    if tick is not None:
        record["tick"] = tick
    if recrawl_after is not None:
        record["recrawl_after"] = recrawl_after
    if base:
        record["base"] = base
    return [
        spec.job,
        run,
        via,
        json.dumps(record, separators=(",", ":")),
        len(spec.urls),
        events_max,
        by,
        *spec.seed_entries(run, recrawl_after),
    ]


def submit_call(
    keys: RedisKeys,
    spec: JobSpec,
    run: str,
    *,
    events_max: int,
    now: int | str = "",
    recrawl_after: float | None = None,
    base: dict[str, int] | None = None,
    by: str = "",
) -> tuple[list[str], list[Any]]:
    """KEYS and ARGV of ``lua/submit.lua`` for one run (at ``now``: ``plumbing/clock.py``).

    ``recrawl_after``: see :func:`rerun_recrawl_after` (a job submitted again,
    from the time since its previous run started, its record's ``started_at``).
    """
    args = run_args(
        spec,
        run,
        via=SUBMIT,
        events_max=events_max,
        recrawl_after=recrawl_after,
        base=base,
        by=by,
    )
    return [keys.jobs, keys.jobs_events, keys.start_urls], [now, *args]
