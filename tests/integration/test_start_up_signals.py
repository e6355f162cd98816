"""A signal at any moment of start-up (the SIGSEGV race), on the real tritonserver: SIGTERM and SIGINT at 20 moments
from the first import of the client libraries to a model loading, each ending `serve` cleanly with nothing left.

Its own module, apart from test_fault_injection's: that module keeps a server up for its mid-sweep tests, and while
a server started before them lives, the Python backend's folders of the servers stopped here cannot be told from
its own (cleanup.sweep_python_env_dirs leaves them), so the check that none is left would not hold there.
"""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from conftest import wait_until
from test_fault_injection import Serve, _stat, children_named, repo, slow_repo, tools  # noqa: F401 (fixtures)

from deployment_toolkit.cleanup import (PYTHON_ENV_DIR, PYTHON_ENV_PREFIX, START_SLACK_S, regions_with_prefix,
                                        sweep_python_env_dirs, tritonserver_start_times)
from deployment_toolkit.server.local import port_is_free

pytestmark = [pytest.mark.integration, pytest.mark.long]  # long: collected first (conftest)


def maps_library(pid: int, fragment: str) -> bool:
    """Whether process `pid` has a shared library whose path holds `fragment` loaded (a C extension imported)."""
    try:
        return fragment in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def processes_naming(text: str) -> list[int]:
    """Live processes whose command line holds `text` (a repository path: the server and its stubs name it)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            try:
                argv = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if text.encode() in argv and (st := _stat(int(entry.name))) and st[1] != "Z":
                out.append(int(entry.name))
    return out


# (moment, seconds after it, signal). "importing": serve has begun importing the client libraries (numpy's C
# extension is mapped; no server yet); "spawned": the tritonserver process exists, serve imports tritonclient.http
# (gevent, geventhttpclient: where the SIGSEGV was) and polls readiness; "loading": the slow model's initialize() runs.
# Before "importing" serve's own code is not running: while Python starts, SIGTERM still kills it (-15); between
# cli.run's handler and serve's main (importing the small command module) cli.run answers 143 / 130.
RACE = ([("importing", 0.025 * i, (signal.SIGTERM, signal.SIGINT)[i % 2]) for i in range(8)]
        + [("spawned", 0.03 * i, (signal.SIGTERM, signal.SIGINT)[i % 2]) for i in range(8)]
        + [("loading", 0.2 * i, (signal.SIGTERM, signal.SIGINT)[i % 2]) for i in range(4)])


def _reached(serve: Serve, moment: str, repo: Path) -> bool:
    pid = serve.proc.pid
    if moment == "importing":
        return maps_library(pid, "_multiarray_umath")
    if moment == "spawned":
        return bool(children_named(pid, "tritonserver"))
    return (repo / "loading").exists()


def _signal_at(moment: str, delay: float, sig: int, repo: Path, logs: Path) -> str | None:
    """One try: start `serve`, signal it `delay` s after `moment`; what went wrong, or None. Nothing may be left
    either way: not the server, a stub (both name the repository), a port or a region."""
    (repo / "loading").unlink(missing_ok=True)
    serve = Serve(repo, logs)
    try:
        wait_until(lambda: _reached(serve, moment, repo) or serve.proc.poll() is not None, 60, moment)
        assert serve.proc.poll() is None, serve.proc.communicate()[1][-2000:]
        time.sleep(delay)  # the moment under test, not a wait for something
        seen = children_named(serve.proc.pid, "tritonserver")
        serve.proc.send_signal(sig)
        err = serve.finish()
        what = f"{signal.Signals(sig).name} {delay:.3f} s after {moment}"
        if serve.proc.returncode != 0 or "Traceback" in err or "Fatal Python error" in err:
            return f"{what}: exit {serve.proc.returncode}\n{err[-3000:]}"
        wait_until(lambda: not processes_naming(str(repo.resolve())), 30, f"{what}: a server or stub is left")
        if seen:
            serve.server_pid = seen[0]
            serve.assert_nothing_left()
        else:  # signalled before the server was seen: whatever it started is gone all the same
            wait_until(lambda: all(port_is_free(p) for p in serve.ports), 30, f"{what}: a port is still held")
            assert regions_with_prefix(f"dtkpy_{serve.proc.pid}_") == [], what
        return None
    finally:
        serve.kill_everything()


def test_signals_at_every_moment_of_start_up(repo, slow_repo, tmp_path):
    """SIGTERM and SIGINT at 20 moments from the first import of the client libraries to a model loading: each
    stops `serve` with its usual code 0 (never SIGSEGV: a KeyboardInterrupt or SystemExit raised inside
    geventhttpclient's import crashed it), no traceback, and nothing of the run left: the Python backend's
    /tmp/python_env_* folder of a server stopped mid-start (it removes its own on a clean exit only) is swept at the
    next start or stop, so at most the last try's, made under a second before it was stopped, may remain."""
    envs_before = set(PYTHON_ENV_DIR.glob(PYTHON_ENV_PREFIX + "*"))
    failures = []
    for n, (moment, delay, sig) in enumerate(RACE):
        failure = _signal_at(moment, delay, sig, slow_repo if moment == "loading" else repo, tmp_path / f"logs{n}")
        if failure:
            failures.append(f"try {n}: {failure}")
    assert not failures, f"{len(failures)} of {len(RACE)} tries failed:\n" + "\n\n".join(failures)
    # the product's own sweep, once more now that every try's server is gone; under a parallel run (pytest -n) a
    # live server of another test protects every folder made after it started (they cannot be told apart), so the
    # count holds over the folders older than every live server, which the sweep must have taken
    sweep_python_env_dirs()
    starts = tritonserver_start_times() or []
    cutoff = min(starts, default=time.time()) - START_SLACK_S
    left = {p for p in set(PYTHON_ENV_DIR.glob(PYTHON_ENV_PREFIX + "*")) - envs_before
            if not starts or p.lstat().st_mtime < cutoff}
    assert len(left) <= 1, sorted(left)
