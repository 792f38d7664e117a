"""The demo site's pages: a deterministic graph of links with every trap a crawler meets.

Crawl tests need a site whose exact page set is known in advance and which
holds the traps a correct crawler must handle: duplicate, fragment, relative
and absolute links, dead links (404), off-site links. The graph and the text
depend only on the seed and the arguments, never on the port the site is
served on, so the same site can be built in any process.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

#: Host of off-site links that can never resolve (RFC 2606), so never reach anything.
OFFSITE_HOST = "offsite.example.invalid"

_FRAGMENTS = ("top", "main", "comments", "footer")
_WORDS = (
    "crawler frontier spider request response queue redis worker item pipeline "
    "scheduler fingerprint politeness latency retry backoff heartbeat shutdown "
    "buffer writer metric exporter domain robots sitemap link anchor page index "
    "archive news story topic author review product price stock catalog search"
).split()


@dataclass(frozen=True, slots=True)
class Page:
    """One generated page; hrefs hold ``{netloc}``/``{trap}`` placeholders, filled per port."""

    hrefs: tuple[tuple[str, str], ...]
    text: str


def page_href(source: int, target: int, rng: random.Random) -> str:
    """An href to ``target`` in one of the forms a crawler must resolve to the same URL."""
    path = "/" if target == 0 else f"/page/{target}"
    form = rng.random()
    if form < 0.4:
        return path
    if form < 0.6:
        return "http://{netloc}" + path
    if form < 0.65:
        return "//{netloc}" + path
    # Relative to the source's directory: "/" for the root, "/page/" for the others.
    if source == 0:
        return "./" if target == 0 else rng.choice((f"page/{target}", f"./page/{target}"))
    return "../" if target == 0 else rng.choice((str(target), f"./{target}", f"../page/{target}"))


def title(n: int) -> str:
    return "Home" if n == 0 else f"Page {n}"


def build_site(
    pages: int,
    seed: str,
    links_per_page: int,
    dead_links: bool,
    offsite_links: bool,
    fragment_links: bool,
) -> list[Page]:
    """The page graph of one site: a random tree from ``/`` plus random extra links.

    The tree makes every page reachable from the root, so the page set is
    exactly ``pages`` pages; the root always carries one link of every enabled
    trap kind, so even a tiny site exercises them.
    """
    rng = random.Random(f"tree:{seed}")
    children: list[list[int]] = [[] for _ in range(pages)]
    for n in range(1, pages):
        children[rng.randrange(n)].append(n)
    site = []
    for n in range(pages):
        rng = random.Random(f"page:{seed}:{n}")
        targets = list(children[n])
        while len(targets) < links_per_page:
            targets.append(rng.randrange(pages))
        hrefs = [(page_href(n, t, rng), title(t)) for t in targets]
        if hrefs and (n == 0 or rng.random() < 0.5):
            hrefs.append(rng.choice(hrefs))  # the very same href twice on one page
        if fragment_links and (n == 0 or rng.random() < 0.4):
            t, frag = rng.choice(targets or [n]), rng.choice(_FRAGMENTS)
            hrefs.append((f"{page_href(n, t, rng)}#{frag}", title(t)))
            if n == 0 or rng.random() < 0.3:
                hrefs.append((f"#{frag}", "Up"))
        if dead_links and (n == 0 or rng.random() < 0.25):
            hrefs.append((f"/missing/{rng.randrange(pages)}", "Gone"))
        if offsite_links and (n == 0 or rng.random() < 0.25):
            path = f"/page/{rng.randrange(pages)}"
            hrefs.append((f"http://{OFFSITE_HOST}{path}", "Elsewhere"))
            hrefs.append(("http://{trap}" + path, "Next door"))
        rng.shuffle(hrefs)
        text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(40, 70)))
        site.append(Page(tuple(hrefs), text.capitalize() + "."))
    return site
