"""Users' own spiders on the cluster: CrawlSpider, SitemapSpider, a spider from scrapy-redis.

Real processes throughout: ``scrapy crawl <spider>`` workers, the db_writer,
the session's redis-server and the shop site (``tests/support/shop``). The
CrawlSpider's database must hold exactly what plain Scrapy yields for the
same spider: the same item types and field values, each once, with a
declared key where ITEM_KEYS names one and the page's fingerprint and
position otherwise, also when a worker is SIGKILLed mid-crawl.
"""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis

from spiders_project.keys import RedisKeys
from tests.support.processes import (
    PYTHON,
    ROOT,
    Proc,
    db_writer,
    items_drained,
    items_in_hand,
    stat,
    wait_until,
    worker,
)
from tests.support.shop.site import ShopSite, expected_counts

pytestmark = pytest.mark.slow

SHOP = RedisKeys("shop")
SHOP_SPIDERS = "SPIDER_MODULES=tests.support.shop.spiders"


def plain_scrapy_items(site: ShopSite, tmp_path: Path) -> Counter[tuple[str, str]]:
    """(item type, canonical JSON) of every item a plain Scrapy run of the spider yields."""
    out = tmp_path / "plain.jsonl"
    done = subprocess.run(
        [PYTHON, "-m", "tests.support.shop.plain", site.url, str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in out.read_text().splitlines() if line]
    return Counter((line["type"], canonical(line["item"])) for line in lines)


def canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True)


def stored_rows(db_path: Path) -> list[tuple[str, str, str | None, Any]]:
    with sqlite3.connect(db_path) as db:
        rows = db.execute("SELECT item_type, item_key, url, data FROM items").fetchall()
    return [(t, k, url, json.loads(data)) for t, k, url, data in rows]


def crawl_shop(
    redis_url: str, r: redis.Redis, tmp_path: Path, procs: list[Proc], site: ShopSite, kill: bool
) -> tuple[list[Proc], Path, int]:
    """Two workers and the db_writer crawl the shop; with ``kill``, SIGKILL one mid-crawl.

    Returns the workers, the database and how many items there were at the kill.
    """
    db_path = tmp_path / "shop.db"
    # Four downloads each: the shop is one host, and a worker with 32 slots
    # would lease all of its pages before the other asked.
    settings = [
        SHOP_SPIDERS,
        "MAX_IDLE_TIME_BEFORE_CLOSE=3",
        "FRONTIER_LEASE_TIMEOUT=3",
        "CONCURRENT_REQUESTS=4",
    ]
    workers = [worker(f"shop{i}", redis_url, tmp_path, *settings, spider="shop") for i in (1, 2)]
    # Both workers up (listed by their first stats publish) before the seed, so both share it.
    wait_until(lambda: r.zcard(SHOP.workers) == 2, 60, what="both workers to start")
    r.lpush(SHOP.start_urls, site.url)
    writer = db_writer("dbw", redis_url, f"sqlite:///{db_path}", tmp_path, "--spider", "shop")
    procs += [*workers, writer]
    at_kill = 0

    def items_so_far() -> int:
        return r.llen(SHOP.items) + items_in_hand(r, SHOP) + stored(db_path)

    def holding_leases() -> list[Proc]:
        owners = {lease.decode().split(":")[1] for lease in r.zrange(SHOP.leases, 0, -1)}
        return [w for w in workers if str(w.pid) in owners]

    frozen: list[Proc] = []

    def freeze_a_lease_holder() -> bool:
        """SIGSTOP a worker that holds leases, and keep it stopped only if it
        still holds one (a running worker may ack its last lease between the
        look and the kill, and then nothing would be left to reclaim). A stopped
        worker's last writes may still be on their way (sent before the stop,
        not yet run by Redis): the look waits for them, else an ack landing
        after it leaves nothing to reclaim (seen once in CI under load 5.6)."""
        for w in holding_leases():
            w.signal(signal.SIGSTOP)
            time.sleep(1.0)
            if w in holding_leases():
                frozen.append(w)
                return True
            w.signal(signal.SIGCONT)
        return False

    if kill:
        wait_until(lambda: items_so_far() > 40 and freeze_a_lease_holder(), 90, what="leased work")
        (victim,) = frozen
        victim.signal(signal.SIGKILL)
        at_kill = items_so_far()
        victim.wait(10)
        workers.remove(victim)
        workers.insert(0, victim)
        workers.append(worker("shop3", redis_url, tmp_path, *settings, spider="shop"))
        procs.append(workers[-1])
    for w in workers[1:] if kill else workers:
        assert w.wait(240) == 0, w.log()[-3000:]
    wait_until(lambda: items_drained(r, SHOP), 60, what="the item buffer to drain")
    assert writer.stop(30) == 0, writer.log()[-3000:]
    return workers, db_path, at_kill


def stored(db_path: Path) -> int:
    if not db_path.exists():
        return 0
    with sqlite3.connect(db_path) as db:
        try:
            return int(db.execute("SELECT count(*) FROM items").fetchone()[0])
        except sqlite3.OperationalError:
            return 0


def assert_same_as_plain_scrapy(db_path: Path, site: ShopSite, plain: Counter) -> None:
    rows = stored_rows(db_path)
    assert Counter((t, canonical(data)) for t, _, _, data in rows) == plain
    assert Counter(t for t, _, _, _ in rows) == +Counter(expected_counts(site))
    for item_type, key, _, data in rows:
        if item_type == "ProductItem":
            assert key == data["sku"]
        elif item_type == "SellerItem":
            assert key == str(data["seller_id"])
        else:  # no declared key: the page's request fingerprint and the item's position
            assert re.fullmatch(r"[0-9a-f]{40}:\d+", key), key
        if item_type == "dict":  # the errback's items, through the user's pipeline
            assert data["checked"] is True and data["status"] == 404
    # The user's pipeline dropped seller 0: dropped from the database too.
    assert all(data["seller_id"] != 0 for t, _, _, data in rows if t == "SellerItem")
    listing = Counter(key.split(":")[0] for t, key, _, _ in rows if t == "ListingEntry")
    assert set(listing.values()) == {site.per_page}  # ten products on a page: ten rows


def test_a_crawl_spider_on_two_workers_stores_what_plain_scrapy_yields(
    redis_url, r, tmp_path, procs
):
    with ShopSite(latency=0.02) as site:
        plain = plain_scrapy_items(site, tmp_path)
        workers, db_path, _ = crawl_shop(redis_url, r, tmp_path, procs, site, kill=False)
    assert_same_as_plain_scrapy(db_path, site, plain)
    for w in workers:
        assert stat(r, w, "item_scraped_count", SHOP) > 0
        assert stat(r, w, "frontier/rejected", SHOP) == 0
        assert stat(r, w, "frontier/unserializable", SHOP) == 0
        assert "Traceback" not in w.log() and "Unhandled error" not in w.log()
    assert r.llen(SHOP.items_rejected) == r.llen(SHOP.requests_unserializable) == 0


def test_a_crawl_spider_loses_and_duplicates_nothing_when_a_worker_is_killed(
    redis_url, r, tmp_path, procs
):
    with ShopSite(latency=0.05) as site:
        plain = plain_scrapy_items(site, tmp_path)
        workers, db_path, at_kill = crawl_shop(redis_url, r, tmp_path, procs, site, kill=True)
    assert_same_as_plain_scrapy(db_path, site, plain)
    # Killed mid-crawl, holding leases that the others reclaimed and fetched again.
    assert at_kill < sum(expected_counts(site).values())
    reclaimed = sum(stat(r, w, "frontier/leases_reclaimed", SHOP) for w in workers[1:])
    assert reclaimed > 0
    assert r.zcard(SHOP.leases) == 0


def test_a_sitemap_spider_follows_the_index_and_its_rules(redis_url, r, tmp_path, procs):
    keys = RedisKeys("shop_sitemap")
    with ShopSite() as site:
        r.lpush(keys.start_urls, f"{site.url}sitemap.xml")
        w = worker(
            "maps",
            redis_url,
            tmp_path,
            SHOP_SPIDERS,
            "MAX_IDLE_TIME_BEFORE_CLOSE=2",
            spider="shop_sitemap",
        )
        procs.append(w)
        assert w.wait(120) == 0, w.log()[-3000:]
        good = {sku for sku in site.all_skus() if not site.broken(sku)}
    entries = [json.loads(x) for x in r.lrange(keys.items, 0, -1)]
    assert sorted(e["item"]["sku"] for e in entries) == sorted(good)
    assert {e["type"] for e in entries} == {"dict"}


def test_a_scrapy_redis_spider_runs_after_changing_its_import(redis_url, r, tmp_path, procs):
    original = (ROOT / "tests/support/shop/ported.py").read_text()
    old = "from scrapy_redis.spiders import RedisCrawlSpider"
    assert original.count(old) == 1
    package = tmp_path / "ported_project"
    package.mkdir()
    (package / "__init__.py").write_text("")
    ported = original.replace(old, "from spiders_project.spiders import RedisCrawlSpider")
    (package / "shop.py").write_text(ported)
    assert len(ported.splitlines()) == len(original.splitlines())

    with ShopSite() as site:
        # Its own seed key and its own seed format (make_request_from_data).
        r.lpush("shop_ported:seeds", json.dumps({"start": site.url}))
        w = worker(
            "ported",
            redis_url,
            tmp_path,
            "SPIDER_MODULES=ported_project.shop",
            "MAX_IDLE_TIME_BEFORE_CLOSE=2",
            spider="shop_ported",
            env={"PYTHONPATH": f"{tmp_path}:{ROOT}"},
        )
        procs.append(w)
        assert w.wait(120) == 0, w.log()[-3000:]
        good = {sku for sku in site.all_skus() if not site.broken(sku)}
    keys = RedisKeys("shop_ported")
    entries = [json.loads(x) for x in r.lrange(keys.items, 0, -1)]
    assert {e["item"]["sku"] for e in entries} == good and len(entries) == len(good)
    assert {e["type"] for e in entries} == {"PortedProduct"}
    assert all(e["item"]["seen_on"].startswith(site.url + "c/") for e in entries)
    assert r.llen("shop_ported:seeds") == 0 and r.llen(keys.requests_rejected) == 0
    assert stat(r, w, "frontier/unserializable", keys) == 0


def test_hostile_callback_and_class_names_are_rejected_never_run(redis_url, r, tmp_path, procs):
    """Entries planted in the shop's frontier name machinery, dunders and foreign classes.

    ``evil_module`` would leave a file behind if anything imported it; the
    spider's own module has classes that are not items (its pipeline).
    """
    marker = tmp_path / "imported"
    (tmp_path / "evil_module.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nclass Boom:\n    pass\n"
    )
    with ShopSite() as site:
        host = urlsplit(site.url).netloc
        hostile_meta = [
            {"__t": "obj", "c": "evil_module.Boom", "v": {}},
            {"__t": "obj", "c": "os.system", "v": {"command": "touch " + str(marker)}},
            {"__t": "obj", "c": "tests.support.shop.spiders.ShopPipeline", "v": {}},
            {"__t": "obj", "c": "tests.support.shop.spiders.ProductItem", "v": {"evil": 1}},
        ]
        planted = [
            json.dumps({"url": f"{site.url}cb/{name}", "cb": name}).encode()
            for name in ("close", "from_crawler", "_set_crawler", "__init__", "start", "nope")
        ]
        planted += [json.dumps({"url": f"{site.url}eb", "eb": "setup_redis"}).encode()]
        planted += [
            json.dumps({"url": f"{site.url}meta/{i}", "meta": {"x": value}}).encode()
            for i, value in enumerate(hostile_meta)
        ]
        for i, entry in enumerate(planted, start=1):
            r.zadd(SHOP.host_queue(host), {entry: i})
        r.incrby(SHOP.requests_size, len(planted))
        r.zadd(SHOP.hosts, {host: 0})
        r.lpush(SHOP.start_urls, site.url)
        w = worker(
            "shop",
            redis_url,
            tmp_path,
            SHOP_SPIDERS,
            "MAX_IDLE_TIME_BEFORE_CLOSE=2",
            spider="shop",
            env={"PYTHONPATH": f"{tmp_path}:{ROOT}"},
        )
        procs.append(w)
        assert w.wait(120) == 0, w.log()[-3000:]
        good = {sku for sku in site.all_skus() if not site.broken(sku)}
        served = set(site.requested())
    rejected = r.lrange(SHOP.requests_rejected, 0, -1)
    assert sorted(rejected) == sorted(planted)
    assert stat(r, w, "frontier/rejected", SHOP) == len(planted)
    assert not marker.exists()
    assert not any(path.startswith(("/cb/", "/eb", "/meta/")) for path in served)
    # The crawl went on: every product was stored.
    products = {
        e["item"]["sku"]
        for e in map(json.loads, r.lrange(SHOP.items, 0, -1))
        if e["type"] == "ProductItem"
    }
    assert products == good


def test_a_request_that_cannot_be_stored_is_kept_aside_and_the_crawl_goes_on(
    redis_url, r, tmp_path, procs
):
    keys = RedisKeys("shop_careless")
    with ShopSite(broken_every=0) as site:
        r.lpush(keys.start_urls, site.url)
        w = worker(
            "careless",
            redis_url,
            tmp_path,
            SHOP_SPIDERS,
            "MAX_IDLE_TIME_BEFORE_CLOSE=2",
            spider="shop_careless",
        )
        procs.append(w)
        assert w.wait(120) == 0, w.log()[-3000:]
        listings = len(site.categories) * site.pages_per_category
        first = {site.skus(c, p)[0] for c in site.categories for p in range(1, 4)}
        others = set(site.all_skus()) - first
    kept = [json.loads(x) for x in r.lrange(keys.requests_unserializable, 0, -1)]
    assert len(kept) == listings
    assert {e["url"].rsplit("/", 1)[1] for e in kept} == first
    for entry in kept:
        assert (entry["where"], entry["type"]) == ("meta['lock']", "_thread.lock")
        assert entry["callback"] == "parse_product" and entry["meta"]["lock"].startswith("<")
    assert stat(r, w, "frontier/unserializable", keys) == listings
    lines = [line for line in w.log().splitlines() if "Unserializable request" in line]
    assert len(lines) == listings and "meta['lock'] is a _thread.lock" in lines[0]
    # The crawl went on: every other product was fetched and its item buffered.
    skus = {json.loads(x)["item"]["sku"] for x in r.lrange(keys.items, 0, -1)}
    assert skus == others
    # Not in the dupefilter (the seed, the listing pages and the other products
    # are): found again after a fix, the same links are crawled.
    assert int(r.get(keys.seen) or 0) == 1 + listings + len(others)
