"""Reading settings: one idiom for every component and every process.

- Every default lives in ``spiders_project.settings``. Values from the
  environment arrive there as text and are parsed here, where they are read,
  so a bad value never fails at import with a traceback.
- Each component reads its settings once, into a typed config whose
  ``from_settings`` uses :class:`SettingsReader`: a value of the wrong type or
  out of range raises :class:`ConfigError`, whose message is one line naming
  the setting (the environment variable of the same name, or ``-s NAME=``).
- Every entry point turns a ConfigError into that line on stderr and exit
  status 2 (:func:`exit_on_config_error`).
- The db_writer and the monitor read the settings of the project they run
  in, as the workers do, with ``-s NAME=VALUE`` on top
  (``spiders_project.process.project_settings``); :func:`load_settings` is
  this checkout's own settings.py (the demo's, and the tests').
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

from scrapy.settings import BaseSettings, Settings

T = TypeVar("T")

#: Exit status of a process refused by its configuration (EX_USAGE-like, as argparse uses).
CONFIG_EXIT_STATUS = 2


class ConfigError(ValueError):
    """A setting the process cannot use; the message is one line naming it."""


class SettingsReader:
    """Typed, checked reads of one settings object (Scrapy's getters, named alike).

    Every failure is a :class:`ConfigError` naming the setting and the value
    found, e.g. ``DB_WRITER_BATCH_SIZE='abc': not an integer``.
    """

    def __init__(self, settings: BaseSettings) -> None:
        self.settings = settings

    def fail(self, name: str, problem: str, shown: str | None = None) -> NoReturn:
        """Raise the ConfigError; ``shown`` replaces the value in it (a masked password)."""
        value = repr(self.settings.get(name)) if shown is None else shown
        raise ConfigError(f"{name}={value}: {problem}")

    def _typed(self, name: str, read: Callable[[str], T], kind: str) -> T:
        try:
            return read(name)
        except (TypeError, ValueError):
            self.fail(name, f"not {kind}")

    def getint(self, name: str, *, minimum: int | None = None) -> int:
        value = self._typed(name, self.settings.getint, "an integer")
        if minimum is not None and value < minimum:
            self.fail(name, f"must be at least {minimum}")
        return value

    def getfloat(
        self, name: str, *, minimum: float | None = None, above: float | None = None
    ) -> float:
        value = self._typed(name, self.settings.getfloat, "a number")
        if value != value:  # NaN compares false with every bound
            self.fail(name, "not a number")
        if minimum is not None and value < minimum:
            self.fail(name, f"must be at least {minimum:g}")
        if above is not None and value <= above:
            self.fail(name, f"must be more than {above:g}")
        return value

    def getbool(self, name: str) -> bool:
        return self._typed(name, self.settings.getbool, "a boolean (true/false, 1/0)")

    def getstr(self, name: str, *, choices: Sequence[str] | None = None) -> str:
        value = self.settings.get(name)
        if not isinstance(value, str):
            self.fail(name, "not a string")
        if choices is not None and value not in choices:
            self.fail(name, f"must be one of {', '.join(choices)}")
        return value

    def getlist(self, name: str) -> list[Any]:
        """Scrapy's getlist, and a JSON array too (``-s 'NAME=["a,b", "c"]'``).

        Scrapy splits a string at commas, which a regex may contain; a value
        that starts with ``[`` is read as JSON instead.
        """
        value = self.settings.get(name)
        if isinstance(value, str) and value.lstrip().startswith("["):
            try:
                parsed = json.loads(value)
            except ValueError:
                self.fail(name, "not a JSON array")
            if not isinstance(parsed, list):
                self.fail(name, "not a JSON array")
            return parsed
        return self._typed(name, self.settings.getlist, "a list")

    def getdict(self, name: str) -> dict[Any, Any]:
        return self._typed(name, self.settings.getdict, "a JSON object")

    def check(self, ok: bool, name: str, problem: str) -> None:
        """Fail with ``problem`` unless ``ok`` (a rule between settings, say)."""
        if not ok:
            self.fail(name, problem)


LOG_LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")


def log_level(settings: BaseSettings) -> str:
    """``LOG_LEVEL``, checked before logging is configured with it."""
    return SettingsReader(settings).getstr("LOG_LEVEL", choices=LOG_LEVELS)


@contextmanager
def exit_on_config_error(prog: str) -> Iterator[None]:
    """Run an entry point's set-up: a ConfigError becomes one line and exit status 2."""
    try:
        yield
    except ConfigError as exc:
        print(f"{prog}: ERROR: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(CONFIG_EXIT_STATUS) from None


def load_settings(overrides: Mapping[str, Any] | None = None) -> Settings:
    """This checkout's settings.py (environment included), with ``overrides`` on top.

    The add-on named in its ADDONS is not applied here: a crawler applies it.
    """
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
