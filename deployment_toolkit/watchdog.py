"""User code that hangs is seen (a model.py that never finishes importing, a forward that never returns): each
stage that runs user code says what it starts, on stdout, and has a time limit; past it the tool writes every
thread's stack to a file, says in one line which stage hung and exits 2 (os._exit: a stuck C call cannot be
interrupted; the children the tool started die with it, PR_SET_PDEATHSIG). The stacks go to a file it names. A leaf: imports nothing of the toolkit.
"""
from __future__ import annotations

import contextlib
import faulthandler
import logging
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator

log = logging.getLogger(__name__)
DEFAULT_TIMEOUT_S = 600.0
_settings = {"timeout_s": DEFAULT_TIMEOUT_S, "announce": False}


def configure(timeout_s: float | None = None, announce: bool | None = None) -> None:
    """Set from a command's flags (--user-code-timeout; commands announce stages, library calls stay quiet).
    A timeout of 0 or less: no limit."""
    if timeout_s is not None:
        _settings["timeout_s"] = timeout_s
    if announce is not None:
        _settings["announce"] = announce


@contextlib.contextmanager
def user_stage(what: str, announce: bool = True) -> Iterator[None]:
    """Run the body as the user-code stage `what` (e.g. 'importing model.py'); `announce=False` for stages that
    repeat (each batch of a dataloader)."""
    timeout = float(_settings["timeout_s"] or 0)
    if _settings["announce"] and announce:
        log.info(f"{what} ...")  # progress (on stdout under a command): stderr stays the one line of an error
    done = threading.Event()
    t0 = time.monotonic()

    def expire() -> None:
        if done.wait(timeout):
            return
        stacks = Path(tempfile.gettempdir()) / f"deployment_toolkit-stuck-{os.getpid()}.txt"
        with open(stacks, "w") as fh:
            faulthandler.dump_traceback(file=fh, all_threads=True)
        sys.stderr.flush()
        os.write(2, (f"error: {what} did not finish within {timeout:.0f} s (--user-code-timeout); stopped after "
                     f"{time.monotonic() - t0:.0f} s. Where each thread was: {stacks}\n").encode())
        os._exit(2)

    if timeout > 0:
        threading.Thread(target=expire, name="user-code-watchdog", daemon=True).start()
    try:
        yield
    finally:
        done.set()
