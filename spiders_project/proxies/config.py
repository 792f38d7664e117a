"""The proxy settings (``PROXIES``, ``PROXIES_FILE``, ``PROXY_*``), read and checked."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader

MODES = ("rotate", "host")


@dataclass(frozen=True)
class Proxy:
    """One proxy: its URL (credentials included, never logged) and its public name."""

    url: str
    name: str  # scheme://host:port, what logs, Redis and metrics show


@dataclass(frozen=True)
class ProxyConfig:
    proxies: tuple[Proxy, ...]
    mode: str
    ban_time: float
    max_failures: int
    refresh_interval: float

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> ProxyConfig:
        read = SettingsReader(settings)
        urls = [str(u).strip() for u in read.getlist("PROXIES") if str(u).strip()]
        path = read.getstr("PROXIES_FILE")
        if path:
            try:
                lines = Path(path).read_text().splitlines()
            except OSError as exc:
                read.fail("PROXIES_FILE", f"cannot be read ({exc.strerror})")
            urls += [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
        proxies: list[Proxy] = []
        names: set[str] = set()
        for url in urls:
            name = proxy_name(url)
            if name is None:
                # The URL may hold a password: show only its position.
                read.fail("PROXIES", f"entry {len(proxies) + 1} is not a proxy URL", "(hidden)")
            base, n = name, 2
            while name in names:
                name, n = f"{base}#{n}", n + 1
            names.add(name)
            proxies.append(Proxy(url, name))
        return cls(
            proxies=tuple(proxies),
            mode=read.getstr("PROXY_MODE", choices=MODES),
            ban_time=read.getfloat("PROXY_BAN_TIME", above=0),
            max_failures=read.getint("PROXY_MAX_FAILURES", minimum=1),
            refresh_interval=read.getfloat("PROXY_REFRESH_INTERVAL", above=0),
        )


def proxy_name(url: str) -> str | None:
    """``scheme://host:port`` of a proxy URL, without credentials; None if it is not one."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    port = port or (443 if parts.scheme == "https" else 80)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}:{port}"
