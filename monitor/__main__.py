"""``python -m monitor``: serve the crawler's metrics at http://MONITOR_HOST:MONITOR_PORT/metrics,
and the operators' console at ``/`` when ``CONSOLE_HTPASSWD`` is set (``monitor/console/``).

Every scrape reads Redis (two pipelined round trips, at most
``MONITOR_REDIS_TIMEOUT`` seconds each, never retried) through the project's
one Redis call path; between scrapes the exporter does nothing. When Redis
does not answer, or answers with an error, the scrape still succeeds, with
``crawler_redis_up 0`` (see :class:`monitor.collector.CrawlerCollector`). The
log has one line when it starts listening, one when Redis answered at start,
one per Redis state change (``Redis connection lost ...``, ``Redis reconnected
at ...``), one per error reply (with its command) and one when it stops.

One aiohttp application serves both (``monitor/console/app.py``); scrapes and
the console's reads run in threads, off its event loop.

With ``CONSOLE_REDIS_URL`` (the operator's user) it also finishes jobs when no
worker is left to (``job_looks.py``, a thread); its own connection only ever reads.

Exit status: 0 after SIGTERM or SIGINT; 1 when the address cannot be bound,
or when Redis answers but the monitor's user may not read what it reads (one
line naming the command or key: ``acl_check.py``);
2 for bad settings or options.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Callable, Sequence

import redis
from aiohttp import web
from prometheus_client import CollectorRegistry, ProcessCollector
from scrapy.settings import Settings

from monitor.collector import CrawlerCollector
from monitor.config import ConsoleConfig, MonitorConfig
from monitor.console.actions import Actions, HostDefaults
from monitor.console.app import build_app
from monitor.console.auth import Sessions, Throttle, Users
from monitor.console.host_sweep import HostSweep
from monitor.console.reads import Reads
from monitor.console.state import Console
from monitor.job_looks import job_looks
from spiders_project.keys import RedisKeys
from spiders_project.process import (
    command_line,
    exit_on_bad_config,
    on_stop_signals,
    redis_calls,
    start,
)
from spiders_project.redis_access.acl import MONITOR, OPERATOR
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
        console_config = ConsoleConfig.from_settings(settings)
        RedisConfig.from_settings(settings)
        # The finish rule when no worker is left to run it (job_looks.py).
        looks = job_looks(settings, config.spiders, console_config.redis_url)
    # The console's actions connect with the workers' timeouts, not the scrapes'.
    operator_settings = settings.copy()
    # The scrape's own timeout, not the workers' REDIS_SOCKET_TIMEOUT: a scrape
    # must answer (with crawler_redis_up 0) before Prometheus gives up on it.
    settings.set("REDIS_SOCKET_TIMEOUT", config.redis_timeout, priority="cmdline")
    # Scrapes never wait on the call path's backoff (they are not retried); its
    # state is here for its log lines, shared with every other process.
    calls = redis_calls(settings, logger)
    client, state = calls.client, calls.state
    keys_of = shard_keys_reader(settings, calls)
    masters_memory = masters_memory_reader(settings, calls)
    collector = CrawlerCollector(
        calls,
        config.spiders,
        worker_retention=config.worker_retention,
        keys_of=keys_of,
        masters_memory=masters_memory,
    )
    problem = _user_problem(settings, config.spiders, MONITOR.name)
    if problem is not None:
        logger.error("%s", problem)
        client.close()
        return 1
    registry = CollectorRegistry()
    registry.register(collector)
    ProcessCollector(registry=registry)
    console = None
    if console_config.htpasswd is not None:
        reads = Reads(
            calls,
            config.spiders,
            worker_retention=config.worker_retention,
            keys_of=keys_of,
            masters_memory=masters_memory,
        )
        with exit_on_bad_config(logger):
            console = _console(operator_settings, console_config, reads)
    app = build_app(registry, console)

    def ready(host: str, port: int) -> None:
        logger.info(
            "listening on http://%s:%d/metrics (spiders: %s; Redis %s)",
            host,
            port,
            ", ".join(config.spiders),
            state.url,
        )
        if console is not None:
            actions = "on" if console.actions is not None else "off (no CONSOLE_REDIS_URL)"
            logger.info(
                "console at http://%s:%d%s/ (%d users; operators: %s; actions %s)",
                host,
                port,
                console_config.prefix,
                len(console.users.names),
                ", ".join(sorted(console_config.operators)) or "none",
                actions,
            )
        # Whether Redis answers now, rather than at the first scrape (the state
        # logs only changes, and starts out assuming Redis is there).
        if collector.read() is not None:
            logger.info("Redis connected at %s", state.url)
        if looks is not None:
            looks.start()

    status = asyncio.run(_serve(app, config.host, config.port, ready))
    if looks is not None:
        looks.stop()
    client.close()
    if console is not None and console.actions is not None:
        console.actions.calls.client.close()
    return status


async def _serve(
    app: web.Application, host: str, port: int, ready: Callable[[str, int], None]
) -> int:
    """Serve ``app`` until SIGTERM or SIGINT; 1 if the address cannot be bound."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    received: list[int] = []

    def on_stop(signum: int) -> None:
        received.append(signum)
        loop.call_soon_threadsafe(stop.set)

    on_stop_signals(on_stop)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as exc:
        logger.error("cannot listen on %s:%d: %s", host, port, exc)
        await runner.cleanup()
        return 1
    bound_host, bound_port = runner.addresses[0][:2]
    await asyncio.to_thread(ready, bound_host, bound_port)
    await stop.wait()
    await runner.cleanup()
    logger.info("stopped (%s)", signal.Signals(received[0]).name)
    return 0


def _console(settings: Settings, config: ConsoleConfig, reads: Reads) -> Console:
    """The console's state; its actions on their own Redis connection (the operator's
    user, ``CONSOLE_REDIS_URL``), None without one. Raises ConfigError."""
    assert config.htpasswd is not None
    users = Users(config.htpasswd, config.operators)
    if not users.names:
        logger.warning("console: %s has no bcrypt entry: nobody can log in", config.htpasswd)
    for name in sorted(config.operators - users.names):
        logger.warning("console: operator %s is not in %s", name, config.htpasswd)
    actions = None
    if config.redis_url:
        settings.set("REDIS_URL", config.redis_url, priority="cmdline")
        actions = Actions.from_settings(
            settings, redis_calls(settings, logging.getLogger("monitor.console")), reads.keys_of
        )
        problem = _user_problem(settings, reads.spiders, OPERATOR.name)
        if problem is not None:
            logger.error("console: CONSOLE_REDIS_URL: %s", problem)
    return Console(
        config,
        users,
        Sessions(config.session_idle),
        Throttle(config.login_attempts, config.login_window),
        reads,
        HostDefaults.from_settings(settings),
        actions,
        HostSweep(reads.send, reads.spiders, reads.keys_of, config.host_sweep_rate),
    )


def _user_problem(settings: Settings, spiders: Sequence[str], role: str) -> str | None:
    """What the Redis user of ``settings`` lacks for ``role`` (acl_check.py); None too
    when Redis does not answer: the exporter starts anyway and answers
    ``crawler_redis_up 0``."""
    cluster = RedisConfig.from_settings(settings).cluster
    keys = [RedisKeys(spider, cluster=cluster) for spider in spiders]
    try:
        return permission_problem(settings, role, keys)
    except (redis.RedisError, OSError):
        return None


if __name__ == "__main__":
    sys.exit(main())
