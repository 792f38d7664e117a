"""The cluster's component lists merged into a project's, never replacing them.

Scrapy replaces a dict setting given at a higher priority: a spider whose
``custom_settings`` names one user-agent middleware in
``DOWNLOADER_MIDDLEWARES`` would otherwise crawl with none of the cluster's
(no SSRF guard, no node health, no archive), and one that names an extension
would lose the item buffer. The add-on runs after ``custom_settings`` are
applied (``Crawler._apply_settings``), so it adds each cluster component to
whatever dict won, with ``BaseSettings.setdefault_in_component_priority_dict``:

- a component the dict names already (as a path or a class, with an order or
  with ``None``) keeps the project's or spider's entry: naming one with
  ``None`` switches it off, as in plain Scrapy;
- every other one is added at its order, the setting's priority unchanged.

Components are loaded (imported) here, as Scrapy compares classes, not
spellings: only a crawler does this, never the db_writer or the monitor.
Scrapy's method keys what it adds by class; the merged dict names ours by
dotted path again, as settings, ``scrapy settings`` and the "Enabled ..."
log lines spell components.
"""

from __future__ import annotations

from collections.abc import Mapping

from scrapy.settings import BaseSettings
from scrapy.utils.misc import load_object

from spiders_project.addon.components import DOWNLOAD_HANDLERS, ORDERED


def merge_ordered(settings: BaseSettings, name: str, ours: Mapping[str, int | None]) -> None:
    """Each of ``ours`` into component dict ``name``, unless the dict names it already."""
    paths = {load_object(path): path for path in ours}
    for component, order in zip(paths, ours.values(), strict=True):
        settings.setdefault_in_component_priority_dict(name, component, order)
    merged = settings.getdict(name)
    if any(not isinstance(key, str) and key in paths for key in merged):
        spelled = {
            (key if isinstance(key, str) else paths.get(key, key)): o for key, o in merged.items()
        }
        settings.set(name, spelled, settings.getpriority(name) or 0)


def merge_handlers(settings: BaseSettings) -> None:
    """The cluster's handler for each scheme the project does not name (a scheme keys
    the dict, not a class, so there is no component priority dict method for it)."""
    handlers = settings.getdict("DOWNLOAD_HANDLERS")
    missing = {scheme: path for scheme, path in DOWNLOAD_HANDLERS.items() if scheme not in handlers}
    if missing:
        priority = settings.getpriority("DOWNLOAD_HANDLERS") or 0
        settings.set("DOWNLOAD_HANDLERS", {**handlers, **missing}, priority)


def merge_components(settings: BaseSettings) -> None:
    for name, ours in ORDERED.items():
        merge_ordered(settings, name, ours)
    merge_handlers(settings)
