"""The network guard: which addresses are public, and what a setting widens (scope/networks.py)."""

import pytest

from spiders_project.config import ConfigError, load_settings


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
