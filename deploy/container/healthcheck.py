"""``crawler health ROLE``: exit 0 when the program of that role in this container is healthy.

The container image's health check (compose's ``healthcheck``, ``podman
healthcheck``, a Kubernetes exec probe), with the container's own environment:

- ``worker``, ``render``: every ``scrapy crawl SPIDER`` process here has its
  heartbeat key in Redis (``<spider>:worker:<host>:<pid>:heartbeat``, which the
  worker renews every STATS_PUBLISH_INTERVAL and which expires on its own when
  it stops publishing). Checked with the worker's own Redis user (EXISTS on its
  spider's keys).
- ``db_writer``: its Redis answers PING with the db_writer's user.
- ``monitor``: the exporter answers ``/metrics`` on MONITOR_PORT (it answers with
  ``crawler_redis_up 0`` while Redis is down: the exporter itself is fine then).

Exit status 1 and one line on stderr saying why, otherwise 0 and nothing.
"""

from __future__ import annotations

import os
import socket
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROLES = ("worker", "render", "db_writer", "monitor")


def crawls() -> Iterator[tuple[int, str]]:
    """(pid, spider) of every ``scrapy crawl SPIDER`` process of this container."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        for i, arg in enumerate(argv[:-2]):
            if arg.endswith("scrapy") and argv[i + 1] == "crawl":
                yield int(entry.name), argv[i + 2]
                break


def worker_problem() -> str | None:
    from scrapy.utils.project import get_project_settings

    from spiders_project.keys import RedisKeys
    from spiders_project.redis_access.connection import RedisConfig, sync_client

    running = list(crawls())
    if not running:
        return "no scrapy crawl process runs in this container"
    settings = get_project_settings()
    cluster = RedisConfig.from_settings(settings).cluster
    client = sync_client(settings)
    try:
        for pid, spider in running:
            worker = f"{socket.gethostname()}:{pid}"
            key = RedisKeys(spider, cluster=cluster).worker_heartbeat(worker)
            if not client.exists(key):
                return f"worker {worker} has no heartbeat in Redis ({key})"
    except Exception as exc:  # any failure answers "unhealthy"
        return f"cannot read the heartbeat from Redis: {exc}"
    finally:
        client.close()
    return None


def db_writer_problem() -> str | None:
    from scrapy.utils.project import get_project_settings

    from spiders_project.redis_access.connection import ping_or_message

    return ping_or_message(get_project_settings())


def monitor_problem() -> str | None:
    host = os.environ.get("MONITOR_HOST", "127.0.0.1")
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    url = f"http://{host}:{os.environ.get('MONITOR_PORT', '9410')}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            if answer.status != 200:
                return f"{url} answered {answer.status}"
    except OSError as exc:
        return f"{url}: {exc}"
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ROLES:
        print(f"usage: crawler health {{{','.join(ROLES)}}}", file=sys.stderr)
        return 2
    role = argv[0]
    if role in ("worker", "render"):
        problem = worker_problem()
    elif role == "db_writer":
        problem = db_writer_problem()
    else:
        problem = monitor_problem()
    if problem:
        print(f"crawler health {role}: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
