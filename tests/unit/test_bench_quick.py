"""make bench-quick's verdicts: a figure worse than its target fails the run."""

from __future__ import annotations

from tests.bench.crawls import CrawlResult
from tests.bench.quick import Target, crawl_targets, median_crawl, worker_cpu_target


def test_an_upper_bound_holds_up_to_its_limit():
    assert Target("Redis CPU per page (µs)", 30.0, 30.0, at_most=True).holds
    assert not Target("Redis CPU per page (µs)", 30.1, 30.0, at_most=True).holds


def test_a_lower_bound_holds_from_its_limit():
    assert Target("items/s", 100_000, 100_000, at_most=False).holds
    assert not Target("items/s", 99_999, 100_000, at_most=False).holds


def test_the_line_says_which_target_is_missed():
    line = Target("Redis commands per page", 17.5, 12.0, at_most=True).line()
    assert line.split()[0] == "MISS" and "≤ 12.0" in line and "17.5" in line


def test_the_worker_must_give_at_least_plain_scrapys_pages_per_cpu_second():
    assert worker_cpu_target(1.0).holds
    assert not worker_cpu_target(0.99).holds


def _crawl(cpu_ms: float, redis_per_10k: float | None) -> CrawlResult:
    return CrawlResult(
        name="worker",
        processes=1,
        window=8000,
        pages_per_s=300.0 + cpu_ms,
        cpu_ms_per_page=cpu_ms,
        site_core_share=0.0,
        other_cores=0.0,
        wall=30.0,
        redis_cpu_per_10k=redis_per_10k,
        commands_per_page=redis_per_10k,
    )


def test_rounds_are_judged_by_their_medians():
    rounds = [_crawl(2.9, 0.5), _crawl(2.5, 0.3), _crawl(2.7, None)]
    mid = median_crawl(rounds)
    assert mid.cpu_ms_per_page == 2.7 and mid.pages_per_s == 302.7
    assert mid.redis_cpu_per_10k == 0.4 and mid.commands_per_page == 0.4


def test_the_ratio_given_replaces_the_median_pairs_own():
    plain, worker = _crawl(2.5, None), _crawl(2.7, 0.3)
    (ratio,) = [t for t in crawl_targets(plain, worker, 1.02) if "CPU-second" in t.title]
    assert ratio.value == 1.02 and ratio.holds
    (own,) = [t for t in crawl_targets(plain, worker) if "CPU-second" in t.title]
    assert own.value == 2.5 / 2.7 and not own.holds
