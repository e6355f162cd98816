"""Shared pieces of the thin command-line scripts in triton/."""
from __future__ import annotations

import argparse
import errno
import logging
import os
import signal
import sys
import textwrap
import threading
from pathlib import Path
from types import FrameType
from typing import Any, Callable

from . import committed, watchdog
from .config.fields import int_list  # noqa: F401  (cli.int_list: the commands' flag type)
from .errors import UserError

# Errors whose message is the whole story: print it, no traceback. Anything else (a bare ValueError or KeyError
# included) is a bug and keeps its traceback, exit 1.
USER_ERRORS = (UserError,)


class _Parser(argparse.ArgumentParser):
    """A usage error is the one line that matters and a pointer to --help, not the whole usage block. Every
    command takes --user-code-timeout and announces the stages that run user code (watchdog)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # no abbreviations: `--deploy` or `--max-min` read as another flag, and copied into a job's pods as typed
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.add_argument("--user-code-timeout", type=float, default=watchdog.DEFAULT_TIMEOUT_S, metavar="SECONDS",
                          help="time limit for each stage that runs your code (importing model.py, building the "
                               "model, a forward pass, a dataloader batch, metrics.py); past it the command stops "
                               "with exit 2 and says which stage hung (default %(default)s; 0: none)")
        self.add_argument("--update-committed", action="store_true",
                          help="allow writing into a folder git tracks (regenerating a committed example run); "
                               "without it such a folder is refused")
        self.add_argument("--keep-raw", action="store_true",
                          help="keep perf_analyzer's per-request profile exports (gzip-compressed) and the arrival "
                               "schedule files of open-loop points beside their summaries; without it they are "
                               "summarised (*.profile.summary.json) and dropped")

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        parsed, rest = super().parse_known_args(args, namespace)
        watchdog.configure(getattr(parsed, "user_code_timeout", None), announce=True)
        committed.allow(getattr(parsed, "update_committed", False))
        committed.keep_raw(getattr(parsed, "keep_raw", False))
        return parsed, rest

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n(run {self.prog} --help for every flag and an example)\n")


def parser(description: str, example: str) -> argparse.ArgumentParser:
    return _Parser(
        description=description,
        epilog="example:\n" + textwrap.indent(textwrap.dedent(example).strip(), "  "),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


EXIT_NOT_MET = 1  # a bound the command was asked to meet is not met (a threshold, a budget, an SLO)
EXIT_USER_ERROR = 2  # bad input, a missing file or tool: the README's exit-code table
EXIT_SIGTERM = 128 + signal.SIGTERM  # 143, what a shell reports for a process killed by SIGTERM


def _raise_on_sigterm(signum: int, frame: FrameType | None) -> None:
    """SIGTERM unwinds the stack like Ctrl-C, so `with LocalTritonServer(...)` blocks stop their server.

    Python's default for SIGTERM is to die on the spot: no finally, no __exit__, and the embedded
    tritonserver (its own session, so it gets no signal) lives on as an orphan holding its ports.
    Further SIGTERMs are ignored while the cleanup (bounded by LocalTritonServer.stop's timeouts) runs.
    """
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(EXIT_SIGTERM)


def install_sigterm_handler() -> Callable[[], None]:
    """Install `_raise_on_sigterm` (main thread only: elsewhere Python cannot set handlers); returns a
    function that restores the previous handler."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous: Any = signal.signal(signal.SIGTERM, _raise_on_sigterm)
    # None: the previous handler was not set from Python; the default is the closest we can restore
    return lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


# Where the user's environment, not the toolkit, says no: a full disk or quota, a read-only or immutable
# destination, a missing permission, a name too long for the filesystem.
_ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENAMETOOLONG}
_OWN_EXITS = (str(Path(__file__).resolve().parent), str(Path(argparse.__file__).resolve()))


def user_exit_site(err: SystemExit) -> str | None:
    """`file:line` where a SystemExit was raised, when that is neither the toolkit (the SIGTERM handler) nor
    argparse (--help, a usage error): a user's model.py, dataloader.py or metrics.py calling sys.exit. None else."""
    tb, frame = err.__traceback__, None
    while tb is not None:
        frame, tb = tb, tb.tb_next
    if frame is None:
        return None
    path = str(Path(frame.tb_frame.f_code.co_filename).resolve())
    if path.startswith(_OWN_EXITS[0]) or path == _OWN_EXITS[1] or frame.tb_frame.f_code.co_filename.startswith("<"):
        return None
    return f"{Path(path).name}:{frame.tb_lineno}"


class _Console(logging.Handler):
    """The library's messages as a command shows them: the bare text, INFO to stdout and WARNING up to stderr,
    each written to the stream in place when the record comes (so a test's capture, or a `| tee`, sees it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stderr if record.levelno >= logging.WARNING else sys.stdout
            stream.write(self.format(record) + "\n")
            stream.flush()
        except BrokenPipeError:
            raise
        except Exception:  # noqa: BLE001  (logging's own rule: a failed emit never stops the job)
            self.handleError(record)


def console_logging(level: int = logging.INFO) -> logging.Handler:
    """Route the library's logging (`logging.getLogger(__name__)` under `deployment_toolkit`) to the console: the
    one place a command's progress reaches the user. Library code logs and never prints; the Python API leaves the
    logger to the caller's own configuration. Installing twice keeps one handler."""
    logger = logging.getLogger("deployment_toolkit")
    for handler in logger.handlers:
        if isinstance(handler, _Console):
            return handler
    handler = _Console(level)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(min(level, logger.level or level))
    logger.propagate = False
    return handler


def run(main: Callable[[], int | None]) -> None:
    """The one entry point of every command (triton/*.py and `deployment-toolkit SUB`): a UserError becomes one
    `error: ...` line and exit code 2; any other exception is a bug and propagates with its traceback (exit 1);
    SIGTERM and Ctrl-C unwind (context managers stop embedded servers) and exit with 143 and 130."""
    restore = install_sigterm_handler()
    console_logging()
    try:
        code = main()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 130
    except BrokenPipeError:  # the reader went away (`... | head`): nothing failed, and nothing more to say
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 0
    except SystemExit as err:
        where = user_exit_site(err)
        if where is not None:  # a user's file called sys.exit: nothing it was asked to compute was computed
            print(f"error: user code called sys.exit({err.code!r}) at {where}; the command stopped there, nothing "
                  "was checked or written after it: remove that call (a library function must return or raise)",
                  file=sys.stderr)
            code = EXIT_USER_ERROR
        elif err.code != EXIT_SIGTERM:
            raise
        else:
            print("terminated (SIGTERM)", file=sys.stderr)
            code = EXIT_SIGTERM
    except USER_ERRORS as err:
        print(f"error: {err}", file=sys.stderr)
        code = EXIT_USER_ERROR
    except OSError as err:
        if err.errno not in _ENVIRONMENT_ERRNOS:
            raise
        print(f"error: {err.strerror}" + (f": {err.filename}" if err.filename else "") + "; completed measurements "
              "and files are kept: make room or point the output elsewhere, then run the same command again",
              file=sys.stderr)
        code = EXIT_USER_ERROR
    finally:
        restore()
    forget_handled_interrupt()
    sys.exit(code or 0)


def forget_handled_interrupt() -> None:
    """Make the exit code the one the command chose, after a Ctrl-C it handled.

    CPython marks a KeyboardInterrupt "unhandled" when it leaves code run by exec()/eval() on a string (every
    dataclass and namedtuple definition runs one), even when a caller then handles it; `python -m` ends such a
    process by SIGINT (exit -2) after the command returned 0 (`serve` stopped cleanly, printed "tritonserver
    stopped", and died by SIGINT: the start-up race test, 1 in 20 tries, Ctrl-C while the server module imported).
    Each string exec clears the mark before it runs (CPython 3.10-3.13), so one that raises nothing leaves it clear."""
    exec("pass")  # noqa: S102  (a constant: the reset described above)
