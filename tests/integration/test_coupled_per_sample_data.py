"""A batch-coupled model takes per-sample data (issue 46, item 5): CLIP (transformers' CLIPModel from a tiny CLIPConfig,
random weights), whose [B, B] logits couple the batch, is served with max_batch_size 0, each request one whole batch.
The user's data files hold one sample each (token ids of 8 or 12 tokens, their mask, one image): they are stacked
into requests of samples of one shape for the dumps (served and framework, paired by request) and for perf_analyzer,
whose Inferences/second then counts samples: requests/s x samples per request."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from deployment_toolkit.data.samples import DataSpec
from deployment_toolkit.data.user import UserData
from deployment_toolkit.data.whole import samples_per_request
from deployment_toolkit.export import ConvertOptions, convert
from deployment_toolkit.sources import ModelSource, resolve
from conftest import require_triton_tools

pytestmark = [pytest.mark.integration, pytest.mark.long]  # long: collected first (conftest)

MODEL_PY = '''
import transformers as T


def get_model():
    return T.CLIPModel(T.CLIPConfig(
        text_config=dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, max_position_embeddings=32, bos_token_id=1, eos_token_id=2),
        vision_config=dict(image_size=32, patch_size=8, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                           num_attention_heads=2),
        projection_dim=16))
'''
TOKENS = {"shape": [-1], "dtype": "int64", "example_shape": [8], "value_range": [3, 100]}
MASK = {"shape": [-1], "dtype": "int64", "example_shape": [8], "value_range": [1, 2]}
INPUTS = {"input_ids": TOKENS, "pixel_values": [3, 32, 32], "attention_mask": MASK}
LENGTHS = {"s0": 8, "s1": 12, "s2": 8, "s3": 8, "s4": 12, "s5": 8}  # two shapes: four of 8 tokens, two of 12


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> tuple[Path, Path]:
    """The converted CLIP (ONNX, max_batch_size 0) and a folder of per-sample .npz files."""
    base = tmp_path_factory.mktemp("coupled")
    (base / "model.py").write_text(MODEL_PY)
    resolved = resolve(ModelSource(kind="python", ref=str(base / "model.py"), input_shapes=INPUTS))
    manifest = convert(resolved, "onnx", base / "onnx", ConvertOptions())
    assert manifest.max_batch_size == 0 and "logits_per_image" in manifest.batch_coupled
    rng = np.random.default_rng(0)
    (base / "data").mkdir()
    for name, length in LENGTHS.items():
        np.savez(base / "data" / f"{name}.npz", input_ids=rng.integers(3, 100, length).astype(np.int64),
                 attention_mask=np.ones(length, np.int64),
                 pixel_values=rng.standard_normal((3, 32, 32)).astype(np.float32))
    return base / "onnx", base / "data"


def test_per_sample_files_are_stacked_into_whole_requests(clip):
    from deployment_toolkit.spec import Manifest

    signature = Manifest.load(clip[0]).signature
    requests = list(UserData(signature, data_dir=str(clip[1]), batched=False).batches(1))
    assert [r[0].tolist() for r in requests] == [["s0+s2+s3+s5"], ["s1+s4"]]  # one shape per request
    assert [r[1]["input_ids"].shape for r in requests] == [(4, 8), (2, 12)]
    assert requests[0][1]["pixel_values"].shape == (4, 3, 32, 32)
    small = list(UserData(signature, data_dir=str(clip[1]), batched=False, request_samples=3).batches(1))
    assert [r[0].tolist() for r in small] == [["s0+s2+s3"], ["s5"], ["s1+s4"]]


def test_served_dumps_perf_and_capacity_take_the_per_sample_files(clip, tmp_path):
    require_triton_tools()
    import deployment_toolkit as dt
    from deployment_toolkit.data.dump import align, load_dump
    from deployment_toolkit.inference import TritonDumpSettings, framework_dump, triton_dump
    from deployment_toolkit.perf.analyzer import PerfOptions
    from deployment_toolkit.perf.analyzer.flags import sample_input_data
    from deployment_toolkit.perf.analyzer.parse import parse_csv
    from deployment_toolkit.perf.online import run_online
    from deployment_toolkit.results.schema import THROUGHPUT
    from deployment_toolkit.spec import Manifest

    onnx, data_dir = clip
    manifest = Manifest.load(onnx)
    data = DataSpec(data_dir=str(data_dir))
    dt.deploy(onnx, tmp_path / "repository", "clip")
    reference = framework_dump(onnx, tmp_path / "fw", data)
    assert reference.samples == 2  # two requests, one per shape
    perf_json = sample_input_data(data, manifest, tmp_path / "perf_input", 16, batched=False)
    assert samples_per_request(manifest, perf_json) == 3.0  # (4 + 2) / 2
    with dt.serve(tmp_path / "repository") as server:
        served = triton_dump(server.grpc_url, "clip", tmp_path / "triton", data,
                             TritonDumpSettings(manifest=onnx / "manifest.json"))
        # one point whose rows are compared with each other, not judged: short windows, stability not checked (at
        # perf_analyzer's 10 % beside the other test worker, its retries took 40 s)
        options = PerfOptions(input_data=perf_json, measurement_interval_ms=500, stability_percentage=100,
                              max_trials=3, max_attempts=1, shared_memory="none")
        outcome = run_online("clip", server.grpc_url, manifest, [1], options, tmp_path / "online",
                             manifest_path=onnx / "manifest.json")
    aligned = align(load_dump(served.path), load_dump(reference.path))
    assert sorted(aligned.ids.tolist()) == ["s0+s2+s3+s5", "s1+s4"]
    for name in aligned.a:
        for a, b in zip(aligned.a[name], aligned.b[name]):
            assert np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max() < 1e-4, name
    logits = dict(zip(aligned.ids.tolist(), aligned.a["logits_per_image"]))
    assert np.asarray(logits["s0+s2+s3+s5"]).shape[-2:] == (4, 4)  # every image against every text of its request
    [row] = outcome.rows
    [raw] = parse_csv(next((tmp_path / "online" / "raw").glob("online_*.csv")))
    assert row[THROUGHPUT] == pytest.approx(raw[THROUGHPUT] * 3.0)  # requests/s x samples per request
