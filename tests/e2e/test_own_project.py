"""Someone's own Scrapy project, made distributed by the ADDONS line and its spider's import.

``tests/e2e/own_project`` was made with ``scrapy startproject own_project``
and has its own items, pipeline and middlewares. Here it runs as a user
runs it: the wheel of this checkout in a fresh virtualenv
(tests/support/distribution.py), a copy of the project outside the
checkout, every process started in the project's folder with the checkout
on no path: two workers (``scrapy crawl pages``), the db_writer and the
monitor, against a local site, the session's redis-server and SQLite.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
import redis

from spiders_project.addon.checks import NOT_ENABLED
from spiders_project.keys import RedisKeys
from tests.support.distribution import Installed, install_distribution
from tests.support.monitoring import scrape_url
from tests.support.processes import Proc, items_drained, stored_urls, wait_until
from tests.support.services import free_port
from tests.support.site import TestSite

pytestmark = pytest.mark.slow

OWN_PROJECT = Path(__file__).resolve().parent / "own_project"
KEYS = RedisKeys("pages")
ADDONS_LINE = 'ADDONS = {"spiders_project.Addon": 0}'
SPIDER_IMPORT = "from spiders_project.spiders import RedisSpider"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    return install_distribution(tmp_path_factory.mktemp("distribution"))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the project, outside the checkout: its folder (with scrapy.cfg)."""
    folder = tmp_path / "own_project"
    shutil.copytree(OWN_PROJECT, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def process(installed: Installed, name: str, project: Path, log_dir: Path, *argv: str, **env: str):
    """``python <argv>`` of the virtualenv in the project's folder, logging to a file."""
    return Proc(
        name,
        [str(installed.python), *argv],
        installed.env(**env),
        log_dir / f"{name}.log",
        cwd=project,
        inherit_env=False,
    )


def test_the_project_is_made_distributed_by_two_lines_only() -> None:
    mentions = [
        (path.relative_to(OWN_PROJECT).as_posix(), line.strip())
        for path in sorted(OWN_PROJECT.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
        for line in path.read_text().splitlines()
        if "spiders_project" in line or "scrapy_redis" in line
    ]
    assert mentions == [
        ("own_project/settings.py", ADDONS_LINE),
        ("own_project/spiders/pages.py", SPIDER_IMPORT),
    ]


def test_two_workers_and_the_db_writer_store_one_row_a_page_with_the_projects_own_fields(
    installed: Installed,
    project: Path,
    redis_url: str,
    r: redis.Redis,
    tmp_path: Path,
    procs: list[Proc],
) -> None:
    # The environment beats the project's settings.py (DOWNLOAD_DELAY = 1,
    # CONCURRENT_REQUESTS_PER_DOMAIN = 1 there, as startproject writes them).
    env = {"REDIS_URL": redis_url, "DOWNLOAD_DELAY": "0", "CONCURRENT_REQUESTS_PER_DOMAIN": "4"}
    db_path = tmp_path / "pages.db"
    # No idle close: a worker that started first must not leave before the seed
    # (both are seen alive first); both are stopped with SIGTERM once every page is stored.
    crawl = ("-m", "scrapy", "crawl", "pages")
    workers = [process(installed, f"w{i}", project, tmp_path, *crawl, **env) for i in (1, 2)]
    procs += workers
    port = free_port()
    monitor = process(
        installed,
        "monitor",
        project,
        tmp_path,
        "-m",
        "monitor",
        "-s",
        f"MONITOR_PORT={port}",
        **env,
        MONITOR_SPIDERS="pages",
    )
    procs.append(monitor)
    metrics = f"http://127.0.0.1:{port}/metrics"

    def alive() -> float:
        assert monitor.poll() is None, monitor.log()[-3000:]
        try:
            return scrape_url(metrics).value("crawler_workers_alive", spider="pages")
        except (OSError, AssertionError):
            return 0

    # Both workers' heartbeats, seen by the monitor, before the seed.
    wait_until(lambda: alive() == 2, 60, what="two workers alive in the monitor")
    with TestSite(pages=30, seed=5, dead_links=False, offsite_links=False) as site:
        r.lpush(KEYS.start_urls, site.url)
        writer = process(
            installed,
            "dbw",
            project,
            tmp_path,
            "-m",
            "spiders_project.db_writer",
            "--spider",
            "pages",
            **env,
            DB_URL=f"sqlite:///{db_path}",
        )
        procs.append(writer)
        pages = site.page_urls()
        wait_until(lambda: set(stored_urls(db_path)) == pages, 120, what="every page stored")
        for w in workers:
            assert w.stop(60) == 0, w.log()[-3000:]  # a warm stop
        fetches = [entry for entry in site.request_log() if entry[2] != "/robots.txt"]
    wait_until(lambda: items_drained(r, KEYS), 60, what="the item buffer to drain")
    assert writer.stop(30) == 0, writer.log()[-3000:]

    with sqlite3.connect(db_path) as db:
        rows = db.execute("SELECT spider, item_type, url, data FROM items").fetchall()
    assert sorted(url for _, _, url, _ in rows) == sorted(pages)  # one row a page
    for spider, item_type, _, data in rows:
        fields = json.loads(data)
        assert (spider, item_type) == ("pages", "OwnProjectItem")
        assert fields["fetched_by"] == "OwnProjectDownloaderMiddleware"  # its middleware
        assert isinstance(fields["links"], int) and fields["links"] > 0  # its spider middleware
        assert fields["checked"] is True  # its pipeline
        assert fields["title_words"] == len((fields["title"] or "").split())
    # A second apart each, had settings.py's DOWNLOAD_DELAY = 1 won.
    assert fetches[-1][0] - fetches[0][0] < (len(fetches) - 1) / 2
    # The monitor, started in the folder too, counted what the workers published.
    assert scrape_url(metrics).value("crawler_spider_pages_total", spider="pages") >= len(pages)
    for p in (*workers, writer, monitor):
        assert "Traceback" not in p.log(), p.log()[-3000:]
    # The operator's commands read the project's settings with the add-on's defaults too.
    status = installed.run(
        "-m",
        "scrapy",
        "crawlstatus",
        "--once",
        "--json",
        cwd=project,
        env={**env, "MONITOR_SPIDERS": "pages"},
    )
    assert status.returncode == 0, status.stdout + status.stderr
    assert json.loads(status.stdout)["spiders"][0]["totals"]["pages"] >= len(pages)


def test_genspider_writes_a_distributed_spider_into_the_project(
    installed: Installed, project: Path
) -> None:
    done = installed.run(
        "-m", "scrapy", "genspider", "-t", "distributed", "news", "news.example", cwd=project
    )
    assert done.returncode == 0, done.stdout + done.stderr
    source = (project / "own_project" / "spiders" / "news.py").read_text()
    assert SPIDER_IMPORT in source
    listed = installed.run("-m", "scrapy", "list", cwd=project)
    assert listed.stdout.split() == ["news", "pages"], listed.stdout + listed.stderr


def test_the_db_writer_and_the_monitor_read_the_projects_settings(
    installed: Installed, project: Path
) -> None:
    settings_py = project / "own_project" / "settings.py"
    settings_py.write_text(
        settings_py.read_text() + 'DB_WRITER_BATCH_SIZE = "many"\nMONITOR_PORT = "any"\n'
    )
    for argv, name in [
        (("-m", "spiders_project.db_writer", "--spider", "pages"), "DB_WRITER_BATCH_SIZE"),
        (("-m", "monitor"), "MONITOR_PORT"),
    ]:
        done = installed.run(*argv, cwd=project)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        assert [line for line in done.stderr.splitlines() if name in line], done.stderr


def test_a_settings_py_still_naming_scrapy_redis_is_refused_with_what_to_remove(
    installed: Installed, project: Path
) -> None:
    settings_py = project / "own_project" / "settings.py"
    settings_py.write_text(
        settings_py.read_text()
        + 'SCHEDULER = "scrapy_redis.scheduler.Scheduler"\n'
        + 'DUPEFILTER_CLASS = "scrapy_redis.dupefilter.RFPDupeFilter"\n'
        + 'ITEM_PIPELINES = {"scrapy_redis.pipelines.RedisPipeline": 400}\n'
    )
    # Refused before Redis is asked: nothing listens there.
    env = {"REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    done = installed.run("-m", "scrapy", "crawl", "pages", cwd=project, env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR: ")]
    assert [line.split()[1] for line in errors] == [
        "SCHEDULER",
        "DUPEFILTER_CLASS",
        "ITEM_PIPELINES",
    ], done.stderr
    assert all("remove" in line for line in errors)


def test_without_the_addon_line_a_plain_spider_is_plain_scrapys_and_ours_is_refused(
    installed: Installed, project: Path
) -> None:
    """The distribution's crawl command replaces Scrapy's in every project of the
    environment: a crawl that is not the cluster's runs as in Scrapy, unchecked."""
    settings_py = project / "own_project" / "settings.py"
    settings_py.write_text(settings_py.read_text().replace(ADDONS_LINE, "ADDONS = {}"))
    (project / "own_project" / "spiders" / "quiet.py").write_text(
        "import scrapy\n\n\nclass QuietSpider(scrapy.Spider):\n    name = 'quiet'\n"
    )
    env = {"REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}  # nothing listens: never asked
    plain = installed.run("-m", "scrapy", "crawl", "quiet", cwd=project, env=env)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "spiders_project" not in plain.stderr and "ERROR" not in plain.stderr, plain.stderr
    ours = installed.run("-m", "scrapy", "crawl", "pages", cwd=project, env=env)
    assert ours.returncode == 2, ours.stdout + ours.stderr
    errors = [line for line in ours.stderr.splitlines() if line.startswith("ERROR: ")]
    assert errors == [f"ERROR: {NOT_ENABLED}"], ours.stderr
