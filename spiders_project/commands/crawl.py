"""``scrapy crawl``, refusing to start with one clear line when Redis is away."""

from __future__ import annotations

import argparse
import sys

from scrapy.commands.crawl import Command as ScrapyCrawlCommand

from spiders_project.redis_connection import ping_or_message


class Command(ScrapyCrawlCommand):
    """Scrapy's crawl command, plus a Redis check before anything starts.

    Without it an unreachable Redis surfaces as a traceback from deep inside
    the engine, after the spider has been opened.
    """

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        message = ping_or_message(self.settings)
        if message is not None:
            print(f"ERROR: {message}", file=sys.stderr)
            self.exitcode = 1
            return
        super().run(args, opts)
