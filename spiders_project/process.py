"""How a process of the project starts: its command line, settings, logging and stop signals.

The db_writer and the monitor (``python -m ...``) start the same way, so they
do it here, once:

- :func:`command_line`: an ``ArgumentParser`` that takes ``-s NAME=VALUE``
  (repeatable), as ``scrapy crawl`` does;
- :func:`start`: parse it, load the settings of the project it runs in
  (:func:`project_settings`) with those overrides on top, and log to stderr
  at ``LOG_LEVEL`` in Scrapy's format (a bad LOG_LEVEL is one line and exit
  status 2, before logging exists);
- :func:`exit_on_bad_config`: any other bad setting is one log line and exit
  status 2, before anything is connected;
- :func:`redis_calls`: the blocking Redis call path on ``REDIS_URL``;
- :func:`on_stop_signals`: SIGTERM and SIGINT request a stop; with
  ``second_kills`` a second one ends the process at once.

The demo takes its command line and its stop signals from here too (it
prints instead of logging, and has no ``-s``). Base layer: it imports no
Scrapy component, so the monitor can use it.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any

from scrapy.settings import Settings
from scrapy.utils.project import get_project_settings

from spiders_project.addon.defaults import apply_defaults
from spiders_project.config import (
    CONFIG_EXIT_STATUS,
    ConfigError,
    add_settings_option,
    exit_on_config_error,
    log_level,
    parse_overrides,
)
from spiders_project.redis_access import RedisState, SyncRedisCalls
from spiders_project.redis_access.connection import sync_client

LOG_FORMAT = "%(asctime)s [%(name)s] %(levelname)s: %(message)s"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def command_line(
    prog: str, description: str, *, settings_option: bool = True
) -> argparse.ArgumentParser:
    """The parser of ``python -m <prog>``, with ``-s NAME=VALUE`` unless told otherwise."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    if settings_option:
        add_settings_option(parser)
    return parser


def start(
    name: str, parser: argparse.ArgumentParser, argv: Sequence[str] | None
) -> tuple[argparse.Namespace, Settings]:
    """Parse ``argv`` (``args.overrides``: the ``-s`` pairs as a dict), load settings, log.

    A malformed ``-s`` pair is a usage error (exit 2, from argparse); a bad
    LOG_LEVEL is the line ``<name>: ERROR: ...`` and exit 2.
    """
    args = parser.parse_args(argv)
    args.overrides = parse_overrides(parser, args.overrides)
    settings = project_settings(args.overrides)
    with exit_on_config_error(name):
        level = log_level(settings)
    logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr)
    return args, settings


def project_settings(overrides: Mapping[str, Any] | None = None) -> Settings:
    """The settings of the Scrapy project this process runs in, as ``scrapy crawl`` reads
    them there (scrapy.cfg, or SCRAPY_SETTINGS_MODULE), with the add-on's defaults and
    the environment ranked as for a worker (spiders_project/addon/defaults.py), and
    ``overrides`` (``-s``) on top.

    The add-on's defaults apply whether the project names it or not: these
    processes are the cluster's own. Its components are a crawler's only.
    """
    settings = get_project_settings()
    apply_defaults(settings)
    if overrides:
        settings.setdict(dict(overrides), priority="cmdline")
    return settings


@contextmanager
def exit_on_bad_config(logger: logging.Logger, *also: type[Exception]) -> Iterator[None]:
    """Read the process' configs: a ConfigError (or one of ``also``) is one log line, exit 2."""
    errors: tuple[type[Exception], ...] = (ConfigError, *also)
    try:
        yield
    except errors as exc:
        logger.error("%s", exc)
        raise SystemExit(CONFIG_EXIT_STATUS) from None


def redis_calls(
    settings: Settings, logger: logging.Logger, sleep: Callable[[float], None] = time.sleep
) -> SyncRedisCalls:
    """The process' one blocking Redis call path; its state logs to ``logger``.

    ``sleep`` waits between retries (see :class:`SyncRedisCalls`).
    """
    state = RedisState.from_settings(settings, logger)
    return SyncRedisCalls(sync_client(settings), state, sleep=sleep)


def on_stop_signals(stop: Callable[[int], None], *, second_kills: bool = False) -> None:
    """Call ``stop(signum)`` at SIGTERM or SIGINT.

    With ``second_kills`` the first signal gives both back their default
    action, so a second one ends the process at once (status 143 or 130 from
    the shell), even inside a long blocking call: a warm first stop, a cold
    second one.
    """

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if second_kills:
            for other in STOP_SIGNALS:
                signal.signal(other, signal.SIG_DFL)
        stop(signum)

    for signum in STOP_SIGNALS:
        signal.signal(signum, on_signal)


def ignore_stop_signals() -> None:
    """From now on SIGTERM and SIGINT do nothing (a late signal must not change the status)."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
