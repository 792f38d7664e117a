"""Key names of the workers' coarse pages history, beside ``keys/__init__.py`` (whose
``stats_totals`` and ``stats_samples`` it goes with). Stdlib only, like it."""

from __future__ import annotations

from spiders_project.keys import RedisKeys


def stats_history(keys: RedisKeys) -> str:
    """Sorted set of "<time> <pages total>" samples by time, as ``stats_samples``, but
    one a minute for an hour (``STATS_HISTORY_*``): the console's chart of the last
    hour, which outlives a restart of the monitor. In the spider's slot, with the
    other keys the publish script writes."""
    return keys.prefix + "stats:history"
