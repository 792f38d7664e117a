"""The ``MONITOR_*`` and ``CONSOLE_*`` settings, read once and checked."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader


@dataclass(frozen=True)
class MonitorConfig:
    """Where the exporter listens, what it reports on, how long it waits for Redis."""

    host: str
    port: int
    spiders: tuple[str, ...]
    redis_timeout: float
    worker_retention: float

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> MonitorConfig:
        read = SettingsReader(settings)
        port = read.getint("MONITOR_PORT", minimum=0)
        read.check(port <= 65535, "MONITOR_PORT", "must be a TCP port (0-65535)")
        spiders = tuple(
            dict.fromkeys(s.strip() for s in read.getlist("MONITOR_SPIDERS") if s.strip())
        )
        read.check(bool(spiders), "MONITOR_SPIDERS", "names no spider")
        return cls(
            host=read.getstr("MONITOR_HOST"),
            port=port,
            spiders=spiders,
            redis_timeout=read.getfloat("MONITOR_REDIS_TIMEOUT", above=0),
            worker_retention=read.getfloat("STATS_WORKER_RETENTION", above=0),
        )


# A path prefix a reverse proxy serves the console under: "/name[/name...]".
_PREFIX = re.compile(r"^(/[A-Za-z0-9._~-]+)*$")


@dataclass(frozen=True)
class ConsoleConfig:
    """The ``CONSOLE_*`` settings: whether the console is on, who may act, and how.

    ``htpasswd`` None: no console (``/metrics`` only). ``redis_url`` "": no
    actions for anyone. ``warc_dir``: the archive's folder when ``WARC_ENABLED``
    and it is one on this node, else None (no archive page).
    """

    htpasswd: Path | None
    operators: frozenset[str]
    redis_url: str
    prefix: str
    session_idle: float
    login_attempts: int
    login_window: float
    host_sweep_rate: float  # hosts a second the background sweep reads at most
    warc_dir: Path | None

    @property
    def actions(self) -> bool:
        """Whether anyone may act: an operator's Redis URL is set."""
        return bool(self.redis_url)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> ConsoleConfig:
        read = SettingsReader(settings)
        htpasswd = read.getstr("CONSOLE_HTPASSWD").strip()
        if htpasswd:
            read.check(Path(htpasswd).is_file(), "CONSOLE_HTPASSWD", "is not a file")
        prefix = read.getstr("CONSOLE_PREFIX").strip().rstrip("/")
        read.check(
            bool(_PREFIX.match(prefix)),
            "CONSOLE_PREFIX",
            "must be a path like /crawler (letters, digits, . _ ~ -), or empty",
        )
        warc_dir = Path(read.getstr("WARC_DIR"))
        return cls(
            htpasswd=Path(htpasswd) if htpasswd else None,
            operators=frozenset(
                str(u).strip() for u in read.getlist("CONSOLE_OPERATORS") if str(u).strip()
            ),
            redis_url=read.getstr("CONSOLE_REDIS_URL").strip(),
            prefix=prefix,
            session_idle=read.getfloat("CONSOLE_SESSION_IDLE", above=0),
            login_attempts=read.getint("CONSOLE_LOGIN_ATTEMPTS", minimum=1),
            login_window=read.getfloat("CONSOLE_LOGIN_WINDOW", above=0),
            host_sweep_rate=read.getfloat("CONSOLE_HOST_SWEEP_RATE", above=0),
            warc_dir=warc_dir if read.getbool("WARC_ENABLED") and warc_dir.is_dir() else None,
        )
