"""What the operator's Redis-only commands share (crawlstatus, deadletters, crawlmove, dupefilter).

Each needs the project's settings and its Redis, never a crawler process;
Scrapy configures no logging for them, so each says what happened itself:
its result on stdout, a failure as one ``ERROR:`` line on stderr with exit
status 1, and a bad setting as one line with exit status 2
(``config.exit_on_config_error``).
"""

from __future__ import annotations

import argparse
import logging
import sys
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, ClassVar

import redis
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError
from scrapy.spiderloader import get_spider_loader

from spiders_project.addon.defaults import apply_defaults
from spiders_project.config import SettingsReader, exit_on_config_error
from spiders_project.keys import RedisKeys, seeds_key_of
from spiders_project.redis_access import SyncRedisCalls, one_shot_calls
from spiders_project.redis_access.acl import MONITOR, OPERATOR
from spiders_project.redis_access.acl_check import permission_problem
from spiders_project.redis_access.connection import RedisConfig, mask_url

DEFAULT_SPIDER = "distributed"

# Whose user a command needs (acl.py), by its name; any other: the operator's.
ACL_ROLES = {"crawlstatus": MONITOR.name}

# Scrapy makes a command of every ScrapyCommand subclass defined in a module
# of COMMANDS_MODULE, named after the module: a subclass defined here would
# be listed as ``scrapy redis_command``. So this is a mixin, put before
# ScrapyCommand in each command's bases; only the type checker sees it as one.
if TYPE_CHECKING:
    _Command = ScrapyCommand
else:
    _Command = object


class RedisCommand(_Command):
    """A command that uses Redis only: ``class Command(RedisCommand, ScrapyCommand)``."""

    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}
    # Whether it takes positional arguments; one that does not refuses them.
    takes_arguments = True

    @property
    def command_name(self) -> str:
        """The name it is run by (Scrapy's: its module's)."""
        return type(self).__module__.rsplit(".", 1)[-1]

    def add_spider_option(self, parser: argparse.ArgumentParser, what: str = "spider") -> None:
        """``--spider NAME``, one spider, "distributed" unless given."""
        parser.add_argument(
            "--spider", default=DEFAULT_SPIDER, help=f"{what} (default %(default)s)"
        )

    def config_errors(self) -> AbstractContextManager[None]:
        """Around reading settings: a bad one is one line and exit status 2."""
        return exit_on_config_error(f"scrapy {self.command_name}")

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        # Without a crawler process Scrapy applies no add-on: these commands are the
        # cluster's own, so they take its defaults in any project, as the db_writer does.
        assert self.settings is not None
        apply_defaults(self.settings)
        if args and not self.takes_arguments:
            raise UsageError(f"unexpected arguments: {' '.join(args)}")
        # The spiders the command works on, for the user check (redis_calls).
        named = getattr(opts, "spider", None)
        self._spiders = [named] if isinstance(named, str) else list(named or [])

    def redis_calls(self) -> SyncRedisCalls:
        """The command's call path to Redis (see ``redis_calls.one_shot_calls``),
        after checking that the user of REDIS_URL may do what the command does
        (``acl_check``): if not, one ``ERROR:`` line and exit status 1.

        Its state logs as the command's module, to nowhere: a failure is the
        command's own one line.
        """
        assert self.settings is not None
        calls = one_shot_calls(self.settings, logging.getLogger(type(self).__module__))
        self.check_user()
        return calls

    def check_user(self) -> None:
        """Refuse (one line, exit 1) when REDIS_URL's user lacks what this command runs.

        crawlstatus reads what the monitor reads; the others are the
        operator's. A Redis that does not answer is left to the command,
        which says so in its own words (or retries, crawlstatus live).
        """
        assert self.settings is not None
        read = SettingsReader(self.settings)
        role = ACL_ROLES.get(self.command_name, OPERATOR.name)
        spiders = getattr(self, "_spiders", None) or read.getlist("MONITOR_SPIDERS")
        cluster = RedisConfig.from_settings(self.settings).cluster
        keys = [RedisKeys(s.strip(), cluster=cluster) for s in spiders if s.strip()]
        try:
            problem = permission_problem(self.settings, role, keys)
        except (redis.RedisError, OSError):
            return
        if problem is not None:
            print(f"ERROR: {problem}", file=sys.stderr)
            raise SystemExit(1)

    def seeds_key(self, spider: str) -> str:
        """The spider's own seed list (``redis_key``), or "" when it has none or is unknown."""
        assert self.settings is not None
        try:
            return seeds_key_of(get_spider_loader(self.settings).load(spider)) or ""
        except KeyError:
            return ""

    def redis_url(self) -> str:
        """``REDIS_URL`` with its password masked, for the command's lines."""
        assert self.settings is not None
        return mask_url(RedisConfig.from_settings(self.settings).url)

    def fail(self, message: str) -> None:
        """``ERROR: <message>`` on stderr, and exit status 1."""
        print(f"ERROR: {message}", file=sys.stderr)
        self.exitcode = 1


def redis_error(exc: Exception) -> str:
    """The line for an error Redis answered (or a cluster client raised)."""
    return f"Redis error: {type(exc).__name__}: {exc}"
