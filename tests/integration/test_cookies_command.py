"""``scrapy cookies list|clear`` on a real Redis holding jars as the workers write them.

The jars are written here in the layout docs/SECURITY.md ("Cookies") gives:
a hash per jar whose fields are ``<domain>\\t<path>\\t<name>`` -> the cookie's
attributes as JSON, and ``~`` control fields; the index and the counts under
the spider's prefix. Every value planted is a secret the output must not hold.
"""

from __future__ import annotations

import json

import redis

from spiders_project.commands.cookies import CookieLine, cookie_line
from spiders_project.keys import RedisKeys
from spiders_project.keys.cookies import cookie_counts, cookie_jar, cookie_jars
from tests.support.processes import K, scrapy_command

SECRETS = ("PLANTED-session-value", "PLANTED-cart-value", "PLANTED-user7-value")
EXPIRES = 1893456000  # 2030-01-01 00:00:00 UTC


def attributes(value: str, expires: int | None, *, secure: bool = False) -> str:
    return json.dumps(
        {
            "value": value,
            "expires": expires,
            "secure": secure,
            "http_only": secure,
            "domain_specified": True,
            "domain_initial_dot": True,
            "path_specified": True,
            "version": 0,
        }
    )


def plant(r: redis.Redis, keys: RedisKeys = K) -> None:
    r.hset(
        cookie_jar(keys, "default"),
        mapping={
            ".example.com\t/\tsession": attributes(SECRETS[0], EXPIRES, secure=True),
            "shop.example.com\t/cart\tcart": attributes(SECRETS[1], None),
            "~v": 7,
            "~proxy": "http://proxy-1:3128",
            "~login": json.dumps({"state": "ok"}),
        },
    )
    r.hset(
        cookie_jar(keys, "user-7"),
        mapping={".example.com\t/\tsession": attributes(SECRETS[2], EXPIRES), "~v": 1},
    )
    r.zadd(cookie_jars(keys), {"default": 1_700_000_000_000, "user-7": 1_700_000_060_000})
    # A jar counted but gone from the index (its TTL passed): clear drops its count too.
    r.hset(cookie_counts(keys), mapping={"default": 2, "user-7": 1, "old": 4})


def run(redis_url: str, *argv: str) -> str:
    done = scrapy_command(redis_url, "cookies", *argv)
    assert done.returncode == 0, (argv, done.stdout, done.stderr)
    for secret in SECRETS:
        assert secret not in done.stdout + done.stderr, (argv, secret)
    return done.stdout


def test_list_shows_names_domains_paths_and_expiry_never_values(redis_url, r):
    plant(r)
    shown = run(redis_url, "list")
    assert shown.splitlines() == [
        "Jar 'user-7': 1 cookies (last used 2023-11-14 22:14:20 UTC)",
        "  .example.com  /  session  expires 2030-01-01 00:00:00 UTC",
        "Jar 'default': 2 cookies (last used 2023-11-14 22:13:20 UTC)",
        "  .example.com  /  session  expires 2030-01-01 00:00:00 UTC  secure  httponly",
        "  shop.example.com  /cart  cart  expires session",
        "2 cookie jars of distributed (values never shown)",
    ]
    document = json.loads(run(redis_url, "list", "--jar", "default", "--json"))
    assert document == {
        "spider": "distributed",
        "jars": [
            {
                "jar": "default",
                "last_used": 1_700_000_000.0,
                "cookies": [
                    {
                        "domain": ".example.com",
                        "path": "/",
                        "name": "session",
                        "expires": EXPIRES,
                        "secure": True,
                        "http_only": True,
                    },
                    {
                        "domain": "shop.example.com",
                        "path": "/cart",
                        "name": "cart",
                        "expires": None,
                        "secure": False,
                        "http_only": False,
                    },
                ],
            }
        ],
    }
    # The control fields (version, proxy, login state) are not cookies: not shown.
    assert "~" not in shown and "proxy-1" not in shown
    assert "0 cookies (not in the index)" in run(redis_url, "list", "--jar", "nobody")


def test_clear_one_jar_then_every_jar_of_the_spider_only(redis_url, r):
    plant(r)
    other = RedisKeys("other")
    plant(r, other)
    assert "Cleared jar 'user-7' of distributed" in run(redis_url, "clear", "--jar", "user-7")
    assert not r.exists(cookie_jar(K, "user-7"))
    assert r.zrange(cookie_jars(K), 0, -1) == [b"default"]
    assert set(r.hkeys(cookie_counts(K))) == {b"default", b"old"}
    assert r.exists(cookie_jar(K, "default"))

    cleared = run(redis_url, "clear")
    assert "Cleared 2 cookie jars of distributed (1 jar hashes deleted)" in cleared, cleared
    assert not r.exists(cookie_jar(K, "default"), cookie_jars(K), cookie_counts(K))
    # Another spider's jars are not this spider's to clear.
    assert r.exists(cookie_jar(other, "default"), cookie_jar(other, "user-7"))
    assert r.zcard(cookie_jars(other)) == 2 and r.hlen(cookie_counts(other)) == 3
    assert "0 cookie jars of distributed" in run(redis_url, "list")


def test_a_field_or_attributes_it_cannot_read_show_no_value():
    assert cookie_line("no tabs here", b"{not json") == CookieLine(
        "?", "?", "no tabs here", None, False, False
    )
    assert cookie_line("a\t/\tn", json.dumps({"value": "v", "expires": "soon"})).expires is None
    assert "v" not in str(cookie_line("a\t/\tn", json.dumps({"value": "v"}))).split("  ")
