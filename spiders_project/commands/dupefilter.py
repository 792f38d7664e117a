"""``scrapy dupefilter migrate``: move the previous release's fingerprints into the seen-set.

The previous release kept ``<spider>:dupefilter``, a set of 40-hex SHA1
strings (88 bytes a URL). Workers of this release read it while it exists
and record new fingerprints only in the compact seen-set
(``frontier/seen.py``). This command moves its members over in batches,
each member removed from the old set in the same atomic step that records it
(``lua/seen_migrate.lua``), so a worker running meanwhile finds every
fingerprint in one of the two: no URL is crawled twice and none is lost.
Workers keep running; upgrade them all first (a worker of the previous
release would keep adding to the old set), then run::

    scrapy dupefilter migrate [--spider NAME] [--batch N]

It stops when the old set is gone, and can be run again at any time.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

import redis
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from spiders_project.config import exit_on_config_error
from spiders_project.frontier.calls import seen_migrate_call
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.frontier.seen import SeenConfig, mode_mismatch
from spiders_project.redis_calls import RedisUnavailable, one_shot_calls
from spiders_project.redis_connection import unreachable_message
from spiders_project.shards import spider_keys

logger = logging.getLogger(__name__)

DEFAULT_SPIDER = "distributed"
DEFAULT_BATCH = 1000


class Command(ScrapyCommand):
    """Operator's migration of the seen-set; needs only Redis, never starts a crawl."""

    requires_project = True
    requires_crawler_process = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "migrate [--spider NAME] [--batch N]"

    def short_desc(self) -> str:
        return "Move the previous release's fingerprints (<spider>:dupefilter) into the seen-set"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--spider", default=DEFAULT_SPIDER, help="spider (default %(default)s)")
        parser.add_argument(
            "--batch", type=int, default=DEFAULT_BATCH, help="members per step (%(default)s)"
        )

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        if args != ["migrate"]:
            raise UsageError("expected one action: migrate")
        if opts.batch < 1:
            raise UsageError("--batch must be at least 1", print_help=False)

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        with exit_on_config_error("scrapy dupefilter"):
            keys = spider_keys(self.settings, opts.spider)
            seen = SeenConfig.from_settings(self.settings)
            calls = one_shot_calls(self.settings, logger)
        script = FrontierScripts().seen_migrate
        moved = new = 0
        if keys.sharded:
            # Each shard keeps the fingerprints of its hosts' URLs; a hex
            # fingerprint of the old set says nothing of its URL's host.
            self._fail(
                f"this spider's frontier is sharded ({keys.shards} shards, FRONTIER_SHARDS): "
                "its seen-set is split by host, and the old set's fingerprints carry no host; "
                "migrate on a single Redis, before moving to a cluster (docs/SCALING.md)"
            )
            calls.client.close()
            return
        try:
            recorded = calls.command("GET", keys.seen_mode, retry=False, writes=False)
            problem = mode_mismatch(keys, seen.spec, recorded)
            if problem is not None:
                self._fail(f"{problem}: run this with the workers' settings")
                return
            calls.command(
                "SET", keys.seen_mode, seen.recorded(int(time.time() * 1000)), "NX", retry=False
            )
            cursor = 0
            while True:
                cursor, members = calls.command(
                    "SSCAN", keys.dupefilter, cursor, "COUNT", opts.batch, retry=False, writes=False
                )
                pairs = [(seen.token(_fingerprint(m)), m) for m in members]
                if pairs:
                    keys_, args_ = seen_migrate_call(keys, seen.spec, pairs)
                    step_moved, step_new = calls.script(script, keys_, args_, retry=False)
                    moved, new = moved + int(step_moved), new + int(step_new)
                if int(cursor) == 0:
                    if not calls.command("EXISTS", keys.dupefilter, retry=False, writes=False):
                        break
                    cursor = 0  # added meanwhile (a worker of the previous release): again
        except RedisUnavailable as exc:
            self._fail(unreachable_message(self.settings, exc.cause))
            return
        except redis.RedisError as exc:
            self._fail(f"Redis error: {type(exc).__name__}: {exc}")
            return
        finally:
            calls.client.close()
        print(
            f"Moved {moved} fingerprints from {keys.dupefilter} into {keys.seen} "
            f"({new} not there yet); {keys.dupefilter} is gone"
        )

    def _fail(self, message: str) -> None:
        print(f"ERROR: {message}", file=sys.stderr)
        self.exitcode = 1


def _fingerprint(member: bytes) -> bytes:
    """A member of the old set as fingerprint bytes (hex, as scrapy-redis wrote it)."""
    try:
        return bytes.fromhex(member.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return member  # not hex: its bytes still identify it
