"""Architectures from transformers, torchvision and torch, named as a user names a model and given their data as
a user's folder, go all the way: inputs read from the data, converted, verified, served on the real
tritonserver, answering as the framework model rebuilt from the manifest, measured by the real perf_analyzer."""
import json

import pytest

from deployment_toolkit_lab.corpus.run import run_corpus

pytestmark = pytest.mark.integration

# a ModelOutput with three int64 inputs (dynamic sequence axis), an OrderedDict from torchvision, fused attention,
# lazy modules, a seq2seq model returning its cache with samples of different lengths, outputs that underflow
# (namedtuples: tests/unit/sources/test_structured_outputs.py; CLIP and an ONNX file ORT refuses:
# test_caches_and_coupled_batches.py, test_export_fixes.py; all of them: bench-corpus)
MODELS = ["hf-bert-qa", "tv-deeplabv3", "torch-set-attention", "torch-lazy-mlp", "hf-t5-seq2seq",
          "torch-underflow-seg"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    work = tmp_path_factory.mktemp("corpus")
    rows = run_corpus(MODELS, work, formats=("onnx",), perf_window_ms=800, say=lambda _: None)
    return {r.model: r for r in rows}, work


@pytest.mark.parametrize("name", MODELS)
def test_each_model_is_served_answers_as_the_framework_and_is_measured(corpus, name):
    rows, _ = corpus
    row = rows[name]
    assert row.reached in ("done", "perf"), f"{name} stopped at {row.reached}: {row.stopped_by}"
    assert row.onnx.startswith("ok"), (row.onnx, row.stopped_by)  # TorchScript: tests/unit/sources/test_models_people_bring.py
    assert float(row.triton_vs_framework) <= 1e-3 and float(row.infer_per_s) > 0
    assert row.accuracy.startswith("8 samples") and "cosine_min 1.0000" in row.accuracy, row.accuracy


def test_the_accuracy_check_covers_the_data_as_it_is(corpus):
    rows, _ = corpus
    assert "padded" in rows["hf-bert-qa"].accuracy  # token ids of 4 lengths share requests, masked
    assert "padded" in rows["hf-t5-seq2seq"].accuracy  # past_key_values left out, the rest served
    assert "8 near-zero sample(s) agreeing by the absolute tolerance" in rows["torch-underflow-seg"].accuracy


def test_the_manifests_say_how_the_structure_maps_to_names(corpus):
    _, work = corpus
    qa = json.loads((work / "hf-bert-qa" / "onnx" / "manifest.json").read_text())
    assert [t["name"] for t in qa["signature"]["inputs"]] == ["input_ids", "attention_mask", "token_type_ids"]
    assert qa["output_paths"] == {"start_logits": ["start_logits"], "end_logits": ["end_logits"]}
    assert all(t["shape"] == [-1] for t in qa["signature"]["outputs"])  # per token: follows the sequence axis
    seg = json.loads((work / "tv-deeplabv3" / "onnx" / "manifest.json").read_text())
    assert seg["output_paths"] == {"out": ["out"]}
