"""Settings for the processes that are not Scrapy crawls (db_writer, monitor).

They read the same module as the workers, so REDIS_URL, DB_URL and every
default are defined once, in ``spiders_project.settings``.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from scrapy.settings import Settings


def load_settings(overrides: Mapping[str, Any] | None = None) -> Settings:
    """The project's settings (environment included), with ``overrides`` on top."""
    settings = Settings()
    settings.setmodule("spiders_project.settings", priority="project")
    if overrides:
        settings.setdict(dict(overrides), priority="cmdline")
    return settings


def add_settings_option(parser: argparse.ArgumentParser) -> None:
    """``-s NAME=VALUE`` (repeatable), as ``scrapy crawl`` takes it."""
    parser.add_argument(
        "-s",
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a setting, as with scrapy crawl -s (repeatable)",
    )


def parse_overrides(parser: argparse.ArgumentParser, pairs: Sequence[str]) -> dict[str, str]:
    """The ``-s`` pairs as a dict; a malformed one is a usage error."""
    overrides = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            parser.error(f"-s expects NAME=VALUE, not {pair!r}")
        overrides[name] = value
    return overrides
