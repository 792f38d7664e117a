"""A spider's own component dicts in ``custom_settings`` add to the cluster's, never replace them.

Real workers (``scrapy crawl``) of spiders written into a package of the
test's own, each beside a control spider with no ``custom_settings``, on the
same local site and the session's redis-server. What Scrapy built is read
from its own "Enabled ..." lines (there is no stat of it), what the crawl did
from Redis, the items and the WARC files.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import redis

from spiders_project.addon import components
from spiders_project.keys import RedisKeys
from tests.support.archive import records, warc_paths
from tests.support.processes import ROOT, Proc, published_stats, wait_until, worker
from tests.support.site import TestSite

pytestmark = pytest.mark.slow

PACKAGE = "custom_spiders"
SPIDERS = '''
from spiders_project.spiders import RedisSpider


class OwnUserAgent:
    """The spider's own user agent, instead of Scrapy's middleware, as many spiders do."""

    def process_request(self, request):
        request.headers["User-Agent"] = "own-user-agent"
        request.meta["own_user_agent"] = True


class OwnExtension:
    @classmethod
    def from_crawler(cls, crawler):
        crawler.stats.set_value("own_extension/built", 1)
        return cls()


class Pages(RedisSpider):
    def parse(self, response):
        yield {"url": response.url, "own_user_agent": response.meta.get("own_user_agent", False)}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.parse)


class Plain(Pages):
    name = "plain"


class OwnMiddleware(Pages):
    name = "own_middleware"
    custom_settings = {
        "DOWNLOADER_MIDDLEWARES": {
            "scrapy.downloadermiddlewares.useragent.UserAgentMiddleware": None,
            "custom_spiders.OwnUserAgent": 500,
        }
    }


class OwnExtensions(OwnMiddleware):
    name = "own_extensions"
    custom_settings = {
        **OwnMiddleware.custom_settings,
        "EXTENSIONS": {"custom_spiders.OwnExtension": 500},
    }
'''
OWN_USER_AGENT = f"{PACKAGE}.OwnUserAgent"
OWN_EXTENSION = f"{PACKAGE}.OwnExtension"
SCRAPY_USER_AGENT = "scrapy.downloadermiddlewares.useragent.UserAgentMiddleware"
SCRAPYS_OFF = {
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware",
    "scrapy.downloadermiddlewares.retry.RetryMiddleware",
}
ITEM_BUFFER = "spiders_project.item_buffer.buffer.ItemBuffer"
KINDS = ("downloader middlewares", "spider middlewares", "extensions")


def enabled(log: str, kind: str) -> list[str]:
    """What Scrapy's "Enabled <kind>:" line of a worker's log lists."""
    match = re.search(rf"Enabled {kind}:\n(\[.*?\])\n", log, re.DOTALL)
    assert match, f"no 'Enabled {kind}' in:\n{log[-3000:]}"
    return list(ast.literal_eval(match.group(1)))


def crawl_beside_the_plain_spider(
    spider: str, redis_url: str, r: redis.Redis, tmp_path: Path, procs: list[Proc], *settings: str
) -> tuple[Proc, Proc, set[str]]:
    """``spider`` and the control spider ``plain`` crawl the same site, one worker each,
    with the same ``settings``; returns both workers and the site's pages."""
    package = tmp_path / PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text(SPIDERS)
    common = (f"SPIDER_MODULES={PACKAGE}", "MAX_IDLE_TIME_BEFORE_CLOSE=2", *settings)
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}"}
    names = (spider, "plain")
    with TestSite(pages=20, seed=39, dead_links=False, offsite_links=False) as site:
        workers = [worker(n, redis_url, tmp_path, *common, spider=n, env=env) for n in names]
        procs += workers
        # The heartbeat lists each worker (STATS_PUBLISH_ENABLED); each is seeded as
        # soon as it is listed, so neither idles out waiting for the other to start.
        for name in names:
            keys = RedisKeys(name)
            wait_until(lambda keys=keys: r.zcard(keys.workers) == 1, 60, what=f"{name} listed")
            r.lpush(keys.start_urls, site.url)
        for w in workers:
            assert w.wait(120) == 0, w.log()[-3000:]
        pages = site.page_urls()
    return workers[0], workers[1], pages


def items(r: redis.Redis, spider: str) -> list[dict]:
    return [json.loads(entry)["item"] for entry in r.lrange(RedisKeys(spider).items, 0, -1)]


def test_a_spiders_own_downloader_middleware_keeps_every_cluster_component(
    redis_url, r, tmp_path, procs
):
    warc_dir = tmp_path / "warc"
    own, plain, pages = crawl_beside_the_plain_spider(
        "own_middleware", redis_url, r, tmp_path, procs, "WARC_ENABLED=true", f"WARC_DIR={warc_dir}"
    )
    # Exactly the control's downloader middlewares, its user agent instead of Scrapy's.
    mine = enabled(own.log(), "downloader middlewares")
    theirs = enabled(plain.log(), "downloader middlewares")
    assert set(mine) == set(theirs) - {SCRAPY_USER_AGENT} | {OWN_USER_AGENT}
    cluster = set(components.DOWNLOADER_MIDDLEWARES)
    assert {
        "spiders_project.scope.networks.NetworkGuardMiddleware",
        "spiders_project.node_health.middleware.NodeHealthMiddleware",
        "spiders_project.archive.middleware.ArchiveMiddleware",
        "spiders_project.scope.seed_limits.SeedBudget",
    } <= cluster & set(mine)
    assert not SCRAPYS_OFF & set(mine)
    for kind in KINDS[1:]:
        assert enabled(own.log(), kind) == enabled(plain.log(), kind)

    stored = items(r, "own_middleware")
    assert sorted(item["url"] for item in stored) == sorted(pages)
    assert all(item["own_user_agent"] for item in stored)
    assert not any(item["own_user_agent"] for item in items(r, "plain"))
    # The archive: every page's response, with the spider's own user agent on its request.
    responses, agents = set(), {}
    for path in warc_paths(warc_dir):
        found = list(records(path))
        info = dict(line.split(": ", 1) for line in found[0][1].decode().splitlines() if line)
        if info["spider"] != "own_middleware":  # the control's file (the same WARC_DIR)
            continue
        for record, _ in found:
            url = record.rec_headers.get_header("WARC-Target-URI")
            if record.rec_type == "response":
                responses.add(url)
            elif record.rec_type == "request":
                agents[url] = record.http_headers.get_header("User-Agent")
    assert pages <= responses
    assert {agents[url] for url in pages} == {"own-user-agent"}
    # The heartbeat's last publish: the worker's stats, as the monitor reads them.
    assert int(published_stats(r, own, RedisKeys("own_middleware"))["item_scraped_count"]) == len(
        pages
    )


def test_a_spiders_own_extensions_keep_the_item_buffer_and_scrapys_middlewares_off(
    redis_url, r, tmp_path, procs
):
    own, plain, pages = crawl_beside_the_plain_spider(
        "own_extensions", redis_url, r, tmp_path, procs
    )
    extensions = enabled(own.log(), "extensions")
    assert set(extensions) == set(enabled(plain.log(), "extensions")) | {OWN_EXTENSION}
    assert ITEM_BUFFER in extensions
    middlewares = enabled(own.log(), "downloader middlewares")
    assert not SCRAPYS_OFF & set(middlewares)
    assert OWN_USER_AGENT in middlewares
    # Every page's item buffered for the db_writer, as the control's.
    stored = items(r, "own_extensions")
    assert sorted(item["url"] for item in stored) == sorted(pages)
    assert len(items(r, "plain")) == len(pages)
    stats = published_stats(r, own, RedisKeys("own_extensions"))
    assert stats["own_extension/built"] == "1"
