"""One URL, one fetch: links in one form before they are fingerprinted, and trap bounds.

Scrapy's fingerprint (``canonicalize_url``) sorts query arguments, but
``?utm_source=mail`` and ``?utm_source=feed`` are still two pages to it, and
so are ``http://Example.com:80/`` and ``http://example.com/``. The frontier
normalises every request's URL before fingerprinting it:

- query parameters named in ``URL_STRIP_PARAMS`` are dropped (a trailing
  ``*`` matches a prefix: ``utm_*``), unless the request's seed said
  ``"strip_params": false``;
- the scheme's default port is dropped;
- the host is lower-cased and IDNA (punycode) encoded, as ``hosts.host_of`` names it.

The path and the order of the parameters left are kept as written: some
sites answer differently to ``/A`` and ``/a``, and the fingerprint already
ignores parameter order.

Traps: a link longer than ``URL_MAX_LENGTH`` characters (browsers' old limit
of 2,083) or whose path repeats one segment more than
``URL_MAX_REPEATED_SEGMENTS`` times (``/a/b/a/b/a/b/...``, relative links
resolved against themselves) is not followed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader
from spiders_project.crawl.hosts import host_of_parts


@dataclass(frozen=True)
class UrlRules:
    """``URL_STRIP_PARAMS``, ``URL_MAX_LENGTH`` and ``URL_MAX_REPEATED_SEGMENTS``, checked."""

    strip_exact: frozenset[str]
    strip_prefixes: tuple[str, ...]
    max_length: int  # 0: no limit
    max_repeated_segments: int  # 0: no limit

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> UrlRules:
        read = SettingsReader(settings)
        names = [str(n).strip() for n in read.getlist("URL_STRIP_PARAMS") if str(n).strip()]
        return cls(
            strip_exact=frozenset(n for n in names if not n.endswith("*")),
            strip_prefixes=tuple(n[:-1] for n in names if n.endswith("*")),
            max_length=read.getint("URL_MAX_LENGTH", minimum=0),
            max_repeated_segments=read.getint("URL_MAX_REPEATED_SEGMENTS", minimum=0),
        )

    # --- normalisation ------------------------------------------------------------
    def _stripped(self, name: str) -> bool:
        return name in self.strip_exact or name.startswith(self.strip_prefixes)

    def normalise(self, url: str, strip: bool = True) -> str:
        """``url`` in its one form (see the module docstring); unchanged if already so.

        Never raises: a URL it cannot parse is returned as it came, and the
        frontier stores or refuses it as before.
        """
        try:
            parts = urlsplit(url)
        except ValueError:
            return url
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            return url
        netloc = parts.netloc
        userinfo, at, _ = netloc.rpartition("@")
        canonical = host_of_parts(parts)
        if canonical:
            netloc = f"{userinfo}{at}{canonical}"
        query = parts.query
        if strip and query and (self.strip_exact or self.strip_prefixes):
            kept = [
                pair
                for pair in query.split("&")
                if pair and not self._stripped(pair.partition("=")[0])
            ]
            query = "&".join(kept)
        if scheme == parts.scheme and netloc == parts.netloc and query == parts.query:
            return url
        return urlunsplit((scheme, netloc, parts.path, query, parts.fragment))

    # --- traps --------------------------------------------------------------------------
    def trap(self, url: str) -> str | None:
        """Why ``url`` is not followed (a stat name's last part), or None."""
        if self.max_length and len(url) > self.max_length:
            return "url_too_long"
        if self.max_repeated_segments:
            try:
                path = urlsplit(url).path
            except ValueError:
                return None
            segments = [s for s in path.split("/") if s]
            if len(segments) > self.max_repeated_segments:
                most = Counter(segments).most_common(1)[0][1]
                if most > self.max_repeated_segments:
                    return "repeated_segments"
        return None
