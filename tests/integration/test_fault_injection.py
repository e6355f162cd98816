"""Fault injection on the real tritonserver and perf_analyzer: SIGTERM, SIGINT and SIGKILL at several moments
(server starting, a model loading, serving, mid-sweep). After each: no tritonserver, Python-backend stub or
perf_analyzer of the run survives, its ports can be bound again, and /dev/shm holds no region of the run.

Other servers and sweeps run on this host at the same time, so every check is scoped to what this module
started: process sessions of our servers, `dtkpy_<pid>_` regions of our `serve` processes, and the
perf_analyzer regions of tensors named only here (FI_IN / FI_OUT). Every wait polls with a deadline.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import require_triton_tools, wait_until

from deployment_toolkit.cleanup import SHM_DIR, regions_with_prefix
from deployment_toolkit.server.local import free_ports, port_is_free

pytestmark = [pytest.mark.integration, pytest.mark.long]  # long: collected first (conftest)
ROOT = Path(__file__).resolve().parents[2]

FI_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 4
input [ {{ name: "FI_IN" data_type: TYPE_FP32 dims: [ 8 ] }} ]
output [ {{ name: "FI_OUT" data_type: TYPE_FP32 dims: [ 8 ] }} ]
instance_group [ {{ count: 2 kind: KIND_CPU }} ]
"""
FI_MODEL = '''
import time
from pathlib import Path

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        if {slow}:  # "loading": say so, then take a minute (the test signals while this runs)
            Path({marker!r}).write_text("1")
            time.sleep(60)

    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[
            pb_utils.Tensor("FI_OUT", pb_utils.get_input_tensor_by_name(r, "FI_IN").as_numpy() * 2)]) for r in requests]
'''


def _repo(root: Path, name: str, slow: bool) -> Path:
    (root / name / "1").mkdir(parents=True)
    (root / name / "config.pbtxt").write_text(textwrap.dedent(FI_CONFIG.format(name=name)).lstrip())
    (root / name / "1" / "model.py").write_text(FI_MODEL.format(slow=slow, marker=str(root / "loading")).lstrip())
    return root


@pytest.fixture(scope="module")
def tools():
    require_triton_tools()  # part of `make install`: missing fails, never skips


@pytest.fixture()
def repo(tmp_path, tools) -> Path:
    return _repo(tmp_path / "repo", "fi", slow=False)


@pytest.fixture()
def slow_repo(tmp_path, tools) -> Path:
    return _repo(tmp_path / "slow_repo", "fi_slow", slow=True)


# ---- what is alive ------------------------------------------------------------------------------

def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return [text[text.index("(") + 1:text.rindex(")")], *text[text.rindex(")") + 2:].split()]


def children_named(ppid: int, name: str) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) and st[2] == str(ppid) and st[0] == name:
            out.append(int(entry.name))
    return out


def session_members(sid: int) -> list[int]:
    """Live (non-zombie) processes in session `sid`: a server started with start_new_session, and its stubs."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) and st[1] != "Z" and st[5] == str(sid):
            out.append(int(entry.name))
    return out


def perf_analyzers_against(url: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                state = _stat(int(entry.name))
            except OSError:
                continue
            if argv and argv[0].endswith(b"perf_analyzer") and url.encode() in argv and state and state[1] != "Z":
                pids.append(int(entry.name))
    return pids


def fi_perf_regions() -> list[str]:
    """perf_analyzer's regions for this module's tensors (FI_IN -> FI_IN_0_0, FI_OUT -> FI_OUT)."""
    return sorted(p.name for p in SHM_DIR.iterdir() if p.name.lower().startswith(("fi_in_", "fi_out")))


def http_ready(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=1) as resp:
            return resp.status == 200
    except OSError:
        return False


def _as_in_a_terminal(cmd: list[str]) -> list[str]:
    """`cmd` with SIGINT back to its default, through a launcher that execs it. A shell's background job
    (`make test &`, nohup) starts with SIGINT ignored, every child inherits that, and Python then installs no
    KeyboardInterrupt handler, so the Ctrl-C these tests send would be dropped; a terminal's foreground job, which
    is what they stand for, starts with the default. Not a preexec_fn: forking this process, which has gRPC
    loaded, can deadlock (cleanup.dying_with_parent)."""
    launcher = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                "os.execv(sys.argv[1], sys.argv[1:])")
    return [sys.executable, "-c", launcher, *cmd]


# ---- `python -m deployment_toolkit serve` -------------------------------------------------------

class Serve:
    def __init__(self, repo: Path, logs: Path, ports: tuple[int, int, int] | None = None, extra: tuple[str, ...] = ()):
        self.ports = ports or free_ports(3)
        http, grpc, metrics = self.ports
        self.proc = subprocess.Popen(
            _as_in_a_terminal([sys.executable, "-m", "deployment_toolkit", "serve", "--model-repository", str(repo),
                               "--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics),
                               "--log-dir", str(logs), *extra]), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env={**os.environ, "PYTHONFAULTHANDLER": "1"})  # a hang below dumps its stacks on SIGABRT
        self.server_pid: int | None = None

    def finish(self, timeout_s: float = 60) -> str:
        """Wait for `serve` to exit; if it hangs, fail with the Python stacks of where it hangs."""
        try:
            return self.proc.communicate(timeout=timeout_s)[1]
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)
            _, err = self.proc.communicate(timeout=30)
            pytest.fail(f"serve did not exit within {timeout_s:.0f} s; its stacks:\n{err[-3000:]}")

    def wait_server_process(self) -> int:
        found = wait_until(lambda: children_named(self.proc.pid, "tritonserver") or self.proc.poll() is not None,
                           60, "no tritonserver child")
        assert self.proc.poll() is None, self.proc.communicate()[1][-2000:]
        self.server_pid = found[0]
        return self.server_pid

    def wait_ready(self) -> None:
        self.wait_server_process()
        wait_until(lambda: http_ready(self.ports[0]) or self.proc.poll() is not None, 120, "server not ready")
        assert self.proc.poll() is None

    def assert_nothing_left(self) -> None:
        """No process of the server's session, every port bindable, no Python-backend region of this run."""
        assert self.server_pid is not None
        wait_until(lambda: not session_members(self.server_pid), 30, "tritonserver or a stub is still alive")
        wait_until(lambda: all(port_is_free(p) for p in self.ports), 30, "a port is still held")
        assert regions_with_prefix(f"dtkpy_{self.proc.pid}_") == []

    def kill_everything(self) -> None:
        self.proc.kill()
        if self.server_pid is not None:
            for pid in session_members(self.server_pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_while_the_server_starts(repo, tmp_path, sig):
    serve = Serve(repo, tmp_path / "logs")
    try:
        serve.wait_server_process()  # the server exists, it is not ready yet
        assert not http_ready(serve.ports[0])
        serve.proc.send_signal(sig)
        err = serve.finish()
        assert serve.proc.returncode == 0, err[-2000:]
        assert "Traceback" not in err
        serve.assert_nothing_left()
    finally:
        serve.kill_everything()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_signal_while_a_model_loads(slow_repo, tmp_path, sig):
    serve = Serve(slow_repo, tmp_path / "logs")
    try:
        serve.wait_server_process()
        wait_until(lambda: (slow_repo / "loading").exists(), 60, "the model never started loading")
        serve.proc.send_signal(sig)
        serve.finish()
        assert serve.proc.returncode == (0 if sig == signal.SIGINT else -signal.SIGKILL)
        if sig == signal.SIGKILL:  # no handler ran: the kernel and the watchdog did the work
            wait_until(lambda: not session_members(serve.server_pid), 30, "server or stub survived SIGKILL")
            wait_until(lambda: all(port_is_free(p) for p in serve.ports), 30, "a port is still held")
        else:
            serve.assert_nothing_left()
    finally:
        serve.kill_everything()


def test_a_model_loading_past_the_server_timeout_is_said_to_be_loading(slow_repo, tmp_path):
    """Issue: a slow model looked like a hang. While it loads, `serve` says so every few seconds; past
    --server-timeout it says the model was still loading, for how long, and which flag gives it longer (exit 2)."""
    serve = Serve(slow_repo, tmp_path / "logs", extra=("--server-timeout", "7"))
    try:
        serve.wait_server_process()
        err = serve.finish()
        assert serve.proc.returncode == 2, err[-2000:]
        assert "tritonserver starting: 5 s of 7 s (--server-timeout); loading fi_slow for" in err
        last = err.strip().splitlines()[-1]
        assert last.startswith("error: tritonserver did not become ready within 7 s: still loading fi_slow (for ")
        assert "nothing failed: give it longer with --server-timeout SECONDS" in last
        assert "Traceback" not in err
        serve.assert_nothing_left()
    finally:
        serve.kill_everything()


def test_sigkill_while_serving_then_restart_on_the_same_ports(repo, tmp_path):
    """SIGKILL: no handler runs; the kernel kills the server (PDEATHSIG), its stubs follow, and a new `serve`
    on the same ports starts at once and sweeps the dead run's shared memory."""
    first = Serve(repo, tmp_path / "logs1")
    second = None
    try:
        first.wait_ready()
        assert regions_with_prefix(f"dtkpy_{first.proc.pid}_"), "the Python backend's regions carry our prefix"
        first.proc.kill()
        first.proc.wait(timeout=30)
        wait_until(lambda: not session_members(first.server_pid), 30, "the server or a stub outlived SIGKILL")
        second = Serve(repo, tmp_path / "logs2", ports=first.ports)
        second.wait_ready()
        assert regions_with_prefix(f"dtkpy_{first.proc.pid}_") == []
        second.proc.send_signal(signal.SIGTERM)
        second.finish()
        assert second.proc.returncode == 0
        second.assert_nothing_left()
    finally:
        first.kill_everything()
        if second is not None:
            second.kill_everything()


def test_sigterm_while_serving_then_restart_on_the_same_ports(repo, tmp_path):
    """A restart right after a clean stop is not refused as 'port in use' (sockets in TIME-WAIT)."""
    first = Serve(repo, tmp_path / "logs1")
    second = None
    try:
        first.wait_ready()
        for _ in range(5):  # connections the server closes: its side of them waits in TIME-WAIT
            assert http_ready(first.ports[0])
        first.proc.send_signal(signal.SIGTERM)
        first.finish()
        assert first.proc.returncode == 0
        first.assert_nothing_left()
        second = Serve(repo, tmp_path / "logs2", ports=first.ports)
        second.wait_ready()
        second.proc.send_signal(signal.SIGINT)
        err = second.finish()
        assert second.proc.returncode == 0 and "already in use" not in err
        second.assert_nothing_left()
    finally:
        first.kill_everything()
        if second is not None:
            second.kill_everything()


# ---- mid-sweep -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sweep_server(tools, tmp_path_factory):
    from deployment_toolkit.server import LocalTritonServer, ServerConfig

    repo = _repo(tmp_path_factory.mktemp("sweep_repo"), "fi", slow=False)
    server = LocalTritonServer(ServerConfig(repo, log_dir=tmp_path_factory.mktemp("sweep_logs"))).start()
    yield server
    server.stop()
    assert regions_with_prefix(server.shm_prefix) == []


def _sweep_command(url: str, run_dir: Path, concurrency: str = "1:3:1") -> list[str]:
    return [sys.executable, str(ROOT / "triton" / "run_online_performance_test_on_triton.py"),
            "--server-url", url, "--model-name", "fi", "--concurrency", concurrency, "--shared-memory", "system",
            "--measurement-interval", "1000", "--stability-percentage", "50", "--max-trials", "8",
            "--result-path", str(run_dir), "--no-progress", "--no-report"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=["SIGTERM", "SIGINT", "SIGKILL"])
def test_signal_mid_sweep_leaves_no_perf_analyzer_and_no_shared_memory(sweep_server, tmp_path, sig):
    url = sweep_server.grpc_url
    assert fi_perf_regions() == [], "regions of an earlier run of this module"
    proc = subprocess.Popen(_as_in_a_terminal(_sweep_command(url, tmp_path / "run")), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # perf_analyzer is measuring (its regions exist): the moment a Ctrl-C or a kill leaked them
        wait_until(lambda: (perf_analyzers_against(url) and fi_perf_regions()) or proc.poll() is not None,
                   180, "perf_analyzer never started")
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == {signal.SIGTERM: 143, signal.SIGINT: 130, signal.SIGKILL: -9}[sig], err[-2000:]
    wait_until(lambda: not perf_analyzers_against(url), 30, "perf_analyzer outlived the sweep")
    if sig != signal.SIGKILL:
        assert "Traceback" not in err
        assert fi_perf_regions() == []
    else:  # nothing ran in the killed process: the next run of the toolkit clears what it left
        rerun = subprocess.run(_sweep_command(url, tmp_path / "run2", concurrency="1"), cwd=ROOT,
                               capture_output=True, text=True, timeout=240)
        assert rerun.returncode == 0, rerun.stderr[-2000:]
        assert fi_perf_regions() == []
