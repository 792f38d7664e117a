"""Proxy settings: the list, its file and the mode; proxies named without credentials.

The config is proxies/config.py.
"""

import pytest

from spiders_project.config import ConfigError, load_settings
from spiders_project.proxies.config import ProxyConfig, proxy_name


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


def test_an_empty_proxies_file_setting_reads_no_file():
    assert ProxyConfig.from_settings(load_settings({"PROXIES_FILE": ""})).proxies == ()


@pytest.mark.parametrize(
    ("value", "problem"),
    [(7, "not a string"), ("/nonexistent/proxies.txt", "cannot be read")],
)
def test_a_bad_proxies_file_is_refused_with_the_setting_named(value, problem):
    with pytest.raises(ConfigError, match=f"^PROXIES_FILE=.*: {problem}"):
        ProxyConfig.from_settings(load_settings({"PROXIES_FILE": value}))
