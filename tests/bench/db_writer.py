"""db_writer throughput into SQLite and PostgreSQL, through ``spiders_project.db_writer.bench``.

That module pushes N items into the item buffer of a scratch spider, runs the
real db_writer process until the buffer is empty, and prints one line; this one
runs it for each database and reads that line back.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.bench.services import PYTHON, ROOT, Postgres

_LINE = re.compile(
    r"(?P<written>\d+) items -> .*?: (?P<rate>[\d,]+) items/s from the first batch on "
    r"\((?P<steady>[\d.]+) s\); (?P<rate_all>[\d,]+) items/s with process start-up "
    r"\((?P<elapsed>[\d.]+) s\); exit (?P<code>-?\d+)"
)


@dataclass
class WriterResult:
    database: str
    items: int
    items_per_s: float  # from the first committed batch to the empty buffer
    drain_s: float  # process start to empty buffer (start-up included)
    steady_s: float
    exit_code: int
    error: str = ""


def run_writer_bench(database: str, redis_url: str, db_url: str, items: int) -> WriterResult:
    argv = [PYTHON, "-m", "spiders_project.db_writer.bench", "-n", str(items)]
    argv += ["--redis-url", redis_url, "--db-url", db_url]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    match = _LINE.search(done.stdout)
    if match is None:
        tail = (done.stdout + done.stderr)[-1500:]
        return WriterResult(database, 0, 0.0, 0.0, 0.0, done.returncode, tail)
    return WriterResult(
        database,
        int(match["written"]),
        float(match["rate"].replace(",", "")),
        float(match["elapsed"]),
        float(match["steady"]),
        int(match["code"]),
    )


def writer_phase(redis_url: str, items: int, with_postgres: bool = True) -> list[WriterResult]:
    results = []
    with tempfile.TemporaryDirectory(prefix="bench_sqlite_") as tmp:
        db = Path(tmp) / "items.db"
        results.append(run_writer_bench("SQLite", redis_url, f"sqlite:///{db}", items))
    if with_postgres:
        try:
            pg = Postgres()
        except Exception as exc:  # reported in the table, the rest of the bench stands
            results.append(WriterResult("PostgreSQL", 0, 0.0, 0.0, 0.0, -1, str(exc)))
            return results
        try:
            results.append(run_writer_bench("PostgreSQL", redis_url, pg.url, items))
        finally:
            pg.stop()
    return results
