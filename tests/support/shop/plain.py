"""``python -m tests.support.shop.plain URL OUT``: the shop spider in plain Scrapy, for comparison.

No Redis, no project settings: Scrapy's defaults, the spider's start URL, and
every scraped item written to OUT as one JSON line ``{"type": ..., "item":
...}``, encoded as Scrapy's own feed exports encode items.
"""

from __future__ import annotations

import sys
from typing import Any

from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.crawler import CrawlerProcess
from scrapy.utils.serialize import ScrapyJSONEncoder

from tests.support.shop.spiders import PlainShopSpider


def main(url: str, out: str) -> int:
    encoder = ScrapyJSONEncoder()
    lines: list[str] = []

    def scraped(item: Any) -> None:
        entry = {"type": type(item).__name__, "item": ItemAdapter(item).asdict()}
        lines.append(encoder.encode(entry))

    process = CrawlerProcess({"LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False})
    crawler = process.create_crawler(PlainShopSpider)
    crawler.signals.connect(scraped, signal=signals.item_scraped)
    process.crawl(crawler, start_urls=[url])
    process.start()
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
