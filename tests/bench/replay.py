"""Replay a captured crawl's Redis commands against the scripts of several trees.

    python -m tests.bench.replay capture FILE [--pages 3000] [--job ID]
    python -m tests.bench.replay run FILE TREE [TREE ...] [--rounds 4] [--only enqueue]

Issue 29 asks to measure before cutting, and a crawl is a poor instrument for
a change of a few percent to one script: two crawls of the same code scatter
by ±10% of Redis CPU a page on this VM. A replay holds everything but the
scripts still:

- ``capture`` runs ``make bench``'s one-worker crawl (same pinning, site and
  settings) for ``--pages`` pages with ``redis-cli monitor`` recording every
  command the processes sent (commands run inside scripts are left out);
  ``--job ID`` seeds it as that crawl job, so every request carries it (a
  stripped tree, ``tests/bench/no_jobs.py``, then shows what jobs cost);
- ``run`` sends those commands again, in order and at their own pace (the
  scripts read Redis' clock: a turn, a lease deadline, a host's ready time),
  to a fresh redis-server pinned to CPU 1, once per tree and round,
  alternately. Each EVALSHA goes to the same script of that tree (loaded by
  the tree's own loader), so the trees must share the scripts' arguments.
  It prints Redis' own time in EVALSHA and EXEC (``INFO commandstats``):
  the write tick's scripts (enqueue, ack) run inside EXEC, the lease calls
  outside, so EVALSHA minus EXEC is about the lease script's time.
  ``--only NAME`` replays that script's calls alone, as fast as they go
  (enqueue's do not depend on the others' or on time), per call.

Redis' time is wall time inside the command, so other load on CPU 1 shows
in it: compare the trees' medians over rounds run alternately.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import redis

from tests.bench.crawls import Bench
from tests.bench.profile import script_names, sources
from tests.bench.site_proc import Site
from tests.support.processes import ROOT
from tests.support.services import RedisServer, pin

_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "a": b"\a", "b": b"\b", '"': b'"', "\\": b"\\"}
_LINE = re.compile(r"^(\d+\.\d+) \[\d+ ([^\]]+)\] (.*)$")
# Not the crawl's: the benchmark's own reads, and connection set-up.
_SKIP = {
    *(b"MONITOR", b"SCRIPT", b"CLIENT", b"HELLO", b"SELECT"),
    *(b"INFO", b"CONFIG", b"MEMORY", b"SCAN"),
}


def monitor_args(line: str) -> list[bytes]:
    """The arguments of one MONITOR line's command, unescaped (sdscatrepr's format)."""
    out, i = [], 0
    while i < len(line):
        if line[i] == " ":
            i += 1
            continue
        i += 1  # the opening quote
        arg = bytearray()
        while line[i] != '"':
            if line[i] == "\\":
                if line[i + 1] == "x":
                    arg.append(int(line[i + 2 : i + 4], 16))
                    i += 4
                else:
                    arg += _ESCAPES[line[i + 1]]
                    i += 2
            else:
                arg += line[i].encode("latin-1")
                i += 1
        out.append(bytes(arg))
        i += 1
    return out


def commands(capture: Path) -> Iterator[tuple[float, list[bytes]]]:
    """(time, arguments) of each command a process sent, in order."""
    with open(capture, encoding="latin-1") as lines:
        for line in lines:
            match = _LINE.match(line.rstrip("\n"))
            if match and match.group(2) != "lua":
                args = monitor_args(match.group(3))
                if args[0].upper() not in _SKIP:
                    yield float(match.group(1)), args


def names_file(capture_file: Path) -> Path:
    """Where a capture keeps its scripts' names by SHA: the trees it is replayed
    with may have other SHAs, and this checkout may have changed since."""
    return capture_file.with_name(capture_file.name + ".scripts.json")


def capture(out: Path, pages: int, log_dir: Path, job: str | None = None) -> None:
    names_file(out).write_text(json.dumps(script_names(ROOT)))
    pin(os.getpid(), {1})
    server = RedisServer(datadir=log_dir / "redis", cpus={1})
    site = Site(max(16_000, 2 * pages), log_dir, {1})
    with open(out, "wb") as sink:
        monitor = subprocess.Popen(["redis-cli", "-p", str(server.port), "monitor"], stdout=sink)
        try:
            seed = json.dumps({"url": site.url, "job": job}) if job else None
            bench = Bench(site, server, log_dir, {0}, {1})
            bench.windowed_worker("captured", "capture", pages, seed=seed)
        finally:
            monitor.terminate()
            monitor.wait()
            site.stop()
            server.stop()


def replay(
    cmds: list[tuple[float, list[bytes]]], tree: Path, names: dict[str, str], paced: bool
) -> dict[str, int]:
    """One replay with ``tree``'s scripts: Redis' µs in EVALSHA and EXEC, and calls."""
    server = RedisServer(cpus={1})
    client = redis.Redis(port=server.port)
    try:
        shas = {name: client.script_load(src) for name, src in sources(tree)}
        client.config_resetstat()
        start, first = time.monotonic(), cmds[0][0]
        for at, args in cmds:
            if args[0].upper() == b"EVALSHA":
                name = names.get(args[1].decode(), "")
                args = [args[0], shas.get(name, args[1]), *args[2:]]
            ahead = (at - first) - (time.monotonic() - start)
            if paced and ahead > 0.002:
                time.sleep(ahead)
            try:
                client.execute_command(*args)
            except redis.ResponseError:
                pass  # as it was for the crawl (a NOSCRIPT, a refused write)
        stats = client.info("commandstats")
    finally:
        client.close()
        server.stop()
    return {
        key: int(stats.get(f"cmdstat_{cmd}", {}).get(field, 0))
        for key, cmd, field in (
            ("evalsha", "evalsha", "usec"),
            ("exec", "exec", "usec"),
            ("calls", "evalsha", "calls"),
        )
    }


def run(capture_file: Path, trees: list[Path], rounds: int, only: str | None) -> None:
    names = json.loads(names_file(capture_file).read_text())
    cmds = list(commands(capture_file))
    if only:
        cmds = [
            c for c in cmds if c[1][0].upper() == b"EVALSHA" and names.get(c[1][1].decode()) == only
        ]
    pin(os.getpid(), {0})
    got: dict[Path, list[dict[str, int]]] = {tree: [] for tree in trees}
    for n in range(rounds):
        for tree in trees:
            result = replay(cmds, tree, names, paced=not only)
            got[tree].append(result)
            print(f"round {n + 1} {tree}: {result}", flush=True)
    for tree, results in got.items():
        if only:
            per_call = [r["evalsha"] / max(1, r["calls"]) for r in results]
            print(
                f"{tree}: {only} µs a call, median {statistics.median(per_call):.0f}, "
                f"min {min(per_call):.0f}"
            )
            continue
        evalsha = statistics.median(r["evalsha"] for r in results)
        outside = statistics.median(r["evalsha"] - r["exec"] for r in results)
        print(
            f"{tree}: Redis µs, medians of {rounds}: EVALSHA {evalsha:.0f}, "
            f"EXEC {statistics.median(r['exec'] for r in results):.0f}, "
            f"EVALSHA outside EXEC {outside:.0f}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.replay", description=__doc__)
    parser.add_argument("mode", choices=("capture", "run"))
    parser.add_argument("file", type=Path)
    parser.add_argument("trees", nargs="*", type=Path)
    parser.add_argument("--pages", type=int, default=3_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--only", help="one script's calls alone, unpaced")
    parser.add_argument("--job", help="capture: the seed carries this crawl job")
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp/bench-replay"))
    args = parser.parse_args(argv)
    if args.mode == "capture":
        args.log_dir.mkdir(parents=True, exist_ok=True)
        capture(args.file, args.pages, args.log_dir, args.job)
    else:
        run(args.file, args.trees or [ROOT], args.rounds, args.only)


if __name__ == "__main__":
    main()
