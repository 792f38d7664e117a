"""The console's parts without a server: users, sessions, the throttle, CSRF, rates, settings."""

from __future__ import annotations

import logging

import bcrypt
import pytest
from scrapy.settings import Settings

from monitor.config import ConsoleConfig
from monitor.console.auth import Session, Sessions, Throttle, Users, csrf_ok, read_htpasswd
from monitor.console.history import BUCKETS, KEEP, History, chart
from monitor.console.host_sweep import HostNames
from monitor.console.pages import _chart, search_terms
from spiders_project.config import ConfigError
from tests.unit.test_layers import violations


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def hashed(password: str, prefix: str = "$2y$") -> str:
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode().replace("$2b$", prefix)


def test_htpasswd_keeps_bcrypt_entries_and_says_which_it_left_out(tmp_path, caplog):
    path = tmp_path / "htpasswd"
    path.write_text(
        f"# operators\nalice:{hashed('a')}\n\nbob:{hashed('b', '$2b$')}\n"
        "carol:$apr1$abc$def\ndave:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\nplain\n"
    )
    with caplog.at_level(logging.ERROR, "monitor.console"):
        users = read_htpasswd(path)
    assert set(users) == {"alice", "bob"}
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3
    assert "line 5 (carol): not a bcrypt entry (use htpasswd -B), left out" in lines[0]
    assert "(dave)" in lines[1] and "(no user:hash)" in lines[2]


def test_users_check_passwords_and_who_may_act(tmp_path):
    path = tmp_path / "htpasswd"
    path.write_text(f"alice:{hashed('a-pw')}\nbob:{hashed('b-pw')}\n")
    users = Users(path, ["alice", "zed"])
    assert users.check("alice", "a-pw") and not users.check("alice", "b-pw")
    assert not users.check("nobody", "a-pw") and not users.check("alice", "")
    assert not users.check("alice", "x" * 100)  # bcrypt reads 72 bytes: refused, never cut
    assert users.may_act("alice") and not users.may_act("bob") and not users.may_act("zed")
    # The file is read again once it changed.
    path.write_text(f"bob:{hashed('new')}\n")
    users._mtime = -1.0
    users.reload()
    assert users.names == {"bob"} and users.check("bob", "new")


def test_sessions_end_after_their_idle_time_or_at_logout():
    clock = Clock()
    sessions = Sessions(idle=60, clock=clock)
    one, two = sessions.new("alice"), sessions.new("bob")
    assert one.token != two.token and one.csrf != two.csrf and len(one.token) >= 40
    clock.now += 50
    assert sessions.get(one.token) is one  # used: its idle time starts again
    clock.now += 50
    assert sessions.get(one.token) is one and sessions.get(two.token) is None
    sessions.end(one.token)
    assert sessions.get(one.token) is None and sessions.get(None) is None


def test_the_throttle_counts_per_key_within_its_window():
    clock = Clock()
    throttle = Throttle(attempts=3, window=100, clock=clock)
    keys = ["user:alice", "addr:10.0.0.1"]
    for _ in range(2):
        throttle.failed(keys)
    assert not throttle.refused(keys)
    throttle.failed(keys)
    assert throttle.refused(["user:alice"]) and throttle.refused(["addr:10.0.0.1", "user:x"])
    assert not throttle.refused(["user:bob", "addr:10.0.0.2"])
    # A good password clears its user's count, not its address'.
    throttle.succeeded("user:alice")
    assert not throttle.refused(["user:alice"]) and throttle.refused(["addr:10.0.0.1"])
    clock.now += 101
    assert not throttle.refused(keys)


def test_csrf_tokens_must_match_the_sessions():
    session = Session("t", "alice", "the-token", 0.0)
    assert csrf_ok(session, "the-token")
    assert not csrf_ok(session, "the-tokeN") and not csrf_ok(session, "")
    assert not csrf_ok(session, None) and not csrf_ok(session, b"the-token")


def test_rates_and_the_chart_from_the_samples():
    history = History()
    for second in range(0, 1200, 10):  # 5 pages/s for 20 minutes, items at 2/s
        history.add("s", 10_000.0 + second, {"pages": 5.0 * second, "items": 2.0 * second})
    now = 10_000.0 + 1190
    assert history.rate("s", "pages", now) == pytest.approx(5.0)
    assert history.rate("s", "items", now) == pytest.approx(2.0)
    assert history.rate("nothing", "pages", now) is None
    history.add("s", now + 1, {"pages": 0.0, "items": 0.0})  # closer than the spacing: dropped
    buckets = history.per_bucket("s", "pages", now)
    assert 38 <= len(buckets) <= 41 and all(r == pytest.approx(5.0) for _, r in buckets)
    drawn = chart(buckets, now, history.covered("s", now))
    assert drawn.peak == pytest.approx(5.0) and drawn.covered_min == 20 and drawn.dots == []
    xs = [float(point.split(",")[0]) for point in drawn.points.split()]
    assert xs == sorted(xs) and 0 <= xs[0] and xs[-1] <= 600
    assert KEEP / BUCKETS == 30


def test_the_chart_covers_the_hour_from_the_workers_samples_a_fresh_monitor_lacks():
    """A monitor started a minute ago has a minute of its own samples; the
    workers' (one a minute for the hour, and the hour's margin) fill the rest."""
    now = 100_000.0
    own = History()
    for second in range(0, 60, 10):
        own.add("s", now - 60 + second, {"pages": 10.0 * (now - 60 + second - 90_000)})
    workers = [(now - t, int(10 * (now - t - 90_000))) for t in range(3720, 0, -60)]
    drawn = _chart(own, workers, "s", now)
    assert drawn.covered_min == 60 and drawn.peak == pytest.approx(10.0)
    assert len(drawn.points.split()) >= BUCKETS // 2
    alone = _chart(own, [], "s", now)
    assert alone.covered_min == 1


def test_host_names_are_searched_by_part_ignoring_case_bounded():
    names = HostNames([f"site{n}.example" for n in range(1000)] + ["Shop.TEST", "a\nb"])
    assert len(names) == 1001  # a name with a line break is no host name
    assert names.containing("SITE12", 50) == (
        [f"site{n}.example" for n in (12, *range(120, 130))],
        False,
    )
    found, more = names.containing(".example", 50)
    assert len(found) == 50 and more
    assert names.containing("shop.t", 5) == (["shop.test"], False)
    assert names.containing("", 5) == ([], False) and names.containing("x\ny", 5) == ([], False)
    assert HostNames([]).containing("a", 5) == ([], False)


def test_a_search_asks_for_part_of_a_name_and_the_host_it_names():
    assert search_terms("HTTP://Shop.Test:80/some/page") == ("shop.test", "shop.test")
    assert search_terms(" Shop ") == ("shop", "shop")
    assert search_terms("shop.test:8080") == ("shop.test:8080", "shop.test:8080")
    assert search_terms("<script>") == ("<script>", None)
    assert search_terms("a" * 1000)[0] == "a" * 300


def _settings(**values: object) -> Settings:
    settings = Settings()
    settings.setmodule("spiders_project.settings")
    for name, value in values.items():
        settings.set(name, value)
    return settings


def test_console_settings(tmp_path):
    off = ConsoleConfig.from_settings(_settings())
    assert off.htpasswd is None and not off.actions and off.prefix == ""
    path = tmp_path / "htpasswd"
    path.write_text("")
    on = ConsoleConfig.from_settings(
        _settings(
            CONSOLE_HTPASSWD=str(path),
            CONSOLE_OPERATORS="alice, bob,",
            CONSOLE_REDIS_URL="redis://op@h/0",
            CONSOLE_PREFIX="/crawler/",
        )
    )
    assert on.htpasswd == path and on.operators == {"alice", "bob"} and on.actions
    assert on.prefix == "/crawler"
    assert on.host_sweep_rate == 2000.0
    with pytest.raises(ConfigError, match="CONSOLE_HOST_SWEEP_RATE"):
        ConsoleConfig.from_settings(_settings(CONSOLE_HOST_SWEEP_RATE="0"))
    with pytest.raises(ConfigError, match="CONSOLE_HTPASSWD=.*is not a file"):
        ConsoleConfig.from_settings(_settings(CONSOLE_HTPASSWD=str(tmp_path / "none")))
    for bad in ("crawler", "/a b", "/x/../y?", "//evil.example"):
        with pytest.raises(ConfigError, match="CONSOLE_PREFIX"):
            ConsoleConfig.from_settings(_settings(CONSOLE_PREFIX=bad))


def test_only_the_consoles_two_doors_reach_feature_code():
    edges = {
        "monitor.console.actions": {"spiders_project.jobs.control"},
        "monitor.console.archive": {"spiders_project.archive.index"},
        "monitor.console.pages": {"spiders_project.jobs.control"},
        "monitor.console.forms": {"spiders_project.archive.index"},
    }
    assert violations(edges) == [
        "monitor.console.forms imports spiders_project.archive.index: "
        "the monitor reads the read model only",
        "monitor.console.pages imports spiders_project.jobs.control: "
        "the monitor reads the read model only",
    ]
