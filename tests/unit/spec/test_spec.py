import json

import numpy as np
import pytest

from deployment_toolkit.spec import Manifest, ModelSignature, SpecError, TensorSpec, numpy_dtype, triton_dtype


def sig():
    return ModelSignature(
        inputs=(TensorSpec("x", (3, -1), example_shape=(3, 5)), TensorSpec("w", (2,), value=[0.5, 1.5])),
        outputs=(TensorSpec("y", (10,)),),
    )


def test_dtype_mapping_round_trip():
    for np_name in ("float32", "float16", "int64", "uint8", "bool"):
        assert numpy_dtype(triton_dtype(np_name)) == np_name
    assert numpy_dtype("TYPE_FP32") == "float32"
    with pytest.raises(SpecError, match="no Triton equivalent"):
        triton_dtype("complex64")


def test_dynamic_dims_need_example_shape():
    with pytest.raises(SpecError, match="example_shape"):
        TensorSpec("x", (3, -1))
    with pytest.raises(SpecError, match="does not fit"):
        TensorSpec("x", (3, -1), example_shape=(4, 5))
    with pytest.raises(SpecError, match="positive or -1"):
        TensorSpec("x", (0, 3))


def test_examples_use_fixed_values_and_concrete_shapes():
    ex = sig().examples(4, seed=1)
    assert ex["x"].shape == (4, 3, 5) and ex["x"].dtype == np.float32
    np.testing.assert_array_equal(ex["w"], np.tile([0.5, 1.5], (4, 1)).astype(np.float32))
    again = sig().examples(4, seed=1)
    np.testing.assert_array_equal(ex["x"], again["x"])
    assert not np.array_equal(ex["x"], sig().examples(4, seed=2)["x"])


def test_nbytes_uses_example_shape():
    assert sig().inputs[0].nbytes(batch=2) == 2 * 3 * 5 * 4


def test_duplicate_names_rejected():
    with pytest.raises(SpecError, match="unique"):
        ModelSignature(inputs=(TensorSpec("a", (1,)),), outputs=(TensorSpec("a", (1,)),))


def test_manifest_json_round_trip(tmp_path):
    m = Manifest(model="m", preset="small", family="f", task="embedding", metric="cosine", format="onnx",
                 artifact="model.onnx", signature=sig(), max_batch_size=8, verification={"passed": True})
    path = m.save(tmp_path)
    assert json.loads(path.read_text())["signature"]["inputs"][0]["shape"] == [3, -1]
    back = Manifest.load(tmp_path)
    assert back == m
    with pytest.raises(SpecError, match="unknown format"):
        Manifest(**{**m.__dict__, "format": "tflite"})
    with pytest.raises(FileNotFoundError, match="convert_model"):
        Manifest.load(tmp_path / "nope")
