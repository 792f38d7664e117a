"""The demo site's page graph, without a server: every page reachable, every trap on the root."""

from __future__ import annotations

import re

from spiders_project.demo.pages import OFFSITE_HOST, build_site


def graph(pages: int = 40, seed: str = "0:0", **traps: bool):
    options = {"dead_links": True, "offsite_links": True, "fragment_links": True, **traps}
    return build_site(pages, seed, 8, **options)


def targets(page) -> set[int]:
    """Page numbers a page links to on its own site, in any of the href forms."""
    found = set()
    for href, _ in page.hrefs:
        href = href.split("#", 1)[0]
        if OFFSITE_HOST in href or "{trap}" in href or "/missing/" in href:
            continue
        match = re.search(r"(\d+)$", href)
        found.add(int(match.group(1)) if match else 0)
    return found


def test_every_page_is_reachable_from_the_root():
    site = graph()
    seen, queue = {0}, [0]
    while queue:
        for n in targets(site[queue.pop()]) - seen:
            seen.add(n)
            queue.append(n)
    assert seen == set(range(40))


def test_the_root_carries_every_enabled_trap_and_none_of_the_disabled_ones():
    hrefs = [href for href, _ in graph()[0].hrefs]
    assert any(h.startswith("/missing/") for h in hrefs)
    assert any(OFFSITE_HOST in h for h in hrefs) and any("{trap}" in h for h in hrefs)
    assert any("#" in h for h in hrefs)
    assert len(hrefs) > len(set(hrefs)), "one href appears twice"
    plain = [
        h for h, _ in graph(dead_links=False, offsite_links=False, fragment_links=False)[0].hrefs
    ]
    assert not any("/missing/" in h or OFFSITE_HOST in h or "#" in h for h in plain)


def test_the_same_seed_builds_the_same_site():
    assert graph(seed="7:0") == graph(seed="7:0")
    assert graph(seed="7:0") != graph(seed="8:0")
