"""Both worked pipeline examples served end to end on the real tritonserver (issue 36, item 1): image bytes ->
decode/resize -> resnet18 -> top-5 labels, and UTF-8 text -> a locally trained tokenizer -> BERT -> a label. Each
is converted, checked in-process on its raw samples, written as an ensemble, served, verified sample by sample
against the in-process steps, and measured with one perf_analyzer point whose `--input-data` sends the raw bytes
(TYPE_STRING). A request the preprocess cannot decode gets that request's error and the ensemble keeps serving."""
from __future__ import annotations

import csv
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from deployment_toolkit.__main__ import main
from deployment_toolkit.client import InferenceError, TritonClient
from deployment_toolkit.perf.analyzer import PerfOptions
from deployment_toolkit.pipeline import PipelineLayout, PipelineRequest, deploy_pipeline
from deployment_toolkit.server import LocalTritonServer, ServerConfig
from conftest import require_triton_tools

pytestmark = [pytest.mark.integration, pytest.mark.long]  # long: collected first (conftest)

ROOT = Path(__file__).resolve().parents[2]
IMAGE = ROOT / "examples" / "image_pipeline"
TEXT = ROOT / "examples" / "text_pipeline"


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem + "_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def image_run(tmp_path_factory):
    """The image example through the command, as a user runs it (one perf point, short windows)."""
    require_triton_tools()
    base = tmp_path_factory.mktemp("image_pipeline")
    _module(IMAGE / "make_images.py").write_images(base / "images", 4)
    with pytest.raises(SystemExit) as exc:
        main(["deploy-pipeline", "--model", "timm:resnet18", "--num-classes", "10",
              "--preprocess", str(IMAGE / "preprocess.py"), "--postprocess", str(IMAGE / "postprocess.py"),
              "--raw-data", str(base / "images"), "--name", "classifier", "--workspace", str(base / "ws"),
              "--result-path", str(base / "run"), "--concurrency", "1", "--measurement-interval", "500",
              "--max-attempts", "1"])
    assert exc.value.code == 0
    return base / "run"


def test_the_image_pipeline_is_served_verified_and_measured_with_image_bytes(image_run):
    run = image_run
    verification = _rows(run / "verification.csv")
    assert {(r["output"], r["passed"]) for r in verification} == {("labels", "True"), ("scores", "True")}
    assert len({r["sample"] for r in verification}) == 4
    points = _rows(run / "points.csv")
    assert len(points) == 1 and float(points[0]["Inferences/second"]) > 0
    steps = _rows(run / "steps.csv")
    assert [r["model"] for r in steps] == ["classifier_preprocess", "classifier", "classifier_postprocess"]
    assert all(int(r["requests"]) > 0 for r in steps)
    assert sum(float(r["share"]) for r in steps) == pytest.approx(1.0, abs=1e-3)
    data = json.loads((run / "input_data.json").read_text())["data"]
    assert set(data[0]) == {"image"} and "b64" in data[0]["image"]["content"]  # the raw bytes, not tensors
    report = (run / "report.md").read_text()
    assert "served pipeline matches the in-process steps" in report and "classifier_postprocess" in report
    assert json.loads((run / "run.json").read_text())["config"]["verified"] is True
    ensemble = (run / "model_repository" / "classifier_pipeline" / "config.pbtxt").read_text()
    assert 'platform: "ensemble"' in ensemble and "TYPE_STRING" in ensemble


def test_a_request_the_preprocess_cannot_decode_fails_alone(image_run):
    repo = image_run / "model_repository"
    images = sorted((image_run.parent / "images").iterdir())
    good = _a_bad_request_fails_alone(repo, images[0], image_run.parent / "logs2")
    assert good["labels"].shape == (1, 5) and good["labels"][0, 0].decode() in _module(
        IMAGE / "postprocess.py").LABELS


def _a_bad_request_fails_alone(repo: Path, image: Path, logs: Path) -> dict:
    """Serve `repo`: bytes the preprocess cannot decode get that request's error; then a good image is answered."""
    with LocalTritonServer(ServerConfig(repo, log_dir=logs)) as server, TritonClient(server.grpc_url) as client:
        server.require_models(["classifier_pipeline"])
        with pytest.raises(InferenceError, match="UnidentifiedImageError"):
            client.infer("classifier_pipeline", {"image": np.array([[b"not an image"]], dtype=object)}, ["labels"])
        return client.infer("classifier_pipeline", {"image": np.array([[image.read_bytes()]], dtype=object)},
                            ["labels", "scores"])


@pytest.fixture(scope="module")
def text_inputs(tmp_path_factory):
    """The text example's tokenizer (trained locally), raw texts and a workspace the two layouts share."""
    require_triton_tools()
    base = tmp_path_factory.mktemp("text_pipeline")
    subprocess.run([sys.executable, str(TEXT / "make_tokenizer.py"), "--output", str(TEXT / "tokenizer.json")],
                   check=True, capture_output=True)
    return base, _module(TEXT / "make_texts.py").write_texts(base / "texts")


def _text_request(base: Path, out: Path, **fields) -> PipelineRequest:
    return PipelineRequest(
        model=str(TEXT / "model.py"), raw_data=base / "texts", result_path=out,
        preprocess=TEXT / "preprocess.py", postprocess=TEXT / "postprocess.py", name="sentiment",
        workspace=base / "ws", concurrencies=(1,), perf=PerfOptions(measurement_interval_ms=500, max_attempts=1),
        speed_rounds=1, **fields)


def test_the_text_pipeline_is_served_verified_measured_and_timed(text_inputs, tmp_path):
    base, texts = text_inputs
    run = deploy_pipeline(_text_request(base, tmp_path / "run"))
    assert run.passed, run.verification.summary()
    assert [p.name for p in run.plan.wiring.inputs] == ["text"] and run.plan.wiring.inputs[0].dtype == "text"
    assert {p.name: p.dtype for p in run.plan.wiring.outputs} == {"label": "bytes", "probability": "float32"}
    assert len({c.sample for c in run.verification.checks}) == len(texts)
    labels = {bytes(r.final["label"][0]).decode() for r in run.plan.runs}
    assert labels <= {"negative", "neutral", "positive"}
    [point] = run.points
    assert point.throughput > 0 and {s.model for s in point.steps} == {
        "sentiment_preprocess", "sentiment", "sentiment_postprocess"}
    assert run.speed is not None and run.speed.requests == len(texts) and run.speed.served_ms > 0
    tokenizer_copy = tmp_path / "run" / "model_repository" / "sentiment_preprocess" / "1" / "tokenizer.json"
    assert tokenizer_copy.read_bytes() == (TEXT / "tokenizer.json").read_bytes()  # FILES travel with the step


def test_the_text_pipeline_fused_into_one_model_answers_as_the_ensemble_does(text_inputs, tmp_path):
    """--layout fused: the tokenizer, BERT (int64 token ids of the texts' lengths) and the label step in one
    Python-backend model named as the ensemble: verified sample by sample, measured, timed, one model loaded."""
    base, texts = text_inputs
    run = deploy_pipeline(_text_request(base, tmp_path / "run", layout=PipelineLayout.FUSED))
    assert run.passed, run.verification.summary()
    assert run.written.models == ["sentiment_pipeline"] and run.written.composing == []
    assert len({c.sample for c in run.verification.checks}) == len(texts)
    [point] = run.points
    assert point.throughput > 0 and point.steps == []  # one model: no per-step statistics
    assert run.speed is not None and run.speed.steps == 1 and run.speed.served_steps == {}
    version = tmp_path / "run" / "model_repository" / "sentiment_pipeline" / "1"
    assert (version / "tokenizer.json").read_bytes() == (TEXT / "tokenizer.json").read_bytes()
    assert {"model.py", "step_runtime.py", "runtimes.py", "user_preprocess.py", "user_postprocess.py",
            "manifest.json"} <= {p.name for p in version.iterdir()}
    config = (version.parent / "config.pbtxt").read_text()
    assert 'backend: "python"' in config and "ensemble_scheduling" not in config
    assert "fused into one model" in run.report.read_text()
    assert json.loads((tmp_path / "run" / "run.json").read_text())["config"]["layout"] == "fused"


def test_a_fused_image_pipeline_answers_a_bad_request_alone_and_native_is_refused(image_run, tmp_path, capsys):
    base = image_run.parent
    common = ["deploy-pipeline", "--model", "timm:resnet18", "--num-classes", "10",
              "--preprocess", str(IMAGE / "preprocess.py"), "--postprocess", str(IMAGE / "postprocess.py"),
              "--raw-data", str(base / "images"), "--name", "classifier", "--workspace", str(base / "ws"),
              "--layout", "fused"]
    with pytest.raises(SystemExit) as exc:
        main([*common, "--result-path", str(tmp_path / "native"), "--runtime", "native", "--write-only"])
    assert exc.value.code == 2
    assert "--layout fused runs the network in the Python runtime" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main([*common, "--result-path", str(tmp_path / "run"), "--no-perf"])
    assert exc.value.code == 0
    repo = tmp_path / "run" / "model_repository"
    assert [p.name for p in repo.iterdir()] == ["classifier_pipeline"]
    images = sorted((base / "images").iterdir())
    good = _a_bad_request_fails_alone(repo, images[0], tmp_path / "logs")
    assert good["labels"].shape == (1, 5) and good["scores"].dtype == np.float32


def test_write_only_writes_the_ensemble_for_a_server_elsewhere(image_run, tmp_path):
    """--write-only with --runtime native: the repository for the NGC container (the network on Triton's ONNX
    Runtime backend), checked in-process, nothing served; the converted artifact is reused."""
    base = image_run.parent
    with pytest.raises(SystemExit) as exc:
        main(["deploy-pipeline", "--model", "timm:resnet18", "--num-classes", "10",
              "--preprocess", str(IMAGE / "preprocess.py"), "--postprocess", str(IMAGE / "postprocess.py"),
              "--raw-data", str(base / "images"), "--name", "classifier", "--workspace", str(base / "ws"),
              "--result-path", str(tmp_path / "run"), "--runtime", "native", "--write-only"])
    assert exc.value.code == 0
    repo = tmp_path / "run" / "model_repository"
    assert 'platform: "onnxruntime_onnx"' in (repo / "classifier" / "config.pbtxt").read_text()
    assert sorted(p.name for p in repo.iterdir()) == [
        "classifier", "classifier_pipeline", "classifier_postprocess", "classifier_preprocess"]
    assert not (tmp_path / "run" / "points.csv").exists()


def test_a_served_pipeline_that_differs_from_in_process_exits_1(image_run, tmp_path, capsys):
    """A postprocess that answers differently in the server (here: its process id) fails the verification: exit 1,
    and the report and verification.csv name the sample and the output."""
    post = tmp_path / "post.py"
    post.write_text("import os\nimport numpy as np\n\ndef postprocess(output__0):\n"
                    "    return {'pid': np.full(len(output__0), os.getpid(), dtype=np.int64)}\n")
    base = image_run.parent
    with pytest.raises(SystemExit) as exc:
        main(["deploy-pipeline", "--model", "timm:resnet18", "--num-classes", "10",
              "--preprocess", str(IMAGE / "preprocess.py"), "--postprocess", str(post),
              "--raw-data", str(base / "images"), "--name", "odd", "--workspace", str(base / "ws"),
              "--result-path", str(tmp_path / "run"), "--no-perf"])
    assert exc.value.code == 1
    out = capsys.readouterr().out
    assert "served pipeline differs from the in-process steps (framework) on 4 of 4 sample(s)" in out
    rows = _rows(tmp_path / "run" / "verification.csv")
    assert {(r["output"], r["passed"]) for r in rows} == {("pid", "False")}
