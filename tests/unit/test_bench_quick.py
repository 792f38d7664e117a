"""make bench-quick's verdicts: a figure worse than its target fails the run."""

from __future__ import annotations

import pytest

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


def _crawl(pages_per_s: float, cpu_ms: float, redis_per_10k: float | None = None) -> CrawlResult:
    return CrawlResult(
        name="crawl",
        processes=1,
        window=8_000,
        pages_per_s=pages_per_s,
        cpu_ms_per_page=cpu_ms,
        site_core_share=0.0,
        other_cores=0.0,
        wall=30.0,
        commands_per_page=4.5 if redis_per_10k else None,
        redis_cpu_per_10k=redis_per_10k,
    )


def test_issue_42_keeps_the_workers_pages_per_second_at_nine_tenths_of_plain_scrapys():
    plain, worker = _crawl(374, 2.60), _crawl(353, 2.71, 0.544)
    figures = {f.title: f for f in crawl_targets(plain, worker)}
    assert figures["Redis CPU per page (µs)"].value == pytest.approx(54.4)
    assert not figures["Redis CPU per page (µs)"].holds
    assert figures["Redis commands per page"].holds
    assert figures["Worker pages/s / plain Scrapy's"].holds  # 0.94
    slower = {f.title: f for f in crawl_targets(plain, _crawl(330, 2.71, 0.544))}
    assert not slower["Worker pages/s / plain Scrapy's"].holds  # 0.88


def test_the_worker_must_give_at_least_plain_scrapys_pages_per_cpu_second():
    assert worker_cpu_target(1.0).holds
    assert not worker_cpu_target(0.99).holds


def test_rounds_are_judged_by_their_medians():
    rounds = [_crawl(302.9, 2.9, 0.5), _crawl(302.5, 2.5, 0.3), _crawl(302.7, 2.7, None)]
    mid = median_crawl(rounds)
    assert mid.cpu_ms_per_page == 2.7 and mid.pages_per_s == 302.7
    assert mid.redis_cpu_per_10k == 0.4 and mid.commands_per_page == 4.5


def test_the_ratio_given_replaces_the_median_pairs_own():
    plain, worker = _crawl(300, 2.5), _crawl(300, 2.7, 0.3)
    (ratio,) = [t for t in crawl_targets(plain, worker, 1.02) if "CPU-second" in t.title]
    assert ratio.value == 1.02 and ratio.holds
