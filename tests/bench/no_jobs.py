"""A checkout of this commit with crawl jobs switched off: the jobs phase's baseline.

Issue 27 asks what jobs cost a page "against a run without jobs". The commit
before jobs (bce0023) no longer answers that: later commits changed the hot
path for everyone (the batched ack and lease scripts of issue 29), so the two
differ by much more than jobs. :func:`strip_jobs` takes a worktree of this
very commit and removes what jobs do per request and per page:

- in the scripts (``frontier/lua``): no job found in a request, no count kept,
  no per-job page rate written by ``ack.lua``, no look at paused or cancelled
  jobs by the lease script (``job_turns.lua``) and ``enqueue.lua``, nor at the
  hosts whose jobs take turns;
- in the worker: the jobs' frontier step, download gate and both extensions.

Each edit must match the source exactly once, or :class:`StripFailed` says
which one did not: a change to those lines has to come here too, rather than
leave a baseline that silently still pays for jobs.
"""

from __future__ import annotations

from pathlib import Path

LUA = "spiders_project/frontier/lua/"
# The component dicts the add-on and settings.py build from (since the add-on, issue 41).
SETTINGS = "spiders_project/addon/components.py"

# (file, text found once, its replacement)
EDITS: tuple[tuple[str, str, str], ...] = (
    (
        LUA + "job_counts.lua",
        "local function job_of(request)\n",
        "local function job_of(request)\n  do return 'default' end\n",
    ),
    (
        LUA + "job_counts.lua",
        "local function job_changes(job)\n",
        "local function job_changes(job)\n  do return {} end\n",
    ),
    (
        LUA + "job_counts.lua",
        "local function job_count(request, what, by)\n",
        "local function job_count(request, what, by)\n  do return end\n",
    ),
    (
        LUA + "job_counts.lua",
        "local function job_counts_done(key)\n",
        "local function job_counts_done(key)\n  do return end\n",
    ),
    (LUA + "ack.lua", "    paged[job] = (paged[job] or 0) + 1\n", ""),
    (
        LUA + "job_turns.lua",
        "taking.controlled = redis.call('HLEN', control) > 0",
        "taking.controlled = false",
    ),
    (
        LUA + "job_turns.lua",
        "taking.turned = redis.call('HLEN', turns) > 0",
        "taking.turned = false",
    ),
    (LUA + "enqueue.lua", "local controlled = nil ", "local controlled = false "),
    *(
        (
            SETTINGS,
            f'"spiders_project.jobs.{name}": {order}',
            f'"spiders_project.jobs.{name}": None',
        )
        for name, order in (
            ("pause_step.JobStep", 900),
            ("fetch_gate.JobGate", 995),
            ("webhook_extension.JobWebhooks", 125),
            ("schedules.JobSchedules", 140),
            ("state_loop.JobWatch", 150),
        )
    ),
)


class StripFailed(RuntimeError):
    """An edit of :data:`EDITS` no longer matches its file once."""


def strip_jobs(tree: Path) -> None:
    """Apply :data:`EDITS` to the checkout at ``tree`` (not committed)."""
    for name, old, new in EDITS:
        path = tree / name
        text = path.read_text()
        if text.count(old) != 1:
            raise StripFailed(f"{name}: {old.strip()!r} found {text.count(old)} times, not once")
        path.write_text(text.replace(old, new))
