"""The snapshot of a cluster the monitor and crawlstatus read: pure reading of replies."""

from __future__ import annotations

from spiders_project.read_model.cluster_view import as_dict, read_cluster, read_cookie_counts
from spiders_project.read_model.contract import Work


def test_a_cluster_read_from_raw_replies() -> None:
    """``send`` may hand back raw replies (flat lists) or redis-py's parsed ones."""
    sent: list[str] = []

    def send(name: str, commands: list[tuple[object, ...]]) -> list[object]:
        sent.append(name)
        if name == "read_cluster":
            assert commands[0] == ("TIME",) and commands[1] == ("INFO", "memory")
            return [
                [b"1000", b"500000"],
                b"# Memory\r\nused_memory:2048\r\nmaxmemory:0\r\n",
                *(1, b"5", 2, 0),  # work
                [b"w1", b"2", b"w2", b"0"],  # the writers' hash: w1 holds a batch of 2
                3,  # dead
                4,  # unserializable
                *(1, 0, 0, 0),  # rejected lists
                40,  # the previous release's dupefilter set
                [b"pages", b"7"],  # totals, as a flat HGETALL
                {b"items_written": b"6"},  # db_writer, as redis-py parses it
                b'{"at": "1970-01-01T00:16:30+00:00"}',  # the buffer's head: 10.5 s old
                [b"h:1", b"999.5", b"h:2", b"1.0"],  # h:2 is older than the retention
                [b"http://p:1", b"1000600"],  # proxies:banned (ms): banned until 1000.6
                b"2",  # the seen-set's count
                0,  # the samples (EXISTS)
                [b"spam.example", b'{"blocked": true}', b"odd", b"x"],  # hosts steered, flat
                2,  # the cookie jars (ZCARD of the index)
                2,  # the jars counted (HLEN of the counts)
                [b"default", b"3", b"user-7", b"1"],  # their counts (HRANDFIELD), flat
                b"3",  # the render queue's size
                1,  # its leases
                {b"j": b'{"state": "running", "started_at": 1000000, "seeds": ["http://x/"]}'},
                # The shard's counts, as a flat HGETALL.
                [b"j|pages", b"4", b"j|items", b"9", b"j|queued", b"2", b"j|leased", b"1"]
                + [b"j|slots", b"1"],
            ]
        assert commands == [
            ("HGETALL", "s:worker:h:1"),
            ("EXISTS", "s:worker:h:1:heartbeat"),
            ("LINDEX", "s:items:processing:w1", 0),  # the head of w1's batch
        ]
        return [{b"pages": b"7", b"items": b"2"}, 1, b'{"at": "1970-01-01T00:16:00+00:00"}']

    view = read_cluster(send, ["s"], worker_retention=900)
    assert sent == ["read_cluster", "read_cluster workers"]
    assert view.time == 1000.5 and view.used_memory == 2048 and view.maxmemory == 0
    [spider] = view.spiders
    assert spider.work == Work(1, 8, 3, 0, 2) and not spider.work.idle
    assert spider.queues["items_processing"] == 2
    assert spider.queues["requests"] == 8 and spider.queues["render"] == 3
    assert spider.queues["dead"] == 3 and spider.queues["rejected"] == 1
    assert spider.queues["unserializable"] == 4
    assert spider.rejected == {"start_urls": 1, "requests": 0, "items": 0, "dead": 0}
    assert spider.dupefilter == 42 and spider.totals == {"pages": 7}
    # The lag: the oldest batch in hand (40.5 s), not the buffer's head.
    assert spider.db_writer == {"items_written": 6.0} and spider.lag == 40.5
    [worker] = spider.workers
    assert (worker.worker, worker.alive, worker.counters) == ("h:1", True, {"pages": 7, "items": 2})
    assert as_dict(view)["spiders"][0]["idle"] is False
    assert (spider.cookie_jars, spider.cookies) == (2, 4)
    assert as_dict(view)["spiders"][0]["cookies"] == {"jars": 2, "cookies": 4}
    assert spider.proxy_bans == {"http://p:1": 1000.6}
    assert spider.proxies(1000.5) == {"http://p:1": True}
    assert spider.proxies(1000.7) == {"http://p:1": False}
    # A steering record that is not ours is left out.
    assert list(spider.steered) == ["spam.example"] and spider.hosts_blocked == 1
    [job] = spider.jobs
    assert (job.id, job.state, job.pages, job.queued, job.in_flight, job.items) == (
        "j",
        "running",
        4,
        2,
        1,
        9,
    )
    assert as_dict(view)["spiders"][0]["jobs"][0]["seeds"] == ["http://x/"]
    hosts = as_dict(view)["spiders"][0]["hosts"]
    assert hosts == {
        "blocked": 1,
        "steered": {"spam.example": {"delay": None, "cap": None, "blocked": True}},
    }


def test_a_spider_named_twice_is_read_once() -> None:
    def send(name: str, commands: list[tuple[object, ...]]) -> list[object]:
        per_spider = [0, 0, 0, 0, {}, 0, 0, 0, 0, 0, 0, 0, {}, {}, None, [], [], None, 0, {}]
        per_spider += [0, 0, []]  # the cookie jars, their counts
        per_spider += [None, 0]  # the render queue
        per_spider += [{}, {}]  # the jobs: records, counts
        return [[b"1000", b"0"], {}, *per_spider]

    view = read_cluster(send, ["s", "s"], worker_retention=900)
    assert [spider.spider for spider in view.spiders] == ["s"]
    assert view.spiders[0].work.drained


def test_the_cookies_of_more_jars_than_one_read_takes_are_estimated_from_a_sample() -> None:
    assert read_cookie_counts(0, []) == 0
    assert read_cookie_counts(3, {b"a": b"2", b"b": b"5", b"c": b"1"}) == 8
    # 4 of 40 jars read (HRANDFIELD's count): their mean, times 40.
    assert read_cookie_counts(40, [b"a", b"2", b"b", b"5", b"c", b"1", b"d", b"4"]) == 120
    assert read_cookie_counts(2, [[b"a", b"2"], [b"b", b"not a count"]]) == 2  # redis-py's pairs
    assert read_cookie_counts(4, [b"a", b"2", b"b", b"not a count"]) == 4
