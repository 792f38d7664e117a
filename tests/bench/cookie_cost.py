"""What shared cookie jars cost per page (issue 41, item 9), in interleaved pairs.

    python -m tests.bench.cookie_cost [--pairs 3] [--window 8000] [--pages 16000]
                                      [--baseline disabled|jars]

Item 9: on bench-quick's crawl with a session cookie, worker CPU and Redis
CPU per page stay within 5% of the same crawl without cookies, and Redis
commands per page grow by at most one. Each pair is one worker crawling the
bench site (``make bench-quick``'s worker phase, pinned the same way) twice,
back to back:

- **cookie**: the site's root sets a session cookie, and every other page
  counts the requests that came without it (``site_proc.py``): the shared
  jar's update travels with the root's ack, and every later request reads
  the jar before it goes out;
- **baseline** ``disabled`` (the default): the same crawl with
  ``COOKIES_ENABLED=False``, the strict reading of "without cookies";
  ``jars``: jars on but no cookie set (the site sets none), what the other
  bench-quick figures measure.

Pairs alternate which crawl runs first, so a drift of the machine's load
shows in both. Under load one crawl's worker CPU per page scatters by 10-15%
from round to round (five helpers share two cores), so the figures are
medians of each pair's ratio; commands per page hardly move with load.
``make bench-quick`` runs this (``quick.cookie_targets`` holds its limits).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.bench.crawls import Bench, CrawlResult, pin_apart
from tests.bench.site_proc import Site
from tests.support.services import RedisServer

BASELINES = ("disabled", "jars")


@dataclass(frozen=True)
class Pair:
    """One crawl with the session cookie and its baseline, run back to back."""

    cookie: CrawlResult
    baseline: CrawlResult
    missing: int  # pages but the root the cookie crawl fetched without the session

    @property
    def worker_cpu(self) -> float:
        return self.cookie.cpu_ms_per_page / self.baseline.cpu_ms_per_page

    @property
    def redis_cpu(self) -> float:
        return (self.cookie.redis_cpu_per_10k or 0.0) / (self.baseline.redis_cpu_per_10k or 1.0)

    @property
    def commands(self) -> float:
        return (self.cookie.commands_per_page or 0.0) - (self.baseline.commands_per_page or 0.0)

    def line(self) -> str:
        c, b = self.cookie, self.baseline
        return (
            f"    worker CPU {c.cpu_ms_per_page:.3f} / {b.cpu_ms_per_page:.3f} ms/page "
            f"= {self.worker_cpu:.3f}; Redis CPU {100 * (c.redis_cpu_per_10k or 0):.2f} / "
            f"{100 * (b.redis_cpu_per_10k or 0):.2f} µs/page = {self.redis_cpu:.3f}; commands "
            f"{c.commands_per_page or 0:.2f} / {b.commands_per_page or 0:.2f} "
            f"({self.commands:+.2f}); round trips {c.round_trips_per_page or 0:.3f} / "
            f"{b.round_trips_per_page or 0:.3f}; "
            f"{c.pages_per_s:,.0f} / {b.pages_per_s:,.0f} pages/s; "
            f"{self.missing} pages without the session; EVALSHA (lease calls, mostly) "
            f"{self.per_page('evalsha')[0]:.4f} / {self.per_page('evalsha')[1]:.4f} a page; "
            "commands a page more (less): "
            + (", ".join(f"{cmd} {d:+.2f}" for cmd, d in self.command_deltas()) or "none")
        )

    def per_page(self, command: str) -> tuple[float, float]:
        """``command``'s calls a page, in the cookie crawl and in its baseline."""
        cookie, baseline = dict(self.cookie.top_commands), dict(self.baseline.top_commands)
        return cookie.get(command, 0.0), baseline.get(command, 0.0)

    def command_deltas(self, least: float = 0.05) -> list[tuple[str, float]]:
        """Commands a page the cookie crawl sent more (or fewer) than its baseline."""
        cookie, baseline = dict(self.cookie.top_commands), dict(self.baseline.top_commands)
        deltas = {c: cookie.get(c, 0.0) - baseline.get(c, 0.0) for c in {*cookie, *baseline}}
        return sorted(
            ((c, d) for c, d in deltas.items() if abs(d) >= least), key=lambda cd: -abs(cd[1])
        )


@dataclass(frozen=True)
class CookieCost:
    """The pairs of one run and their medians."""

    baseline: str
    window: int
    pairs: list[Pair]

    @property
    def worker_cpu(self) -> float:
        return statistics.median(p.worker_cpu for p in self.pairs)

    @property
    def redis_cpu(self) -> float:
        return statistics.median(p.redis_cpu for p in self.pairs)

    @property
    def commands(self) -> float:
        return statistics.median(p.commands for p in self.pairs)

    @property
    def missing(self) -> int:
        return sum(p.missing for p in self.pairs)

    def lines(self) -> list[str]:
        title = "COOKIES_ENABLED=False" if self.baseline == "disabled" else "jars, no cookie"
        out = [
            f"  session cookie vs {title}: {len(self.pairs)} pairs of "
            f"{self.window:,}-page windows (cookie / baseline)"
        ]
        return out + [p.line() for p in self.pairs]


def cookie_pairs(bench: Bench, window: int, pairs: int, baseline: str = "disabled") -> CookieCost:
    """``pairs`` interleaved pairs on ``bench``'s site and Redis (see the module docstring)."""
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}, not {baseline!r}")
    site = bench.site
    done: list[Pair] = []
    try:
        for i in range(pairs):
            results: dict[str, CrawlResult] = {}
            missing = 0
            for kind in ("cookie", "baseline") if i % 2 == 0 else ("baseline", "cookie"):
                cookie = kind == "cookie"
                site.set_session(cookie or baseline == "disabled")
                settings = [] if cookie or baseline == "jars" else ["COOKIES_ENABLED=False"]
                results[kind] = bench.windowed_worker(
                    f"{kind} {i + 1}", f"cookies-{kind}", window, *settings
                )
                if cookie:
                    missing = site.missing()
            done.append(Pair(results["cookie"], results["baseline"], missing))
    finally:
        site.set_session(False)
    return CookieCost(baseline, window, done)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.cookie_cost", description=__doc__)
    parser.add_argument("--pages", type=int, default=16_000)
    parser.add_argument("--window", type=int, default=8_000)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--baseline", choices=BASELINES, default="disabled")
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp/bench-cookies"))
    args = parser.parse_args(argv)
    args.log_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    crawl_cpus, service_cpus = pin_apart()
    redis = RedisServer(datadir=args.log_dir / "redis", cpus=service_cpus)
    try:
        site = Site(args.pages, args.log_dir, service_cpus)
        try:
            bench = Bench(site, redis, args.log_dir, crawl_cpus, service_cpus)
            cost = cookie_pairs(bench, args.window, args.pairs, args.baseline)
        finally:
            site.stop()
    finally:
        redis.stop()
    print(f"\ncookie cost, {time.monotonic() - t0:.0f} s")
    for line in cost.lines():
        print(line)
    print(
        f"  medians: worker CPU {cost.worker_cpu:.3f}, Redis CPU {cost.redis_cpu:.3f}, "
        f"commands {cost.commands:+.2f}/page; {cost.missing} pages without the session"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
