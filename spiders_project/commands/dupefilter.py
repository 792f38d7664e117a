"""``scrapy dupefilter migrate``: move the previous release's fingerprints into the seen-set.

The previous release kept ``<spider>:dupefilter``, a set of 40-hex SHA1
strings, several times the seen-set's bytes a URL (docs/BENCHMARKS.md, "The
seen-set"). Workers of this release read it while it exists
and record new fingerprints only in the compact seen-set
(``frontier/seen.py``). This command moves its members over in batches,
each member removed from the old set in the same atomic step that records it
(``lua/seen_migrate.lua``), so a worker running meanwhile finds every
fingerprint in one of the two: no URL is crawled twice and none is lost.
Workers keep running; upgrade them all first (a worker of the previous
release would keep adding to the old set), then run::

    scrapy dupefilter migrate [--spider NAME] [--batch N]

It stops when the old set is gone, and can be run again at any time. On a
sharded frontier (Redis Cluster) each shard's old set, which ``scrapy
crawlmove`` copied into every shard, goes into that shard's seen-set.
"""

from __future__ import annotations

import argparse
import time

import redis
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from spiders_project.commands.redis_command import RedisCommand, redis_error
from spiders_project.frontier.calls import seen_migrate_call
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.frontier.seen import SeenConfig, mode_mismatch
from spiders_project.keys import RedisKeys
from spiders_project.redis_access import LuaScript, RedisUnavailable, SyncRedisCalls
from spiders_project.redis_access.connection import unreachable_message
from spiders_project.redis_access.shards import spider_keys

DEFAULT_BATCH = 1000


class Command(RedisCommand, ScrapyCommand):
    """Operator's migration of the seen-set; needs only Redis, never starts a crawl."""

    def syntax(self) -> str:
        return "migrate [--spider NAME] [--batch N]"

    def short_desc(self) -> str:
        return "Move the previous release's fingerprints (<spider>:dupefilter) into the seen-set"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        self.add_spider_option(parser)
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
        with self.config_errors():
            keys = spider_keys(self.settings, opts.spider)
            seen = SeenConfig.from_settings(self.settings)
            calls = self.redis_calls()
        script = FrontierScripts().seen_migrate
        moved = new = 0
        # A sharded frontier (Redis Cluster) has a seen-set per shard, and an
        # old set in a shard only if ``scrapy crawlmove`` copied one there (into
        # every shard: its fingerprints carry no host); each shard's old set
        # goes into that shard's seen-set, one shard after the other.
        shards = keys.all_shards
        try:
            for shard in shards:
                step_moved, step_new = self._migrate(calls, shard, seen, script, opts.batch)
                moved, new = moved + step_moved, new + step_new
        except _Refused as exc:
            self.fail(str(exc))
            return
        except RedisUnavailable as exc:
            self.fail(unreachable_message(self.settings, exc.cause))
            return
        except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
            self.fail(redis_error(exc))
            return
        finally:
            calls.client.close()
        where = f" in each of {len(shards)} shards" if keys.sharded else ""
        print(
            f"Moved {moved} fingerprints from {keys.dupefilter} into {keys.seen}{where} "
            f"({new} not there yet); {keys.dupefilter} is gone"
        )

    @staticmethod
    def _migrate(
        calls: SyncRedisCalls, keys: RedisKeys, seen: SeenConfig, script: LuaScript, batch: int
    ) -> tuple[int, int]:
        """One seen-set's old set moved into it: (fingerprints moved, of which new)."""
        recorded = calls.command("GET", keys.seen_mode, retry=False, writes=False)
        problem = mode_mismatch(keys, seen.spec, recorded)
        if problem is not None:
            raise _Refused(f"{problem}: run this with the workers' settings")
        calls.command(
            "SET", keys.seen_mode, seen.recorded(int(time.time() * 1000)), "NX", retry=False
        )
        moved = new = 0
        cursor = 0
        while True:
            cursor, members = calls.command(
                "SSCAN", keys.dupefilter, cursor, "COUNT", batch, retry=False, writes=False
            )
            pairs = [(seen.token(_fingerprint(m)), m) for m in members]
            if pairs:
                keys_, args_ = seen_migrate_call(keys, seen.spec, pairs)
                step_moved, step_new = calls.script(script, keys_, args_, retry=False)
                moved, new = moved + int(step_moved), new + int(step_new)
            if int(cursor) == 0:
                if not calls.command("EXISTS", keys.dupefilter, retry=False, writes=False):
                    return moved, new
                cursor = 0  # added meanwhile (a worker of the previous release): again


class _Refused(Exception):
    """The migration cannot go on; the message says why, in one line."""


def _fingerprint(member: bytes) -> bytes:
    """A member of the old set as fingerprint bytes (hex, as scrapy-redis wrote it)."""
    try:
        return bytes.fromhex(member.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return member  # not hex: its bytes still identify it
