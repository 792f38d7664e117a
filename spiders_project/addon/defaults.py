"""The add-on's plain values: every default of ``spiders_project.settings``, and the environment.

Where a value comes from, lowest first (Scrapy's numbers, ``SETTINGS_PRIORITIES``):

1. Scrapy's own defaults (0) and a command's (10);
2. this module's defaults (``addon``, 15): every setting of
   ``spiders_project/settings.py`` except the project's own names
   (:data:`PROJECT_NAMES`), so the scheduler, dupefilter, reactor and every
   setting a worker, the db_writer or the monitor reads;
3. the project's settings.py (``project``, 20);
4. the environment variable of a setting's own name, when it is set
   (:data:`ENVIRONMENT_PRIORITY`, 25): settings.py reads those variables at
   import (its ``_env``), so a deployment's ``REDIS_URL=...`` wins over a
   project's ``REDIS_URL = ...`` line as it does in this checkout. The text
   is parsed where the setting is read, as always;
5. a spider's ``custom_settings`` (``spider``, 30);
6. ``-s NAME=VALUE`` (``cmdline``, 40).

Component lists are not plain values: they are merged (``components.py``).
Nothing here imports a component, so every process can apply it (the
monitor and the db_writer included).
"""

from __future__ import annotations

import copy
import os
from types import ModuleType

from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings

from spiders_project import settings as defaults
from spiders_project.addon.components import FRONTIER_STEPS_BASE

# Names that belong to the project the add-on runs in: where its spiders and
# commands live, and its add-ons. This checkout sets them for itself.
PROJECT_NAMES = frozenset(
    {"BOT_NAME", "SPIDER_MODULES", "NEWSPIDER_MODULE", "COMMANDS_MODULE", "ADDONS"}
)
ADDON_PRIORITY = SETTINGS_PRIORITIES["addon"]
# Above a project's settings.py, below a spider's custom_settings and -s.
ENVIRONMENT_PRIORITY = (SETTINGS_PRIORITIES["project"] + SETTINGS_PRIORITIES["spider"]) // 2


def default_values(module: ModuleType = defaults) -> dict[str, object]:
    """Each setting of ``module`` the add-on gives a project (as Scrapy's setmodule
    reads a module: upper-case names; _private ones and the project's own left out)."""
    return {
        name: getattr(module, name)
        for name in dir(module)
        if name.isupper() and not name.startswith("_") and name not in PROJECT_NAMES
    }


def environment_values(module: ModuleType = defaults) -> dict[str, str]:
    """The settings whose variable of the same name is set, as the environment's text."""
    names = set(default_values(module)) & module.environment_names
    return {name: os.environ[name] for name in sorted(names) if name in os.environ}


def apply_defaults(settings: BaseSettings) -> None:
    """Every default (at ``addon``) and every set environment variable (above ``project``).

    Idempotent, and never lowers a value set at a higher priority: Scrapy's
    ``set`` keeps the value of the higher one.
    """
    for name, value in default_values().items():
        settings.set(name, copy.deepcopy(value), ADDON_PRIORITY)
    settings.set("FRONTIER_STEPS_BASE", copy.deepcopy(FRONTIER_STEPS_BASE), ADDON_PRIORITY)
    for name, text in environment_values().items():
        settings.set(name, text, ENVIRONMENT_PRIORITY)
