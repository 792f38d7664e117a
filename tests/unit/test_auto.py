"""RENDER_MODE=auto's decisions (rendering/auto.py): what needs JavaScript, and what is learned."""

from __future__ import annotations

import pytest
from scrapy.http import HtmlResponse

from spiders_project.rendering.auto import Learned, needs_javascript, section_of


def page(body: str, url: str = "https://shop.example/p/1") -> HtmlResponse:
    return HtmlResponse(url, body=body.encode(), encoding="utf-8")


ARTICLE = "<p>" + "An article with its text in the HTML, as most of the web is. " * 3 + "</p>"


@pytest.mark.parametrize(
    ("body", "needed"),
    [
        (f"<html><body><h1>Title</h1>{ARTICLE}<script src='/a.js'></script></body></html>", None),
        ("<html><body><div id='root'></div><script src='/app.js'></script></body></html>", "root"),
        ("<html><body><div id='__next'></div></body></html>", "__next"),
        (
            "<html><body><noscript>You need to enable JavaScript to run this app.</noscript>"
            "<div id='main'>x</div></body></html>",
            "noscript",
        ),
        ("<html><body><div>Loading...</div><script src='/b.js'></script></body></html>", "visible"),
        # Little text but no script to build more: a short page, not a shell.
        ("<html><body><p>Gone.</p></body></html>", None),
        # An app root with server-rendered content is fine.
        (f"<html><body><div id='app'><h1>Hi</h1>{ARTICLE}</div></body></html>", None),
    ],
)
def test_the_detector_of_script_built_pages(body: str, needed: str | None) -> None:
    why = needs_javascript(page(body), None)
    assert (why is None) is (needed is None), why
    if needed is not None:
        assert needed in why


def test_a_selector_rule_decides_alone() -> None:
    assert needs_javascript(page(f"<html><body>{ARTICLE}</body></html>"), "#price")
    assert needs_javascript(page("<div id='root'></div><b id='price'>9</b>"), "#price") is None


def test_sections_fold_digits_and_keep_the_port() -> None:
    assert section_of("https://Shop.example/p/123?x=1") == "shop.example/p"
    assert section_of("http://127.0.0.1:8080/") == "127.0.0.1:8080/"
    assert section_of("https://a.example/2024/05/post") == "a.example/#"


def test_a_section_renders_directly_after_enough_of_its_pages_needed_it() -> None:
    learned = Learned(learn=3)
    for _ in range(2):
        learned.count("s/p", needed=True)
    assert not learned.renders("s/p")
    learned.count("s/p", needed=True)
    assert learned.renders("s/p")
    # A section where few pages need it stays HTTP, page by page checked.
    for _ in range(3):
        learned.count("s/m", needed=True)
    for _ in range(27):
        learned.count("s/m", needed=False)
    assert not learned.renders("s/m")


def test_the_cluster_counts_are_merged_and_garbage_ignored() -> None:
    learned = Learned(learn=2)
    learned.count("a/x", needed=True)
    learned.load({b"a/x js": b"5", b"a/x http": b"1", b"junk": b"1", b"b/y js": b"nan"})
    assert learned.js == {"a/x": 5} and learned.http == {"a/x": 1}
    assert learned.renders("a/x")
