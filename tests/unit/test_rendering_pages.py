"""PagePool: which idle page serves the next URL of a context, and when a page retires."""

from __future__ import annotations

from spiders_project.rendering.page_pool import PagePool


class Page:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


def test_a_page_serves_its_share_of_urls_then_is_closed() -> None:
    pool: PagePool[Page] = PagePool(urls_per_page=3)
    page = Page("a")
    assert pool.take("ctx") is None  # nothing idle: the handler opens a page
    assert pool.give_back("ctx", page)  # 1 URL
    assert pool.take("ctx") is page
    assert pool.give_back("ctx", page)  # 2 URLs
    assert pool.take("ctx") is page
    assert not pool.give_back("ctx", page)  # 3 URLs: closed by the caller
    assert pool.take("ctx") is None
    assert pool.idle == 0


def test_one_url_per_page_turns_reuse_off() -> None:
    pool: PagePool[Page] = PagePool(urls_per_page=1)
    assert not pool.enabled
    assert not pool.give_back("ctx", Page("a"))
    assert pool.take("ctx") is None


def test_pages_stay_with_their_context() -> None:
    pool: PagePool[Page] = PagePool(urls_per_page=10)
    a, b = Page("a"), Page("b")
    pool.give_back("old", a)
    pool.give_back("new", b)
    assert pool.take("new") is b
    assert pool.take("new") is None  # never a page of another context
    assert pool.drop("old") == [a]  # the old context closes with its pages
    assert pool.take("old") is None


def test_the_most_recently_used_page_goes_first() -> None:
    pool: PagePool[Page] = PagePool(urls_per_page=10)
    a, b = Page("a"), Page("b")
    pool.give_back("ctx", a)
    pool.give_back("ctx", b)
    assert pool.take("ctx") is b
    assert pool.take("ctx") is a


def test_a_forgotten_page_is_never_handed_out_and_starts_over_if_seen_again() -> None:
    pool: PagePool[Page] = PagePool(urls_per_page=3)
    a, b = Page("a"), Page("b")
    pool.give_back("ctx", a)
    pool.give_back("ctx", b)
    pool.forget(a)  # crashed while idle
    assert pool.take("ctx") is b
    pool.forget(b)  # failed while out
    assert pool.take("ctx") is None
    assert pool.give_back("ctx", b)  # counted from zero: nothing remembered


def test_clear_returns_every_idle_page() -> None:
    pool: PagePool[Page] = PagePool(urls_per_page=10)
    a, b = Page("a"), Page("b")
    pool.give_back("one", a)
    pool.give_back("two", b)
    assert sorted(pool.clear(), key=repr) == [a, b]
    assert pool.idle == 0
    assert pool.take("one") is None


def test_a_page_idle_long_enough_expires_unless_it_was_used_again() -> None:
    pool: PagePool[Page] = PagePool(urls_per_page=10)
    a = Page("a")
    pool.give_back("ctx", a, now=100.0)
    assert not pool.expire(a, now=104.0, idle_for=5.0)  # idle 4 s: stays
    assert pool.take("ctx") is a  # used again at 104 ...
    pool.give_back("ctx", a, now=106.0)
    assert not pool.expire(a, now=105.0 + 0.5, idle_for=5.0)  # ... so the first timer misses
    assert pool.expire(a, now=111.0, idle_for=5.0)  # idle since 106: expired, forgotten
    assert pool.take("ctx") is None
    assert not pool.expire(a, now=200.0, idle_for=5.0)  # already gone
