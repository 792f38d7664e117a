"""``scrapy warc index URL``: the file and offset of a URL's latest capture in the archive.

Examples::

    scrapy warc index http://shop.example/p/7
    scrapy warc index http://shop.example/p/7 --dir /srv/warc --json
    scrapy warc index --all            # every capture, one line each (a small CDX)

Reads the WARC files under ``WARC_DIR`` (closed and open) with warcio; needs
no Redis and starts no crawl. Exit status 1 when the URL has no capture.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from spiders_project.archive.index import Capture, captures, latest, warc_files
from spiders_project.config import SettingsReader

ACTIONS = ("index",)


def _line(capture: Capture) -> str:
    return (
        f"{capture.path} {capture.offset} {capture.length} {capture.date} "
        f"{capture.record_type} {capture.status or '-'} {capture.url}"
    )


def _json(capture: Capture) -> dict[str, object]:
    return {
        "url": capture.url,
        "file": str(capture.path),
        "offset": capture.offset,
        "length": capture.length,
        "date": capture.date,
        "type": capture.record_type,
        "status": capture.status,
    }


class Command(ScrapyCommand):
    """Reads the archive only (``WARC_DIR``, or ``--dir``)."""

    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "index URL | index --all [--dir DIR] [--json]"

    def short_desc(self) -> str:
        return "Find a URL's latest capture in the WARC archive: file and offset"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--dir", metavar="DIR", help="the WARC files' folder (WARC_DIR)")
        parser.add_argument("--all", action="store_true", help="every capture of every URL")
        parser.add_argument("--json", action="store_true", help="JSON instead of text")

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        if not args or args[0] not in ACTIONS:
            raise UsageError(f"expected one action: {', '.join(ACTIONS)}")
        if opts.all == (len(args) == 2):
            raise UsageError("index needs either a URL or --all")
        if len(args) > 2:
            raise UsageError("index takes one URL")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        directory = Path(opts.dir or SettingsReader(self.settings).getstr("WARC_DIR"))
        if not directory.is_dir():
            raise UsageError(f"{directory} is not a folder", print_help=False)
        files = warc_files(directory)
        if opts.all:
            found = list(captures(files))
            if opts.json:
                print(json.dumps([_json(each) for each in found], indent=2))
            else:
                for each in found:
                    print(_line(each))
            return
        capture = latest(files, args[1])
        if capture is None:
            print(f"no capture of {args[1]} in {directory}")
            self.exitcode = 1
        elif opts.json:
            print(json.dumps(_json(capture), indent=2))
        else:
            print(_line(capture))
