"""Runs a command as a child subreaper, so that the CPU of everything it started is counted.

``python -m tests.bench.reaper CMD ...`` exits with CMD's status once CMD and
every process it started have exited. Chromium's zygote and renderers outlive
the browser process that started them by a moment and are re-parented away
from the worker: ``wait4`` on the worker alone never sees their CPU (it
reported about two thirds of the rendering tree's CPU). As a subreaper
(``PR_SET_CHILD_SUBREAPER``), this process inherits those orphans and reaps
them, so ``wait4`` on it covers the whole tree.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

PR_SET_CHILD_SUBREAPER = 36


def main(argv: list[str]) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")
    child = subprocess.Popen(argv)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
    code = 1
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:  # nothing left to reap: the whole tree is gone
            break
        if pid == child.pid:
            code = os.waitstatus_to_exitcode(status)
            child.returncode = code
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
