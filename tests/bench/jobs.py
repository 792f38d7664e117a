"""The ``jobs`` phase: what crawl jobs cost a page (issue 27, item 9).

Jobs keep exact per-job counts inside the frontier's scripts (one HINCRBY per
job and count per enqueue, lease, ack, requeue call; ``job_counts.lua``), carry
``crawl_job`` in every request's meta (a longer queued entry) and send each
lease's outcome (page, items, dead letter, ...) with its ack. The issue allows
them at most +5% worker CPU and Redis CPU per page against a run without jobs
on the same machine in the same sitting.

Two setups, the ``worker`` phase's one-worker crawl of the same site, pinned the
same way, with the same settings, until ``--window`` pages:

- *with jobs*: this checkout, its seed a JSON seed ``{"url": ..., "job": "bench"}``,
  so every request carries the job and every count is kept;
- *without jobs*: a detached ``git worktree`` of this commit (HEAD) with jobs
  switched off (``tests/bench/no_jobs.py``: no job found, counted or controlled
  in the scripts, none of the jobs' worker components), its plain URL seed. This
  is ``--jobs-baseline stripped``, the default; a commit may be named instead
  (bce0023, the last before jobs; "A+B" applies commit B on A; several,
  comma-separated, are measured in the same rounds). The worker is ``scrapy crawl
  distributed`` started by this checkout's ``Bench.worker`` with its working
  directory at that worktree, so Python imports that tree's ``spiders_project``
  (nothing of it is installed in the venv) and Scrapy reads its ``scrapy.cfg``;
  the site, the private Redis, the sampling and the arithmetic are this
  checkout's, the same for both.

The machine's speed drifts by more than the effect looked for, so the setups run
alternately, ``--jobs-pairs`` rounds, the order rotated each round (as the
distance phase does), and each round gives a ratio with / without per figure;
the report quotes the median of the rounds' ratios.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from spiders_project.keys.jobs import job_counts
from tests.bench.crawls import OURS, Bench, CrawlResult
from tests.bench.no_jobs import strip_jobs
from tests.support.processes import ROOT

# The baseline: this commit with jobs switched off (tests/bench/no_jobs.py). A
# commit may be named instead ("bce0023", the last before jobs, or "A+B").
STRIPPED = "stripped"
BASELINE = STRIPPED
JOB = "bench"
TARGET = 1.05  # with / without, worker CPU and Redis CPU per page


@dataclass
class Metric:
    title: str
    value: Callable[[CrawlResult], float]
    fmt: str


METRICS = (
    Metric("Worker CPU ms/page", lambda r: r.cpu_ms_per_page, "{:.2f}"),
    Metric("Redis CPU µs/page", lambda r: 100 * (r.redis_cpu_per_10k or 0.0), "{:.1f}"),
    Metric("Redis commands/page", lambda r: r.commands_per_page or 0.0, "{:.1f}"),
    Metric("Pages/s", lambda r: r.pages_per_s, "{:,.0f}"),
)


@dataclass
class Pair:
    baseline: str
    with_jobs: CrawlResult
    without: CrawlResult
    # The job's pages counted by the scripts, and the pages the site served in all.
    job_pages: int = 0

    def ratio(self, metric: Metric) -> float:
        return metric.value(self.with_jobs) / metric.value(self.without)


@dataclass
class JobsResult:
    window: int
    # commit as given -> "<short sha> <subject>"
    baselines: dict[str, str] = field(default_factory=dict)
    pairs: list[Pair] = field(default_factory=list)

    def of(self, baseline: str) -> list[Pair]:
        return [p for p in self.pairs if p.baseline == baseline]

    def median(self, baseline: str, metric: Metric) -> float:
        return statistics.median(p.ratio(metric) for p in self.of(baseline))

    def commands(self, baseline: str) -> list[tuple[str, float, float]]:
        """(command, mean per page with jobs, without) over the rounds, by difference."""
        pairs = self.of(baseline)
        sides: list[dict[str, float]] = [{}, {}]
        for pair in pairs:
            for side, run in zip(sides, (pair.with_jobs, pair.without), strict=True):
                for cmd, n in run.top_commands:
                    side[cmd] = side.get(cmd, 0.0) + n / len(pairs)
        rows = [(c, sides[0].get(c, 0.0), sides[1].get(c, 0.0)) for c in {*sides[0], *sides[1]}]
        return sorted(rows, key=lambda r: -abs(r[1] - r[2]))


def jobs_phase(bench: Bench, window: int, pairs: int, baselines: list[str]) -> JobsResult:
    """``pairs`` rounds of: this checkout with jobs, and each baseline without."""
    result = JobsResult(window=window)
    with _checkouts(baselines) as trees:
        for commit, tree in trees.items():
            described = _git(tree, "log", "-1", "--format=%h %s")
            if commit.split("+")[0] == STRIPPED:
                described += ", jobs switched off (tests/bench/no_jobs.py)"
            for extra in commit.split("+")[1:]:
                described += f"; with {_git(ROOT, 'log', '-1', '--format=%h %s', extra)} applied"
            result.baselines[commit] = described
        order: list[str | None] = [None, *baselines]
        for i in range(pairs):
            k = i % len(order)
            runs: dict[str | None, CrawlResult] = {}
            job_pages = 0
            for side in order[k:] + order[:k]:
                tree = ROOT if side is None else trees[side]
                runs[side] = _crawl(bench, tree, side, window, i)
                if side is None:
                    counts = bench.redis.client.hget(job_counts(OURS), f"{JOB}|pages")
                    job_pages = int(counts or 0)
                print(_line(runs[side]), flush=True)
            for commit in baselines:
                result.pairs.append(Pair(commit, runs[None], runs[commit], job_pages))
    return result


def _crawl(bench: Bench, tree: Path, commit: str | None, window: int, n: int) -> CrawlResult:
    tag = f"jobs-{commit or 'head'}-{n}"
    # Identical on both sides. FRONTIER_SPARES is 32 now and was 16 at bce0023 (d9fb935,
    # not a jobs commit): given, so both run with this checkout's value.
    seed = None if commit is not None else json.dumps({"url": bench.site.url, "job": JOB})
    return bench.windowed_worker(
        f"1 worker, {'without jobs, ' + commit if commit else 'with jobs'}",
        tag,
        window,
        "FRONTIER_SPARES=32",
        cwd=tree,
        seed=seed,
    )


@contextmanager
def _checkouts(commits: list[str]) -> Iterator[dict[str, Path]]:
    """A detached worktree of each commit under a temporary directory, removed after."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-jobs-"))
    trees: dict[str, Path] = {}
    try:
        for commit in commits:
            # "A+B": commit A with commit B applied on top (not committed), to
            # compare against a baseline that shares a later change unrelated to
            # jobs (3f75895: the scripts sent without their comments).
            base, *extras = commit.split("+")
            path = tmp / commit.replace("+", "_")
            _git(
                ROOT, "worktree", "add", "--detach", str(path), "HEAD" if base == STRIPPED else base
            )
            trees[commit] = path
            if base == STRIPPED:
                strip_jobs(path)
            for extra in extras:
                _git(path, "cherry-pick", "--no-commit", extra)
        yield trees
    finally:
        for path in trees.values():
            _git(ROOT, "worktree", "remove", "--force", str(path))
        shutil.rmtree(tmp, ignore_errors=True)


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def _line(run: CrawlResult) -> str:
    figures = ", ".join(f"{m.fmt.format(m.value(run))} {m.title}" for m in METRICS)
    return f"  {run.name}: {figures}"


def section(result: JobsResult) -> list[str]:
    """The section of docs/BENCHMARKS.md."""
    out = [
        "## Crawl jobs: what they cost per page",
        "",
        "The `worker` phase's one-worker crawl (pinned the same way, same site and settings),"
        f" {result.window:,}-page windows, with jobs (this code, a JSON seed with"
        f' `"job": "{JOB}"`: every request carries the job, every count is kept) and without'
        " (a detached worktree of the commit named, or of this commit with jobs switched off"
        " by `tests/bench/no_jobs.py`, its plain URL seed), alternately in one"
        " run (`tests/bench/jobs.py`). *Ratio* is with / without per round; the target row"
        " is the median.",
    ]
    for commit, described in result.baselines.items():
        pairs = result.of(commit)
        if not pairs:
            continue
        out += [
            "",
            f"Without jobs: `{described}`.",
            "",
            "| Per page | With jobs, median | Without, median | Ratio, median "
            "| With (each round) | Without (each round) | Ratio (each round) |",
            "|---|---:|---:|---:|---|---|---|",
        ]
        for m in METRICS:
            with_ = [m.value(p.with_jobs) for p in pairs]
            without = [m.value(p.without) for p in pairs]
            out.append(
                f"| {m.title} | {m.fmt.format(statistics.median(with_))} "
                f"| {m.fmt.format(statistics.median(without))} "
                f"| {result.median(commit, m):.3f} "
                f"| {', '.join(m.fmt.format(v) for v in with_)} "
                f"| {', '.join(m.fmt.format(v) for v in without)} "
                f"| {', '.join(f'{p.ratio(m):.3f}' for p in pairs)} |"
            )
        diff = [
            f"{cmd.upper()} {w - wo:+.2f}"
            for cmd, w, wo in result.commands(commit)[:8]
            if abs(w - wo) >= 0.01
        ]
        served = ", ".join(f"{p.job_pages:,} of {p.with_jobs.pages_total:,}" for p in pairs)
        other = ", ".join(
            f"{p.with_jobs.other_cores:.2f} / {p.without.other_cores:.2f}" for p in pairs
        )
        trips = ", ".join(
            " / ".join(f"{r.round_trips_per_page or 0:.2f}" for r in (p.with_jobs, p.without))
            for p in pairs
        )
        out += [
            "",
            "- Commands per page, with minus without (mean of the rounds): "
            f"{', '.join(diff) or 'none'}.",
            f"- Round trips per page, with / without, each round: {trips}.",
            f"- Other load (cores taken by processes outside the benchmark), with / without, "
            f"each round: {other}.",
            f"- Pages the job counted (`{JOB}|pages`) of the pages the site served: {served}.",
        ]
    return out


def targets(result: JobsResult) -> list[tuple[str, str, bool | None]]:
    """The rows of the targets table: one per baseline."""
    rows: list[tuple[str, str, bool | None]] = []
    cpu, redis = METRICS[0], METRICS[1]
    for commit in result.baselines:
        if not result.of(commit):
            continue
        worker_ratio = result.median(commit, cpu)
        redis_ratio = result.median(commit, redis)
        rows.append(
            (
                f"Jobs: worker CPU and Redis CPU per page vs no jobs ({commit}) "
                f"≤ +{(TARGET - 1) * 100:.0f}% (issue 27)",
                f"worker {(worker_ratio - 1) * 100:+.1f}%, Redis {(redis_ratio - 1) * 100:+.1f}% "
                f"(medians of {len(result.of(commit))} pairs)",
                worker_ratio <= TARGET and redis_ratio <= TARGET,
            )
        )
    return rows
