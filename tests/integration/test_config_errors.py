"""A bad setting gives one line naming it and exit status 2, at every entry point.

Environment values are parsed where settings are read (never at import), by
typed configs that name the offending setting. Nothing here reaches Redis:
each process must refuse before connecting.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.support.processes import PYTHON, ROOT
from tests.support.services import free_port

SCRAPY = [PYTHON, "-m", "scrapy"]
ENTRY_POINTS = {
    "worker": [*SCRAPY, "crawl", "distributed"],
    "db_writer": [PYTHON, "-m", "spiders_project.db_writer"],
    "deadletters": [*SCRAPY, "deadletters", "list"],
    "crawlstatus": [*SCRAPY, "crawlstatus", "--once"],
    "dupefilter": [*SCRAPY, "dupefilter", "migrate"],
    "monitor": [PYTHON, "-m", "monitor"],
}


def run(argv: list[str], env: dict[str, str], tmp_path) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "DB_"))}
    return subprocess.run(
        argv,
        cwd=ROOT,
        env={
            **base,
            "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",  # nothing listens
            "DB_URL": f"sqlite:///{tmp_path / 'items.db'}",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_one_line_naming(done: subprocess.CompletedProcess[str], name: str) -> None:
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "Traceback" not in output, output
    naming = [line for line in output.splitlines() if name in line]
    assert len(naming) == 1, output
    assert "ERROR" in naming[0], naming


@pytest.mark.parametrize(
    ("entry", "name", "value"),
    [
        ("worker", "CONCURRENT_REQUESTS", "abc"),
        ("worker", "DOWNLOAD_DELAY", "soon"),
        ("worker", "REDIS_URL", "nonsense"),
        ("worker", "ROBOTSTXT_OBEY", "maybe"),
        ("worker", "RENDER_CONCURRENCY", "0"),
        ("worker", "DUPEFILTER_MODE", "fuzzy"),
        ("worker", "DUPEFILTER_ERROR_RATE", "2"),
        ("worker", "REDIS_CLUSTER", "maybe"),
        ("worker", "FRONTIER_SHARDS", "many"),
        ("worker", "FRONTIER_SHARDS", "2"),  # more than 1 needs a Redis Cluster
        ("worker", "COOKIES_PUBLIC_SUFFIX_LIST", "/nonexistent/public_suffix_list.dat"),
        ("dupefilter", "DUPEFILTER_MODE", "fuzzy"),
        ("dupefilter", "REDIS_URL", "nonsense"),
        ("db_writer", "DB_WRITER_BATCH_SIZE", "abc"),
        ("db_writer", "REDIS_URL", "nonsense"),
        ("db_writer", "LOG_LEVEL", "LOUD"),
        ("deadletters", "REDIS_URL", "nonsense"),
        ("crawlstatus", "REDIS_URL", "nonsense"),
        ("crawlstatus", "MONITOR_SPIDERS", ""),
        ("monitor", "MONITOR_PORT", "abc"),
        ("monitor", "REDIS_URL", "nonsense"),
        ("monitor", "LOG_LEVEL", "LOUD"),
    ],
)
def test_a_bad_environment_value_is_one_line_and_status_2(entry, name, value, tmp_path):
    assert_one_line_naming(run(ENTRY_POINTS[entry], {name: value}, tmp_path), name)


@pytest.mark.parametrize(
    ("entry", "name", "value"),
    [
        ("worker", "FRONTIER_LEASE_TIMEOUT", "0"),  # used to make the lease loop spin
        ("worker", "STATS_PUBLISH_INTERVAL", "often"),
        ("worker", "HOST_STEERING_INTERVAL", "5"),  # a change must reach workers in 2 s
        ("crawlstatus", "STATS_WORKER_RETENTION", "abc"),
        ("monitor", "MONITOR_REDIS_TIMEOUT", "0"),
        ("monitor", "STATS_WORKER_RETENTION", "-1"),
    ],
)
def test_a_bad_command_line_setting_is_one_line_and_status_2(entry, name, value, tmp_path):
    argv = [*ENTRY_POINTS[entry], "-s", f"{name}={value}"]
    assert_one_line_naming(run(argv, {}, tmp_path), name)


def test_a_password_in_a_bad_redis_url_is_never_shown(tmp_path):
    done = run(ENTRY_POINTS["db_writer"], {"REDIS_URL": "redis://:s3cret@h:99999999/0"}, tmp_path)
    assert_one_line_naming(done, "REDIS_URL")
    assert "s3cret" not in done.stdout + done.stderr
