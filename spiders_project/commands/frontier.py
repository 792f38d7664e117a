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
from spiders_project.keys import LANES, RedisKeys
from spiders_project.keys.jobs import host_jobs
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.politeness.steered import (
    record_call,
    record_script,
    steer_call,
    steer_script,
)
from spiders_project.read_model.host_steering import (
    HostSteer,
    InvalidSteering,
    check_cap,
    check_delay,
    check_host,
)
from spiders_project.read_model.replies import scored, text
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
        """Write the change: the record every worker reads first, changed in one
        script (a block is then refused by the workers), then the host's limits
        and its purge in its shard."""
        asked = self._delay is not None or self._cap is not None
        if not (asked or opts.block or opts.unblock or opts.purge or opts.clear):
            return {}
        blocked: bool | None
        if opts.clear:
            delay, cap, blocked = DEFAULT, DEFAULT, False
        else:
            delay, cap = _arg(self._delay), _arg(self._cap)
            blocked = True if opts.block else (False if opts.unblock else None)
        script_keys, args = record_call(keys, self._host, delay, cap, blocked)
        before, after = calls.script(record_script(), script_keys, args, retry=False)
        old, new = _record(before), _record(after)
        purge = opts.purge or opts.block
        script_keys, args = steer_call(keys, self._host, new.limits(), purge=purge)
        queued, later = calls.script(steer_script(), script_keys, args, retry=False)
        out: dict[str, Any] = {"changed": new != old}
        if purge:
            out.update(purged=int(queued) + int(later), purged_retries=int(later))
        return out


def show(
    calls: SyncRedisCalls, keys: RedisKeys, host: str, configured_ms: int, configured_cap: int
) -> dict[str, Any]:
    """Everything the frontier holds about ``host``, in two round trips (its
    shard, then the spider's slot): what ``--show`` prints."""
    shard = keys.for_host(host)
    reads: list[tuple[Any, ...]] = []
    for lane in LANES:
        k = shard.in_lane(lane)
        reads += [
            ("ZCARD", k.host_queue(host)),
            ("LLEN", k.host_list(host)),
            ("ZCARD", k.host_later(host)),
            ("HGET", k.in_flight, host),
            ("ZSCORE", k.hosts, host),
            ("ZCARD", host_jobs(k, host)),
        ]
    reads += [("HGET", shard.host_delays, host), ("HGET", shard.host_limits, host), ("TIME",)]
    replies = calls.pipelined("frontier host", reads, retry=False)
    origins = [f"{scheme}://{host}" for scheme in ("http", "https")]
    spider_reads: list[tuple[Any, ...]] = [("HGET", keys.host_steering, host)]
    for origin in origins:
        spider_reads += [
            ("STRLEN", keys.robots(origin)),
            ("PTTL", keys.robots(origin)),
            ("EXISTS", keys.robots_lock(origin)),
        ]
    spider_reads.append(("ZRANGE", keys.proxies_banned, 0, -1, "WITHSCORES"))
    more = calls.pipelined("frontier host", spider_reads, retry=False)
    seconds, micros = replies[-1]
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    lanes = [replies[i : i + 6] for i in range(0, 6 * len(LANES), 6)]
    turns = [float(lane[4]) for lane in lanes if lane[4] is not None]
    try:
        steer = HostSteer.from_json(more[0]) if more[0] is not None else HostSteer()
        bad = None
    except InvalidSteering as exc:
        steer, bad = HostSteer(), str(exc)
    site_ms = int(replies[-3] or 0)
    override_ms = steer.delay_ms
    robots = {
        origin: _robots(int(more[1 + 3 * i]), int(more[2 + 3 * i]), bool(more[3 + 3 * i]))
        for i, origin in enumerate(origins)
    }
    bans = {text(m): (s - now_ms) / 1000 for m, s in scored(more[-1]) if s > now_ms}
    out: dict[str, Any] = {
        "host": host,
        "queued": sum(int(lane[0]) + int(lane[1]) + int(lane[5]) for lane in lanes),
        "retries_waiting": sum(int(lane[2]) for lane in lanes),
        "in_flight": sum(int(lane[3] or 0) for lane in lanes),
        "next_turn_in_s": max(0.0, (min(turns) - now_ms) / 1000) if turns else None,
        "delay": {
            "configured": configured_ms / 1000,
            "site": site_ms / 1000,
            "override": steer.delay,
            "effective": max(configured_ms if override_ms is None else override_ms, site_ms) / 1000,
        },
        "cap": {
            "configured": configured_cap,
            "override": steer.cap,
            "effective": steer.cap or configured_cap,
        },
        "blocked": steer.blocked,
        "limits_in_shard": text(replies[-2]) if replies[-2] is not None else None,
        "robots": robots,
        "proxy_bans": bans,
    }
    if bad is not None:
        out["bad_record"] = bad
    return out


def _robots(size: int, pttl: int, fetching: bool) -> str:
    if pttl == -2:
        return "being fetched" if fetching else "not fetched (or expired)"
    if size == 0:
        return "none (everything allowed)"
    expires = "" if pttl < 0 else f", kept {pttl / 1000:.0f} s more"
    return f"fetched ({size} bytes{expires})"


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


def _record(raw: Any) -> HostSteer:
    """A record the script returned; one that is not ours counts as none (it is replaced)."""
    try:
        return HostSteer.from_json(raw) if raw else HostSteer()
    except InvalidSteering:
        return HostSteer()
