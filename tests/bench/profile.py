"""Where Redis spends its time per crawled page: per script, per command.

``python -m tests.bench.profile [--pages N] [--window N] [--rounds N] [--against C,...]``

Issue 29 asks to measure before cutting: which script costs how many µs a page.
``INFO commandstats`` gives one total for all of EVAL and one for EVALSHA, so
this runs the ``worker`` phase's one-worker crawl (same pinning, site and
settings as ``make bench``) with Redis' SLOWLOG recording every command
(``slowlog-log-slower-than 0``) and groups the entries: a script by the file
it was loaded from (its SHA, or the start of its source for EVAL), any other
command by name. Each crawl is profiled whole, from its seed to its exit
after ``--window`` pages.

What the figures mean:

- a script's µs include the commands it runs, and Redis 7 also logs those
  commands one by one, so each of them appears again under its own name:
  the rows do not add up, and logging every command makes each script slower
  than without the profile (by about 0.3 µs per command it runs). Compare
  rows between commits profiled in the same run, not with ``make bench``'s
  Redis CPU, which includes reading and writing the sockets;
- ``--job J`` seeds this checkout's crawl as crawl job J (a JSON seed), so
  that ``--against stripped`` (tests/bench/no_jobs.py) shows what jobs cost;
- ``--against C`` profiles, alternately with this checkout, a detached
  worktree of commit C (``A+B``: A with B applied), as the ``jobs`` phase does.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from tests.bench.crawls import Bench, pin_apart
from tests.bench.jobs import _checkouts
from tests.bench.site_proc import Site
from tests.support.processes import ROOT
from tests.support.services import RedisServer

SLOWLOG_ENTRIES = 2_000_000
# Each script of a tree, by name, as its own loader sends it.
_SOURCES = """
import pathlib, sys
from spiders_project.redis_access.lua import load_lua
for path in sorted(pathlib.Path("spiders_project").rglob("*.lua")):
    script = load_lua(path.parent.resolve(), path.stem)
    sys.stdout.buffer.write(path.stem.encode() + b"\\0" + script.source.encode() + b"\\0\\0")
"""


def run_in_tree(tree: Path, code: str) -> bytes:
    """What ``code`` prints, run by this Python in the checkout at ``tree`` (its
    own modules imported, not this checkout's)."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        check=True,
    ).stdout


def sources(tree: Path) -> list[tuple[str, bytes]]:
    """(script name, source) of each script, as ``tree``'s loader makes it; two
    scripts may share a name (the frontier's ack and the db_writer's)."""
    scripts = []
    for chunk in run_in_tree(tree, _SOURCES).split(b"\0\0"):
        if chunk:
            name, source = chunk.split(b"\0", 1)
            scripts.append((name.decode(), source))
    return scripts


def script_names(tree: Path) -> dict[str, str]:
    """SHA (Redis': the source's SHA-1), and the first 100 characters of the
    source (EVAL), -> script name."""
    names: dict[str, str] = {}
    for name, source in sources(tree):
        names[hashlib.sha1(source).hexdigest()] = name
        names[source.decode()[:100]] = name
    return names


def grouped(entries: list, names: dict[str, str]) -> dict[str, tuple[int, int]]:
    """SLOWLOG entries -> {row: (calls, µs)}; a script's row is "EVAL <name>"."""
    rows: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for entry in entries:
        args = [a.decode(errors="replace") if isinstance(a, bytes) else str(a) for a in entry[3]]
        row = args[0].upper()
        if row in ("EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO") and len(args) > 1:
            row = "script " + names.get(args[1], names.get(args[1][:100], args[1][:12]))
        rows[row][0] += 1
        rows[row][1] += int(entry[2])
    return {row: (calls, us) for row, (calls, us) in rows.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.profile", description=__doc__)
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--window", type=int, default=6_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--against", default="", help="commits, comma-separated")
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument(
        "--workers", type=int, default=1, help="workers crawling at once, on the same crawl CPU"
    )
    parser.add_argument(
        "--job", default="", help="seed this checkout's crawl as a JSON seed of this crawl job"
    )
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp/bench-profile"))
    args = parser.parse_args(argv)
    args.log_dir.mkdir(parents=True, exist_ok=True)
    crawl_cpus, service_cpus = pin_apart()
    redis = RedisServer(datadir=args.log_dir / "redis", cpus=service_cpus)
    commits = [c for c in args.against.split(",") if c]
    # (side, row) -> per-round µs/page and calls/page
    table: dict[tuple[str, str], list[tuple[float, float]]] = collections.defaultdict(list)
    site = None
    try:
        site = Site(args.pages, args.log_dir, service_cpus)
        bench = Bench(site, redis, args.log_dir, crawl_cpus, service_cpus)
        client = redis.client
        client.config_set("slowlog-max-len", SLOWLOG_ENTRIES)
        with _checkouts(commits) as worktrees:
            trees: dict[str, Path] = {"this": ROOT, **worktrees}
            names = {side: script_names(tree) for side, tree in trees.items()}
            sides = list(trees)
            for n in range(args.rounds):
                for side in sides[n % len(sides) :] + sides[: n % len(sides)]:
                    client.config_set("slowlog-log-slower-than", 0)
                    client.slowlog_reset()
                    run = bench.windowed_worker(
                        f"profile {side}",
                        f"profile-{side.replace('+', '_')}-{n}",
                        args.window,
                        cwd=trees[side],
                        seed=json.dumps({"url": site.url, "job": args.job})
                        if args.job and side == "this"
                        else None,
                        workers=args.workers,
                    )
                    client.config_set("slowlog-log-slower-than", -1)
                    entries = client.execute_command("SLOWLOG", "GET", "-1")
                    pages = max(1, run.pages_total)
                    for row, (calls, us) in grouped(entries, names[side]).items():
                        table[(side, row)].append((us / pages, calls / pages))
                    # Redis' own CPU (INFO) over the window, socket reads and
                    # writes included, which SLOWLOG does not time.
                    table[(side, "Redis CPU, INFO")].append(
                        (100 * (run.redis_cpu_per_10k or 0.0), 0.0)
                    )
                    print(
                        f"round {n + 1}, {side}: {pages:,} pages, {len(entries):,} commands, "
                        f"{run.pages_per_s:,.0f} pages/s"
                    )
        report(table, sides, args.rows)
    finally:
        if site is not None:
            site.stop()
        redis.stop()


def report(
    table: dict[tuple[str, str], list[tuple[float, float]]], sides: list[str], top: int
) -> None:
    """One row per script or command, µs and calls per page (medians of the rounds)."""

    def med(side: str, row: str, i: int) -> float:
        values = table.get((side, row))
        return statistics.median(v[i] for v in values) if values else 0.0

    rows = sorted({row for _, row in table}, key=lambda r: -med(sides[0], r, 0))[:top]
    head = "".join(f" | {side} µs/page | calls/page" for side in sides)
    print(f"| Script or command{head} |")
    print("|---" + "|---:|---:" * len(sides) + "|")
    for row in rows:
        cells = "".join(f" | {med(s, row, 0):.2f} | {med(s, row, 1):.3f}" for s in sides)
        print(f"| {row}{cells} |")


if __name__ == "__main__":
    main()
