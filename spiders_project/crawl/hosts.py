"""The politeness and scope unit of a URL: its host, in one canonical form.

Every per-host thing in the crawler (frontier queue, politeness turn, asked
Crawl-delay, dead-letter host, the spider's link scope) is keyed by
``host_of``, so two spellings of one server must give one name, or a host gets
two queues and twice the request rate, and an IDN seed stops at its first page.
"""

from __future__ import annotations

import re
from functools import lru_cache
from urllib.parse import SplitResult, urlsplit

# Ports dropped from the name: the scheme's default, which a URL may or may not spell.
_DEFAULT_PORTS: dict[str, tuple[int, ...]] = {"http": (80,), "https": (443,)}
# A settings key has no scheme: a port of either default is written for that scheme's site.
_EITHER_DEFAULT = (80, 443)
# The network location of a URL urlsplit refuses: after "scheme://", up to the path.
_NETLOC = re.compile(r"^[^:/?#]*://([^/?#]*)")


def host_of(url: str) -> str:
    """Lower-case ``host[:port]`` of ``url``, the same for every spelling of one host.

    - userinfo is dropped (``user:pw@``): it does not change the server;
    - the scheme's default port is dropped, so ``example.com:80`` and
      ``example.com`` share one queue and one politeness turn;
    - internationalized names are in IDNA (punycode) form, the form Scrapy
      gives request and response URLs, so a seed typed as ``bücher.example``
      and the links found on its pages compare equal;
    - a trailing dot is dropped (``example.com.`` is the same DNS name);
    - IPv6 literals keep their brackets (``[::1]:8080``).

    Never raises, because it runs on every extracted link and a bad link must
    not cost the rest of the page. Odd input falls back as follows:

    - a name IDNA refuses (an empty or over-long label) stays lower-case as
      written, which is what Scrapy keeps in the request URL too;
    - a port that is not ASCII digits stays as written, after the canonical
      name (Scrapy refuses to build such a request, so it never reaches the
      frontier; only a scope check sees it);
    - a URL urlsplit refuses (an unclosed ``[``) gives the lower-case text
      between ``//`` and the path, and a string with no ``//`` gives ``""``.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        match = _NETLOC.match(url)
        return _canonical((), match.group(1)) if match else ""
    return host_of_parts(parts)


def host_of_parts(parts: SplitResult) -> str:
    """``host_of`` of a URL its caller has already split (scope/urls.py's normalise
    runs on every link a worker enqueues: one split a link, not two)."""
    return _canonical(_DEFAULT_PORTS.get(parts.scheme.lower(), ()), parts.netloc)


def host_key(hostport: str) -> str:
    """The ``host_of`` form of a ``host[:port]`` an operator wrote in settings.

    For the keys of ``HOST_DOWNLOAD_DELAYS``: ``Bücher.example`` must find the
    queue ``host_of`` named ``xn--bcher-kva.example``. There is no scheme, so a
    port of 80 or 443 is dropped: ``example.com:443`` is written for the https
    site, whose URLs ``host_of`` files under ``example.com``.
    """
    return _canonical(_EITHER_DEFAULT, hostport.strip())


# One entry per distinct (defaults, netloc); a crawl sees few hosts and many links.
@lru_cache(maxsize=4096)
def _canonical(default_ports: tuple[int, ...], netloc: str) -> str:
    hostport = netloc.rpartition("@")[2].lower()
    if hostport.startswith("["):
        host, bracket, rest = hostport.partition("]")
        host += bracket
        if rest and not rest.startswith(":"):
            return hostport  # text after the literal: not a host we can name better
        port_text = rest[1:]
    else:
        host, _, port_text = hostport.partition(":")
        host = host.rstrip(".")
        if not host.isascii():
            try:
                host = host.encode("idna").decode("ascii")
            except UnicodeError:
                pass  # kept as written, as Scrapy keeps it in the URL
    if not port_text:
        return host
    # str.isdigit() also accepts "²" and "٨٠", which int() refuses or reads as 80.
    if not (port_text.isascii() and port_text.isdigit()):
        return f"{host}:{port_text}"
    port = int(port_text)
    return host if port in default_ports else f"{host}:{port}"
