"""Running one exporter attempt the way a user wants to see it: its own dumps in a log file, a time limit, the
attention fast path off, and a record of what happened (exporter, seconds, outcome, first line of the error).

Exporters print a lot (the TorchScript graph before a one-line error, torch.export's progress, C++ warnings),
some of it from C++ straight to the file descriptors, so both fds 1 and 2 are pointed at the log while an
attempt runs. An exporter that hangs cannot be interrupted from Python (it may sit in C++); past its limit a
watchdog writes every thread's stack to the log, says in one line which attempt hung, and ends the process with
exit code 2: nothing else can stop it, and the artifact is written only on success, so nothing half-done stays.
"""
from __future__ import annotations

import contextlib
import errno
import faulthandler
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from ..spec import NoSpaceError, free_bytes
from .errors import ConversionError

T = TypeVar("T")
LOG_NAME = "export.log"
DEFAULT_TIMEOUT_S = 900.0


@dataclass
class Attempt:
    """One try at one format with one exporter, as the manifest records it."""

    exporter: str
    seconds: float
    outcome: str  # ok | failed | failed to load | failed verification
    error: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        return f"{self.exporter}: {self.outcome} in {self.seconds:.1f} s" + (f" - {self.error}" if self.error else "")


def first_line(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).strip().splitlines() if ln.strip()]
    return (lines[0] if lines else type(err).__name__)[:300]


@contextlib.contextmanager
def fastpath_off() -> Iterator[None]:
    """PyTorch's fused attention (`aten::_native_multi_head_attention`, `_transformer_encoder_layer_fwd`, used by
    nn.MultiheadAttention / nn.TransformerEncoder in eval) has no ONNX mapping and traces into ops TorchScript
    saves but other runtimes lack; the unfused path computes the same thing."""
    import torch

    mha = getattr(torch.backends, "mha", None)
    before = mha.get_fastpath_enabled() if mha is not None else None
    if mha is not None:
        mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        if mha is not None and before is not None:
            mha.set_fastpath_enabled(before)


@contextlib.contextmanager
def output_to(log: Path) -> Iterator[int]:
    """fds 1 and 2 (and sys.stdout/err) into `log` (appended); yields a duplicate of the real stderr."""
    sys.stdout.flush()
    sys.stderr.flush()
    log.parent.mkdir(parents=True, exist_ok=True)
    saved_out, saved_err = os.dup(1), os.dup(2)
    with open(log, "a", buffering=1) as fh:
        os.dup2(fh.fileno(), 1)
        os.dup2(fh.fileno(), 2)
        try:
            yield saved_err
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved_out, 1)
            os.dup2(saved_err, 2)
            os.close(saved_out)
            os.close(saved_err)


def run_attempt(name: str, what: str, fn: Callable[[], T], log: Path, timeout_s: float | None
                ) -> tuple[T | None, Attempt]:
    """Run `fn` as attempt `name` (for `what`, e.g. 'ONNX export'); a ConversionError or any exception from it
    is a failed attempt (its first line recorded, the whole error in the log); past `timeout_s` the process ends
    with one line and exit 2 (see the module docstring)."""
    with open(log, "a") as fh:
        fh.write(f"\n===== {what} with {name} ({time.strftime('%Y-%m-%d %H:%M:%S')}) =====\n")
    t0 = time.perf_counter()
    with output_to(log) as real_err, fastpath_off():
        done = threading.Event()

        def watchdog() -> None:
            if done.wait(timeout_s):
                return
            with open(log, "a") as fh:
                fh.write(f"\n===== {what} with {name} passed its {timeout_s:.0f} s limit: stacks =====\n")
                fh.flush()
                faulthandler.dump_traceback(file=fh, all_threads=True)
            os.write(real_err, (f"error: {what} with {name} did not finish within {timeout_s:.0f} s "
                                f"(--export-timeout); stopped. Stacks and the exporter's output: {log}\n").encode())
            os._exit(2)

        if timeout_s:
            threading.Thread(target=watchdog, name="export-watchdog", daemon=True).start()
        try:
            result = fn()
            outcome, error = "ok", ""
        except NoSpaceError:
            raise  # the disk, not the exporter: no other exporter would fare better (one line, exit 2)
        except Exception as err:  # noqa: BLE001 - every exporter raises its own types; the attempt records it
            import traceback

            traceback.print_exc()  # into the log
            full = disk_full(err, log.parent)
            if full is not None:  # an exporter's own write met the full disk (torch.onnx's, in C++)
                raise full from err
            result, outcome, error = None, "failed", first_line(err)
        finally:
            done.set()
    return result, Attempt(name, round(time.perf_counter() - t0, 3), outcome, error)


def disk_full(err: BaseException, folder: Path) -> NoSpaceError | None:
    """The NoSpaceError behind `err` where a full disk (ENOSPC, EDQUOT) is anywhere in its chain: the exporters wrap
    the OSError in their own errors, and each next exporter would only fill the disk again."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            where = Path(seen.filename) if seen.filename else folder
            return NoSpaceError(where, None, free_bytes(where if where.is_dir() else where.parent), written=None)
        seen = seen.__cause__ or seen.__context__
    return None


def all_failed(what: str, attempts: list[Attempt], log: Path) -> ConversionError:
    """The error when no attempt worked: one line per attempt, the log's path for the rest."""
    lines = "".join(f"\n  {a.line()}" for a in attempts)
    return ConversionError(f"{what} failed with every exporter tried (their output: {log}):{lines}")
