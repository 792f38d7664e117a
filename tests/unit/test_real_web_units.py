"""Politeness groups, backoff, ban rules and proxy settings: the pure parts of issue 12."""

import random

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse, TextResponse

from spiders_project.config import ConfigError, load_settings
from spiders_project.politeness.bans import BanRules
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.politeness.groups import PolitenessKey, registrable_domain
from spiders_project.politeness.retries import Backoff
from spiders_project.proxies.config import ProxyConfig, proxy_name


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


def test_delays_set_for_a_host_apply_to_its_group():
    settings = load_settings(
        {"POLITENESS_KEY": "domain", "HOST_DOWNLOAD_DELAYS": {"www.example.com": 2}}
    )
    politeness = HostPoliteness.from_settings(settings)
    assert politeness.key_of("http://img.example.com/a.png") == "example.com"
    assert politeness.delay_ms("example.com") == 2000
    with pytest.raises(ConfigError):
        HostPoliteness.from_settings(load_settings({"POLITENESS_KEY": "server"}))


def test_backoff_doubles_with_jitter_and_a_cap():
    backoff = Backoff(2.0, 30.0, random.Random(1))
    for attempt, base in ((1, 2), (2, 4), (3, 8), (4, 16)):
        for _ in range(50):
            assert base <= backoff.seconds(attempt) <= base * 1.25
    assert backoff.seconds(10) == 30.0


def test_ban_rules():
    rules = BanRules.from_settings(
        load_settings({"BAN_HTTP_CODES": "403,429", "BAN_BODY_PATTERNS": '["captcha", "a,b"]'})
    )
    request = Request("http://h/")

    def response(status=200, body=b"<html>fine</html>", cls=HtmlResponse):
        return cls("http://h/", status=status, body=body, request=request)

    assert rules.reason(response()) is None
    assert rules.reason(response(403)) == "HTTP 403"
    assert rules.reason(response(body=b"solve the captcha")) == "body matches 'captcha'"
    assert rules.reason(response(body=b"x a,b y")) == "body matches 'a,b'"
    assert rules.reason(response(body=b"captcha", cls=TextResponse)) is not None
    with pytest.raises(ConfigError):
        BanRules.from_settings(load_settings({"BAN_BODY_PATTERNS": '["("]'}))
    with pytest.raises(ConfigError):
        BanRules.from_settings(load_settings({"BAN_HTTP_CODES": "forbidden"}))


def test_proxy_settings_name_proxies_without_credentials(tmp_path):
    listing = tmp_path / "proxies.txt"
    listing.write_text("# ours\nhttp://u:secret@10.0.0.2:3128\n\nhttps://p.example\n")
    config = ProxyConfig.from_settings(
        load_settings(
            {
                "PROXIES": "http://u:secret@10.0.0.1:3128,http://u:other@10.0.0.1:3128",
                "PROXIES_FILE": str(listing),
                "PROXY_MODE": "host",
            }
        )
    )
    assert [p.name for p in config.proxies] == [
        "http://10.0.0.1:3128",
        "http://10.0.0.1:3128#2",
        "http://10.0.0.2:3128",
        "https://p.example:443",
    ]
    assert config.proxies[0].url == "http://u:secret@10.0.0.1:3128"
    assert config.mode == "host"
    assert proxy_name("socks5://h:1") is None
    with pytest.raises(ConfigError) as bad:
        ProxyConfig.from_settings(load_settings({"PROXIES": "ftp://u:secret@h:1"}))
    assert "secret" not in str(bad.value)
    with pytest.raises(ConfigError):
        ProxyConfig.from_settings(load_settings({"PROXY_MODE": "random"}))
    assert ProxyConfig.from_settings(load_settings()).proxies == ()


def test_what_the_network_guard_calls_public():
    from spiders_project.scope.networks import NetworkGuard

    guard = NetworkGuard(True, [])
    for private in (
        "127.0.0.1",
        "10.0.0.5",
        "172.16.3.4",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",  # shared (carrier-grade NAT)
        "0.0.0.0",
        "240.0.0.1",  # reserved
        "224.0.0.1",  # multicast
        "::1",
        "fe80::1",
        "fc00::1",
        "::ffff:10.0.0.1",
        "[::1]",
        "not-an-ip",
    ):
        assert not guard.is_public(private), private
    for public in ("93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8"):
        assert guard.is_public(public), public
    widened = NetworkGuard.from_settings(
        load_settings({"NETWORK_GUARD_PUBLIC": '["127.0.0.2/32"]'})
    )
    assert widened.is_public("127.0.0.2") and not widened.is_public("127.0.0.1")
    # Hosts are guarded unless the handler said otherwise just before connecting.
    assert not widened.allows("localhost", "127.0.0.1")
    widened.connecting("localhost", False)
    assert widened.allows("localhost", "127.0.0.1")
    off = NetworkGuard.from_settings(load_settings({"ALLOW_PRIVATE_NETWORKS": "true"}))
    assert off.allows("metadata", "169.254.169.254")
    with pytest.raises(ConfigError):
        NetworkGuard.from_settings(load_settings({"NETWORK_GUARD_PUBLIC": '["nope"]'}))


def test_the_exporter_shows_each_proxy_and_whether_all_are_banned():
    from monitor.collector import spider_metrics
    from spiders_project.cluster_view import read_cluster

    def send(name, commands):
        if name == "read_cluster workers":
            return []
        totals = {
            b"pages": b"3",
            b"proxy_requests:http://a:1": b"5",
            b"proxy_requests:http://b:1": b"7",
            b"proxy_bans:http://a:1": b"2",
        }
        banned = [b"http://a:1", b"2000000", b"http://b:1", b"1500000"]
        return [
            [b"1000", b"0"],
            {},
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            totals,
            {},
            None,
            None,
            [],
            banned,
            None,  # the seen-set's count
            None,  # the samples
            None,  # the render queue's size
            0,  # its leases
        ]

    def families(now_banned_b: bool):
        view = read_cluster(send, ["s"], worker_retention=900)
        now = 1400.0 if now_banned_b else 1600.0
        return {f.name: f.samples for f in spider_metrics(view.spiders, now)}

    found = families(True)
    requests = {s.labels["proxy"]: s.value for s in found["crawler_proxy_requests"]}
    assert requests == {"http://a:1": 5, "http://b:1": 7}
    bans = {s.labels["proxy"]: s.value for s in found["crawler_proxy_bans"]}
    assert bans == {"http://a:1": 2, "http://b:1": 0}
    assert [s.value for s in found["crawler_proxies_all_banned"]] == [1]
    later = families(False)  # b's ban ended at 1500 s
    assert {s.labels["proxy"]: s.value for s in later["crawler_proxy_banned"]} == {
        "http://a:1": 1,
        "http://b:1": 0,
    }
    assert [s.value for s in later["crawler_proxies_all_banned"]] == [0]
