"""The dead letters' settings: the switch, and Scrapy's retry settings that say
what "failed for good" is and where a requeued letter goes, read once and checked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scrapy.settings import BaseSettings
from scrapy.utils.misc import load_object

from spiders_project.config import SettingsReader


@dataclass(frozen=True)
class DeadLettersConfig:
    """``DEAD_LETTERS_ENABLED`` and ``RETRY_HTTP_CODES``, ``_EXCEPTIONS``, ``_PRIORITY_ADJUST``."""

    enabled: bool  # off: a request that failed for good is logged, not kept
    retry_http_codes: frozenset[int]  # a status RetryMiddleware retries
    # The exceptions RetryMiddleware retries, as given (import paths or classes):
    # loaded by ``retry_exceptions()`` only, as importing them imports Playwright,
    # which ``scrapy deadletters`` does not need.
    retry_exception_paths: tuple[Any, ...]
    retry_priority_adjust: int  # added to a request's priority when it is retried or requeued

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> DeadLettersConfig:
        read = SettingsReader(settings)
        codes = read.getlist("RETRY_HTTP_CODES")
        try:
            statuses = frozenset(int(code) for code in codes)
        except (TypeError, ValueError):
            read.fail("RETRY_HTTP_CODES", "not a list of HTTP statuses")
        return cls(
            enabled=read.getbool("DEAD_LETTERS_ENABLED"),
            retry_http_codes=statuses,
            retry_exception_paths=tuple(read.getlist("RETRY_EXCEPTIONS")),
            retry_priority_adjust=read.getint("RETRY_PRIORITY_ADJUST"),
        )

    def retry_exceptions(self) -> tuple[type[BaseException], ...]:
        """``RETRY_EXCEPTIONS`` loaded, for ``isinstance`` (as RetryMiddleware loads them)."""
        return tuple(load_object(path) for path in self.retry_exception_paths)
