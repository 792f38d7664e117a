"""``python -m monitor``: serve the crawler's metrics at http://MONITOR_HOST:MONITOR_PORT/metrics.

Every scrape reads Redis (two pipelined round trips, at most
``MONITOR_REDIS_TIMEOUT`` seconds each, never retried) through the project's
one Redis call path; between scrapes the exporter does nothing. When Redis
does not answer, or answers with an error, the scrape still succeeds, with
``crawler_redis_up 0`` (see :class:`monitor.collector.CrawlerCollector`). The
log has one line when it starts listening, one when Redis answered at start,
one per Redis state change (``Redis connection lost ...``, ``Redis reconnected
at ...``), one per error reply (with its command) and one when it stops.

With ``CONSOLE_REDIS_URL`` (the operator's user) it also finishes jobs when no
worker is left to (``job_looks.py``); its own connection only ever reads.

Exit status: 0 after SIGTERM or SIGINT; 1 when the address cannot be bound,
or when Redis answers but the monitor's user may not read what it reads (one
line naming the command or key: ``acl_check.py``);
2 for bad settings or options.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Sequence

import redis
from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server
from scrapy.settings import Settings

from monitor.collector import CrawlerCollector
from monitor.config import MonitorConfig
from monitor.job_looks import job_looks
from spiders_project.keys import RedisKeys
from spiders_project.process import (
    command_line,
    exit_on_bad_config,
    on_stop_signals,
    redis_calls,
    start,
)
from spiders_project.redis_access.acl import MONITOR
from spiders_project.redis_access.acl_check import permission_problem
from spiders_project.redis_access.connection import RedisConfig
from spiders_project.redis_access.shards import masters_memory_reader, shard_keys_reader

logger = logging.getLogger("monitor")


def main(argv: Sequence[str] | None = None) -> int:
    parser = command_line(
        "python -m monitor", "Prometheus exporter of the crawl's state in Redis (REDIS_URL)."
    )
    _, settings = start("monitor", parser, argv)
    with exit_on_bad_config(logger):
        config = MonitorConfig.from_settings(settings)
        RedisConfig.from_settings(settings)
        # The finish rule when no worker is left to run it (job_looks.py).
        looks = job_looks(settings, config.spiders)

    stop = threading.Event()
    received: list[int] = []

    def on_stop(signum: int) -> None:
        received.append(signum)
        stop.set()

    on_stop_signals(on_stop)
    # The scrape's own timeout, not the workers' REDIS_SOCKET_TIMEOUT: a scrape
    # must answer (with crawler_redis_up 0) before Prometheus gives up on it.
    settings.set("REDIS_SOCKET_TIMEOUT", config.redis_timeout, priority="cmdline")
    # Scrapes never wait on the call path's backoff (they are not retried); its
    # state is here for its log lines, shared with every other process.
    calls = redis_calls(settings, logger)
    client, state = calls.client, calls.state
    collector = CrawlerCollector(
        calls,
        config.spiders,
        worker_retention=config.worker_retention,
        keys_of=shard_keys_reader(settings, calls),
        masters_memory=masters_memory_reader(settings, calls),
    )
    problem = _user_problem(settings, config.spiders)
    if problem is not None:
        logger.error("%s", problem)
        client.close()
        return 1
    registry = CollectorRegistry()
    registry.register(collector)
    ProcessCollector(registry=registry)
    try:
        server, thread = start_http_server(config.port, config.host, registry=registry)
    except OSError as exc:
        logger.error("cannot listen on %s:%d: %s", config.host, config.port, exc)
        client.close()
        return 1
    host, port = server.server_address[:2]
    logger.info(
        "listening on http://%s:%d/metrics (spiders: %s; Redis %s)",
        host,
        port,
        ", ".join(config.spiders),
        state.url,
    )
    # Whether Redis answers now, rather than at the first scrape (the state
    # logs only changes, and starts out assuming Redis is there).
    if collector.read() is not None:
        logger.info("Redis connected at %s", state.url)
    if looks is not None:
        looks.start()
    while not stop.wait(1.0):
        pass
    if looks is not None:
        looks.stop()
    server.shutdown()
    server.server_close()
    thread.join(5)
    client.close()
    logger.info("stopped (%s)", signal.Signals(received[0]).name)
    return 0


def _user_problem(settings: Settings, spiders: Sequence[str]) -> str | None:
    """What the monitor's Redis user lacks (acl_check.py); None too when Redis does
    not answer: the exporter starts anyway and answers ``crawler_redis_up 0``."""
    cluster = RedisConfig.from_settings(settings).cluster
    keys = [RedisKeys(spider, cluster=cluster) for spider in spiders]
    try:
        return permission_problem(settings, MONITOR.name, keys)
    except (redis.RedisError, OSError):
        return None


if __name__ == "__main__":
    sys.exit(main())
