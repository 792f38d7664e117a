"""A distributed Scrapy crawler: shared Redis frontier, item buffer, db_writer.

``ADDONS = {"spiders_project.Addon": 0}`` in a Scrapy project's settings.py
makes its crawls workers of the cluster (``spiders_project/addon``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spiders_project.addon import Addon

# The crawler's version, as its WARC files' warcinfo records name it
# (spiders_project/archive/). Raised with each release.
__version__ = "0.28.0"

__all__ = ["Addon", "__version__"]


def __getattr__(name: str) -> Any:
    """``spiders_project.Addon``, imported on first use: importing the package stays
    light (the monitor imports no Scrapy component through it)."""
    if name == "Addon":
        from spiders_project.addon import Addon

        return Addon
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
