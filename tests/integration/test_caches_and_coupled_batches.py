"""What users bring from transformers, built from config classes with random weights: a causal LM and seq2seq
models whose output carries a generation cache (converted without listing their tensors: the cache is left out in
one line), Mamba (its sequential scan fixes the traced sequence length: the verification says so, a fixed length
converts), and CLIP, whose [B, B] logits couple the batch (served with max_batch_size 0, each request one whole
batch, answering as the model for any request batch)."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from deployment_toolkit.export import ConvertOptions, VerificationError, convert
from deployment_toolkit.sources import ModelSource, resolve

pytestmark = [pytest.mark.integration, pytest.mark.long]  # long: collected first (conftest)
ROOT = Path(__file__).resolve().parents[2]

MODEL_PY = '''
import transformers as T


def get_model(kind):
    if kind == "gpt2":
        return T.GPT2LMHeadModel(T.GPT2Config(vocab_size=100, n_positions=64, n_embd=32, n_layer=2, n_head=2,
                                              bos_token_id=1, eos_token_id=2))
    if kind == "t5":
        return T.T5ForConditionalGeneration(T.T5Config(vocab_size=100, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                                                       num_heads=2, decoder_start_token_id=0))
    if kind == "bart":
        return T.BartForConditionalGeneration(T.BartConfig(
            vocab_size=100, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
            decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64))
    if kind == "mamba":
        return T.MambaForCausalLM(T.MambaConfig(vocab_size=100, hidden_size=32, state_size=8, num_hidden_layers=2,
                                                expand=2, conv_kernel=4))
    if kind == "clip":
        return T.CLIPModel(T.CLIPConfig(
            text_config=dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                             num_attention_heads=2, max_position_embeddings=32, bos_token_id=1, eos_token_id=2),
            vision_config=dict(image_size=32, patch_size=8, hidden_size=32, intermediate_size=64,
                               num_hidden_layers=1, num_attention_heads=2),
            projection_dim=16))
    raise ValueError(kind)
'''

TOKENS = {"shape": [-1], "dtype": "int64", "example_shape": [8], "value_range": [3, 100]}
MASK = {"shape": [-1], "dtype": "int64", "example_shape": [8], "value_range": [1, 2]}
INPUTS = {
    "gpt2": {"input_ids": TOKENS, "attention_mask": MASK},
    "t5": {"input_ids": TOKENS, "attention_mask": MASK, "decoder_input_ids": TOKENS},
    "bart": {"input_ids": TOKENS, "attention_mask": MASK, "decoder_input_ids": TOKENS},
    "mamba": {"input_ids": TOKENS},
    "clip": {"input_ids": TOKENS, "pixel_values": [3, 32, 32], "attention_mask": MASK},
}


@pytest.fixture(scope="module")
def model_py(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("brought") / "model.py"
    path.write_text(MODEL_PY)
    return path


def _convert(model_py: Path, kind: str, fmt: str, out: Path, inputs=None, notes=None, **options):
    resolved = resolve(ModelSource(kind="python", ref=str(model_py), kwargs={"kind": kind},
                                   input_shapes=inputs or INPUTS[kind]))
    return convert(resolved, fmt, out, ConvertOptions(log=notes.append if notes is not None else None, **options))


@pytest.mark.parametrize("kind, fmt, served, cache", [
    ("gpt2", "onnx", ["logits"], "DynamicCache"),
    ("gpt2", "ts-trace", ["logits"], "DynamicCache"),
    ("t5", "onnx", ["logits", "encoder_last_hidden_state"], "EncoderDecoderCache"),
    ("t5", "ts-trace", ["logits", "encoder_last_hidden_state"], "EncoderDecoderCache"),
    ("bart", "onnx", ["logits", "encoder_last_hidden_state"], "EncoderDecoderCache"),
])
def test_a_decoder_converts_without_listing_its_outputs_and_its_cache_is_left_out(model_py, tmp_path, kind, fmt,
                                                                                  served, cache):
    notes: list[str] = []
    manifest = _convert(model_py, kind, fmt, tmp_path, notes=notes)
    assert [t.name for t in manifest.outputs] == served and manifest.verification["passed"], manifest.verification
    assert manifest.export_options["left_out"] == {"past_key_values": f"transformers.{cache}"}
    assert notes == [f"note: left out past_key_values (a transformers.{cache}): not a tensor (a cache for generation), "
                     f"so not served; serving {', '.join(served)}"]
    assert manifest.verification["input_shapes"][1]["input_ids"] == [16]  # the sequence axis stays dynamic
    assert all(t.dtype == "int64" for t in manifest.inputs) and manifest.max_batch_size == 8


def test_the_command_says_what_it_left_out_in_one_line(model_py, tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "triton" / "convert_model.py"), "--input-path", str(model_py),
                           "--model-arg", "kind='gpt2'", "--input-shape", "input_ids=8:int64", "--dynamic-axis",
                           "input_ids:0", "--output-type", "onnx", "--output-path", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0 and "-> OK" in proc.stdout, proc.stdout + proc.stderr
    assert "note: left out past_key_values (a transformers.DynamicCache)" in proc.stderr
    assert [t["name"] for t in json.loads((tmp_path / "manifest.json").read_text())["signature"]["outputs"]] == ["logits"]


def test_mamba_fixes_the_traced_sequence_length_and_the_verification_says_so(model_py, tmp_path):
    """The slow path's selective scan is a Python loop over the sequence: traced (or exported with torch.export)
    it is unrolled at the example length, so at any other length the graph's shapes no longer meet."""
    with pytest.raises(VerificationError) as err:
        _convert(model_py, "mamba", "onnx", tmp_path / "dynamic", onnx_exporter="torchscript")
    message = str(err.value)
    assert "at batch 1, input shapes {'input_ids': [16]}: the converted model failed" in message
    assert "8 by 16" in message and "it matches at the example shapes {'input_ids': [8]} only" in message
    assert "Mamba's sequential scan" in message and "--input-shape without --dynamic-axis" in message
    with pytest.raises(VerificationError, match=r"the converted model failed: RuntimeError: The size of tensor a \(8\) "
                                                r"must match the size of tensor b \(16\).*example shapes"):
        _convert(model_py, "mamba", "ts-trace", tmp_path / "traced")
    fixed = {"input_ids": {"shape": [8], "dtype": "int64", "value_range": [3, 100]}}
    for fmt in ("onnx", "ts-trace"):
        notes: list[str] = []
        manifest = _convert(model_py, "mamba", fmt, tmp_path / fmt, inputs=fixed, notes=notes)
        assert manifest.verification["passed"] and [t.name for t in manifest.outputs] == ["logits"]
        assert list(manifest.export_options["left_out"]) == ["cache_params"]  # a Cache subclass


def test_clip_is_served_one_whole_batch_per_request_and_answers_as_the_model(model_py, tmp_path):
    import torch

    import deployment_toolkit as dt
    from deployment_toolkit.repository.config import read_config
    from deployment_toolkit.sources import rebuild

    notes: list[str] = []
    manifest = _convert(model_py, "clip", "onnx", tmp_path / "onnx", notes=notes)
    assert manifest.max_batch_size == 0 and manifest.verification["passed"]
    assert list(manifest.batch_coupled) == ["logits_per_image", "logits_per_text"]
    assert manifest.batch_coupled["logits_per_image"] == "[2, 2] for a batch of 2, [1, 1] for one sample"
    assert "served with max_batch_size 0" in notes[0] and "logits_per_image" in notes[0]
    shapes = {t.name: list(t.shape) for t in (*manifest.inputs, *manifest.outputs)}
    assert shapes["pixel_values"] == [-1, 3, 32, 32] and shapes["input_ids"] == [-1, -1]
    assert shapes["logits_per_image"] == [-1, -1] and shapes["image_embeds"] == [-1, 16]
    folder = dt.deploy(tmp_path / "onnx", tmp_path / "repository", "clip")  # the Python runtime: CPU wheel
    config = read_config(folder / "config.pbtxt")
    assert config.max_batch_size == 0 and not config.HasField("dynamic_batching")
    assert [list(t.dims) for t in config.input] == [[-1, -1], [-1, 3, 32, 32], [-1, -1]]

    model = rebuild(manifest).build(0)
    rng = np.random.default_rng(0)
    with dt.serve(tmp_path / "repository") as server, dt.connect(server.grpc_url) as client:
        for batch in (3, 1):
            request = {"input_ids": rng.integers(3, 100, (batch, 8)), "attention_mask": np.ones((batch, 8), np.int64),
                       "pixel_values": rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)}
            served = client.infer("clip", request, ["logits_per_image"])["logits_per_image"]
            with torch.no_grad():
                expected = model(**{k: torch.from_numpy(v) for k, v in request.items()}).logits_per_image.numpy()
            assert served.shape == (batch, batch) and np.abs(served - expected).max() < 1e-4
