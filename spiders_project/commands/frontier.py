"""``scrapy frontier host HOST``: steer one host of a running crawl, or show it.

Examples::

    scrapy frontier host shop.example --show            # queue, leases, delay, cap, robots, bans
    scrapy frontier host shop.example --delay 2 --cap 1  # slower, one fetch at a time
    scrapy frontier host shop.example --delay default    # back to the configured delay
    scrapy frontier host spam.example --block            # drop its queue, refuse its links
    scrapy frontier host spam.example --unblock
    scrapy frontier host shop.example --purge --json     # empty its queue: {"purged": N, ...}
    scrapy frontier host shop.example --clear            # no override, not blocked

Every worker reads the steering once a second (HOST_STEERING_INTERVAL), and
the lease script reads the delay and cap from the host's shard at every call
(``host_steering.py``, ``politeness/steered.py``): a change takes effect across
the cluster within 2 s, nothing restarts. HOST is the name the frontier queues
the host under (``hosts.host_of``: lower-case host[:port], punycode, no
default port; the domain with POLITENESS_KEY=domain). A bad host, delay or
cap is one ``ERROR:`` line and exit status 2, before Redis is touched.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import redis
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from spiders_project.commands.redis_command import RedisCommand, redis_error
from spiders_project.config import SettingsReader
from spiders_project.crawl.hosts import host_key
from spiders_project.keys import RedisKeys
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.politeness.steered import steer_host
from spiders_project.read_model.host_steering import (
    InvalidSteering,
    check_cap,
    check_delay,
    check_host,
)
from spiders_project.read_model.host_view import show
from spiders_project.redis_access import RedisUnavailable, SyncRedisCalls
from spiders_project.redis_access.shards import spider_keys

# Exit status of a refused host, delay or cap, as for a bad setting.
REFUSED = 2
DEFAULT = "default"


class Command(RedisCommand, ScrapyCommand):
    """Operator's steering of one host; needs only Redis, never starts a crawl."""

    def syntax(self) -> str:
        return (
            "host HOST [--delay S|default] [--cap N|default] [--block|--unblock] [--purge] "
            "[--clear] [--show] [--json] [--spider NAME]"
        )

    def short_desc(self) -> str:
        return "Steer one host at runtime (delay, cap, block, purge) or show it"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        self.add_spider_option(parser, "spider whose frontier to steer")
        parser.add_argument("--delay", metavar="S", help="seconds between fetches, or 'default'")
        parser.add_argument("--cap", metavar="N", help="fetches at once, or 'default'")
        parser.add_argument("--block", action="store_true", help="drop its queue, refuse its links")
        parser.add_argument("--unblock", action="store_true", help="crawl it again")
        parser.add_argument("--purge", action="store_true", help="empty its queue and retries")
        parser.add_argument("--clear", action="store_true", help="no override, not blocked")
        parser.add_argument("--show", action="store_true", help="print its state (the default)")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        if not args or args[0] != "host":
            raise UsageError("expected: host HOST [options]")
        if len(args) != 2:
            raise UsageError("host takes one HOST", print_help=False)
        try:
            self._host = check_host(host_key(args[1]))
            if opts.block and opts.unblock:
                raise InvalidSteering("--block and --unblock together")
            if opts.clear and (opts.delay is not None or opts.cap is not None or opts.block):
                raise InvalidSteering("--clear with --delay, --cap or --block")
            self._delay = _parse(opts.delay, lambda v: check_delay(float(v)), "--delay", "seconds")
            self._cap = _parse(opts.cap, lambda v: check_cap(int(v)), "--cap", "an integer")
        except InvalidSteering as exc:
            print(f"ERROR: {exc}", file=sys.stderr)
            raise SystemExit(REFUSED) from None

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        """Change what was asked (if anything), then show the host: one failure is one line."""
        assert self.settings is not None
        with self.config_errors():
            keys = spider_keys(self.settings, opts.spider)
            politeness = HostPoliteness.from_settings(self.settings)
            cap = SettingsReader(self.settings).getint("CONCURRENT_REQUESTS_PER_DOMAIN", minimum=1)
            calls = self.redis_calls()
        try:
            changed = self._steer(calls, keys, opts)
            shown = show(calls, keys, self._host, politeness.delay_ms(self._host), cap)
        except RedisUnavailable as exc:
            self.fail(f"frontier host {self._host}: Redis unavailable: {exc.cause}")
            return
        except redis.RedisError as exc:
            self.fail(redis_error(exc))
            return
        finally:
            calls.client.close()
        out = {**shown, **changed}
        print(json.dumps(out) if opts.json else "\n".join(_lines(out)))

    def _steer(
        self, calls: SyncRedisCalls, keys: RedisKeys, opts: argparse.Namespace
    ) -> dict[str, Any]:
        """Write the change, if one was asked (``steered.steer_host``)."""
        asked = self._delay is not None or self._cap is not None
        if not (asked or opts.block or opts.unblock or opts.purge or opts.clear):
            return {}
        blocked: bool | None
        if opts.clear:
            delay, cap, blocked = DEFAULT, DEFAULT, False
        else:
            delay, cap = _arg(self._delay), _arg(self._cap)
            blocked = True if opts.block else (False if opts.unblock else None)
        return steer_host(
            calls,
            keys,
            self._host,
            delay=delay,
            cap=cap,
            blocked=blocked,
            purge=opts.purge or opts.block,
        )


def _lines(out: dict[str, Any]) -> list[str]:
    delay, cap = out["delay"], out["cap"]
    override = "none" if delay["override"] is None else f"{delay['override']:g} s"
    cap_override = "none" if cap["override"] is None else str(cap["override"])
    turn = out["next_turn_in_s"]
    lines = [f"host {out['host']}" + (" BLOCKED" if out["blocked"] else "")]
    if "purged" in out:
        lines.append(
            f"  purged      {out['purged']:,} requests ({out['purged_retries']:,} retries waiting)"
        )
    lines += [
        f"  queued      {out['queued']:,}; retries waiting {out['retries_waiting']:,}; "
        f"leases in flight {out['in_flight']:,}"
        + ("" if turn is None else f"; next turn in {turn:.1f} s"),
        f"  delay       {delay['effective']:g} s (configured {delay['configured']:g} s, "
        f"site's {delay['site']:g} s, override {override})",
        f"  cap         {cap['effective']} "
        f"(configured {cap['configured']}, override {cap_override})",
        f"  blocked     {'yes' if out['blocked'] else 'no'}",
    ]
    lines += [f"  robots      {origin}: {state}" for origin, state in out["robots"].items()]
    bans = ", ".join(f"{p} ({s:.0f} s more)" for p, s in out["proxy_bans"].items())
    lines.append(f"  proxy bans  {bans or 'none'} (bans are per proxy, for every host)")
    if "bad_record" in out:
        lines.append(f"  WARNING     its steering record is not ours: {out['bad_record']}")
    return lines


def _parse(value: str | None, check: Any, option: str, what: str) -> Any:
    """None (not given), DEFAULT (clear the override), or the checked value."""
    if value is None or value == DEFAULT:
        return value
    try:
        return check(value)
    except ValueError as exc:
        if isinstance(exc, InvalidSteering):
            raise
        raise InvalidSteering(f"{option} takes {what} or '{DEFAULT}', not {value!r}") from None


def _arg(value: Any) -> str:
    """An option as steer_record.lua takes it: "" to keep, DEFAULT to clear, or the value."""
    return "" if value is None else (DEFAULT if value == DEFAULT else repr(value))
