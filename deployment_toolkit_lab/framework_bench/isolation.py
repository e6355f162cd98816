"""A group measured in a child process: a configuration that hangs (a torch.compile that never ends) or is killed
(the kernel's OOM killer) fails alone, and the bench goes on."""
from __future__ import annotations

import logging
import sys
from typing import Any, Callable, Sequence

from deployment_toolkit.results.bench_store import row_key
from .configs import STATUS_FAILED, BenchConfig
from .measuring import base_row, run_group
from .runners import BenchOptions


def _worker(configs: list[BenchConfig], opts: BenchOptions, conn) -> None:
    """Child-process entry: run a group, send each row through the pipe. (The child imported this module to
    find the function, and with it the toolkit that this package imports, whose __init__ hides the repo's triton/
    scripts folder from torch.)"""

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)  # a fresh process: no handler
    run_group(configs, opts, conn.send, logging.getLogger(__name__).info)
    conn.send(None)
    conn.close()


def run_group_isolated(configs: Sequence[BenchConfig], opts: BenchOptions, emit: Callable[[dict[str, Any]], None],
                       timeout_s: float, target: Callable = _worker, context: str = "spawn") -> None:
    """run_group in a child process: a configuration that takes longer than `timeout_s` (a torch.compile
    that never ends) or kills its process (the kernel's OOM killer) fails alone, the bench goes on."""
    import multiprocessing as mp

    ctx = mp.get_context(context)
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target, args=(list(configs), opts, child), daemon=True)
    proc.start()
    child.close()
    pending = list(configs)
    reason = ""
    try:
        while pending:
            if not parent.poll(timeout_s):
                reason = f"timed out after {timeout_s:.0f} s (torch.compile or the timed run did not finish)"
                break
            try:
                row = parent.recv()
            except EOFError:
                code = proc.join(5) or proc.exitcode
                reason = ("worker killed by SIGKILL (the kernel's OOM killer?)" if code == -9
                          else f"worker exited with code {code}")
                break
            if row is None:
                break
            pending = [c for c in pending if c.key != row_key(row)]
            emit(row)
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(10)
        parent.close()
    for i, cfg in enumerate(pending):
        emit(base_row(cfg, opts.device, STATUS_FAILED, reason if i == 0 else f"not run: {reason} at batch "
                      f"{pending[0].batch_size}"))
