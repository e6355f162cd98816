"""A private /dev/shm for the overhead benchmark: perf_analyzer names its system shared-memory regions after the
tensors, so a run on a shared host re-executes itself in a mount namespace with its own tmpfs there."""
from __future__ import annotations

import os
import shutil
import sys
from typing import Sequence

PRIVATE_SHM_ENV = "DTK_PRIVATE_SHM"


def private_shm_reason() -> str | None:
    """None when this process can run under a private /dev/shm (root + unshare), else why not."""
    if os.environ.get(PRIVATE_SHM_ENV) == "1":
        return "already inside a private /dev/shm"
    if not sys.platform.startswith("linux"):
        return "Linux only"
    if os.geteuid() != 0:
        return "needs root (a mount namespace and a tmpfs mount)"
    if shutil.which("unshare") is None:
        return "no `unshare` binary (util-linux)"
    return None


def private_shm_command(argv: Sequence[str]) -> list[str]:
    """Re-run `argv` in a new mount namespace with its own empty tmpfs on /dev/shm.

    Why: perf_analyzer names its system shared-memory regions after the tensors (/dev/shm/input__0_0_0,
    /dev/shm/output__0) and offers no prefix, so two perf_analyzer runs on one host against models with
    the same tensor names share the files: a batch-1 run truncating the region a batch-8 server still maps
    kills that server with SIGBUS (seen here). The server, its Python stubs and perf_analyzer are all
    children of this process, so a private /dev/shm isolates every region they share.
    """
    script = 'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", *argv]


__all__ = ["PRIVATE_SHM_ENV", "private_shm_command", "private_shm_reason"]
