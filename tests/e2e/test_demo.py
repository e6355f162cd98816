"""`make demo` measures where it runs: a new run folder each time, every reported point measured by this run,
and never a write into a folder that already holds a run (such as the committed example)."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deployment_toolkit.results.store import read_store_csv

pytestmark = [pytest.mark.integration, pytest.mark.long]  # long: collected first (conftest)
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "results" / "demo-resnet50-onnx-cpu"


def _digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _demo(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "deployment_toolkit.demo", "--fast", "--workspace", str(tmp_path / "ws"),
           "--model-repository", str(tmp_path / "repo"), "--results", str(tmp_path / "results"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=900)


def test_demo_refuses_a_folder_that_holds_a_run(tmp_path):
    taken = tmp_path / "results" / "demo-resnet50-onnx-cpu"
    shutil.copytree(EXAMPLE, taken)
    before = _digests(taken)
    out = _demo(tmp_path, "--output", str(taken))
    assert out.returncode == 2 and "already holds a run" in out.stderr and "Traceback" not in out.stderr
    assert _digests(taken) == before and not (tmp_path / "ws").exists(), "nothing ran, nothing changed"


def test_demo_on_a_clone_with_committed_results_measures_every_point(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(EXAMPLE, results / EXAMPLE.name)  # the committed example, as a fresh clone holds it
    committed = _digests(results / EXAMPLE.name)
    start = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    out = _demo(tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (run_dir,) = (results / "local").iterdir()
    assert run_dir.name.startswith("demo-resnet18-onnx-")
    meta = json.loads((run_dir / "run.json").read_text())
    for kind, expected in (("offline", 2), ("online", 2)):
        rows = read_store_csv(run_dir / f"{kind}.csv")
        assert len(rows) == expected
        for row in rows:
            assert row["identity"] in meta["identities"]
            assert dt.datetime.fromisoformat(row["measured_at"]) >= start, "every point is measured by this run"
    assert "skipping" not in out.stdout
    for kind in ("offline", "online"):  # the server's own view beside every point (issue 29)
        server_rows = (run_dir / f"{kind}_server.csv").read_text().splitlines()
        assert len(server_rows) == 3 and "server_infer_per_s" in server_rows[0], server_rows
    assert _digests(results / EXAMPLE.name) == committed, "the committed example is never rewritten"
    hardware = (run_dir / "hardware.md").read_text()
    assert f"Measured: {start.date()}" in hardware and "mixes rows" not in hardware
