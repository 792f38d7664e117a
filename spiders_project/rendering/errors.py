"""Failures of a rendered download that RetryMiddleware retries (they are in RETRY_EXCEPTIONS)."""

from __future__ import annotations


class RenderError(Exception):
    """Base class: a page could not be rendered this time; another attempt may work."""


class RenderTimeout(RenderError):
    """One attempt outlived ``RENDER_DEADLINE`` and was cancelled (a hang, not a slow page)."""


class BrowserCrashed(RenderError):
    """Chromium died under this page more than ``RENDER_CRASH_RETRIES`` times."""
