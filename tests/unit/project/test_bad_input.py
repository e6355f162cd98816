"""Unusable input ends with exit code 2 and one line naming the file and what is wrong, never a traceback
and never exit 1 (which calculate_metrics reserves for "a metric missed its bound"). Also the pieces of a
clean end that need no server: the port check and the shared-memory bookkeeping (issue 16)."""
from __future__ import annotations

import json
import math
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from deployment_toolkit.cleanup import PerfShmRecord, perf_region_pattern, sweep_dead_runs
from deployment_toolkit.data.dump import DumpError, DumpWriter, load_dump
from deployment_toolkit.results.schema import STORE_COLUMNS
from deployment_toolkit.results.store import rows_to_csv
from deployment_toolkit.report.tables import ResultsFileError, load_rows
from deployment_toolkit.server.local import port_is_free

ROOT = Path(__file__).resolve().parents[3]


def _dump(directory: Path, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    with DumpWriter(directory, {"model": "m", "task": "classification", "source": "test"}) as w:
        for start in (0, 4):
            ids = np.arange(start, start + 4)
            w.write(ids, {"output__0": rng.standard_normal((4, 5)).astype(np.float32)},
                    labels={"label": ids % 5})
    return directory


def _shard(directory: Path) -> Path:
    return sorted((directory / "outputs").glob("*.npz"))[0]


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the array data: the zip CRC no longer matches
    path.write_bytes(bytes(data))


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(300))


@pytest.mark.parametrize("damage", [_truncate, _flip, _garbage], ids=["truncated", "bit-flipped", "garbage"])
def test_corrupt_shard_is_a_dump_error_naming_it(tmp_path, damage):
    d = _dump(tmp_path / "dump")
    shard = _shard(d)
    damage(shard)
    with pytest.raises(DumpError) as info:
        load_dump(d)
    assert str(shard) in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"tensors": {"outputs": ["o"]}, "num_shards": "many"}'])
def test_unusable_dump_meta_is_a_dump_error(tmp_path, text):
    d = _dump(tmp_path / "dump")
    (d / "dump.json").write_text(text)
    with pytest.raises(DumpError, match=re.escape(str(d / "dump.json"))):
        load_dump(d)


def _calculate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "triton" / "calculate_metrics.py"), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_calculate_metrics_exits_2_on_a_truncated_dump_and_1_only_for_a_missed_bound(tmp_path):
    good, bad = _dump(tmp_path / "good"), _dump(tmp_path / "bad", seed=1)
    _truncate(_shard(bad))
    out = _calculate("--dump-dir", str(bad), "--reference-dir", str(good), "--csv", str(tmp_path / "m.csv"))
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and str(_shard(bad)) in lines[0] and "truncated or corrupt" in lines[0]
    missed = _calculate("--dump-dir", str(good), "--csv", str(tmp_path / "m.csv"), "--threshold", "top1_accuracy>=1.1")
    assert missed.returncode == 1, missed.stderr  # the one meaning of exit 1


def _results(tmp_path: Path, edit) -> Path:
    row = {c: 1.0 for c in STORE_COLUMNS}
    row.update({"Precision": "FP32", "Client Batch Size": 1, "Concurrent client requests": 1, "Triton Instances": 1,
                "stable": True, "residual_clamped": False, "attempts": 1, "window": "1000 ms", "note": ""})
    text = edit(rows_to_csv([row]))
    (tmp_path / "online.csv").write_text(text)
    return tmp_path


@pytest.mark.parametrize("edit, what", [
    (lambda t: t.replace("FP32,1,1,1,", "FP32,1,1,fast,", 1), "not a number"),
    (lambda t: "a;b;c\n1;2;3\n", "not a online results table"),
    (lambda t: t.replace("FP32,1,1,", "FP32,0,1,", 1), "not a load level"),
    (lambda t: t.replace("FP32,1,1,1", "FP32,1,1,-5", 1), "finite and >= 0"),
], ids=["text", "header", "level", "negative"])
def test_nonsense_results_csv_is_refused_naming_the_file(tmp_path, edit, what):
    run = _results(tmp_path, edit)
    with pytest.raises(ResultsFileError, match=what) as info:
        load_rows(run, "online")
    assert str(run / "online.csv") in str(info.value) and "\n" not in str(info.value)


def test_a_good_results_csv_still_loads(tmp_path):
    (row,) = load_rows(_results(tmp_path, lambda t: t), "online")
    assert row["Inferences/second"] == 1.0 and not math.isnan(row["Avg Latency"])


def test_report_script_exits_2_on_a_hand_edited_csv(tmp_path):
    run = _results(tmp_path, lambda t: t.replace("FP32,1,1,1,", "FP32,1,1,fast,", 1))
    out = subprocess.run([sys.executable, str(ROOT / "triton" / "report.py"), str(run)], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "online.csv" in out.stderr


def test_run_json_that_is_not_json_is_one_error(tmp_path):
    from deployment_toolkit.results.runinfo import read_run_json

    (tmp_path / "run.json").write_text('{"config": ')
    with pytest.raises(ValueError, match="run.json is not valid JSON"):
        read_run_json(tmp_path)


# ---- ports and shared memory ------------------------------------------------------------------

def test_a_port_in_time_wait_counts_as_free_a_listening_one_does_not():
    """The server closes first, so its side of the connection waits in TIME-WAIT on the server's port:
    tritonserver (SO_REUSEADDR) can bind it again at once, and so must our check say."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as tritonserver's listeners do
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    assert not port_is_free(port)  # listening: in use
    client = socket.create_connection(("127.0.0.1", port))
    conn, _ = listener.accept()
    conn.close()  # server side closes first -> TIME-WAIT on `port`
    client.recv(1)
    client.close()
    listener.close()
    with socket.socket() as plain:  # what the old check did: refused while nothing listens
        with pytest.raises(OSError):
            plain.bind(("127.0.0.1", port))
    assert port_is_free(port)


def test_sweep_removes_only_regions_of_dead_toolkit_runs(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    names = {
        f"dtkpy_{dead_pid}_1_abc": False,  # a killed run's Python-backend region: removed
        f"dtk_{dead_pid}_1_2": False,  # a killed run's client region: removed
        f"dtkpy_{os.getpid()}_1_abc": True,  # ours, alive
        f"dtk_{os.getppid()}_9_9": True,  # a live process's
        "triton_python_backend_shm_region_1234": True,  # another program's: never touched
        "input__0_0_0": True,
    }
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    sweep_dead_runs(tmp_path)
    assert {p.name for p in tmp_path.iterdir()} == {n for n, kept in names.items() if kept}


def test_perf_record_removes_only_new_regions_named_after_the_tensors(tmp_path):
    pattern = perf_region_pattern(["FI_IN"], ["FI_OUT"])
    (tmp_path / "FI_OUT").write_bytes(b"x")  # there before: someone else's, kept
    record = PerfShmRecord(tmp_path / "record.json", shm_dir=tmp_path)
    before = record.begin(pattern)
    for name in ("FI_IN_0_0", "fi_in_1_3", "OTHER_0_0", "FI_IN_x"):
        (tmp_path / name).write_bytes(b"x")
    assert json.loads((tmp_path / "record.json").read_text())["pid"] == os.getpid()
    record.end(pattern, before)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FI_IN_x", "FI_OUT", "OTHER_0_0"]


def test_perf_record_of_a_killed_run_is_cleared_by_the_next(tmp_path):
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    pattern = perf_region_pattern(["X"], ["Y"])
    (tmp_path / "record.json").write_text(json.dumps({"pid": dead, "pattern": pattern.pattern, "before": ["Y"]}))
    for name in ("X_0_0", "Y"):
        (tmp_path / name).write_bytes(b"x")
    PerfShmRecord(tmp_path / "record.json", shm_dir=tmp_path).clear_dead()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Y"]
