"""A scalar per sample (a diffusion UNet's `timestep`: signature shape [], the model takes [batch]): read from the
user's files and dataloader as one number per sample, written in config.pbtxt as `dims: [ 1 ]` with
`reshape: { shape: [ ] }` (Triton needs a dim; the reshape hands the model [batch]), and given to perf_analyzer
with shape [1]. Served end to end: tests/integration/test_scalar_inputs_served.py."""
import base64
import json

import numpy as np
import pytest

from deployment_toolkit.data.perf_input import write_perf_input_data
from deployment_toolkit.data.user import DataError, UserData, read_folder
from deployment_toolkit.perf.analyzer.command import write_input_data_json
from deployment_toolkit.repository.config import ConfigOptions, build_config, parse_text, to_text
from deployment_toolkit.spec import Manifest, ModelSignature, TensorSpec

# the scalar first: a folder's file is told a sample from a batch by the first input's rank
SIG = ModelSignature(inputs=(TensorSpec("timestep", (), "int64"), TensorSpec("sample", (4, 8, 8)),
                             TensorSpec("encoder_hidden_states", (7, 32))),
                     outputs=(TensorSpec("out", (4, 8, 8)),))


def manifest(max_batch=8):
    return Manifest(model="unet", preset="small", family="user", task="embedding", metric="cosine", format="onnx",
                    artifact="model.onnx", signature=SIG, max_batch_size=max_batch)


def sample(rng, t):
    return {"timestep": np.array(t, np.int64), "sample": rng.standard_normal((4, 8, 8)).astype(np.float32),
            "encoder_hidden_states": rng.standard_normal((7, 32)).astype(np.float32)}


def test_the_wire_shape_of_a_scalar_is_one():
    assert SIG.inputs[0].wire_shape == (1,) and SIG.inputs[1].wire_shape == (4, 8, 8)
    assert SIG.examples(3)["timestep"].shape == (3,)


@pytest.mark.parametrize("runtime", ["python", "native"])
@pytest.mark.parametrize("max_batch", [8, 0])
def test_the_config_declares_one_dim_and_reshapes_it_away(runtime, max_batch):
    cfg = build_config(manifest(max_batch), ConfigOptions("unet", runtime=runtime, host_has_gpu=False,
                                                          warmup_batch_sizes=(2,)))
    parsed = parse_text(to_text(cfg))  # through Triton's own schema, as the server reads it
    assert parsed == cfg
    timestep, latents = parsed.input[0], parsed.input[1]
    assert list(timestep.dims) == [1] and timestep.HasField("reshape") and list(timestep.reshape.shape) == []
    assert list(latents.dims) == [4, 8, 8] and not latents.HasField("reshape")
    assert 'name: "timestep"\n  data_type: TYPE_INT64\n  dims: 1\n  reshape {\n  }\n' in to_text(cfg)
    assert list(parsed.model_warmup[0].inputs["timestep"].dims) == [1]


def test_a_folder_of_samples_and_batches_gives_one_number_per_sample(tmp_path):
    rng = np.random.default_rng(0)
    for i in range(3):
        np.savez(tmp_path / f"s{i}.npz", **sample(rng, 10 * i))
    batch = {k: np.stack([sample(rng, 0)[k] for _ in range(2)]) for k in ("sample", "encoder_hidden_states")}
    np.savez(tmp_path / "t_batch.npz", timestep=np.array([500, 600]), ids=np.array(["b0", "b1"]), **batch)
    ids, x, _ = next(UserData(SIG, data_dir=str(tmp_path)).batches(5))
    assert x["timestep"].shape == (5,) and x["timestep"].tolist() == [0, 10, 20, 500, 600]
    assert x["sample"].shape == (5, 4, 8, 8) and ids.tolist() == ["s0", "s1", "s2", "b0", "b1"]


def test_a_dataloader_yields_a_scalar_per_sample_as_one_axis(tmp_path):
    loader = tmp_path / "dataloader.py"
    loader.write_text(
        "import numpy as np\n\n"
        "def get_dataloader_fn(batch_size=2):\n"
        "    def gen():\n"
        "        rng = np.random.default_rng(0)\n"
        "        for b in range(2):\n"
        "            x = {'timestep': np.arange(batch_size) + 100 * b,\n"
        "                 'sample': rng.standard_normal((batch_size, 4, 8, 8)).astype(np.float32),\n"
        "                 'encoder_hidden_states': rng.standard_normal((batch_size, 7, 32)).astype(np.float32)}\n"
        "            yield [f'{b}-{i}' for i in range(batch_size)], x, None\n"
        "    return gen\n")
    batches = list(UserData(SIG, dataloader=str(loader)).batches(2))
    assert [b[1]["timestep"].tolist() for b in batches] == [[0, 1], [100, 101]]


def test_a_scalar_given_with_an_extra_axis_is_refused_in_one_line(tmp_path):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "s0.npz", **{**sample(rng, 3), "timestep": np.array([3])})
    with pytest.raises(DataError, match=r"input 'timestep' has per-sample shape \(1,\) int64, the model expects "
                                        r"shape \(scalar\) int64"):
        list(read_folder(tmp_path, SIG))


def test_perf_analyzer_data_gives_a_scalar_the_shape_of_its_config_dims(tmp_path):
    rng = np.random.default_rng(0)
    for i in range(2):
        np.savez(tmp_path / f"s{i}.npz", **sample(rng, 7 + i))
    entries = json.loads(write_perf_input_data(UserData(SIG, data_dir=str(tmp_path)), tmp_path / "in.json")
                         .read_text())["data"]
    assert [e["timestep"]["shape"] for e in entries] == [[1], [1]]
    assert [np.frombuffer(base64.b64decode(e["timestep"]["content"]["b64"]), "<i8").tolist() for e in entries] == \
        [[7], [8]]
    assert entries[0]["sample"]["shape"] == [4, 8, 8]
    generated = json.loads(write_input_data_json(SIG, tmp_path / "gen.json").read_text())["data"][0]
    assert generated["timestep"]["shape"] == [1] and len(base64.b64decode(generated["timestep"]["b64"])) == 8


def test_inputs_read_from_the_data_record_a_scalar_as_shape_empty(tmp_path):
    from deployment_toolkit.data.infer import inputs_from_data

    rng = np.random.default_rng(0)
    for i in range(2):
        np.savez(tmp_path / f"s{i}.npz", **sample(rng, i))
    assert inputs_from_data(str(tmp_path))["timestep"]["shape"] == []
