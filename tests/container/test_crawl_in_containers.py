"""Crawls by the container image: two worker containers, a db_writer and a monitor
container; and a worker container that renders pages with the image's Chromium.

``make test-container`` builds the image (deploy/container/build-image) and
runs this file; ``make test`` leaves the folder out (pyproject.toml's addopts).
Compose's Redis and PostgreSQL images cannot be pulled on the machine this
runs on, so the services come from the host instead: a private redis-server on
a free port and the demo's site, both on 127.0.0.1, and the containers share
the host's network (``--network host``). The db_writer writes SQLite into a
folder of the test mounted as the image's data volume. podman runs as this
machine needs it (deploy/container/build-image says why): the runc runtime and
explicit ulimits.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from tests.support.processes import (
    TEST_WORKER_SETTINGS,
    K,
    Proc,
    items_drained,
    stored_urls,
    wait_until,
)
from tests.support.services import free_port
from tests.support.site import TRACKER_HOST, JsSite, TestSite

pytestmark = pytest.mark.container

IMAGE = os.environ.get("CRAWLER_IMAGE", "localhost/spiders-project:latest")
PODMAN = ["podman", "--runtime", "runc"]
RUN = [
    *PODMAN,
    "run",
    "--rm",
    "--network",
    "host",
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=1024:1024",
]
# Where the image's db_writer keeps a relative or default sqlite DB_URL.
DATA = "/opt/crawler/data"
PAGES = 600
# Workers exit 0 once the whole cluster has had nothing to do for this long.
WORKER_SETTINGS = (*TEST_WORKER_SETTINGS, "MAX_IDLE_TIME_BEFORE_CLOSE=5")


def podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PODMAN, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


class Container:
    """``podman run`` of the image in the foreground; its output is the log."""

    def __init__(self, name: str, log_dir: Path, env: dict[str, str], *command: str) -> None:
        self.name = name
        argv = [*RUN, "--name", name, "--hostname", name]
        argv += ["--volume", f"{log_dir / 'data'}:{DATA}"]
        for key, value in env.items():
            argv += ["--env", f"{key}={value}"]
        self.proc = Proc(name, [*argv, IMAGE, *command], {}, log_dir / f"{name}.log")

    def stop(self, timeout: int = 60) -> int:
        """``podman stop``: SIGTERM to the program (through tini), SIGKILL after ``timeout``."""
        podman("stop", "--time", str(timeout), self.name, timeout=timeout + 30)
        return self.proc.wait(30)

    def remove(self) -> None:
        podman("rm", "--force", "--ignore", self.name)
        self.proc.close()


def worker_ids(r: redis.Redis, hostname: str) -> list[str]:
    """The ids (``host:pid``) a container's running workers registered (``<spider>:workers``;
    a worker that exits signs off, its stats stay)."""
    ids = [member.decode() for member in r.zrange(K.workers, 0, -1)]
    return [worker for worker in ids if worker.startswith(f"{hostname}:")]


def wait_healthy(container: Container, role: str) -> None:
    """Until the image's health check of ``role`` passes in ``container``."""
    wait_until(
        lambda: podman("exec", container.name, "crawler", "health", role).returncode == 0,
        60,
        interval=1.0,
        what=f"`crawler health {role}` in {container.name}",
    )


def scraped(r: redis.Redis, worker: str) -> int:
    return int(r.hget(K.worker_stats(worker), "item_scraped_count") or 0)


@dataclass
class Cluster:
    """A private redis-server on the host, and the test's containers against it."""

    redis_url: str
    r: redis.Redis
    log_dir: Path
    run_id: str = f"crawler-test-{os.getpid()}"
    containers: list[Container] = field(default_factory=list)

    @property
    def data(self) -> Path:
        return self.log_dir / "data"

    def start(self, name: str, *command: str, env: dict[str, str] | None = None) -> Container:
        container = Container(
            f"{self.run_id}-{name}",
            self.log_dir,
            {"REDIS_URL": self.redis_url, **(env or {})},
            *command,
        )
        self.containers.append(container)
        return container

    def worker(self, name: str, *settings: str) -> Container:
        args = [arg for s in (*WORKER_SETTINGS, *settings) for arg in ("-s", s)]
        return self.start(name, "worker", *args)

    def db_writer(self) -> Container:
        return self.start("db-writer", "db_writer", env={"DB_URL": f"sqlite:///{DATA}/items.db"})

    def finish(self, workers: list[Container], writer: Container) -> None:
        """Workers exit 0 by themselves when idle; the db_writer at a SIGTERM, once drained."""
        for w in workers:
            assert w.proc.wait(120) == 0, w.proc.log()[-3000:]
        wait_until(lambda: items_drained(self.r), 60, what="the item buffer to drain")
        assert writer.stop() == 0, writer.proc.log()[-3000:]
        for container in self.containers:
            log = container.proc.log()
            assert "Traceback" not in log, log[-3000:]


@pytest.fixture
def cluster(start_redis, tmp_path: Path) -> Iterator[Cluster]:
    exists = podman("image", "exists", IMAGE)
    assert exists.returncode == 0, f"no image {IMAGE}: `make test-container` builds it"
    _, redis_url = start_redis()
    r = redis.Redis.from_url(redis_url)
    (tmp_path / "data").mkdir()
    (tmp_path / "data").chmod(0o777)  # the image's user (uid 10001) writes the database here
    running = Cluster(redis_url, r, tmp_path)
    try:
        yield running
    finally:
        for container in running.containers:
            container.remove()
        r.close()


def wait_for_workers(cluster: Cluster, workers: list[Container]) -> list[str]:
    """The ids of the workers once each container's has registered."""
    wait_until(
        lambda: all(worker_ids(cluster.r, w.name) for w in workers),
        120,
        interval=0.5,
        what="the worker containers to register",
    )
    return [worker for w in workers for worker in worker_ids(cluster.r, w.name)]


def test_two_worker_containers_and_a_db_writer_container_store_every_page(
    cluster: Cluster,
) -> None:
    with TestSite(pages=PAGES, seed=11, flaky_every=40, latency=0.005) as site:
        workers = [cluster.worker(f"worker-{i}") for i in (1, 2)]
        writer = cluster.db_writer()
        port = free_port()
        monitor = cluster.start(
            "monitor", "monitor", env={"MONITOR_HOST": "127.0.0.1", "MONITOR_PORT": str(port)}
        )
        # Seeded once both workers run, so that both take part from the start.
        registered = wait_for_workers(cluster, workers)
        for role, container in (
            ("worker", workers[0]),
            ("db_writer", writer),
            ("monitor", monitor),
        ):
            wait_healthy(container, role)
        # The exporter of the image, asked from the host, sees both workers.
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
        assert b'crawler_workers_alive{spider="distributed"} 2.0' in metrics
        cluster.r.lpush(K.start_urls, site.url)

        pages = site.page_urls()
        wait_until(
            lambda: set(stored_urls(cluster.data / "items.db")) >= pages,
            240,
            interval=1.0,
            what=f"all {len(pages)} pages in the database",
        )
        cluster.finish(workers, writer)
        assert monitor.stop() == 0, monitor.proc.log()[-3000:]
        urls = stored_urls(cluster.data / "items.db")
        assert len(urls) == len(set(urls)), "a page was stored twice"
        assert set(urls) == pages
        assert site.offsite_requests() == []
    # Both containers crawled, and together scraped each page once.
    counts = [scraped(cluster.r, worker) for worker in registered]
    assert len(counts) == 2 and all(n > 0 for n in counts), counts
    assert sum(counts) == len(urls)


def test_a_worker_container_renders_pages_with_the_image_s_chromium(cluster: Cluster) -> None:
    """Pages whose title and links only a script writes: the browser of the image ran them."""
    with JsSite(pages=7, plain_pages=0, slow_pages=0) as site:
        worker = cluster.worker("render", f"RENDER_BLOCK_DOMAINS={TRACKER_HOST}")
        writer = cluster.db_writer()
        wait_for_workers(cluster, [worker])
        cluster.r.lpush(K.start_urls, json.dumps({"url": site.url, "meta": {"playwright": True}}))
        cluster.finish([worker], writer)
        with sqlite3.connect(cluster.data / "items.db") as db:
            items = {
                url: json.loads(data) for url, data in db.execute("SELECT url, data FROM items")
            }
        # Every page was reached through links only its script added, and rendered once.
        assert set(items) == site.js_urls()
        for n in range(7):
            assert site.hits()[("127.0.0.1", f"/api/page/{n}")] == 1
            item = items[site.page_url(n)]
            assert (item["title"], item["rendered"]) == (f"JS page {n}", True)
