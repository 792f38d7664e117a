"""The exporter's families, from what the contract reads (monitor/collector.py)."""


def test_the_exporter_shows_each_proxy_and_whether_all_are_banned():
    from monitor.collector import spider_metrics
    from spiders_project.read_model.cluster_view import read_cluster

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
            {},  # the writers' hash
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            totals,
            {},
            None,  # the buffer's head
            [],
            banned,
            None,  # the seen-set's count
            None,  # the samples
            {},  # the hosts steered
            0,  # the cookie jars
            0,  # the jars counted
            [],  # their counts
            None,  # the render queue's size
            0,  # its leases
            {},  # the jobs' records
            {},  # their counts
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


def test_the_exporter_shows_steered_hosts_with_bounded_series():
    from monitor.collector import HOST_SERIES_MAX, host_metrics
    from spiders_project.read_model.cluster_view import SpiderView
    from spiders_project.read_model.contract import Work
    from spiders_project.read_model.host_steering import HostSteer

    steered = {f"h{i:03}.example": HostSteer(delay=1.5) for i in range(HOST_SERIES_MAX + 10)}
    steered["zz.example"] = HostSteer(cap=2, blocked=True)
    view = SpiderView("s", Work(0, 0, 0, 0, 0), {}, {}, 0, {}, {}, 0.0, [], [], steered=steered)
    found = {f.name: f.samples for f in host_metrics([view])}
    assert [s.value for s in found["crawler_hosts_blocked"]] == [1]
    assert [s.value for s in found["crawler_hosts_steered"]] == [HOST_SERIES_MAX + 11]
    overrides = found["crawler_host_overrides"]
    assert len({s.labels["host"] for s in overrides}) == HOST_SERIES_MAX
    # Blocked hosts first: never cut off by the bound.
    blocked = {(s.labels["kind"], s.value) for s in overrides if s.labels["host"] == "zz.example"}
    assert blocked == {("cap", 2), ("blocked", 1)}
    assert {s.labels["kind"] for s in overrides} == {"delay_seconds", "cap", "blocked"}


def test_a_job_shows_its_downloads_and_its_other_leases_apart():
    from types import SimpleNamespace

    from monitor.collector import job_metrics
    from spiders_project.read_model.job_progress import job_progress

    (job,) = job_progress({}, [{b"j|leased": b"80", b"j|slots": b"16"}], 0)
    families = {f.name: f for f in job_metrics([SimpleNamespace(spider="s", jobs=[job])])}
    (in_flight,) = families["crawler_job_in_flight"].samples
    (leased,) = families["crawler_job_leased"].samples
    assert (in_flight.value, leased.value) == (16, 64)
    assert leased.labels == {"spider": "s", "crawl_job": "j"}
