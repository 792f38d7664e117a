"""``ADDONS = {"spiders_project.Addon": 0}``: a Scrapy project's crawls as cluster workers.

In the project's settings.py (this checkout's own settings.py has the same
line), it gives every crawler:

- every default of ``spiders_project/settings.py`` the project does not set
  itself: the scheduler, dupefilter and queue of the shared frontier, the
  asyncio reactor and the guarded resolver, ``REDIS_URL`` and everything a
  worker, the db_writer or the monitor reads (``defaults.py``);
- the cluster's downloader and spider middlewares, item pipelines,
  extensions and download handlers (``components.py``), merged into the
  project's and the spider's own, never replacing them (``merge.py``).

Which value wins, lowest first: Scrapy's defaults, the add-on's defaults,
the project's settings.py, the environment variable of a setting's own name
when it is set (``REDIS_URL=...``), a spider's ``custom_settings``, and
``-s NAME=VALUE``. Component dicts are merged at every level: a project's or
spider's ``DOWNLOADER_MIDDLEWARES`` (and the others) add to the cluster's,
and switch one off only by naming it with ``None``.

Scrapy applies add-ons twice. :meth:`Addon.update_pre_crawler_settings` runs
when a command's crawler process is made, before the command runs, so every
command (``scrapy crawl``'s checks, ``crawlstatus``, ``jobs``, ...) sees the
defaults. :meth:`Addon.update_settings` runs for each crawler after its
spider's ``custom_settings``: defaults again (a crawler made without a
command), the components merged, and a crawl it cannot serve refused
(:class:`Refused`, ``checks.py``). ``scrapy crawl`` reads the same checks
first, after every add-on, and says each in one line (commands/crawl.py).
"""

from __future__ import annotations

from scrapy.settings import BaseSettings

from spiders_project.addon.checks import worker_problems
from spiders_project.addon.defaults import apply_defaults
from spiders_project.addon.merge import merge_components
from spiders_project.config import ConfigError


class Refused(ConfigError):
    """Settings a worker must not start with; ``problems`` holds one line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class Addon:
    """The cluster's add-on (Scrapy builds it with no argument)."""

    @classmethod
    def update_pre_crawler_settings(cls, settings: BaseSettings) -> None:
        apply_defaults(settings)

    def update_settings(self, settings: BaseSettings) -> None:
        apply_defaults(settings)
        merge_components(settings)
        problems = worker_problems(settings)
        if problems:
            raise Refused(problems)


__all__ = ["Addon", "Refused"]
