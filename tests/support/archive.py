"""What the archive tests share: a site that gzips its pages, reading WARC files, pywb.

``GzipSite`` is the tests' ``TestSite`` whose pages go out gzip-encoded
(``Content-Encoding: gzip``), as most sites send them, and which keeps the
exact bytes it sent for each URL, so a test can compare them with the
archive's response records. ``Pywb`` runs pywb's ``wayback`` as a real
process on a free port over a collection of WARC files. pywb pins redis-py
2.10.6, which cannot live beside the project's redis-py, so it has its own
virtualenv, ``.venv-replay`` (``make setup``, requirements-replay.txt).
"""

from __future__ import annotations

import gzip
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from warcio.archiveiterator import ArchiveIterator

from tests.support.processes import ROOT, Proc
from tests.support.services import free_port
from tests.support.site import TestSite

REPLAY_BIN = ROOT / ".venv-replay" / "bin"


class GzipSite(TestSite):
    """``TestSite`` whose pages are sent gzip-encoded; ``sent(url)`` is what went out."""

    __test__ = False

    def __init__(self, *args: Any, not_modified: Sequence[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sent: dict[str, list[bytes]] = {}
        self._gzip_count = 0
        # Paths answered 304 from their second GET on, as a server that found the
        # request's validators still good would answer (the crawler's conditional
        # requests are another part of issue 28).
        self._not_modified = set(not_modified)

    async def respond(
        self, site: int, method: str, target: str, host: str | None, arrived: float
    ) -> tuple[int, str, bytes]:
        status, ctype, body = await super().respond(site, method, target, host, arrived)
        if (
            status == 200
            and target in self._not_modified
            and self.sent(self._absolute(site, target))
        ):
            return 304, ctype, b""
        if status == 200 and ctype.startswith("text/html") and method == "GET":
            # A new gzip header time on every answer, as a live server's: the
            # bytes sent differ from one fetch to the next, the page does not.
            with self._lock:
                self._gzip_count += 1
                mtime = 1_700_000_000 + self._gzip_count
            body = gzip.compress(body, compresslevel=6, mtime=mtime)
            with self._lock:
                self._sent.setdefault(self._absolute(site, target), []).append(body)
        return status, ctype, body

    def extra_headers(self, target: str, status: int) -> list[tuple[str, str]]:
        if status == 200 and target != "/robots.txt":
            return [("Content-Encoding", "gzip"), ("Vary", "Accept-Encoding")]
        return []

    def sent(self, url: str) -> list[bytes]:
        """Every gzip body sent for ``url``, in order."""
        with self._lock:
            return list(self._sent.get(url, []))


def warc_paths(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if ".warc.gz" in p.name)


def records(path: Path) -> Iterator[tuple[Any, bytes]]:
    """(record, raw payload as stored) of every record of a WARC file, read with warcio."""
    with path.open("rb") as f:
        for record in ArchiveIterator(f):
            yield record, record.raw_stream.read()


class Pywb:
    """pywb's ``wayback`` over ``warcs`` (collection ``crawl``), on 127.0.0.1:<free port>."""

    def __init__(self, warcs: Sequence[Path], workdir: Path, log_dir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        manager = str(REPLAY_BIN / "wb-manager")
        for argv in ([manager, "init", "crawl"], [manager, "add", "crawl", *map(str, warcs)]):
            done = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stdout + done.stderr
        self.port = free_port()
        self.proc = Proc(
            "pywb",
            [str(REPLAY_BIN / "wayback"), "-p", str(self.port), "-b", "127.0.0.1"],
            {},
            log_dir / "pywb.log",
            cwd=workdir,
        )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.alive(), self.proc.log()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=5):
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)
        raise AssertionError("pywb did not answer:\n" + self.proc.log()[-3000:])

    def replay(
        self, url: str, timestamp: str, mode: str = "id_"
    ) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body) of ``url``'s capture nearest ``timestamp``
        (14 digits) as pywb serves it; ``id_``: the original content, not
        rewritten for a browser."""
        address = f"http://127.0.0.1:{self.port}/crawl/{timestamp}{mode}/{url}"
        request = urllib.request.Request(address, headers={"Accept-Encoding": "identity"})
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                return reply.status, dict(reply.headers), reply.read()
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers), err.read()

    def close(self) -> None:
        self.proc.stop(10)
        self.proc.close()
