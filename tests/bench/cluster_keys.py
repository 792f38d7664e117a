"""Which keys a crawl writes on each master of a Redis Cluster, per page (issue 42, item 1).

Issue 42 asks that no key of the spider's own slot be written per page: a
page's items, page-state entries and ack go to its host's shard, so N
masters carry N times one master's pages. Redis CPU per master says how much
lands where, not what; this says what. Each master publishes a keyspace
notification for every write to one of its keys (``notify-keyspace-events
KA``: every write command, scripts' and MULTI's included, no misses), and one
subscriber per master counts them by key and event during a crawl of the
cluster phase's site. Keys are shown in shapes: outside the hash tag, runs of
digits become ``#`` (a worker's pid, a host's port, a seed's id).

Notifications cost the masters CPU, so this crawl is an extra one, after the
measured one (``python -m tests.bench.cluster --watch-keys``).
"""

from __future__ import annotations

import csv
import re
import subprocess
import time
from collections import Counter
from pathlib import Path

from spiders_project.keys import RedisKeys, key_slot
from tests.bench.crawls import Bench
from tests.support.services import RedisServer

CHANNEL = "__keyspace@0__:"
_DIGITS = re.compile(r"\d+")
_ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')


def shape(key: str) -> str:
    """``key`` with digit runs outside its hash tag made ``#``."""
    start, end = key.find("{"), key.find("}")
    if 0 <= start < end:
        head, tag, tail = key[:start], key[start : end + 1], key[end + 1 :]
        return _DIGITS.sub("#", head) + tag + _DIGITS.sub("#", tail)
    return _DIGITS.sub("#", key)


class KeyWrites:
    """Writes per (key shape, event, slot) on each of ``nodes``, from keyspace
    notifications: one ``redis-cli --csv psubscribe`` per node, its lines kept in
    ``log_dir`` and read once it stops."""

    def __init__(self, nodes: list[RedisServer], log_dir: Path) -> None:
        self.nodes = nodes
        self.paths = [log_dir / f"keyspace-{node.port}.csv" for node in nodes]
        self.counts: list[Counter[tuple[str, str, int]]] = [Counter() for _ in nodes]
        # Every command the first node ran (MONITOR: reads too, and scripts' own calls),
        # by (command, key shape), for keys in ``home_slot``.
        self.monitor_path = log_dir / f"monitor-{nodes[0].port}.txt"
        self.home_calls: Counter[tuple[str, str]] = Counter()
        self._procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> KeyWrites:
        for node, path in zip(self.nodes, self.paths, strict=True):
            node.client.config_set("notify-keyspace-events", "KA")
            with path.open("wb") as sink:
                argv = ["redis-cli", "--csv", "-p", str(node.port), "psubscribe", f"{CHANNEL}*"]
                self._procs.append(subprocess.Popen(argv, stdout=sink))
        with self.monitor_path.open("wb") as sink:
            argv = ["redis-cli", "-p", str(self.nodes[0].port), "monitor"]
            self._procs.append(subprocess.Popen(argv, stdout=sink))
        time.sleep(0.5)  # subscribed before the crawl starts
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(0.5)  # the last notifications read
        for proc in self._procs:
            proc.terminate()
            proc.wait(10)
        for node, path, counts in zip(self.nodes, self.paths, self.counts, strict=True):
            node.client.config_set("notify-keyspace-events", "")
            for row in csv.reader(path.read_text(errors="replace").splitlines()):
                if len(row) == 4 and row[0] == "pmessage":
                    key = row[2][len(CHANNEL) :]
                    counts[(shape(key), row[3], key_slot(key))] += 1

    def read_monitor(self, slot: int) -> None:
        """Fill ``home_calls`` from the first node's MONITOR lines, keys of ``slot`` only."""
        for line in self.monitor_path.read_text(errors="replace").splitlines():
            args = [a.encode().decode("unicode_escape", "replace") for a in _ARG.findall(line)]
            if not args:
                continue
            for key in {a for a in args[1:] if "{" in a and key_slot(a) == slot}:
                self.home_calls[(args[0].upper(), shape(key))] += 1


def watched_crawl(
    on: Bench, keys: RedisKeys, order: list[RedisServer], window: int, seeds: list[str]
) -> list[Counter[tuple[str, str, int]]]:
    """The cluster phase's crawl once more (the spider of ``keys``), its writes counted
    per master (``order``: the spider's own master first); prints each master's writes
    per page, and every command on the spider's own slot."""
    home = key_slot(keys.prefix)
    with KeyWrites(order, on.log_dir) as writes:
        crawl = on.run(
            "watched",
            lambda: [
                on.worker("worker-watched", "MAX_IDLE_TIME_BEFORE_CLOSE=2", cpus=on.crawl_cpus)
            ],
            window=window,
            seed_key=keys.start_urls,
            seed=seeds,
        )
    pages = max(1, crawl.pages_total)
    writes.read_monitor(home)
    print(f"master 1, every command on the spider's own slot ({home}), per page:")
    for (command, key), n in writes.home_calls.most_common(30):
        print(f"  {n / pages:8.3f}  {n:7d}  {command:12s} {key}")
    for i, counts in enumerate(writes.counts, 1):
        total = sum(counts.values())
        print(f"master {i}: {total / pages:.2f} writes/page over {pages} pages (whole crawl)")
        for (key, event, slot), n in counts.most_common(40):
            mark = "  SPIDER'S OWN SLOT" if slot == home else ""
            print(f"  {n / pages:8.3f}  {n:7d}  {event:12s} {key}{mark}")
    return writes.counts
