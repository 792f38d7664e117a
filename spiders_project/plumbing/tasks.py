"""asyncio helpers for the worker's background loops, and the rule that none dies silently."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any

from spiders_project.redis_access import RedisUnavailable

logger = logging.getLogger(__name__)

# Exit status of a worker whose background loop ended unexpectedly (EX_SOFTWARE).
LOOP_DIED_EXIT_CODE = 70


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Wait for ``event`` up to ``timeout`` seconds; True if it was set."""
    with contextlib.suppress(asyncio.TimeoutError):
        async with asyncio.timeout(timeout):
            await event.wait()
    return event.is_set()


async def repeat(
    step: Callable[[], Awaitable[None]], interval: float, what: str, log: logging.Logger
) -> None:
    """Run ``step`` every ``interval`` seconds, for as long as the task runs (``spawn_loop``).

    For the loops that read a little of Redis each period (steered hosts, the
    jobs' schedules and states): Redis being unreachable is the call path's to
    log; any other failure is one line ("``what`` failed: ..."), once until it
    changes, and the next period tries again.
    """
    failing = ""
    while True:
        try:
            await step()
        except RedisUnavailable:
            pass  # the call path logs Redis' state changes
        except Exception as exc:  # noqa: BLE001 - the next period tries again
            if repr(exc) != failing:
                log.error("%s failed: %r", what, exc)
            failing = repr(exc)
        else:
            failing = ""
        await asyncio.sleep(interval)


def spawn_loop(name: str, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    """Run a background loop that must only ever end by being cancelled.

    A loop that returns or raises took a piece of the worker with it (the
    refill loop: fetching; the batcher: every write), and the rest of the
    process would carry on, looking alive, doing nothing. That is fatal and
    loud: one line naming the loop and the error, then exit non-zero so that
    supervisor or systemd restarts the worker. Nothing is lost by exiting:
    the worker's leases expire and go back to their queues, and the writes
    still in memory belong to pages that were not acknowledged, so they are
    fetched again.
    """
    task = asyncio.ensure_future(coro)
    task.set_name(name)
    task.add_done_callback(_exit_unless_cancelled)
    return task


def _exit_unless_cancelled(task: asyncio.Task[None]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    reason = f"{type(exc).__name__}: {exc}" if exc is not None else "it returned"
    logger.critical(
        "Background loop %s ended unexpectedly (%s); exiting with status %d so the "
        "supervisor restarts this worker",
        task.get_name(),
        reason,
        LOOP_DIED_EXIT_CODE,
    )
    if exc is not None:
        logger.debug("Traceback of %s", task.get_name(), exc_info=exc)
    logging.shutdown()
    os._exit(LOOP_DIED_EXIT_CODE)


async def stop_tasks(tasks: Iterable[asyncio.Task[None]]) -> None:
    """Cancel ``tasks`` until they are done.

    On Python 3.11 ``asyncio.wait_for`` can swallow a cancellation that
    arrives as its inner wait completes, leaving a loop running; cancelling
    again until the task is really done makes shutdown deterministic. A task
    that swallowed its cancellation and returned is not a loop death: its
    done callback is removed before the first cancel.
    """
    pending = [t for t in tasks if not t.done()]
    for task in pending:
        task.remove_done_callback(_exit_unless_cancelled)
    stopping = list(pending)
    while pending:
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=0.1)
        pending = [t for t in pending if not t.done()]
    for task in stopping:
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            logger.error("Background loop %s failed while stopping: %r", task.get_name(), exc)
