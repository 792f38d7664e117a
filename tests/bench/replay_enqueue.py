"""Replay a capture's enqueue calls through each tree's own ``enqueue_call``.

    python -m tests.bench.replay_enqueue FILE TREE [TREE ...] [--rounds 4]

``replay run --only enqueue`` sends the captured arguments as they are, so
every tree must take the same arguments. This one reads the requests out of
each captured enqueue call (either argument layout: six a request, or links
as three and the rest as seven, 216ec01 on), builds the call again with the
tree's own ``runtime.calls.enqueue_call`` and runs it against the tree's
``enqueue.lua``, on a fresh redis-server pinned to CPU 1. Each tree runs in a
process of its own (its modules, not this checkout's), once per round,
alternately; it prints Redis' own µs a link (``INFO commandstats``: wall time
inside the command, so other load shows; compare minima and medians).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

MODULE = Path(__file__).resolve()


def requests_of(argv: list[bytes]) -> tuple[bytes, bytes, list[tuple[Any, ...]]]:
    """(now, seen mode, requests) of one enqueue call's arguments, either layout."""
    now, seen, h = argv[0], argv[1], int(argv[3])
    hosts = [host.decode() for host in argv[4 : 4 + h]]
    rest = argv[4 + h :]

    def host(index: bytes) -> str:
        return hosts[int(index) - 1] if int(index) else ""

    try:
        full = int(rest[0])
    except ValueError:  # six arguments a request: (fp, priority, payload, index, seed, wait)
        return (
            now,
            seen,
            [
                (host(i), fp, int(p), payload, seed, int(w))
                for fp, p, payload, i, seed, w in zip(*[iter(rest)] * 6, strict=True)
            ],
        )
    septuples = list(zip(*[iter(rest[1 : 1 + 7 * full])] * 7, strict=True))
    links = iter(zip(*[iter(rest[1 + 7 * full :])] * 3, strict=True))
    out: list[tuple[Any, ...]] = []
    for position, fp, p, payload, i, seed, w in septuples:
        while len(out) < int(position):  # the links before this request's place
            link_fp, link_payload, link_i = next(links)
            out.append((host(link_i), link_fp, 0, link_payload))
        out.append((host(i), fp, int(p), payload, seed, int(w)))
    out += [(host(i), fp, 0, payload) for fp, payload, i in links]
    return now, seen, out


def one_tree(tree: Path, capture: Path) -> float:
    """In ``tree``'s modules: Redis µs a link over the capture's enqueue calls."""
    # The tree's modules first, and not this file's folder (run as a script,
    # its sibling modules would shadow others: profile.py, the stdlib's).
    sys.path[:] = [str(tree), *(p for p in sys.path if Path(p or ".").resolve() != MODULE.parent)]
    import redis

    from spiders_project.frontier.calls import enqueue_call
    from spiders_project.frontier.scripts import FrontierScripts
    from spiders_project.keys import RedisKeys
    from tests.bench.replay import commands, names_file
    from tests.support.services import RedisServer, pin

    names = json.loads(names_file(capture).read_text())
    calls, links = [], 0
    for _, args in commands(capture):
        if args[0].upper() != b"EVALSHA" or names.get(args[1].decode()) != "enqueue":
            continue
        count = int(args[2])
        now, seen, requests = requests_of(args[3 + count :])
        links += len(requests)
        _, argv = enqueue_call(RedisKeys("replay"), requests, seen=seen.decode(), now=now.decode())
        calls.append((args[3 : 3 + count], argv))  # the captured keys: the same in any layout
    pin(os.getpid(), {0})
    server = RedisServer(cpus={1})
    client = redis.Redis(port=server.port)
    try:
        sha = client.script_load(FrontierScripts().enqueue.source)
        client.config_resetstat()
        for keys, argv in calls:
            client.evalsha(sha, len(keys), *keys, *argv)
        usec = int(client.info("commandstats")["cmdstat_evalsha"]["usec"])
    finally:
        client.close()
        server.stop()
    return usec / max(links, 1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:  # a child: one tree, one round
        print(one_tree(args.trees[0].resolve(), args.file.resolve()))
        return
    got: dict[Path, list[float]] = {tree: [] for tree in args.trees}
    for n in range(args.rounds):
        for tree in args.trees:
            out = subprocess.run(
                [sys.executable, str(MODULE), str(args.file), str(tree), "--one"],
                cwd=tree,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            got[tree].append(float(out.split()[-1]))
            print(f"round {n + 1} {tree}: {got[tree][-1]:.2f} µs a link", flush=True)
    for tree, values in got.items():
        print(
            f"{tree}: enqueue, Redis µs a link, median {statistics.median(values):.2f},"
            f" min {min(values):.2f} ({len(values)} rounds)"
        )


if __name__ == "__main__":
    main()
