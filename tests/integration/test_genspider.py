"""``scrapy genspider -t distributed|distributed_crawl NAME DOMAIN`` writes a spider that runs.

Real processes: the genspider command writes into a package of the test's
own (NEWSPIDER_MODULE), then ``scrapy crawl NAME`` crawls a local site from a
seed pushed to ``NAME:start_urls``, against the session's redis-server.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from spiders_project.keys import RedisKeys
from tests.support.processes import PYTHON, ROOT, worker
from tests.support.site import TestSite


def genspider(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{ROOT}"}
    command = [PYTHON, "-m", "scrapy", "genspider", *args]
    command += ["-s", "NEWSPIDER_MODULE=gen_spiders", "-s", "SPIDER_MODULES=gen_spiders"]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("template", "base"),
    [("distributed", "RedisSpider"), ("distributed_crawl", "RedisCrawlSpider")],
)
def test_a_generated_spider_crawls_from_its_seed_list(
    template: str, base: str, redis_url, r, tmp_path: Path, procs
) -> None:
    package = tmp_path / "gen_spiders"
    package.mkdir()
    (package / "__init__.py").write_text("")
    name = f"my_{template}"
    done = genspider(tmp_path, "-t", template, name, "127.0.0.1")
    assert done.returncode == 0, done.stdout + done.stderr
    source = (package / f"{name}.py").read_text()
    assert f"from spiders_project.spiders import {base}" in source

    keys = RedisKeys(name)
    with TestSite(pages=20, seed=8, dead_links=False, offsite_links=False) as site:
        r.lpush(keys.start_urls, site.url)
        w = worker(
            name,
            redis_url,
            tmp_path,
            "SPIDER_MODULES=gen_spiders",
            "MAX_IDLE_TIME_BEFORE_CLOSE=2",
            spider=name,
            env={"PYTHONPATH": f"{tmp_path}:{ROOT}"},
        )
        procs.append(w)
        assert w.wait(120) == 0, w.log()[-3000:]
        pages = site.page_urls()
    entries = [json.loads(x) for x in r.lrange(keys.items, 0, -1)]
    urls = {e["item"]["url"] for e in entries}
    # The CrawlSpider's rules start from the seed's links: the seed itself yields nothing.
    assert urls == (pages if template == "distributed" else pages - {site.url})
    assert len(entries) == len(urls)


def test_scrapys_own_templates_stay_available(tmp_path: Path) -> None:
    done = genspider(tmp_path, "--list")
    assert done.returncode == 0, done.stderr
    for template in ("basic", "crawl", "distributed", "distributed_crawl"):
        assert f"  {template}\n" in done.stdout
