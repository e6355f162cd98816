"""A diffusers UNet2DConditionModel (tiny, random weights) whose data folder holds per-sample `sample`, a scalar
`timestep` and `encoder_hidden_states`: converted to ONNX and verified on those samples, configured with
`dims: [ 1 ]` + `reshape: { shape: [ ] }` for the timestep, served by the real tritonserver (Python backend),
run through Triton on the user's data (with and without the manifest) and compared with the framework model,
and measured by perf_analyzer on those samples (timestep shape [1] in its JSON)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_script as script

from deployment_toolkit.server import LocalTritonServer, ServerConfig

pytestmark = [pytest.mark.integration, pytest.mark.long]  # long: collected first (conftest)
UNET = '''from diffusers import UNet2DConditionModel


def get_model():
    return UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, block_out_channels=(32, 64), layers_per_block=1,
        cross_attention_dim=32, attention_head_dim=8, norm_num_groups=32,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"))
'''


def _data(folder: Path) -> None:
    """Five one-sample files (a 0-d timestep each) and a batch file of two (timestep [2], with ids)."""
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(5):
        np.savez(folder / f"s{i}.npz", sample=rng.standard_normal((4, 8, 8)).astype(np.float32),
                 timestep=np.array(37 * i + 1, np.int64),
                 encoder_hidden_states=rng.standard_normal((7, 32)).astype(np.float32))
    np.savez(folder / "t_batch.npz", sample=rng.standard_normal((2, 4, 8, 8)).astype(np.float32),
             timestep=np.array([500, 999], np.int64), ids=np.array(["b0", "b1"]),
             encoder_hidden_states=rng.standard_normal((2, 7, 32)).astype(np.float32))


def _without_reshape(repo: Path, model: str, copy: str) -> None:
    """The model again under `copy`, its config written by hand without the reshape: the Python runtime then
    gets the timestep as [batch, 1] and drops the axis itself."""
    import shutil

    shutil.copytree(repo / model, repo / copy)
    text = (repo / copy / "config.pbtxt").read_text().replace(f'name: "{model}"', f'name: "{copy}"', 1)
    (repo / copy / "config.pbtxt").write_text(text.replace("  reshape {\n  }\n", ""))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("scalar")
    (base / "model.py").write_text(UNET)
    _data(base / "data")
    out = script("convert_model.py", "--input-path", base / "model.py", "--input-type", "pyt",  # inputs from the data
                 "--data-dir", base / "data", "--output-type", "onnx", "--output-path", base / "onnx")
    assert "-> OK" in out.stdout and "also compared on 7 real sample(s)" in out.stdout, out.stdout
    script("config_model_on_triton.py", "--model-repository", base / "repo", "--model-path", base / "onnx",
           "--model-name", "unet", "--max-queue-delay-us", "100")
    _without_reshape(base / "repo", "unet", "unet_by_hand")
    with LocalTritonServer(ServerConfig(base / "repo")) as server:
        yield {"server": server, "base": base}


def test_the_manifest_and_config_carry_the_scalar(served):
    base = served["base"]
    inputs = {t["name"]: t for t in json.loads((base / "onnx" / "manifest.json").read_text())["signature"]["inputs"]}
    assert inputs["timestep"]["shape"] == [] and inputs["timestep"]["dtype"] == "int64"
    text = (base / "repo" / "unet" / "config.pbtxt").read_text()
    assert 'name: "timestep"\n  data_type: TYPE_INT64\n  dims: 1\n  reshape {\n  }\n' in text


def test_served_answers_as_the_framework_on_the_users_data(served):
    base, server = served["base"], served["server"]
    script("run_inference_on_triton.py", "--server-url", server.grpc_url, "--model-name", "unet", "--manifest",
           base / "onnx" / "manifest.json", "--data-dir", base / "data", "--batch-size", 2, "--output-dir",
           base / "dump_triton")
    # without the manifest the signature comes from the server: the config's reshape says the timestep is scalar
    script("run_inference_on_triton.py", "--server-url", server.grpc_url, "--model-name", "unet", "--data-dir",
           base / "data", "--batch-size", 3, "--output-dir", base / "dump_triton_nomanifest")
    script("run_inference_on_fw.py", "--model-path", base / "onnx", "--runtime", "framework", "--data-dir",
           base / "data", "--batch-size", 2, "--output-dir", base / "dump_fw")
    for dump in ("dump_triton", "dump_triton_nomanifest"):
        both = script("calculate_metrics.py", "--dump-dir", base / dump, "--reference-dir", base / "dump_fw",
                      "--csv", base / f"{dump}.csv", "--threshold", "max_abs_err<=1e-4")
        assert "all 1 threshold(s) met" in both.stdout, both.stdout
        header, row = (base / f"{dump}.csv").read_text().splitlines()
        assert dict(zip(header.split(","), row.split(",")))["num_samples"] in ("7", "7.0")

    from deployment_toolkit.client import TritonClient
    from deployment_toolkit.framework import framework_predictor

    predict, manifest, _ = framework_predictor(base / "onnx", "framework")
    x = manifest.signature.examples(3, seed=4)
    assert x["timestep"].shape == (3,)
    with TritonClient(server.grpc_url) as client:
        got = client.infer("unet", x, ["sample__out"])["sample__out"]
        np.testing.assert_allclose(got, predict(x)["sample__out"], rtol=1e-4, atol=1e-4)
        wired = client.infer("unet", {**x, "timestep": x["timestep"][:, None]}, ["sample__out"])["sample__out"]
        np.testing.assert_array_equal(wired, got)  # [batch, 1] as sent by perf_analyzer: the same answer
        assert not client.scalar_inputs("unet_by_hand")[1] and client.scalar_inputs("unet") == (True, {"timestep"})
        by_hand = client.infer("unet_by_hand", {**x, "timestep": x["timestep"][:, None]}, ["sample__out"])
        np.testing.assert_array_equal(by_hand["sample__out"], got)


def test_perf_analyzer_measures_on_the_users_samples(served):
    base, server = served["base"], served["server"]
    run = base / "perf_run"
    out = script("run_offline_performance_test_on_triton.py", "--server-url", server.grpc_url, "--model-name", "unet",
                 "--manifest", base / "onnx" / "manifest.json", "--data-dir", base / "data", "--perf-samples", 4,
                 "--batch-sizes", "2", "--measurement-interval", "500", "--stability-percentage", "100",
                 "--max-trials", "4", "--max-attempts", "1", "--result-path", run, "--no-progress", "--no-report",
                 timeout=240)
    (json_path,) = (run / "raw").glob("input_data_*.json")
    entries = json.loads(json_path.read_text())["data"]
    assert [e["timestep"]["shape"] for e in entries] == [[1]] * 4 and entries[0]["sample"]["shape"] == [4, 8, 8]
    lines = (run / "offline.csv").read_text().splitlines()
    assert len(lines) == 2, out.stdout  # perf_analyzer accepted the JSON: one measured row
