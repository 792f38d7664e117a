"""The internals adapter with real processes: a worker that refuses to start, a driver that dies.

The adapter itself is tested on a real in-process engine in
tests/unit/test_internals.py.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import re

import psutil
import pytest
import scrapy
from playwright.async_api import PlaywrightContextManager

from spiders_project.config import load_settings
from spiders_project.insides import internals
from spiders_project.insides.check import EXIT_INTERNALS_MISSING
from tests.support.processes import worker


@pytest.mark.slow
def test_a_worker_refuses_to_start_without_an_internal(redis_url, tmp_path, procs):
    # tests/support/internals_break.py deletes engine._slot.inprogress before the check runs,
    # as a Scrapy release that renamed it would.
    extensions = dict(load_settings().getdict("EXTENSIONS"))
    extensions["tests.support.internals_break.RemoveInprogress"] = 1
    w = worker("w", redis_url, tmp_path, f"EXTENSIONS={json.dumps(extensions)}")
    procs.append(w)
    assert w.wait(60) == EXIT_INTERNALS_MISSING
    log = w.log()
    critical = [line for line in log.splitlines() if "CRITICAL" in line]
    assert len(critical) == 1, log[-3000:]
    assert re.search(
        rf"Refusing to start: Scrapy {re.escape(scrapy.__version__)} has no "
        r"ExecutionEngine\._slot\.inprogress; this worker supports scrapy==\S+ "
        r"\(requirements\.txt\)$",
        critical[0],
    )
    assert "Traceback" not in log
    assert "Spider closed" not in log  # it never ran


def test_a_dead_driver_is_reported_and_its_error_read(caplog):
    """on_driver_exit on a real Playwright driver (no browser), then the driver is killed."""
    calls: list[str] = []

    async def run() -> None:
        before = {child.pid for child in psutil.Process().children(recursive=True)}
        manager = PlaywrightContextManager()
        playwright = await manager.start()
        exited = asyncio.Event()

        def on_exit() -> None:
            calls.append("exit")
            exited.set()

        internals.on_driver_exit(playwright, manager, on_exit)
        driver = [
            child for child in psutil.Process().children(recursive=True) if child.pid not in before
        ]
        assert driver, "the driver did not start a process"
        for process in driver:
            process.kill()
        await asyncio.wait_for(exited.wait(), 20)
        await manager.__aexit__()

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(run())
        gc.collect()  # an unread future's error is logged when it is collected
    assert calls == ["exit"]
    assert "never retrieved" not in caplog.text
