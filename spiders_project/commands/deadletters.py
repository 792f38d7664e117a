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
import sys
from typing import Any

import redis
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from spiders_project.frontier.dead_letters import DeadLetter, requeue
from spiders_project.frontier.serialize import InvalidEntry
from spiders_project.keys import RedisKeys
from spiders_project.redis_connection import (
    CONNECTION_ERRORS,
    ping_or_message,
    sync_client,
    unreachable_message,
)

ACTIONS = ("list", "requeue", "purge")
DEFAULT_SPIDER = "distributed"
# Entries ``list`` shows without --limit (newest first).
DEFAULT_LIST_LIMIT = 20


class Command(ScrapyCommand):
    """Operator's view of ``<spider>:dead``; needs only Redis, never starts a crawl."""

    requires_project = True
    requires_crawler_process = False
    default_settings = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "list|requeue|purge [--spider NAME] [--limit N] [--all] [--json]"

    def short_desc(self) -> str:
        return "List, requeue or purge requests that failed for good (<spider>:dead)"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--spider",
            default=DEFAULT_SPIDER,
            help=f"spider whose dead letters to use (default {DEFAULT_SPIDER})",
        )
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
        assert self.settings is not None
        message = ping_or_message(self.settings)
        if message is not None:
            self._fail(message)
            return
        keys = RedisKeys(opts.spider)
        client = sync_client(self.settings)
        try:
            if args[0] == "list":
                self._list(client, keys, opts.limit or DEFAULT_LIST_LIMIT, opts.json)
            elif args[0] == "requeue":
                self._requeue(client, keys, None if opts.all else opts.limit)
            else:
                self._purge(client, keys)
        except CONNECTION_ERRORS as exc:
            self._fail(unreachable_message(self.settings, exc))
        except redis.RedisError as exc:
            self._fail(f"Redis error: {type(exc).__name__}: {exc}")
        finally:
            client.close()

    def _fail(self, message: str) -> None:
        print(f"ERROR: {message}", file=sys.stderr)
        self.exitcode = 1

    def _list(self, client: redis.Redis, keys: RedisKeys, limit: int, as_json: bool) -> None:
        with client.pipeline(transaction=True) as pipe:
            total, raw_entries = pipe.llen(keys.dead).lrange(keys.dead, 0, limit - 1).execute()
        if as_json:
            entries: list[Any] = []
            for raw in raw_entries:
                try:
                    DeadLetter.loads(raw)
                    entries.append(json.loads(raw))
                except InvalidEntry as exc:
                    entries.append({"invalid": str(exc), "raw": raw.decode(errors="replace")})
            print(json.dumps({"key": keys.dead, "total": total, "entries": entries}))
            return
        for raw in raw_entries:
            try:
                letter = DeadLetter.loads(raw)
            except InvalidEntry as exc:
                print(f"<not a dead letter: {exc}> {raw[:200]!r}")
                continue
            print(f"{letter.failed_at}  {letter.attempts}  {letter.error}  {letter.url}")
        print(f"{total} dead letters in {keys.dead} (showing {len(raw_entries)}, newest first)")

    def _requeue(self, client: redis.Redis, keys: RedisKeys, limit: int | None) -> None:
        assert self.settings is not None
        if limit is None:
            # Only what is there now: requests requeued now may fail again
            # while we run, and must not be taken a second time.
            limit = int(client.llen(keys.dead))

        def rejected(raw: bytes, reason: str) -> None:
            print(f"Not a dead letter ({reason}), moved to {keys.dead_rejected}: {raw[:200]!r}")

        result = requeue(
            client,
            keys,
            limit,
            retry_priority_adjust=self.settings.getint("RETRY_PRIORITY_ADJUST"),
            on_rejected=rejected,
        )
        line = f"Requeued {result.requeued} dead letters from {keys.dead}"
        if result.rejected:
            moved = f"{result.rejected} entries that were not dead letters"
            line += f"; {moved} moved to {keys.dead_rejected}"
        print(line)

    def _purge(self, client: redis.Redis, keys: RedisKeys) -> None:
        with client.pipeline(transaction=True) as pipe:
            total, _ = pipe.llen(keys.dead).delete(keys.dead).execute()
        print(f"Purged {total} dead letters from {keys.dead}")
