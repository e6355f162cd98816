"""SIGTERM unwinding in cli.run, process-group cleanup in LocalTritonServer.stop, request grouping in the
Python runtime, and the shared-memory guard around perf_analyzer. None of these need tritonserver."""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from deployment_toolkit.perf.analyzer import shm_lock
from deployment_toolkit.perf.analyzer import (
    Concurrency, PerfAnalyzerError, PerfOptions, PerfTarget, ShmRun, concurrent_message, conflicting_runs,
    parse_shm_run, run_point,
    running_shm_runs, shared_memory_guard, sigbus_message,
)
from deployment_toolkit.runtimes.artifact import (
    batch_uniform_inputs, group_requests, merge_key, run_requests,
)
from deployment_toolkit.server import local
from deployment_toolkit.server.local import LocalTritonServer, ServerConfig, TritonInstallation, group_members
from deployment_toolkit.spec import ModelSignature, TensorSpec

ROOT = Path(__file__).resolve().parents[3]


def read_line(proc: subprocess.Popen, timeout_s: float = 30.0) -> str:
    """One line of a child's stdout, or fail after `timeout_s` (readline alone could block forever)."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    assert ready, f"no output from pid {proc.pid} within {timeout_s} s"
    return proc.stdout.readline().strip()


# ---- 1. cli.run turns SIGTERM into an unwinding exit -----------------------------------------------

SIGTERM_SCRIPT = textwrap.dedent('''
    import contextlib, signal, sys
    sys.path.insert(0, {root!r})
    from deployment_toolkit import cli

    @contextlib.contextmanager
    def resource():
        try:
            yield
        finally:
            open({marker!r}, "w").write("cleaned up")

    def main():
        with resource():
            print("ready", flush=True)
            while True:
                signal.pause()

    cli.run(main)
''')


def test_sigterm_runs_context_managers_and_exits_143(tmp_path):
    marker = tmp_path / "cleaned"
    script = tmp_path / "script.py"
    script.write_text(SIGTERM_SCRIPT.format(root=str(ROOT), marker=str(marker)))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert read_line(proc) == "ready"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 143, err  # not -15: the handler ran, not Python's default death
    assert marker.read_text() == "cleaned up"
    assert "terminated" in err


# ---- 1. LocalTritonServer.stop kills the server's whole process group ------------------------------

def fake_server(tmp_path: Path, shell: str) -> tuple[LocalTritonServer, int]:
    """A LocalTritonServer whose `process` is a shell leading its own group (as tritonserver does) and
    whose first output line is the pid of a child standing in for a Python-backend stub."""
    inst = TritonInstallation(*(tmp_path / n for n in ("root", "bin", "libs", "backend", "stub")))
    server = LocalTritonServer(ServerConfig(tmp_path), installation=inst)
    server.process = subprocess.Popen(["sh", "-c", shell], stdout=subprocess.PIPE, text=True, start_new_session=True)
    return server, int(read_line(server.process))


def test_stop_kills_orphaned_stub_when_server_already_died(tmp_path):
    server, stub = fake_server(tmp_path, "sleep 300 & echo $!")
    pgid = server.process.pid
    try:
        server.process.wait(timeout=10)  # the "server" is gone, its "stub" is not
        assert stub in group_members(pgid)
        server.stop()
        assert group_members(pgid) == []
    finally:
        local.signal_group(pgid, signal.SIGKILL)


def test_stop_kills_stub_that_ignores_sigterm(tmp_path, monkeypatch):
    monkeypatch.setattr(local, "GROUP_GRACE_S", 0.2)
    server, stub = fake_server(tmp_path, "(trap '' TERM; exec sleep 300) & echo $!; wait")
    pgid = server.process.pid
    try:
        assert stub in group_members(pgid)
        server.stop(timeout_s=5)
        assert server.process.returncode is not None
        assert group_members(pgid) == []
    finally:
        local.signal_group(pgid, signal.SIGKILL)


def test_stop_kills_server_that_ignores_sigterm(tmp_path):
    server, _ = fake_server(tmp_path, "trap '' TERM; sleep 300 & echo $!; wait")
    pgid = server.process.pid
    try:
        started = time.monotonic()
        server.stop(timeout_s=0.5)
        assert server.process.returncode == -signal.SIGKILL
        assert group_members(pgid) == []
        assert time.monotonic() - started < 10
    finally:
        local.signal_group(pgid, signal.SIGKILL)


# ---- 2. the Python runtime only merges requests with identical batch-uniform inputs ----------------

WAVES_A = np.array([0.49, 0.56, 0.66], np.float32)
WAVES_B = np.array([0.84, 1.61, 2.19], np.float32)


def request(batch: int, waves: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"input__0": rng.standard_normal((batch, len(waves), 4)).astype(np.float32),
            "wavelengths__1": np.broadcast_to(waves, (batch, len(waves))).copy()}


class RowZeroModel:
    """Like DOFA: reads the wavelengths of row 0 for the whole batch; counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.calls += 1
        waves = inputs["wavelengths__1"][0]
        return {"output__0": inputs["input__0"].sum(axis=2) * waves[None, :]}


def test_requests_with_other_wavelengths_are_not_merged():
    reqs = [request(2, WAVES_A, 0), request(1, WAVES_B, 1), request(3, WAVES_A, 2)]
    model = RowZeroModel()
    got = run_requests(model, reqs, ["wavelengths__1"])
    assert model.calls == 2  # A requests merged into one batch, B on its own
    for req, res in zip(reqs, got):  # answers in request order, each as if sent alone
        np.testing.assert_array_equal(res["output__0"], RowZeroModel()(req)["output__0"])


def test_grouping_keeps_first_appearance_order_and_separates_shapes():
    reqs = [request(1, WAVES_B, 0), request(2, WAVES_A, 1), request(1, WAVES_B, 2),
            request(1, WAVES_A[:2], 3), request(2, WAVES_A, 4)]
    assert group_requests(reqs, ["wavelengths__1"]) == [[0, 2], [1, 4], [3]]
    assert group_requests(reqs[1:2] + reqs[4:], []) == [[0, 1]]  # no uniform inputs: shapes decide


def test_request_whose_own_rows_differ_runs_alone():
    mixed = request(2, WAVES_A, 0)
    mixed["wavelengths__1"][1] = WAVES_B
    assert merge_key(mixed, ["wavelengths__1"]) is None
    assert group_requests([request(1, WAVES_A, 1), mixed, request(1, WAVES_A, 2)], ["wavelengths__1"]) == [[0, 2], [1]]


def test_unbatched_model_runs_every_request_alone():
    model = RowZeroModel()
    reqs = [request(1, WAVES_A, 0), request(1, WAVES_A, 1)]
    run_requests(model, reqs, ["wavelengths__1"], batched=False)
    assert model.calls == 2


def test_uniform_inputs_from_parameter_else_manifest():
    inputs = [{"name": "input__0", "value": None}, {"name": "timestep__1", "value": [500]},
              {"name": "wavelengths__1", "value": [0.49], "batch_uniform": True}]
    assert batch_uniform_inputs(None, inputs) == ["wavelengths__1"]
    assert batch_uniform_inputs("", inputs) == []
    assert batch_uniform_inputs("a, b", inputs) == ["a", "b"]


# ---- 3. perf_analyzer with shared memory: one at a time, clear errors ------------------------------

def test_parse_shm_run_reads_every_option_spelling():
    run = parse_shm_run(7, ["/venv/bin/perf_analyzer", "-m", "r18", "-u127.0.0.1:8001", "--shared-memory=system"])
    assert run == ShmRun(7, "system", "127.0.0.1:8001", "r18")
    assert parse_shm_run(8, ["perf_analyzer", "-m", "r18", "--url", "h:1", "--shared-memory", "cuda"]).url == "h:1"
    assert parse_shm_run(9, ["perf_analyzer", "-m", "r18", "--shared-memory", "none"]) is None
    assert parse_shm_run(10, ["python", "--shared-memory", "system"]) is None


def test_conflicts_system_shm_anywhere_and_any_shm_on_the_same_server():
    other_system = ShmRun(1, "system", "127.0.0.1:9001", "a")
    same_server_cuda = ShmRun(2, "cuda", "localhost:8001", "b")
    elsewhere_cuda = ShmRun(3, "cuda", "127.0.0.1:9001", "c")
    runs = [other_system, same_server_cuda, elsewhere_cuda]
    assert conflicting_runs("system", "127.0.0.1:8001", runs) == [other_system, same_server_cuda]
    assert conflicting_runs("cuda", "127.0.0.1:8001", runs) == [same_server_cuda]
    assert conflicting_runs("none", "127.0.0.1:8001", runs) == []


def test_messages_say_what_happened_and_what_to_do():
    run = ShmRun(4242, "system", "127.0.0.1:8001", "resnet50")
    text = concurrent_message([run])
    assert "pid 4242" in text and "kill 4242" in text and "--shared-memory none" in text
    crash = sigbus_message("system", "batch 8, concurrency 4", [], 64 * 2**20)
    assert "SIGBUS" in crash and "batch 8, concurrency 4" in crash and "64 MiB free" in crash
    assert "--shm-size" in crash and "one perf_analyzer with --shared-memory system at a time" in crash


def test_running_perf_analyzer_with_system_shm_is_found_in_proc():
    fake = subprocess.Popen(["perf_analyzer", "-c", "import time; time.sleep(300)", "-m", "m", "-u", "127.0.0.1:1",
                             "--shared-memory", "system"], executable=sys.executable)
    try:
        deadline = time.monotonic() + 10
        while not any(r.pid == fake.pid for r in running_shm_runs()):
            assert time.monotonic() < deadline, "the fake perf_analyzer never showed up in /proc"
            time.sleep(0.05)
    finally:
        fake.kill()
        fake.wait()


def test_guard_waits_for_lock_holder_then_gives_up_with_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(shm_lock, "running_shm_runs", lambda: [])
    lock = tmp_path / "shm.lock"
    with shared_memory_guard("system", "127.0.0.1:8001", wait_s=1, lock_path=lock):
        with pytest.raises(PerfAnalyzerError, match="held .*shm.lock"):
            with shared_memory_guard("system", "127.0.0.1:8001", wait_s=0.3, lock_path=lock):
                pass
    with shared_memory_guard("system", "127.0.0.1:8001", wait_s=0.3, lock_path=lock):
        pass  # released: the next run goes ahead


def test_guard_refuses_to_run_next_to_a_foreign_perf_analyzer(tmp_path, monkeypatch):
    foreign = ShmRun(4242, "system", "127.0.0.1:9001", "other")
    monkeypatch.setattr(shm_lock, "running_shm_runs", lambda: [foreign])
    with pytest.raises(PerfAnalyzerError, match="pid 4242"):
        with shared_memory_guard("system", "127.0.0.1:8001", wait_s=0.3, lock_path=tmp_path / "l"):
            pass
    with shared_memory_guard("none", "127.0.0.1:8001", wait_s=0.3, lock_path=tmp_path / "l"):
        pass  # without shared memory nothing clashes


def test_sigbus_exit_becomes_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(shm_lock, "running_shm_runs", lambda: [])
    monkeypatch.setattr(shm_lock, "shm_lock_path", lambda: tmp_path / "shm.lock")
    fake = tmp_path / "perf_analyzer"
    fake.write_text("#!/bin/sh\nkill -BUS $$\n")
    fake.chmod(0o755)
    sig = ModelSignature(inputs=(TensorSpec("input__0", (4,)),), outputs=(TensorSpec("output__0", (4,)),))
    with pytest.raises(PerfAnalyzerError, match="killed by SIGBUS.*batch 2, concurrency 1") as info:
        run_point(PerfTarget("m", "127.0.0.1:8001", sig, binary=fake), 2, Concurrency(1),
                  PerfOptions(shared_memory="system"), tmp_path / "p.csv")
    assert info.value.returncode == -signal.SIGBUS
    assert "--shared-memory none" in str(info.value)
