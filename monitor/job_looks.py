"""The finish rule in the monitor: jobs end even when every worker has exited.

The workers find jobs finished (``spiders_project/jobs/finish.py``); a
cluster whose workers close when idle (``MAX_IDLE_TIME_BEFORE_CLOSE`` shorter
than ``JOB_FINISH_GRACE``) has none left to do it. So the monitor runs the
same rule, on its own thread, taking turns with the workers, when it has a
connection that may write: ``CONSOLE_REDIS_URL``, the operator's user, which
the console's actions use too. Without it the monitor writes nothing (its
own user reads only, ``redis_access/acl.py``), says so once at start, and
jobs end only while a worker is up to decide.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from scrapy.settings import Settings

from spiders_project.jobs.config import JobsConfig
from spiders_project.jobs.finish import FinishLooks
from spiders_project.process import redis_calls
from spiders_project.redis_access.shards import shard_keys_reader

logger = logging.getLogger("monitor")


class JobLooks:
    """A thread running :class:`FinishLooks` until :meth:`stop`."""

    def __init__(self, looks: FinishLooks) -> None:
        self.looks = looks
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=looks.run, args=(self._stop,), name="job looks", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop the looks (if they started) and close their connection."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(5)
        self.looks.calls.client.close()


def job_looks(settings: Settings, spiders: Sequence[str], url: str) -> JobLooks | None:
    """The monitor's looks at the jobs of ``spiders``, with the operator's
    connection ``url`` (``CONSOLE_REDIS_URL``), or None without one.
    ``settings`` are the process' own, before the scrapes' timeout replaces the
    workers'. Raises ConfigError (a bad JOB_FINISH_GRACE, JOBS_STATE_INTERVAL)."""
    config = JobsConfig.from_settings(settings)
    if not url:
        logger.info(
            "jobs: no CONSOLE_REDIS_URL, so this monitor finishes no job (its own user "
            "reads only): jobs end while a worker runs to decide"
        )
        return None
    writer = settings.copy()
    writer.set("REDIS_URL", url, priority="cmdline")
    calls = redis_calls(writer, logging.getLogger("monitor.jobs"))
    looks = FinishLooks(
        calls,
        spiders,
        shard_keys_reader(writer, calls),
        look_s=config.finish_look,
        grace_s=config.finish_grace,
        events_max=config.events_max,
    )
    logger.info(
        "jobs: finishing jobs when no worker does, every %.1f s (grace %g s), with "
        "CONSOLE_REDIS_URL's user",
        config.finish_look,
        config.finish_grace,
    )
    return JobLooks(looks)
