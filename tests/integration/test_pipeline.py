"""The spine end to end through the user-facing scripts: convert -> config -> serve -> infer -> metrics,
on the real embedded server (small resnet18 so it runs in seconds)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from deployment_toolkit.server import LocalTritonServer, ServerConfig

pytestmark = [pytest.mark.integration, pytest.mark.long]  # long: collected first (conftest)
ROOT = Path(__file__).resolve().parents[2]


def script(name, *args, check=True):
    proc = subprocess.run([sys.executable, str(ROOT / "triton" / name), *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT)
    if check and proc.returncode != 0:
        raise AssertionError(f"{name} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.mark.parametrize("fmt", ["onnx", "ts-trace"])
def test_convert_config_serve_infer_matches_framework(tmp_path, fmt):
    art, repo = tmp_path / "art", tmp_path / "repo"
    out = script("convert_model.py", "--model", "resnet18", "--output-type", fmt, "--output-path", art)
    assert "-> OK" in out.stdout
    manifest = json.loads((art / "manifest.json").read_text())
    assert manifest["verification"]["passed"] and manifest["verification"]["max_abs_err"] < 1e-4
    script("config_model_on_triton.py", "--model-repository", repo, "--model-path", art, "--model-name", "r18",
           "--preferred-batch-sizes", "4", "--max-queue-delay-us", "100")
    assert (repo / "r18" / "1" / "model.py").exists() and (repo / "r18" / "config.pbtxt").exists()
    with LocalTritonServer(ServerConfig(repo)) as server:
        for protocol, url, shm in (("grpc", server.grpc_url, "system"), ("http", server.http_url, "none")):
            dump = tmp_path / f"dump_{protocol}"
            script("run_inference_on_triton.py", "--server-url", url, "--protocol", protocol, "--model-name", "r18",
                   "--manifest", art / "manifest.json", "--num-samples", 10, "--batch-size", 4, "--in-flight", 3,
                   "--shared-memory", shm, "--output-dir", dump)
    script("run_inference_on_fw.py", "--model-path", art, "--num-samples", 10, "--batch-size", 4,
           "--output-dir", tmp_path / "dump_fw")
    for protocol in ("grpc", "http"):
        csv = tmp_path / f"metrics_{protocol}.csv"
        script("calculate_metrics.py", "--dump-dir", tmp_path / f"dump_{protocol}", "--reference-dir",
               tmp_path / "dump_fw", "--csv", csv, "--threshold", "max_abs_err<=1e-4",
               "--threshold", "top1_agreement>=1.0")
        header, row = csv.read_text().splitlines()[:2]
        values = dict(zip(header.split(","), row.split(",")))
        assert float(values["num_samples"]) == 10


def test_unknown_model_and_bad_config_are_clear(tmp_path, converted):
    proc = script("convert_model.py", "--model", "resnet5O", "--output-type", "onnx", "--output-path", tmp_path,
                  check=False)
    assert proc.returncode == 2 and "unknown model 'resnet5O'" in proc.stderr and "resnet50" in proc.stderr
    artifact = converted["onnx"][0]  # the session's resnet18 ONNX (the test above converts through the script)
    proc = script("config_model_on_triton.py", "--model-repository", tmp_path / "repo", "--model-path", artifact,
                  "--model-name", "r", "--preferred-batch-sizes", "64", check=False)
    assert proc.returncode == 2 and "outside 1..max_batch_size" in proc.stderr
    assert not (tmp_path / "repo" / "r" / "config.pbtxt").exists()
    proc = script("config_model_on_triton.py", "--model-repository", tmp_path / "repo", "--model-path", artifact,
                  "--model-name", "r", "--model-format", "ts-trace", check=False)
    assert proc.returncode == 2 and "contradicts the artifact" in proc.stderr


@pytest.mark.parametrize("name,sub", [("convert_model.py", "convert"), ("config_model_on_triton.py", "config"),
                                      ("run_inference_on_triton.py", "infer"), ("run_inference_on_fw.py", "infer-fw"),
                                      ("calculate_metrics.py", "metrics")])
def test_help_has_an_example(name, sub):
    proc = script(name, "--help")
    assert "example" in proc.stdout.lower() and f"deployment-toolkit {sub}" in proc.stdout  # the script's subcommand
