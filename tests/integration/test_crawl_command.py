"""``scrapy crawl`` refuses what it cannot honour before anything starts."""

from __future__ import annotations

import os
import subprocess

from spiders_project.insides.scrapy_redis_compat import UNSUPPORTED_SETTINGS
from tests.support.processes import PYTHON, ROOT
from tests.support.services import free_port


def test_scrapy_crawl_refuses_an_unhonoured_setting_with_one_line() -> None:
    # Checked before Redis is contacted: nothing listens on this port.
    env_url = f"redis://127.0.0.1:{free_port()}/0"
    done = subprocess.run(
        [PYTHON, "-m", "scrapy", "crawl", "distributed", "-s", "SCHEDULER_IDLE_BEFORE_CLOSE=5"],
        cwd=ROOT,
        env={**os.environ, "REDIS_URL": env_url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
    assert errors == [
        "ERROR: SCHEDULER_IDLE_BEFORE_CLOSE is a scrapy-redis setting this project ignores: "
        + UNSUPPORTED_SETTINGS["SCHEDULER_IDLE_BEFORE_CLOSE"]
    ]
