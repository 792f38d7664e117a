"""``scrapy deadletters list|requeue|purge``: look at and act on requests that failed for good.

Examples::

    scrapy deadletters list --limit 50
    scrapy deadletters list --json
    scrapy deadletters requeue --limit 100
    scrapy deadletters requeue --all
    scrapy deadletters purge --spider distributed
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import redis
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from spiders_project.commands.redis_command import RedisCommand, redis_error
from spiders_project.dead_letters.config import DeadLettersConfig
from spiders_project.dead_letters.letters import DeadLetter
from spiders_project.dead_letters.requeue import purge, requeue
from spiders_project.frontier.codec.serialize import InvalidEntry
from spiders_project.frontier.codec.values import ValueCodec
from spiders_project.keys import RedisKeys
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.redis_access import (
    ErrorKind,
    RedisUnavailable,
    SyncRedisCalls,
    classify,
    error_code,
    error_text,
)
from spiders_project.redis_access.connection import unreachable_message
from spiders_project.redis_access.shards import spider_keys
from spiders_project.rendering.queue_choice import RenderRouting

ACTIONS = ("list", "requeue", "purge")
# Entries ``list`` shows without --limit (newest first).
DEFAULT_LIST_LIMIT = 20


class Command(RedisCommand, ScrapyCommand):
    """Operator's view of ``<spider>:dead``; needs only Redis, never starts a crawl."""

    def syntax(self) -> str:
        return "list|requeue|purge [--spider NAME] [--limit N] [--all] [--json]"

    def short_desc(self) -> str:
        return "List, requeue or purge requests that failed for good (<spider>:dead)"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        self.add_spider_option(parser, "spider whose dead letters to use")
        parser.add_argument(
            "--limit",
            type=int,
            metavar="N",
            help=f"list: newest N (default {DEFAULT_LIST_LIMIT}); requeue: oldest N",
        )
        parser.add_argument("--all", action="store_true", help="requeue: every entry")
        parser.add_argument("--json", action="store_true", help="list: one JSON document")

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        if len(args) != 1 or args[0] not in ACTIONS:
            raise UsageError(f"expected one action: {', '.join(ACTIONS)}")
        action = args[0]
        if opts.limit is not None and opts.limit < 1:
            raise UsageError("--limit must be at least 1", print_help=False)
        if opts.json and action != "list":
            raise UsageError("--json only applies to list", print_help=False)
        if opts.all and action != "requeue":
            raise UsageError("--all only applies to requeue", print_help=False)
        if action == "requeue" and (opts.all == (opts.limit is not None)):
            raise UsageError("requeue needs either --limit N or --all", print_help=False)
        if action == "purge" and opts.limit is not None:
            raise UsageError("purge takes no --limit", print_help=False)

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        """One action, each Redis call sent once: any failure is one line and exit status 1."""
        assert self.settings is not None
        action = args[0]
        with self.config_errors():
            keys = spider_keys(self.settings, opts.spider)
            calls = self.redis_calls()
        try:
            if action == "list":
                self._list(calls, keys, opts.limit or DEFAULT_LIST_LIMIT, opts.json)
            elif action == "requeue":
                self._requeue(calls, keys, None if opts.all else opts.limit)
            else:
                self._purge(calls, keys)
        except RedisUnavailable as exc:
            self.fail(self._unavailable(exc.cause, action, keys))
        except redis.RedisError as exc:
            self.fail(redis_error(exc))
        finally:
            calls.client.close()

    def _unavailable(self, cause: BaseException, action: str, keys: RedisKeys) -> str:
        assert self.settings is not None
        if classify(cause) is ErrorKind.CONNECTION:
            return unreachable_message(self.settings, cause)
        # OOM, READONLY, MISCONF, LOADING, BUSY...: one batch is one transaction,
        # so what was not requeued is still in the dead list.
        code = error_code(cause) or type(cause).__name__
        reply = error_text(cause)
        reason = reply if reply.startswith(code) else f"{code} {reply}"
        refused = "writes" if action != "list" else "reads"
        line = f"Redis refuses {refused} ({reason}) at {self.redis_url()}"
        if action == "requeue":
            line += f"; entries not requeued are still in {keys.dead}"
        return line

    def _list(self, calls: SyncRedisCalls, keys: RedisKeys, limit: int, as_json: bool) -> None:
        def read() -> list[Any]:
            # Not MULTI: Redis refuses every command queued in a transaction
            # while it is out of memory, and an operator looks at the dead
            # letters then too. A letter pushed between the two reads only
            # makes the total one ahead of the entries shown.
            with calls.client.pipeline(transaction=False) as pipe:
                pipe.llen(keys.dead)
                pipe.lrange(keys.dead, 0, limit - 1)
                return pipe.execute()

        total, raw_entries = calls.call("list dead letters", read, retry=False, writes=False)
        assert self.settings is not None
        values = ValueCodec.from_settings(self.settings)
        if as_json:
            entries: list[Any] = []
            for raw in raw_entries:
                try:
                    DeadLetter.loads(raw, values)
                    entries.append(json.loads(raw))
                except InvalidEntry as exc:
                    entries.append({"invalid": str(exc), "raw": raw.decode(errors="replace")})
            print(json.dumps({"key": keys.dead, "total": total, "entries": entries}))
            return
        for raw in raw_entries:
            try:
                letter = DeadLetter.loads(raw, values)
            except InvalidEntry as exc:
                print(f"<not a dead letter: {exc}> {raw[:200]!r}")
                continue
            print(f"{letter.failed_at}  {letter.attempts}  {letter.error}  {letter.url}")
        print(f"{total} dead letters in {keys.dead} (showing {len(raw_entries)}, newest first)")

    def _requeue(self, calls: SyncRedisCalls, keys: RedisKeys, limit: int | None) -> None:
        assert self.settings is not None
        if limit is None:
            # Only what is there now: requests requeued now may fail again
            # while we run, and must not be taken a second time.
            limit = int(calls.command("LLEN", keys.dead, retry=False, writes=False))

        def rejected(raw: bytes, reason: str) -> None:
            print(f"Not a dead letter ({reason}), moved to {keys.dead_rejected}: {raw[:200]!r}")

        with self.config_errors():
            adjust = DeadLettersConfig.from_settings(self.settings).retry_priority_adjust
            groups = HostPoliteness.from_settings(self.settings)
            values = ValueCodec.from_settings(self.settings)
            routing = RenderRouting.from_settings(self.settings)
        # One try: the operator reads why it stopped and runs it again; batches
        # already requeued have left the dead list, so none is requeued twice.
        result = calls.call(
            "requeue dead letters",
            lambda: requeue(
                calls.client,
                keys,
                limit,
                retry_priority_adjust=adjust,
                on_rejected=rejected,
                values=values,
                group_of=groups.key_of,
                lane_of=routing.lane_for,
            ),
            retry=False,
        )
        line = f"Requeued {result.requeued} dead letters from {keys.dead}"
        if result.rejected:
            moved = f"{result.rejected} entries that were not dead letters"
            line += f"; {moved} moved to {keys.dead_rejected}"
        print(line)

    def _purge(self, calls: SyncRedisCalls, keys: RedisKeys) -> None:
        total = calls.call("purge dead letters", lambda: purge(calls.client, keys), retry=False)
        print(f"Purged {total} dead letters from {keys.dead}")
