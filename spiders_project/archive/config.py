"""The archive's settings (``WARC_*``), read once and checked."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader

#: What the worker does when a record cannot be written (a full disk, an I/O error).
PAUSE, CONTINUE = "pause", "continue"

# A prefix is the first part of a file name: no path separator, nothing a shell
# or a WARC-Filename header would need quoted.
_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class ArchiveConfig:
    enabled: bool  # WARC_ENABLED
    directory: Path  # WARC_DIR: where this worker's files go
    max_size: int  # WARC_MAX_SIZE: bytes after which a file is closed and the next opened
    prefix: str  # WARC_PREFIX: the first part of every file name
    on_error: str  # WARC_ON_ERROR: PAUSE (fetch nothing until writing works again) or CONTINUE
    queue_size: int = 1000  # WARC_QUEUE_SIZE: fetches waiting for the writer thread
    retry_interval: float = 5.0  # WARC_RETRY_INTERVAL: seconds between tries of a failed write

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> ArchiveConfig:
        read = SettingsReader(settings)
        prefix = read.getstr("WARC_PREFIX")
        read.check(
            bool(_PREFIX.match(prefix)),
            "WARC_PREFIX",
            "letters, digits, '.', '_' and '-' only, starting with a letter or digit",
        )
        directory = read.getstr("WARC_DIR")
        read.check(bool(directory), "WARC_DIR", "must name a directory")
        return cls(
            enabled=read.getbool("WARC_ENABLED"),
            directory=Path(directory),
            # Below about 64 KB a file would hold a handful of pages.
            max_size=read.getint("WARC_MAX_SIZE", minimum=65_536),
            prefix=prefix,
            on_error=read.getstr("WARC_ON_ERROR", choices=(PAUSE, CONTINUE)),
            queue_size=read.getint("WARC_QUEUE_SIZE", minimum=1),
            retry_interval=read.getfloat("WARC_RETRY_INTERVAL", above=0),
        )
