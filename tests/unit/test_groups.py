"""Politeness groups: one turn per host, registrable domain or IP (politeness/groups.py)."""

import pytest

from spiders_project.politeness.groups import PolitenessKey, registrable_domain


@pytest.mark.parametrize(
    ("host", "domain"),
    [
        ("www.example.com", "example.com"),
        ("a.b.example.co.uk", "example.co.uk"),
        ("example.co.uk", "example.co.uk"),
        ("alice.github.io", "alice.github.io"),  # a private suffix keeps sites apart
        ("127.0.0.1", "127.0.0.1"),
        ("localhost", "localhost"),
        ("[::1]", "[::1]"),
    ],
)
def test_registrable_domain(host, domain):
    assert registrable_domain(host) == domain


def test_politeness_groups():
    assert PolitenessKey("host").of_url("http://WWW.Example.com:80/x") == "www.example.com"
    domain = PolitenessKey("domain")
    assert domain.of_url("http://shop.example.com:8080/") == "example.com"
    assert domain.of_url("https://www.example.com/") == "example.com"
    ip = PolitenessKey("ip")
    assert ip.of_url("http://localhost:8080/") == "127.0.0.1"
    assert ip.of_url("http://127.0.0.1:9/") == "127.0.0.1"
    assert ip.of_url("http://[::1]:9/") == "::1"
    assert ip.of_url("http://no-such-host.invalid/") == "no-such-host.invalid"
    with pytest.raises(ValueError):
        PolitenessKey("server")
