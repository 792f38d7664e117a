"""Settings for the processes that are not Scrapy crawls (db_writer, monitor).

They read the same module as the workers, so REDIS_URL, DB_URL and every
default are defined once, in ``spiders_project.settings``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scrapy.settings import Settings


def load_settings(overrides: Mapping[str, Any] | None = None) -> Settings:
    """The project's settings (environment included), with ``overrides`` on top."""
    settings = Settings()
    settings.setmodule("spiders_project.settings", priority="project")
    if overrides:
        settings.setdict(dict(overrides), priority="cmdline")
    return settings
