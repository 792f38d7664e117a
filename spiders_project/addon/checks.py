"""What a worker refuses to start with, read on the settings a crawler ends up with.

Each problem is one line saying what to change. They are read after every
add-on has run (``scrapy crawl`` computes those settings before it starts
anything, commands/crawl.py; the frontier's scheduler reads the crawler's own
when it is built, for crawls started otherwise), so they hold in any project:

- the add-on itself missing from ``ADDONS`` in a crawl that needs it (a
  spider of ``spiders_project.spiders``, or the cluster's scheduler);
- a class the frontier works only with replaced: another ``SCHEDULER``,
  ``DUPEFILTER_CLASS``, queue or serializer (scrapy-redis's, left in a ported
  settings.py, are named as such: remove the line);
- a cluster component missing from its list: something replaced the list
  after the add-on merged it. A component named with ``None`` is switched
  off by name, which is allowed;
- the SSRF guard incomplete: a worker never crawls without
  ``NetworkGuardMiddleware``, its resolver, the cluster's download handler
  and the spider middleware that marks links, unless the guard is switched
  off by name (``None``) or by ``ALLOW_PRIVATE_NETWORKS``;
- another reactor than asyncio's;
- the scrapy-redis settings this project does not honour
  (``insides/scrapy_redis_compat.setting_problems``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

from scrapy.settings import BaseSettings
from scrapy.utils.misc import load_object

from spiders_project import settings as defaults
from spiders_project.addon.components import DOWNLOAD_HANDLERS, ORDERED
from spiders_project.insides.scrapy_redis_compat import load_path, setting_problems

ADDON = "spiders_project.addon.Addon"
ADDONS_LINE = 'ADDONS = {"spiders_project.Addon": 0}'
GUARD = "spiders_project.scope.networks.NetworkGuardMiddleware"
RESOLVER = "spiders_project.scope.networks.GuardedResolver"
# The spider middleware that gives a page's links the guard's mark.
GUARD_MARKS = "spiders_project.scope.seed_limits.SeedScope"
# The classes the frontier works only with, as the add-on sets them.
FIXED_CLASSES = ("SCHEDULER", "DUPEFILTER_CLASS", "SCHEDULER_QUEUE_CLASS", "SCHEDULER_SERIALIZER")
SCRAPY_REDIS = "scrapy_redis."
# Where a spider of the cluster comes from (its class or a base of it).
CLUSTER_SPIDERS = "spiders_project.spiders."
NOT_ENABLED = (
    f"ADDONS does not name spiders_project.Addon, so the cluster's scheduler and components "
    f"are missing: add {ADDONS_LINE} to your settings.py"
)


def identity(component: Any) -> str:
    """A component's dotted path as its class (or module) names it, however the
    setting spells it (a class, its path, or a path it is re-exported under); an
    unloadable path as it is."""
    if isinstance(component, str):
        path = component
        try:
            component = load_object(path)
        except (ImportError, AttributeError, NameError, ValueError):
            return path
    if isinstance(component, ModuleType):
        return str(component.__name__)
    return load_path(component)


def is_a(component: Any, path: str) -> bool:
    """Whether ``component`` (a class or its path) is the class at ``path`` or a subclass."""
    try:
        loaded = load_object(component) if isinstance(component, str) else component
        return isinstance(loaded, type) and issubclass(loaded, load_object(path))
    except (ImportError, AttributeError, NameError, ValueError):
        return False


def addon_enabled(settings: BaseSettings) -> bool:
    return any(identity(path) == ADDON for path in settings.getdict("ADDONS"))


def needs_addon(settings: BaseSettings, spidercls: type | None) -> bool:
    """Whether a crawl is one of the cluster's: its spider or its scheduler is ours."""
    spider_is_ours = spidercls is not None and any(
        base.__module__.startswith(CLUSTER_SPIDERS) for base in spidercls.__mro__
    )
    return spider_is_ours or identity(settings.get("SCHEDULER")) == defaults.SCHEDULER


def class_problems(settings: BaseSettings) -> dict[str, str]:
    """Each fixed class set to another, by setting."""
    problems = {}
    for name in FIXED_CLASSES:
        ours = getattr(defaults, name)
        value = settings.get(name)
        if identity(value) == ours:
            continue
        spelled = load_path(value) if value is not None else None
        if isinstance(spelled, str) and spelled.startswith(SCRAPY_REDIS):
            problems[name] = (
                f"{name} = {spelled!r} is scrapy-redis's: remove that line from your settings "
                f"(spiders_project.Addon sets the cluster's, {ours})"
            )
        else:
            problems[name] = (
                f"{name} is {spelled!r}, not the cluster's {ours!r}: remove it from your "
                "settings (spiders_project.Addon sets it)"
            )
    return problems


def named(settings: BaseSettings, name: str) -> dict[str, Any]:
    """Component dict ``name`` by each entry's identity (its order, or None: off by name)."""
    return {identity(key): order for key, order in settings.getdict(name).items()}


def missing_problems(settings: BaseSettings) -> list[str]:
    """One line per component list that lacks cluster components (the guard has its own)."""
    problems = []
    lists: dict[str, Mapping[str, Any]] = {**ORDERED, "DOWNLOAD_HANDLERS": DOWNLOAD_HANDLERS}
    for name, ours in lists.items():
        if name == "DOWNLOAD_HANDLERS":
            present = set(settings.getdict(name))  # keyed by scheme
        else:
            present = set(named(settings, name))
            ours = {identity(path): order for path, order in ours.items()}
        lacking = [key for key in ours if key not in present and key != GUARD]
        if lacking:
            problems.append(
                f"{name} lacks the cluster's {', '.join(lacking)}: something replaced the "
                "list after spiders_project.Addon merged it into yours; add to the list "
                "instead, and switch a component off by naming it with None"
            )
    return problems


def guard_problems(settings: BaseSettings) -> list[str]:
    middlewares = named(settings, "DOWNLOADER_MIDDLEWARES")
    if GUARD not in middlewares:
        return [
            f"DOWNLOADER_MIDDLEWARES lacks the SSRF guard {GUARD}: a worker never crawls "
            "without it; to crawl without it, name it there with None"
        ]
    if middlewares[GUARD] is None or _private_networks_allowed(settings):
        return []  # switched off by name
    problems = []
    if named(settings, "SPIDER_MIDDLEWARES").get(GUARD_MARKS, 0) is None:
        problems.append(
            f"SPIDER_MIDDLEWARES switches off {GUARD_MARKS}, which gives a page's links the "
            f"SSRF guard's mark ({GUARD}): keep it, or switch the guard off too by naming "
            "it in DOWNLOADER_MIDDLEWARES with None"
        )
    resolver = settings.get("TWISTED_DNS_RESOLVER")
    if not is_a(resolver, RESOLVER):
        problems.append(
            f"TWISTED_DNS_RESOLVER is {resolver!r}: the SSRF guard ({GUARD}) checks the "
            f"address connected to through {RESOLVER}; remove that setting, or switch the "
            "guard off by naming it in DOWNLOADER_MIDDLEWARES with None"
        )
    handlers = settings.getwithbase("DOWNLOAD_HANDLERS")
    for scheme, ours in DOWNLOAD_HANDLERS.items():
        handler = handlers.get(scheme)
        if handler is not None and not is_a(handler, ours):
            problems.append(
                f"DOWNLOAD_HANDLERS[{scheme!r}] is {load_path(handler)!r}: the SSRF guard "
                f"({GUARD}) needs the cluster's {ours}, which tells it each connection's "
                "host (and renders with scrapy-playwright too); remove that entry, or switch "
                "the guard off by naming it in DOWNLOADER_MIDDLEWARES with None"
            )
    return problems


def _private_networks_allowed(settings: BaseSettings) -> bool:
    try:
        return settings.getbool("ALLOW_PRIVATE_NETWORKS")
    except ValueError:
        return False  # a bad value is refused by the worker's own check of it


def reactor_problems(settings: BaseSettings) -> list[str]:
    reactor = settings.get("TWISTED_REACTOR")
    if reactor == defaults.TWISTED_REACTOR:
        return []
    return [
        f"TWISTED_REACTOR is {reactor!r}: a worker runs on {defaults.TWISTED_REACTOR} "
        "(scrapy-playwright and the asyncio Redis client need it); remove that setting"
    ]


def start_problems(settings: BaseSettings) -> list[str]:
    """Every reason not to start a worker with ``settings`` (after all add-ons), one line each."""
    if not addon_enabled(settings):
        return [NOT_ENABLED]
    return worker_problems(settings)


def worker_problems(settings: BaseSettings) -> list[str]:
    """:func:`start_problems` of settings the add-on was applied to."""
    fixed = class_problems(settings)
    problems = list(fixed.values())
    # scrapy-redis' settings, but for a class already named above (each of its
    # lines starts with the setting's name).
    problems += [p for p in setting_problems(settings) if p.split(" ", 1)[0] not in fixed]
    problems += missing_problems(settings)
    problems += guard_problems(settings)
    problems += reactor_problems(settings)
    return problems
