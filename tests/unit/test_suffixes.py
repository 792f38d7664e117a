"""The Public Suffix List of the crawler's processes (crawl/suffixes.py): bundled or the
operator's file, never fetched, never cached on disk."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from spiders_project.config import ConfigError
from spiders_project.crawl.suffixes import cookie_public_suffixes, public_suffixes

# A list in the form of publicsuffix.org's file, with one private suffix.
LIST = """// comment
uk
co.uk
example
// ===BEGIN PRIVATE DOMAINS===
pages.example
"""


def test_the_bundled_snapshot_fetches_nothing_and_caches_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("TLDEXTRACT_CACHE", str(tmp_path / "cache"))
    extractor = public_suffixes()
    assert extractor.suffix_list_urls == ()
    parts = extractor("shop.example.co.uk")
    assert (parts.domain, parts.suffix) == ("example", "co.uk")
    assert extractor("alice.github.io").suffix == "github.io"  # private suffixes count
    assert not (tmp_path / "cache").exists()


def test_the_operators_file_is_the_list(tmp_path, monkeypatch):
    monkeypatch.setenv("TLDEXTRACT_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "public_suffix_list.dat"
    path.write_text(LIST)
    extractor = cookie_public_suffixes(Settings({"COOKIES_PUBLIC_SUFFIX_LIST": str(path)}))
    assert extractor.suffix_list_urls == (path.resolve().as_uri(),)
    assert extractor("a.pages.example").suffix == "pages.example"
    # Not in this list (it is in the bundled one): no suffix.
    assert extractor("www.example.com").suffix == ""
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("content", [None, "", "// only a comment\n", b"\xff\xfe"])
def test_a_file_that_is_not_a_list_is_one_line_naming_the_setting(tmp_path, content):
    path = tmp_path / "list.dat"
    if isinstance(content, str):
        path.write_text(content)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        public_suffixes(str(path))
    message = str(caught.value)
    assert message.startswith(f"COOKIES_PUBLIC_SUFFIX_LIST={str(path)!r}: ")
    assert "\n" not in message
