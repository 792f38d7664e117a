"""``scrapy cookies list|clear``: the spider's shared cookie jars, never their values.

Examples::

    scrapy cookies list                      # every jar: each cookie's domain, path, name, expiry
    scrapy cookies list --jar user-7 --json  # one jar (a meta["cookiejar"] id), as JSON
    scrapy cookies clear --jar user-7        # drop that session: its jar, index and count
    scrapy cookies clear                     # every jar of the spider

A jar is the hash ``keys.cookies.cookie_jar(keys, <id>)``: a field per cookie
(``<domain>\\t<path>\\t<name>``, its value and attributes as JSON) and control
fields that start with ``~`` (its version, pinned proxy, login state), which
are not shown. ``list`` prints what an operator needs to see which sessions
exist and when they end, and never a cookie's value: the value is the
session, and a terminal, a shell history or a ticket it is pasted into is
not where it may go (docs/SECURITY.md, "Cookies"). ``clear`` deletes the jars
and their entries in the index (``keys.cookies.cookie_jars``) and the counts
(``keys.cookies.cookie_counts``); without ``--jar``, every jar either names. Clear
with the crawl stopped to start every session over: a worker still running
may write a jar again.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import redis
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from spiders_project.commands.redis_command import RedisCommand, redis_error
from spiders_project.keys import RedisKeys
from spiders_project.keys.cookies import cookie_counts, cookie_jar, cookie_jars
from spiders_project.read_model.replies import hash_fields, scored, text
from spiders_project.redis_access import RedisUnavailable, SyncRedisCalls
from spiders_project.redis_access.connection import unreachable_message
from spiders_project.redis_access.shards import spider_keys

ACTIONS = ("list", "clear")
# Jars read (list) or deleted (clear) per round trip: a spider with thousands
# of meta["cookiejar"] sessions is handled in bounded steps.
BATCH = 200
# Fields of a jar that are not cookies (its version, pinned proxy, login state).
CONTROL = "~"


@dataclass(frozen=True)
class CookieLine:
    """What ``list`` shows of one cookie: no value."""

    domain: str
    path: str
    name: str
    expires: int | None  # Unix time; None: a session cookie (or unreadable attributes)
    secure: bool
    http_only: bool

    def __str__(self) -> str:
        flags = [f for f, on in (("secure", self.secure), ("httponly", self.http_only)) if on]
        shown = [self.domain, self.path, self.name, f"expires {_when(self.expires)}", *flags]
        return "  ".join(shown)


def cookie_line(field: str, attributes: bytes | str) -> CookieLine:
    """One cookie of a jar, read from its field and its JSON; the value is not kept."""
    domain, _, rest = field.partition("\t")
    path, _, name = rest.partition("\t")
    if not name:  # not <domain>\t<path>\t<name>: show the field as the name
        domain, path, name = "?", "?", field
    try:
        parsed = json.loads(attributes)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        parsed = {}
    expires = parsed.get("expires")
    return CookieLine(
        domain=domain,
        path=path,
        name=name,
        expires=expires if isinstance(expires, int) and not isinstance(expires, bool) else None,
        secure=parsed.get("secure") is True,
        http_only=parsed.get("http_only") is True,
    )


def jar_cookies(fields: Mapping[Any, Any]) -> list[CookieLine]:
    """The cookies of a jar's HGETALL, by domain, path and name; control fields left out."""
    lines = [
        cookie_line(text(field), value)
        for field, value in fields.items()
        if not text(field).startswith(CONTROL)
    ]
    return sorted(lines, key=lambda line: (line.domain, line.path, line.name))


def _when(seconds: float | None) -> str:
    if seconds is None:
        return "session"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class Command(RedisCommand, ScrapyCommand):
    """Operator's view of the shared cookie jars; needs only Redis, never starts a crawl."""

    def syntax(self) -> str:
        return "list|clear [--spider NAME] [--jar J] [--json]"

    def short_desc(self) -> str:
        return "List the shared cookie jars (names, domains, expiry; never values), or clear them"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        self.add_spider_option(parser, "spider whose cookie jars to use")
        parser.add_argument(
            "--jar", metavar="J", help='one jar: "default", or a meta["cookiejar"] id'
        )
        parser.add_argument("--json", action="store_true", help="list: one JSON document")

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        if len(args) != 1 or args[0] not in ACTIONS:
            raise UsageError(f"expected one action: {', '.join(ACTIONS)}")
        if opts.json and args[0] != "list":
            raise UsageError("--json only applies to list", print_help=False)

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        with self.config_errors():
            keys = spider_keys(self.settings, opts.spider)
            calls = self.redis_calls()
        try:
            if args[0] == "list":
                self._list(calls, keys, opts.jar, opts.json)
            else:
                self._clear(calls, keys, opts.jar)
        except RedisUnavailable as exc:
            self.fail(unreachable_message(self.settings, exc.cause))
        except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
            self.fail(redis_error(exc))
        finally:
            calls.client.close()

    def _list(self, calls: SyncRedisCalls, keys: RedisKeys, jar: str | None, as_json: bool) -> None:
        (indexed,) = calls.pipelined(
            "cookie jars", [("ZRANGE", cookie_jars(keys), 0, -1, "REV", "WITHSCORES")], retry=False
        )
        last_used = {text(member): score / 1000 for member, score in scored(indexed)}
        ids = [jar] if jar is not None else list(last_used)
        jars = []
        for start in range(0, len(ids), BATCH):
            batch = ids[start : start + BATCH]
            replies = calls.pipelined(
                "cookie jars", [("HGETALL", cookie_jar(keys, j)) for j in batch], retry=False
            )
            for jar_id, fields in zip(batch, replies, strict=True):
                jars.append((jar_id, last_used.get(jar_id), jar_cookies(hash_fields(fields))))
        if as_json:
            document = {
                "spider": keys.spider,
                "jars": [
                    {"jar": j, "last_used": used, "cookies": [asdict(c) for c in cookies]}
                    for j, used, cookies in jars
                ],
            }
            print(json.dumps(document))
            return
        for jar_id, used, cookies in jars:
            used_text = "not in the index" if used is None else f"last used {_when(used)}"
            print(f"Jar {jar_id!r}: {len(cookies)} cookies ({used_text})")
            for cookie in cookies:
                print(f"  {cookie}")
        print(f"{len(jars)} cookie jars of {keys.spider} (values never shown)")

    def _clear(self, calls: SyncRedisCalls, keys: RedisKeys, jar: str | None) -> None:
        if jar is not None:
            ids = [jar]
        else:
            indexed, counted = calls.pipelined(
                "cookie jars",
                [("ZRANGE", cookie_jars(keys), 0, -1), ("HKEYS", cookie_counts(keys))],
                retry=False,
            )
            ids = list(dict.fromkeys(text(j) for j in [*indexed, *counted]))
        deleted = 0
        for start in range(0, len(ids), BATCH):
            batch = ids[start : start + BATCH]

            def delete(batch: list[str] = batch) -> int:
                # One slot (the spider's hash tag): a transaction on a Redis Cluster too.
                with calls.client.pipeline(transaction=True) as pipe:
                    pipe.unlink(*(cookie_jar(keys, j) for j in batch))
                    pipe.zrem(cookie_jars(keys), *batch)
                    pipe.hdel(cookie_counts(keys), *batch)
                    gone, _, _ = pipe.execute()
                return int(gone)

            deleted += calls.call("clear cookie jars", delete, retry=False)
        which = f"jar {jar!r}" if jar is not None else f"{len(ids)} cookie jars"
        print(f"Cleared {which} of {keys.spider} ({deleted} jar hashes deleted)")
