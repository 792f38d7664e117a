"""``scrapy genspider -t distributed NAME DOMAIN``: Scrapy's genspider with our templates.

``distributed`` writes a ``RedisSpider``, ``distributed_crawl`` a
``RedisCrawlSpider``: both run with ``scrapy crawl NAME`` on the shared
frontier, seeded with ``redis-cli lpush NAME:start_urls URL``. Scrapy's own
templates (basic, crawl, ...) stay available; ``TEMPLATES_DIR`` would have
replaced them, so the project's are looked up here first instead.
"""

from __future__ import annotations

from pathlib import Path

from scrapy.commands.genspider import Command as ScrapyGenspider

TEMPLATES = Path(__file__).resolve().parents[1] / "templates" / "spiders"


class Command(ScrapyGenspider):
    def _find_template(self, template: str) -> Path | None:
        own = TEMPLATES / (template if template.endswith(".tmpl") else f"{template}.tmpl")
        if own.exists():
            return own
        return super()._find_template(template)

    def _list_templates(self) -> None:
        super()._list_templates()
        print("Templates of this project (spiders on the shared Redis frontier):")
        for file in sorted(TEMPLATES.glob("*.tmpl")):
            print(f"  {file.stem}")
