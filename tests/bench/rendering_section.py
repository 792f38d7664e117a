"""The Rendering section of docs/BENCHMARKS.md, from a ``rendering`` phase's result.

Apart from ``rendering.py``, which runs the phase, so that each stays one purpose
(and under 400 lines).
"""

from __future__ import annotations

import os
import subprocess
from datetime import datetime

from spiders_project.config import load_settings
from tests.bench.rendering import ASSET_LATENCY, MB, RenderingResult


def section(
    result: RenderingResult, command: str, started: datetime, http_beside: bool
) -> list[str]:
    """The Rendering section of docs/BENCHMARKS.md: ``command`` and ``started`` of the
    run; ``http_beside``: the plain HTTP runs ran beside the end of freshness."""
    chromium = subprocess.run(
        [load_settings().getdict("PLAYWRIGHT_LAUNCH_OPTIONS")["executable_path"], "--version"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    lines = [
        "## Rendering",
        "",
        f"`{command}` on {started:%Y-%m-%d}, {os.cpu_count()} cores, {chromium}. "
        f"One worker, RENDER_CONCURRENCY={result.concurrency}, other settings at their "
        "defaults. Each page of the local site waits for its script's fetch() (150 ms) and "
        f"then for network idle (500 ms quiet), and asks for {result.images} 256x256 PNG(s), "
        f"a web font and a tracker script, which answer after {ASSET_LATENCY * 1000:.0f} ms. "
        "Pages/s is measured from the first item to the last; memory is the peak over the "
        "worker's process tree (Python + Node driver + Chromium), sampled every 0.5 s; CPU is "
        "user+sys of the whole tree, Chromium's processes that outlive the browser included "
        "(the worker runs under a subreaper, tests/bench/reaper.py: runs before 2026-11-26 "
        "02:45 UTC missed them and reported about two thirds of the CPU), split by kind of "
        "process from the same samples (a process's last half second is missed). *Steady* "
        "is the CPU between the first and the last item (interpolated between samples) over "
        "the pages after the first: what each further page costs a worker that runs for "
        "days, without the start-up of Python, the driver and Chromium and the shutdown "
        "that the whole run's figure spreads over its pages. Load is "
        "the machine's highest 1-minute load average during the run: above the core count, "
        "other processes competed for the CPU and pages/s is lower than this worker alone "
        "would get.",
        "",
        "| Rendered pages | Pages | Pages/s | Wall s | CPU-s/page, whole run "
        "| CPU-s/page, steady | of which Chromium / driver / Python | Peak RSS (sum) MB "
        "| of which Chromium MB | Peak PSS MB | Requests aborted | Load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in result.render:
        split = " / ".join(
            f"{run.steady_cpu_by_kind.get(kind, 0.0):.3f}"
            for kind in ("chromium", "node", "python")
        )
        lines.append(
            f"| {run.name} | {run.pages} | {run.steady:.2f} | {run.wall:.0f} "
            f"| {run.cpu_per_page:.3f} | {run.steady_cpu_per_page:.3f} | {split} "
            f"| {run.peak.rss / MB:.0f} "
            f"| {run.peak.by_kind.get('chromium', 0) / MB:.0f} | {run.peak_pss / MB:.0f} "
            f"| {run.stats['playwright/request_count/aborted']} "
            f"of {run.stats['render/browser_requests']} | {run.load:.1f} |"
        )
    if result.mixed:
        lines += [
            "",
            f"RENDER_MODE=auto against rendering every page and rendering none, on a mixed site "
            f"of {result.mixed_pages} pages where one page in ten is a script-built shell (the "
            "others plain HTML with their links; the shells' links exist only once rendered). "
            "*Content* counts the site's pages stored with their real title; CPU-s per page "
            "divides the worker tree's CPU by the pages stored.",
            "",
            "| Mixed site | Pages stored | Content | Pages/s | CPU-s/page | Renders "
            "| of which after a failed expectation | Peak PSS MB |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for run in result.mixed:
            lines.append(
                f"| {run.name} | {run.pages} | {run.stats['content']} of {result.mixed_pages} "
                f"| {run.steady:.1f} | {run.cpu_per_page:.3f} | {run.stats['render/pages']} "
                f"| {run.stats['render/auto/expectation_failed']} | {run.peak_pss / MB:.0f} |"
            )
    if result.http:
        lines += [
            "",
            f"A worker that renders nothing (plain HTTP crawl of {result.http[0].pages} pages): "
            "what configuring a Playwright handler costs."
            + (
                " These ran pinned to CPU 1 while the freshness phase ended on CPU 0: their"
                " figures are memory and processes, which the core does not change."
                if http_beside
                else ""
            ),
            "",
            "| DOWNLOAD_HANDLERS | Peak RSS (sum) MB | Processes at peak |",
            "|---|---:|---:|",
        ]
        lines += [f"| {r.name} | {r.peak.rss / MB:.0f} | {r.peak.processes} |" for r in result.http]
    return lines
