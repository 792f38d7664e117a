"""Run ``python -m monitor`` for a test and read its /metrics as numbers."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.support.processes import PYTHON, Proc, wait_until
from tests.support.services import free_port


class Metrics:
    """One scrape: samples by name and labels, plus each family's HELP and type."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        self.help: dict[str, str] = {}
        self.types: dict[str, str] = {}
        for family in text_string_to_metric_families(text):
            self.help[family.name] = family.documentation
            self.types[family.name] = family.type
            for sample in family.samples:
                self.samples[(sample.name, frozenset(sample.labels.items()))] = sample.value

    def names(self) -> set[str]:
        """Every sample name exposed (counters with their ``_total``)."""
        return {name for name, _ in self.samples}

    def get(self, name: str, **labels: str) -> float | None:
        return self.samples.get((name, frozenset(labels.items())))

    def value(self, name: str, **labels: str) -> float:
        found = self.get(name, **labels)
        assert found is not None, f"no sample {name}{labels} in:\n{self.text}"
        return found

    def series(self, name: str, **labels: str) -> dict[frozenset[tuple[str, str]], float]:
        """Samples of ``name`` whose labels include ``labels``."""
        want = set(labels.items())
        return {k: v for (n, k), v in self.samples.items() if n == name and want <= k}


def scrape_url(url: str, timeout: float = 10) -> Metrics:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return Metrics(response.read().decode())


class Exporter:
    """``python -m monitor`` on a free port, logging to ``<log_dir>/<name>.log``.

    ``host`` is the address it listens on (MONITOR_HOST) and ``prefix`` goes
    before its command (a host of tests/support/netns.py: ``ip netns exec <ns>``).
    """

    def __init__(
        self,
        redis_url: str,
        log_dir: Path,
        *settings: str,
        name: str = "monitor",
        host: str = "127.0.0.1",
        prefix: Sequence[str] = (),
    ):
        self.port = free_port()
        argv = [*prefix, PYTHON, "-m", "monitor", "-s", f"MONITOR_PORT={self.port}"]
        if host != "127.0.0.1":
            argv += ["-s", f"MONITOR_HOST={host}"]
        for setting in settings:
            argv += ["-s", setting]
        self.proc = Proc(name, argv, {"REDIS_URL": redis_url}, log_dir / f"{name}.log")
        self.url = f"http://{host}:{self.port}/metrics"
        wait_until(self._answers, 30, what="the exporter to answer")

    def _answers(self) -> bool:
        assert self.proc.poll() is None, self.proc.log()
        try:
            urllib.request.urlopen(self.url, timeout=5).close()
        except (urllib.error.URLError, ConnectionError):
            return False
        return True

    def scrape(self) -> Metrics:
        return scrape_url(self.url)

    def log(self) -> str:
        return self.proc.log()

    def close(self) -> None:
        self.proc.close()
