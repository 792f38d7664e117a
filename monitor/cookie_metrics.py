"""The shared cookie jars' metrics: how many jars and cookies, re-logins and retired sessions.

Counts only: the exporter's Redis user cannot read a jar (docs/SECURITY.md,
"Cookies"), and reads the jars' index and counts under the spider's prefix.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from spiders_project.read_model.cluster_view import COOKIE_COUNTS_READ, SpiderView
from spiders_project.read_model.contract import COOKIES

# crawler_cookie_<name>_total, from the workers' cookies:<name> counters (all workers ever).
COOKIE_COUNTERS = {
    "relogins": "Logins done again because a session expired (one worker logs in for the jar).",
    "sessions_retired": "Sessions retired, their cookies dropped, because the proxy they were "
    "pinned to was banned.",
}


def cookie_metrics(spiders: Sequence[SpiderView]) -> Iterator[Metric]:
    s = ["spider"]
    jars = GaugeMetricFamily(
        "crawler_cookie_jars",
        'Shared cookie jars: the default one and one per meta["cookiejar"] session.',
        labels=s,
    )
    cookies = GaugeMetricFamily(
        "crawler_cookies",
        f"Cookies in the shared jars; exact up to {COOKIE_COUNTS_READ} jars, above that "
        f"estimated from the counts of {COOKIE_COUNTS_READ} jars taken at random.",
        labels=s,
    )
    counters = {
        name: CounterMetricFamily(f"crawler_cookie_{name}", text + " All workers ever.", labels=s)
        for name, text in COOKIE_COUNTERS.items()
    }
    for view in spiders:
        jars.add_metric([view.spider], view.cookie_jars)
        cookies.add_metric([view.spider], view.cookies)
        for name, family in counters.items():
            family.add_metric([view.spider], view.totals.get(COOKIES + name, 0))
    yield from (jars, cookies, *counters.values())
