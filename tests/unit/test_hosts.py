"""host_of: one queue and one politeness turn per host, whatever the spelling."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from scrapy import Request

from spiders_project.crawl.hosts import host_key, host_of, host_of_parts


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://example.com/", "example.com"),
        # case
        ("HTTP://Example.COM/x", "example.com"),
        # default ports of both schemes, with leading zeros too
        ("http://Example.COM:80/x", "example.com"),
        ("https://example.com:443/x", "example.com"),
        ("http://example.com:0080/", "example.com"),
        ("http://example.com:/", "example.com"),
        # userinfo
        ("http://user:pw@example.com/", "example.com"),
        ("http://user:pw@Example.COM:80/x", "example.com"),
        ("http://a@b@example.com/", "example.com"),
        # a non-default port is kept, including the other scheme's default
        ("https://user@example.com:8443/", "example.com:8443"),
        ("http://example.com:443/", "example.com:443"),
        ("https://example.com:80/", "example.com:80"),
        # IDN in punycode, whatever the case, and punycode as given
        ("http://bücher.example/", "xn--bcher-kva.example"),
        ("http://BÜCHER.example:8080/", "xn--bcher-kva.example:8080"),
        ("http://xn--bcher-kva.example/", "xn--bcher-kva.example"),
        ("http://XN--BCHER-KVA.example/", "xn--bcher-kva.example"),
        # IPv6 keeps its brackets
        ("http://[::1]:8080/", "[::1]:8080"),
        ("http://[::1]:80/", "[::1]"),
        ("http://[2001:DB8::1]/", "[2001:db8::1]"),
        ("http://example.com./", "example.com"),
    ],
)
def test_every_spelling_of_a_host_gives_one_name(url: str, host: str) -> None:
    assert host_of(url) == host
    # The same name from a URL its caller split already (scope/urls.py's normalise).
    assert host_of_parts(urlsplit(url)) == host


@pytest.mark.parametrize(
    "url",
    [
        "http://bücher.example:8080/a",
        "http://xn--bcher-kva.example:8080/b",
        "http://user@Bücher.Example:8080/",
    ],
)
def test_an_idn_seed_and_its_punycode_links_share_a_host(url: str) -> None:
    # Scrapy writes the request URL in punycode; host_of of either form agrees.
    assert host_of(url) == host_of(Request(url).url) == "xn--bcher-kva.example:8080"


@pytest.mark.parametrize(
    ("url", "host"),
    [
        # a bad port: the canonical name, then the port as written
        ("http://Example.com:abc/", "example.com:abc"),
        ("http://example.com:80:80/", "example.com:80:80"),
        # digits str.isdigit() accepts but int() refuses ("²") or reads as 80 ("٨٠")
        ("http://example.com:\u00b2/", "example.com:\u00b2"),
        ("http://example.com:\u0668\u0660/", "example.com:\u0668\u0660"),
        # a name IDNA refuses stays lower-case as written, as Scrapy keeps it
        ("http://A..b.\u00c9/", "a..b.\u00e9"),
        ("http://a..b.\u00e9:80/", "a..b.\u00e9"),
        ("http://" + "\u00e9" * 70 + ".example/", "\u00e9" * 70 + ".example"),
        # urlsplit refuses an unclosed IPv6 literal
        ("http://[::1/x", "[::1"),
        ("http://u@[::1:8080/", "[::1:8080"),
        ("http://[::1]junk/", "[::1]junk"),
        # no host at all
        ("not a url", ""),
        ("", ""),
        ("mailto:someone@example.com", ""),
    ],
)
def test_odd_input_never_raises_and_falls_back_to_a_lower_case_form(url: str, host: str) -> None:
    assert host_of(url) == host


@pytest.mark.parametrize(
    ("written", "key"),
    [
        ("Example.com", "example.com"),
        ("example.com:80", "example.com"),
        ("example.com:443", "example.com"),
        ("example.com:8080", "example.com:8080"),
        (" Bücher.example ", "xn--bcher-kva.example"),
        ("[::1]:8080", "[::1]:8080"),
    ],
)
def test_a_host_written_in_settings_finds_its_queue(written: str, key: str) -> None:
    assert host_key(written) == key
