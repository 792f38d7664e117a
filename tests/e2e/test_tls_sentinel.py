"""Redis Sentinel over TLS, with passwords: a failover mid-crawl loses nothing.

Every server speaks TLS only (replication and the sentinels' own links too),
the master and its replica require one password and the sentinels another.
Two workers, the db_writer, the monitor and ``crawlstatus`` are given only a
``rediss://`` REDIS_URL (the master's password and CA), the sentinels and
REDIS_SENTINEL_PASSWORD: they find the master through the sentinels over
TLS, verify every certificate and host name, and follow a ``SENTINEL
FAILOVER`` in the middle of the crawl.
"""

from __future__ import annotations

import pytest
import redis

from tests.support.monitoring import Exporter
from tests.support.processes import (
    K,
    db_writer,
    items_drained,
    scrapy_command,
    stored_urls,
    wait_until,
    worker,
)
from tests.support.sentinels import SentinelGroup
from tests.support.site import TestSite
from tests.support.tls import make_pki

pytestmark = pytest.mark.slow
MASTER_PASSWORD, SENTINEL_PASSWORD = "m4ster-pw", "s3ntinel-pw"


@pytest.fixture
def pki(tmp_path):
    return make_pki(tmp_path / "pki")


@pytest.fixture
def sentinels(pki):
    group = SentinelGroup(
        replicas=1, tls=pki, password=MASTER_PASSWORD, sentinel_password=SENTINEL_PASSWORD
    )
    yield group
    group.stop()


def test_a_failover_over_tls_with_passwords_loses_nothing(sentinels, pki, tmp_path, procs):
    # The sentinels refuse a client without their password, and plain TCP.
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=sentinels.ports[0], ssl=True, ssl_ca_certs=str(pki.ca)).ping()
    with pytest.raises(redis.ConnectionError):
        redis.Redis(port=sentinels.ports[0], socket_timeout=2).ping()
    settings = {
        "REDIS_SENTINELS": sentinels.setting,
        "REDIS_SENTINEL_MASTER": sentinels.name,
        "REDIS_SENTINEL_PASSWORD": SENTINEL_PASSWORD,
    }
    # The host and port are the sentinels' to say; the rest is the master's.
    url = f"rediss://:{MASTER_PASSWORD}@localhost:9/0?ssl_ca_certs={pki.ca}"
    db_path = tmp_path / "items.db"
    old = sentinels.master_address()
    with TestSite(pages=300, seed=26) as site:
        sentinels.master.client.lpush(K.start_urls, site.url)
        workers = [
            worker(
                f"w{i}",
                url,
                tmp_path,
                "MAX_IDLE_TIME_BEFORE_CLOSE=3",
                "DOWNLOAD_DELAY=0.02",
                env=settings,
            )  # fmt: skip
            for i in (1, 2)
        ]
        writer = db_writer("dbw", url, f"sqlite:///{db_path}", tmp_path, env=settings)
        procs += [*workers, writer]
        monitor = Exporter(url, tmp_path, *(f"{k}={v}" for k, v in settings.items()))
        procs.append(monitor.proc)
        wait_until(lambda: len(stored_urls(db_path)) >= 40, 60, what="the crawl to be under way")
        assert len(stored_urls(db_path)) < 250, "failed over too late to prove anything"
        sentinels.failover()
        wait_until(lambda: sentinels.master_address() != old, 30, what="a replica promoted")
        new = sentinels.server(sentinels.master_address()).client
        for w in workers:
            assert w.wait(120) == 0, w.log()[-3000:]
        # A batch the writer acknowledged on the old master just after the
        # promotion is still in the new one's processing list: the running
        # writer finds it when next idle and stores it again (once per url).
        wait_until(lambda: items_drained(new), 60, what="the item buffer to drain")
        assert writer.stop(30) == 0, writer.log()[-3000:]
        urls = stored_urls(db_path)
        assert len(urls) == len(set(urls)), "a page stored twice"
        assert set(urls) == site.page_urls(), sorted(site.page_urls() - set(urls))[:10]
        assert new.zcard(K.leases) == 0 and int(new.get(K.requests_size) or 0) == 0
        assert monitor.scrape().value("crawler_redis_up") == 1
        status = scrapy_command(url, "crawlstatus", "--once", env=settings)
        assert status.returncode == 0, status.stderr
        assert "| items 0 |" in status.stdout and "ETA         nothing queued" in status.stdout
    for p in (*workers, writer, monitor.proc):
        log = p.log()
        assert "Traceback" not in log, log[-3000:]
        assert MASTER_PASSWORD not in log and SENTINEL_PASSWORD not in log
