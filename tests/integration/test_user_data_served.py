"""The user's data and metric on the real server: a zoo model (small resnet18) verified on the user's samples,
served, run with the user's dataloader (labels dumped), scored by the user's metrics file against those labels,
and measured offline by perf_analyzer on the user's samples (JSON --input-data written from them)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_script as script

from deployment_toolkit.server import LocalTritonServer, ServerConfig

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "user_data"
N = 12


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """resnet18 (small) converted with verification on the fixture data, configured and served; the labels are
    the served artifact's own top-1 for the first half of the samples and a wrong class for the second half,
    so a correct chain scores exactly 0.5."""
    base = tmp_path_factory.mktemp("user_data")
    data, art, repo = base / "data", base / "art", base / "repo"
    data.mkdir()
    images = np.random.default_rng(7).standard_normal((N, 3, 64, 64)).astype(np.float32)
    np.save(data / "images.npy", images)
    np.save(data / "labels.npy", np.zeros(N, np.int64))
    out = script("convert_model.py", "--model", "resnet18", "--output-type", "onnx", "--output-path", art,
                 "--dataloader", FIXTURES / "dataloader.py", "--data-dir", data, "--verify-samples", 6)
    assert "also compared on 6 real sample(s)" in out.stdout, out.stdout
    assert json.loads((art / "manifest.json").read_text())["verification"]["samples_checked"] == 6

    import onnxruntime as ort

    session = ort.InferenceSession(str(art / "model.onnx"), providers=["CPUExecutionProvider"])
    top1 = np.argmax(session.run(None, {"input__0": images})[0], axis=1)
    labels = np.where(np.arange(N) < N // 2, top1, (top1 + 1) % 1000).astype(np.int64)
    np.save(data / "labels.npy", labels)

    script("config_model_on_triton.py", "--model-repository", repo, "--model-path", art, "--model-name", "r18",
           "--preferred-batch-sizes", "4", "--max-queue-delay-us", "100")
    with LocalTritonServer(ServerConfig(repo)) as server:
        yield {"server": server, "data": data, "art": art, "labels": labels, "base": base}


def test_accuracy_dump_with_the_users_dataloader_and_metrics(deployed):
    base, server, data = deployed["base"], deployed["server"], deployed["data"]
    dump = base / "dump_triton"
    script("run_inference_on_triton.py", "--server-url", server.grpc_url, "--model-name", "r18",
           "--manifest", deployed["art"] / "manifest.json", "--dataloader", FIXTURES / "dataloader.py",
           "--data-dir", data, "--batch-size", 4, "--output-dir", dump, "--dump-labels")
    meta = json.loads((dump / "dump.json").read_text())
    assert meta["num_samples"] == N and meta["extra"]["data"]["dataloader"].endswith("dataloader.py")
    csv = base / "metrics.csv"
    out = script("calculate_metrics.py", "--dump-dir", dump, "--metrics", FIXTURES / "metrics.py", "--csv", csv,
                 "--threshold", "fixture_top1>=0.5")
    header, row = csv.read_text().splitlines()
    values = dict(zip(header.split(","), map(float, row.split(","))))
    assert values["fixture_top1"] == 0.5 and values["top1_accuracy"] == 0.5, out.stdout
    assert values["fixture_ids"] == N and values["fixture_label_sum"] == float(deployed["labels"].sum())
    missed = script("calculate_metrics.py", "--dump-dir", dump, "--metrics", FIXTURES / "metrics.py", "--csv", csv,
                    "--threshold", "fixture_top1>=0.6", check=False)
    assert missed.returncode == 1

    fw = base / "dump_fw"
    script("run_inference_on_fw.py", "--model-path", deployed["art"], "--runtime", "artifact",
           "--dataloader", FIXTURES / "dataloader.py", "--data-dir", data, "--batch-size", 4, "--output-dir", fw,
           "--dump-labels")
    both = script("calculate_metrics.py", "--dump-dir", dump, "--reference-dir", fw, "--csv", base / "vs_fw.csv",
                  "--threshold", "top1_agreement>=1.0", "--threshold", "max_abs_err<=1e-4")
    assert "all 2 threshold(s) met" in both.stdout


def test_offline_perf_on_real_samples(deployed):
    base, server = deployed["base"], deployed["server"]
    folder = base / "perf_samples"
    folder.mkdir()
    images = np.load(deployed["data"] / "images.npy")
    for i in range(5):
        np.save(folder / f"s{i}.npy", images[i])
    run = base / "perf_run"
    out = script("run_offline_performance_test_on_triton.py", "--server-url", server.grpc_url, "--model-name", "r18",
                 "--manifest", deployed["art"] / "manifest.json", "--data-dir", folder, "--perf-samples", 4,
                 "--batch-sizes", "2", "--measurement-interval", "500", "--stability-percentage", "100",
                 "--max-trials", "4", "--max-attempts", "1", "--result-path", run, "--no-progress", "--no-report",
                 timeout=240)
    (json_path,) = (run / "raw").glob("input_data_*.json")
    entries = json.loads(json_path.read_text())["data"]
    assert len(entries) == 4 and entries[0]["input__0"]["shape"] == [3, 64, 64]
    lines = (run / "offline.csv").read_text().splitlines()
    assert len(lines) == 2, out.stdout  # perf_analyzer accepted the JSON: one measured row
    meta = json.loads((run / "run.json").read_text())
    assert meta["config"]["sweeps"]["offline"]["perf_options"]["input_data"] == str(json_path)
    (identity,) = [v["identity"] for v in meta["identities"].values()]
    assert identity["input_data"] == "sha256:" + hashlib.sha256(json_path.read_bytes()).hexdigest()
    log = next((run / "raw").glob("offline_*.log")).read_text()
    assert f"--input-data {json_path}" in log

    bad = base / "bad_samples"
    bad.mkdir()
    np.save(bad / "s0.npy", images[0][:, :32])
    refused = script("run_offline_performance_test_on_triton.py", "--server-url", server.grpc_url, "--model-name",
                     "r18", "--manifest", deployed["art"] / "manifest.json", "--data-dir", bad, "--batch-sizes", "1",
                     "--result-path", base / "bad_run", "--no-progress", check=False)
    assert refused.returncode == 2 and "input 'input__0' has per-sample shape (3, 32, 64)" in refused.stderr
    assert not (base / "bad_run").exists()
