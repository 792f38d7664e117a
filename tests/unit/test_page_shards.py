"""The shard a page's items and page-state entries go to (frontier/page_shards.py):
its lease's, read from the request; the meta stamp never leaves the worker."""

from __future__ import annotations

from collections.abc import Callable

from scrapy import Request

from spiders_project.crawl.meta import LEASE_SHARD, LEASED_AT
from spiders_project.frontier.lease_id import NO_SHARD
from spiders_project.frontier.page_shards import PageShards
from spiders_project.frontier.steps import Enqueue, FrontierSteps
from spiders_project.keys import RedisKeys

SHARDED = RedisKeys("distributed", cluster=True, shards=3)


def by_domain(url: str) -> str:
    """A politeness group other than the host: the last two labels."""
    host = url.split("/")[2]
    return ".".join(host.split(".")[-2:])


def test_a_leased_page_goes_to_its_leases_shard() -> None:
    asked: list[str] = []

    def group_of() -> Callable[[str], str]:
        asked.append("built")
        return by_domain

    shards = PageShards(SHARDED, group_of)
    leased = Request("http://a.example/p", meta={LEASE_SHARD: 2})
    assert shards.of_request(leased) == 2
    # The lease's shard wins over what the URL would give: its ack goes there.
    other = Request("http://b.example/p", meta={LEASE_SHARD: 0})
    assert shards.of_request(other) == 0 and asked == []
    # An item of no page: the spider's own buffer.
    assert shards.of_request(None) == NO_SHARD


def test_a_request_no_lease_gave_goes_to_its_groups_shard() -> None:
    shards = PageShards(SHARDED, lambda: by_domain)
    for host in ("a.shop.example", "www.other.example", "x.example"):
        request = Request(f"http://{host}/p")
        assert shards.of_request(request) == SHARDED.shard_of(by_domain(request.url))


def test_one_redis_keeps_every_item_in_the_spiders_own_buffer() -> None:
    def never() -> Callable[[str], str]:
        raise AssertionError("no group asked for on one Redis")

    for keys in (
        RedisKeys("s"),
        RedisKeys("s", cluster=True),
        RedisKeys("s", cluster=True, shards=1),
    ):
        shards = PageShards(keys, never)  # type: ignore[arg-type]
        assert shards.of_request(Request("http://a.example/")) == NO_SHARD
        assert shards.of_request(Request("http://a.example/", meta={LEASE_SHARD: 1})) == NO_SHARD


def test_the_lease_stamps_are_not_stored_with_a_request() -> None:
    """A link made with its page's meta, a retry, a redirect: queued again, and
    leased again from its own host's shard."""
    request = Request("http://a.example/", meta={LEASE_SHARD: 1, LEASED_AT: 2.0, "keep": 1})
    stored = FrontierSteps([]).admit(request, Enqueue())
    assert stored is not None and stored.meta == {"keep": 1}
