"""The demo site against a real server on a free port, read with plain urllib."""

from __future__ import annotations

import http.client
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest

from tests.support.site import OFFSITE_HOST, TestSite

# No proxy from the environment may stand between the tests and 127.0.0.1.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class _Hrefs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.hrefs += [v for k, v in attrs if tag == "a" and k == "href" and v is not None]


def fetch(url: str, host: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with _OPENER.open(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def hrefs(body: bytes) -> list[str]:
    parser = _Hrefs()
    parser.feed(body.decode())
    return parser.hrefs


def crawl(root: str) -> tuple[set[str], set[str], list[str]]:
    """BFS over one site: (pages answering 200, on-site URLs not answering 200, raw hrefs)."""
    netloc = urlsplit(root).netloc
    seen, queue, good, bad, raw = {root}, [root], set(), set(), []
    while queue:
        url = queue.pop(0)
        status, body = fetch(url)
        if status != 200:
            bad.add(url)
            continue
        good.add(url)
        for href in hrefs(body):
            raw.append(href)
            link = urldefrag(urljoin(url, href)).url
            if urlsplit(link).netloc == netloc and link not in seen:
                seen.add(link)
                queue.append(link)
    return good, bad, raw


@pytest.fixture
def site() -> Iterator[TestSite]:
    with TestSite(80, seed=7) as server:
        yield server


def test_page_urls_is_the_exact_set_a_crawl_reaches(site: TestSite) -> None:
    pages = site.page_urls()
    assert len(pages) == 80
    assert site.url == f"http://127.0.0.1:{site.port}/" and site.url in pages
    good, bad, raw = crawl(site.url)
    assert good == pages
    assert bad and all("/missing/" in url for url in bad)
    # The traps are really there: fragments, duplicates, relative, absolute, off-site links.
    assert any(h.startswith("#") for h in raw) and any("/page/" in h and "#" in h for h in raw)
    assert any(not h.startswith(("/", "http", "#")) for h in raw)
    assert any(h.startswith(f"http://127.0.0.1:{site.port}/") for h in raw)
    assert any(OFFSITE_HOST in h for h in raw)
    assert len(raw) > len(set(raw))
    assert not any("?" in h for h in raw)
    assert site.offsite_requests() == []


def test_every_page_is_html_with_a_title(site: TestSite) -> None:
    with _OPENER.open(site.url + "page/5", timeout=10) as response:
        assert response.headers["Content-Type"] == "text/html; charset=utf-8"
        body = response.read()
    assert b"<title>Page 5</title>" in body and len(body) > 300
    assert fetch(site.url + "robots.txt")[0] == 200


def test_dead_links_and_non_canonical_paths_answer_404(site: TestSite) -> None:
    for path in ("missing/3", "page/80", "page/05", "page/5?x=1", "page/0", "nothing"):
        assert fetch(site.url + path)[0] == 404, path


def test_flaky_pages_fail_once_then_succeed() -> None:
    with TestSite(10, flaky_every=3) as server:
        assert server.url + "page/3" in server.page_urls()
        assert [fetch(server.url + "page/3")[0] for _ in range(3)] == [503, 200, 200]
        assert fetch(server.url + "page/6")[0] == 503
        assert fetch(server.url + "page/4")[0] == 200
        assert fetch(server.url)[0] == 200
        assert server.hits()[server.url + "page/3"] == 2


def test_request_log_records_host_path_and_status(site: TestSite) -> None:
    before = time.monotonic()
    fetch(site.url + "page/2")
    fetch(site.url + "page/2?q=1")
    fetch(site.url + "page/2", host="other.example:80")
    log = site.request_log()
    own = f"127.0.0.1:{site.port}"
    assert [entry[1:] for entry in log] == [
        (own, "/page/2", 200),
        (own, "/page/2?q=1", 404),
        ("other.example:80", "/page/2", 421),
    ]
    assert before <= log[0][0] <= log[1][0] <= log[2][0] <= time.monotonic()
    assert site.offsite_requests() == log[2:]


def test_hits_count_successful_gets_per_url(site: TestSite) -> None:
    for _ in range(3):
        fetch(site.url + "page/1")
    fetch(site.url)
    fetch(site.url + "missing/1")
    request = urllib.request.Request(site.url + "page/9", method="HEAD")
    with _OPENER.open(request, timeout=10) as response:
        assert response.read() == b"" and int(response.headers["Content-Length"]) > 300
    assert site.hits() == {site.url + "page/1": 3, site.url: 1}


def test_offsite_trap_port_logs_what_a_crawler_should_not_request(site: TestSite) -> None:
    _, body = fetch(site.url)
    trap = next(h for h in hrefs(body) if h.startswith("http://127.0.0.1:") and site.url not in h)
    assert fetch(trap)[0] == 404
    [(_, host, path, status)] = site.offsite_requests()
    assert host == urlsplit(trap).netloc and path == urlsplit(trap).path and status == 404


def test_hosts_are_separate_sites_on_separate_ports() -> None:
    with TestSite(20, hosts=3, seed=1) as server:
        assert server.url == server.urls[0] and len(set(server.urls)) == 3
        assert len(server.page_urls()) == 60
        reached = set()
        for root in server.urls:
            good, _, _ = crawl(root)
            assert {urlsplit(url).netloc for url in good} == {urlsplit(root).netloc}
            reached |= good
        assert reached == server.page_urls()
        assert server.offsite_requests() == []


def test_same_seed_same_site_other_seed_other_site() -> None:
    def pages(seed: int) -> list[bytes]:
        with TestSite(15, seed=seed) as server:
            bodies = [fetch(url)[1] for url in sorted(server.page_urls())]
        return [re.sub(rb"127\.0\.0\.1:\d+", b"HOST", body) for body in bodies]

    assert pages(3) == pages(3)
    assert pages(3) != pages(4)


def test_keep_alive_serves_many_requests_on_one_connection(site: TestSite) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", site.port, timeout=10)
    try:
        sockets = set()
        for n in (1, 2, 3, 404):
            connection.request("GET", f"/page/{n}")
            response = connection.getresponse()
            response.read()
            assert response.status == (404 if n == 404 else 200)
            assert response.getheader("Connection") == "keep-alive"
            sockets.add(connection.sock)
        assert len(sockets) == 1
    finally:
        connection.close()


def test_latency_does_not_serialise_concurrent_requests() -> None:
    with TestSite(100, latency=0.3) as server:
        results: list[int] = []
        urls = sorted(server.page_urls())[:64]
        threads = [threading.Thread(target=lambda u=u: results.append(fetch(u)[0])) for u in urls]
        start = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - start
    assert results == [200] * 64
    assert 0.3 <= elapsed < 2.0


def test_stop_closes_the_port() -> None:
    server = TestSite(5).start()
    port = server.port
    server.stop()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_cli_serves_until_sigterm_and_exits_zero() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "spiders_project.demo.site", "--pages", "12", "--flaky-every", "5"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("serving 12 pages at http://127.0.0.1:")
        url = line.split()[-1]
        assert fetch(url + "page/5")[0] == 503 and fetch(url + "page/5")[0] == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
