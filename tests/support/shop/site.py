"""A small shop: listing pages of many products, detail pages, sellers, reviews, sitemaps.

- ``/`` links to the first listing page of each category.
- ``/c/<category>/<page>`` lists ``per_page`` products (``.product`` blocks with
  the SKU, name, price and a ``a.detail`` link), and a ``.pager`` link to the
  next page. Every ``broken_every``-th product links to a detail page that
  answers 404 (the spider's errback sees it).
- ``/p/<sku>`` is a product: its description, a link to ``/p/<sku>/reviews``
  and one to its seller ``/s/<seller>``.
- ``/p/<sku>/reviews`` counts the product's reviews; ``/s/<seller>`` names a seller.
- ``/sitemap.xml`` is a sitemap index of ``/sitemap-<category>.xml``, which
  list the category's product pages.

Everything is a pure function of the numbers, so two crawls see the same shop.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from spiders_project.demo.site import SiteServer

HTML = "text/html; charset=utf-8"
XML = "application/xml"


class ShopSite(SiteServer):
    """The shop, on the demo's asyncio server (``respond`` serves its pages)."""

    __test__ = False

    def __init__(
        self,
        categories: int = 3,
        pages_per_category: int = 3,
        per_page: int = 10,
        sellers: int = 4,
        broken_every: int = 8,
        latency: float = 0.0,
    ) -> None:
        super().__init__(pages=1, dead_links=False, offsite_links=False, latency=latency)
        self.categories = [f"cat{c}" for c in range(categories)]
        self.pages_per_category = pages_per_category
        self.per_page = per_page
        self.sellers = sellers
        self.broken_every = broken_every
        self._paths: list[str] = []

    def served(
        self, arrived: float, host: str, site: int, method: str, target: str, status: int
    ) -> None:
        super().served(arrived, host, site, method, target, status)
        self._paths.append(target)

    def requested(self) -> list[str]:
        """The path (and query) of every request the shop answered, whatever its status."""
        with self._lock:
            return list(self._paths)

    def __enter__(self) -> ShopSite:
        self.start()
        return self

    # --- the catalogue ------------------------------------------------------------
    def skus(self, category: str, page: int) -> list[str]:
        return [f"{category}-{page}-{i}" for i in range(self.per_page)]

    def all_skus(self) -> list[str]:
        return [
            sku
            for category in self.categories
            for page in range(1, self.pages_per_category + 1)
            for sku in self.skus(category, page)
        ]

    def broken(self, sku: str) -> bool:
        return self.broken_every > 0 and int(sku.rsplit("-", 1)[1]) % self.broken_every == 7

    @staticmethod
    def price(sku: str) -> Decimal:
        return Decimal(sum(map(ord, sku)) % 9000) / 100 + 1

    def seller(self, sku: str) -> int:
        return sum(map(ord, sku)) % self.sellers

    @staticmethod
    def reviews(sku: str) -> int:
        return sum(map(ord, sku)) % 7

    # --- serving ----------------------------------------------------------------------
    async def respond(
        self, site: int, method: str, target: str, host: str | None, arrived: float
    ) -> tuple[int, str, bytes]:
        status, ctype, body = self._shop(target.split("?", 1)[0])
        with self._lock:
            self.served(arrived, host or "", site, method, target, status)
        return status, ctype, body.encode()

    def _shop(self, path: str) -> tuple[int, str, str]:
        parts = [p for p in path.split("/") if p]
        if not parts:
            links = "".join(f'<a class="cat" href="/c/{c}/1">{c}</a>' for c in self.categories)
            return 200, HTML, _page("Shop", links)
        if parts == ["sitemap.xml"]:
            maps = "".join(
                f"<sitemap><loc>{self.url}sitemap-{c}.xml</loc></sitemap>" for c in self.categories
            )
            return 200, XML, _xml("sitemapindex", maps)
        if len(parts) == 1 and parts[0].startswith("sitemap-") and parts[0].endswith(".xml"):
            category = parts[0][len("sitemap-") : -len(".xml")]
            if category in self.categories:
                urls = "".join(
                    f"<url><loc>{self.url}p/{sku}</loc></url>"
                    for page in range(1, self.pages_per_category + 1)
                    for sku in self.skus(category, page)
                    if not self.broken(sku)
                )
                return 200, XML, _xml("urlset", urls)
        if len(parts) == 3 and parts[0] == "c" and parts[1] in self.categories:
            return self._listing(parts[1], parts[2])
        if parts[0] == "p" and len(parts) in (2, 3):
            return self._product(parts[1], parts[2] if len(parts) == 3 else "")
        if len(parts) == 2 and parts[0] == "s" and parts[1].isdigit():
            if int(parts[1]) < self.sellers:
                n = int(parts[1])
                return 200, HTML, _page(f"Seller {n}", f'<p class="seller-name">Seller {n}</p>')
        return 404, HTML, _page("Not found", "")

    def _listing(self, category: str, number: str) -> tuple[int, str, str]:
        if not number.isdigit() or not 1 <= int(number) <= self.pages_per_category:
            return 404, HTML, _page("Not found", "")
        page = int(number)
        blocks = "".join(
            f'<div class="product" data-sku="{sku}"><a class="detail" href="/p/{sku}">'
            f'Product {sku}</a><span class="price">{self.price(sku)}</span></div>'
            for sku in self.skus(category, page)
        )
        pager = ""
        if page < self.pages_per_category:
            pager = f'<div class="pager"><a href="/c/{category}/{page + 1}">next</a></div>'
        return 200, HTML, _page(f"{category} page {page}", blocks + pager)

    def _product(self, sku: str, sub: str) -> tuple[int, str, str]:
        if sku not in set(self.all_skus()) or self.broken(sku):
            return 404, HTML, _page("Not found", "")
        if sub == "reviews":
            return 200, HTML, _page("Reviews", f'<p class="count">{self.reviews(sku)}</p>')
        if sub:
            return 404, HTML, _page("Not found", "")
        body = (
            f'<h1>Product {sku}</h1><p class="price">{self.price(sku)}</p>'
            f'<p class="description">All about {sku}.</p>'
            f'<a class="reviews" href="/p/{sku}/reviews">reviews</a>'
            f'<a class="seller" href="/s/{self.seller(sku)}">seller</a>'
        )
        return 200, HTML, _page(f"Product {sku}", body)


def _page(title: str, body: str) -> str:
    return f"<!doctype html><html><head><title>{title}</title></head><body>{body}</body></html>"


def _xml(root: str, inner: str) -> str:
    ns = "http://www.sitemaps.org/schemas/sitemap/0.9"
    return f'<?xml version="1.0" encoding="UTF-8"?><{root} xmlns="{ns}">{inner}</{root}>'


def expected_counts(site: ShopSite) -> dict[str, Any]:
    """How many items of each type a full crawl of ``site`` keeps (the spider's
    pipeline drops seller 0)."""
    skus = site.all_skus()
    good = [s for s in skus if not site.broken(s)]
    return {
        "ListingEntry": len(skus),
        "ProductItem": len(good),
        "SellerItem": len({site.seller(s) for s in good} - {0}),
        "dict": len(skus) - len(good),
    }
