"""Small asyncio helpers for the worker's background loops."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Wait for ``event`` up to ``timeout`` seconds; True if it was set."""
    with contextlib.suppress(asyncio.TimeoutError):
        async with asyncio.timeout(timeout):
            await event.wait()
    return event.is_set()


async def stop_tasks(tasks: Iterable[asyncio.Task[None]]) -> None:
    """Cancel ``tasks`` until they are done.

    On Python 3.11 ``asyncio.wait_for`` can swallow a cancellation that
    arrives as its inner wait completes, leaving a loop running; cancelling
    again until the task is really done makes shutdown deterministic.
    """
    pending = [t for t in tasks if not t.done()]
    while pending:
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=0.1)
        pending = [t for t in pending if not t.done()]
