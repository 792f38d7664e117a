"""The Public Suffix List a process uses: tldextract's bundled snapshot, or a file
the operator names; never fetched from the internet.

``tldextract.TLDExtract()`` with its defaults downloads the list from
publicsuffix.org on its first use (logging a warning with tracebacks where
it cannot) and caches it under ``~/.cache/python-tldextract``. A crawler
process must not reach out to the internet by itself, so every extractor
here has no URL to fetch (or only the operator's ``file://`` one), no cache
directory, and no fallback that would hide a broken file.
"""

from __future__ import annotations

from pathlib import Path

import tldextract
from scrapy.settings import BaseSettings
from tldextract.suffix_list import SuffixListNotFound, extract_tlds_from_suffix_list

from spiders_project.config import ConfigError, SettingsReader

SETTING = "COOKIES_PUBLIC_SUFFIX_LIST"


def public_suffixes(list_file: str = "") -> tldextract.TLDExtract:
    """An extractor over the bundled snapshot (``""``) or over ``list_file``, loaded now.

    Private suffixes count (``github.io``), as Scrapy's cookie middleware
    counts them. A file is read once, here, so that a missing or empty one
    fails at start with one line (:class:`ConfigError`), never on the first
    cookie of a crawl; tldextract would otherwise log a traceback and fall
    back to the snapshot without a word.
    """
    if not list_file:
        return tldextract.TLDExtract(
            suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True
        )
    path = Path(list_file)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{SETTING}={list_file!r}: cannot be read ({exc})") from None
    public, _private = extract_tlds_from_suffix_list(text)
    if not public:
        raise ConfigError(f"{SETTING}={list_file!r}: has no public suffix (not a suffix list)")
    extractor = tldextract.TLDExtract(
        suffix_list_urls=(path.resolve().as_uri(),),
        cache_dir=None,
        fallback_to_snapshot=False,
        include_psl_private_domains=True,
    )
    try:
        extractor("example.com")  # reads the file now
    except SuffixListNotFound:
        raise ConfigError(f"{SETTING}={list_file!r}: cannot be read") from None
    return extractor


def suffix_list_file(settings: BaseSettings) -> str:
    """``COOKIES_PUBLIC_SUFFIX_LIST``: "" (the bundled snapshot) or a file's path."""
    return SettingsReader(settings).getstr(SETTING)


def cookie_public_suffixes(settings: BaseSettings) -> tldextract.TLDExtract:
    """The extractor Scrapy's cookie middleware is given (``insides/internals.py``),
    loaded now: parsing the bundled list takes about 50 ms, which the first
    cookie would otherwise spend on the reactor."""
    extractor = public_suffixes(suffix_list_file(settings))
    extractor("example.com")
    return extractor
