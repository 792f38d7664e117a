"""Rates over time: items/s, Redis' CPU and the pages/s chart of the last hour.

Every sample is a spider's all-time total at a time (Redis' clock), so
samples from anywhere merge into one series. The chart's come from three
places: the workers' coarse ones in Redis (``stats:history``, one a minute
for the last hour, ``STATS_HISTORY_*``), which outlive a restart of the
monitor; their fine ones (``stats:samples``, every publish for the last
``STATS_SAMPLES_RETENTION`` seconds); and the console's own, kept here for
an hour (taken every ``SAMPLE_EVERY`` seconds by the application, and at
each read of a page), which fill the minutes the workers' do not cover, and
are all there is for items/s and Redis' CPU. Nothing here reads Redis.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from dataclasses import dataclass

# Seconds of samples kept (the chart's hour, and a margin before it: its first
# bucket's rate needs a sample before the bucket), the least spacing between
# two, and the chart's buckets.
KEEP = 3600.0
MARGIN = 120.0
SPACING = 2.0
BUCKETS = 120
# The window of the rates shown as "now".
RATE_WINDOW = 60.0
# The chart's drawing area (SVG user units).
WIDTH, HEIGHT = 600, 120


@dataclass(frozen=True)
class Sample:
    at: float  # Redis' clock, Unix seconds
    values: dict[str, float]  # "pages", "items", "cpu"


class History:
    """Samples of named totals (pages, items, Redis' CPU seconds) for one series each."""

    def __init__(self) -> None:
        self._series: dict[str, deque[Sample]] = {}

    def add(self, series: str, at: float, values: dict[str, float]) -> None:
        samples = self._series.setdefault(series, deque())
        if samples and at - samples[-1].at < SPACING:
            return
        samples.append(Sample(at, dict(values)))
        while samples and at - samples[0].at > KEEP + MARGIN:
            samples.popleft()

    def rate(self, series: str, name: str, now: float, window: float = RATE_WINDOW) -> float | None:
        """``name``'s growth per second over the last ``window`` seconds (or the
        time there are samples for, at least two seconds), None before that."""
        samples = [s for s in self._series.get(series, ()) if name in s.values]
        if len(samples) < 2:
            return None
        older = [s for s in samples if s.at <= now - window]
        base = older[-1] if older else samples[0]
        last = samples[-1]
        if last.at - base.at < SPACING:
            return None
        return max(0.0, last.values[name] - base.values[name]) / (last.at - base.at)

    def per_bucket(self, series: str, name: str, now: float) -> list[tuple[float, float]]:
        """(bucket start, rate) for each of ``BUCKETS`` equal parts of the last hour
        with samples on both sides; buckets without are left out."""
        samples = [s for s in self._series.get(series, ()) if name in s.values]
        times = [s.at for s in samples]
        width = KEEP / BUCKETS
        out = []
        for i in range(BUCKETS):
            start = now - KEEP + i * width
            lo, hi = bisect_left(times, start), bisect_left(times, start + width)
            if hi == lo:
                continue
            first, last = samples[max(lo - 1, 0)], samples[hi - 1]
            if last.at - first.at <= 0:
                continue
            grew = last.values[name] - first.values[name]
            out.append((start, max(0.0, grew) / (last.at - first.at)))
        return out

    def samples(self, series: str, name: str) -> list[tuple[float, float]]:
        """(time, value) of ``name`` in ``series``, oldest first."""
        return [(s.at, s.values[name]) for s in self._series.get(series, ()) if name in s.values]

    def covered(self, series: str, now: float) -> float:
        """Seconds of the last hour the samples cover (from its start, all of it)."""
        samples = self._series.get(series)
        return min(KEEP, now - samples[0].at) if samples else 0.0


@dataclass(frozen=True)
class Chart:
    """A line chart as SVG coordinates: the template draws it, escaping nothing of the crawl's."""

    points: str  # "x,y x,y ..." of the polyline
    dots: list[tuple[str, str]]  # (x, y) of each point, drawn while there are few
    peak: float  # the top of the scale, pages/s
    covered_min: int  # minutes of the last hour with samples


def chart(buckets: list[tuple[float, float]], now: float, covered: float) -> Chart:
    peak = max((rate for _, rate in buckets), default=0.0)
    top = peak if peak > 0 else 1.0
    dots = []
    for start, rate in buckets:
        x = (start + KEEP / BUCKETS - (now - KEEP)) / KEEP * WIDTH
        y = HEIGHT - rate / top * (HEIGHT - 4)
        dots.append((f"{x:.1f}", f"{y:.1f}"))
    return Chart(
        " ".join(f"{x},{y}" for x, y in dots),
        dots if len(dots) < 10 else [],
        peak,
        round(covered / 60),
    )
