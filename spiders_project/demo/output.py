"""The demo's own output and process helpers, shared by its modules."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path


class DemoError(Exception):
    """A reason the demo cannot go on, already phrased for the user."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def say(message: str) -> None:
    """One line of the demo's own output."""
    print(f"demo: {message}", flush=True)


def tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log file, or a note that there is none."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"    (no log at {path})"
    return "\n".join(f"    {line}" for line in text.splitlines()[-lines:])


@contextlib.contextmanager
def signals_ignored() -> Iterator[None]:
    """Let nothing interrupt a last-resort cleanup (SIGINT and SIGTERM are dropped)."""
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def stop_popen(popen: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM, then SIGKILL after ``timeout`` seconds; signals are ignored meanwhile."""
    with signals_ignored():
        if popen.poll() is None:
            popen.terminate()
            try:
                popen.wait(timeout)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()
