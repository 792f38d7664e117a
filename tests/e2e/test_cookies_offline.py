"""No call home: a worker with no route to the internet crawls a site that sets
cookies with a Domain attribute, and never tries to fetch the Public Suffix List.

Scrapy's cookie middleware decides whether a cookie's Domain is a public
suffix with a tldextract extractor that, left as Scrapy builds it, downloads
the list from publicsuffix.org at the first cookie (tests/unit/test_internals.py
checks the replacement itself). Here the worker runs in a network namespace
of its own (tests/support/netns.py), which reaches Redis and the site and
nothing else: an attempt to fetch would fail at once and tldextract would log
it with a traceback. The control shows that: Scrapy's own extractor, in the
same namespace, logs the publicsuffix.org URL it could not read. The list is
the one tldextract bundles, or a file the operator names
(COOKIES_PUBLIC_SUFFIX_LIST): read at start, from disk.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from spiders_project.config import load_settings
from tests.support.netns import NetnsBed
from tests.support.processes import PYTHON, ROOT, K, Proc, wait_until, worker
from tests.support.services import RedisServer
from tests.support.site import TestSite

pytestmark = pytest.mark.slow

SECRET = "s3cret-session-value"


class CookieSite(TestSite):
    """Every answer sets a session cookie for the site's whole domain."""

    def extra_headers(self, target: str, status: int) -> list[tuple[str, str]]:
        return [("Set-Cookie", f"session={SECRET}; Domain={self.host}; Path=/")]


@pytest.fixture
def bed() -> Iterator[NetnsBed]:
    with NetnsBed(("redis", "site", "w")) as made:
        yield made


@pytest.mark.parametrize("list_file", [False, True], ids=["bundled", "operators_file"])
def test_a_worker_without_a_route_out_splits_cookie_domains_offline(
    bed: NetnsBed, tmp_path: Path, procs: list[Proc], list_file: bool
):
    # Nothing but the bed: no default route, so the internet is unreachable.
    assert "default" not in bed.run("w", "ip", "route").stdout
    server = RedisServer(host=bed.address("redis"), prefix=bed.prefix("redis"))
    with bed.inside("site"):
        site = CookieSite(pages=30, seed=41, host=bed.address("site"), offsite_links=False)
        site.start()
    try:
        settings = []
        urls = []
        if list_file:  # the operator's copy of the list (here: the one tldextract ships)
            path = tmp_path / "public_suffix_list.dat"
            path.write_bytes(pkgutil.get_data("tldextract", ".tld_set_snapshot") or b"")
            settings.append(f"COOKIES_PUBLIC_SUFFIX_LIST={path}")
            urls.append(path.as_uri())
        record = tmp_path / "suffixes.json"
        cache = tmp_path / "tldextract-cache"  # tldextract's cache: must stay unwritten
        extensions = dict(load_settings().getdict("EXTENSIONS"))
        extensions["tests.support.suffix_record.RecordSuffixList"] = 1000
        w = worker(
            "w",
            server.url,
            tmp_path,
            "MAX_IDLE_TIME_BEFORE_CLOSE=3",
            f"EXTENSIONS={json.dumps(extensions)}",
            *settings,
            env={"SUFFIX_RECORD": str(record), "TLDEXTRACT_CACHE": str(cache)},
            prefix=bed.prefix("w"),
        )
        procs.append(w)
        wait_until(lambda: server.client.zcard(K.workers) == 1, 60, what="the worker")
        server.client.lpush(K.start_urls, site.url)
        assert w.wait(120) == 0, w.log()[-3000:]
        hits = site.hits()
        assert {url: hits[url] for url in site.page_urls()} == dict.fromkeys(site.page_urls(), 1)

        # In the worker: the middleware split the site's cookie domain with no URL to fetch.
        seen = json.loads(record.read_text())
        assert seen == {"suffix_list_urls": urls, "cookie_domains": [f".{bed.address('site')}"]}
        log = w.log()
        for trace in ("publicsuffix", "tldextract", "Public Suffix", "Traceback", SECRET):
            assert trace not in log, trace
        assert not cache.exists()
    finally:
        site.stop()
        server.stop()

    if list_file:
        return
    # The control: Scrapy's own extractor, in the same namespace, tries to call home.
    control = subprocess.run(
        [
            *bed.prefix("w"),
            PYTHON,
            "-c",
            "from scrapy.downloadermiddlewares.cookies import _is_public_domain\n"
            "_is_public_domain('example.com')",
        ],
        cwd=ROOT,
        env={"TLDEXTRACT_CACHE": str(tmp_path / "control-cache"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "https://publicsuffix.org/list/public_suffix_list.dat" in control.stderr, control
