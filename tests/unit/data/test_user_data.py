"""The user's data: dataloader.py (the DLE form) and .npy/.npz folders, their validation against the
signature, the perf_analyzer JSON built from them, and real samples in the export verification."""
from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from deployment_toolkit.config.keyvalue import parse_pairs
from deployment_toolkit.data.perf_input import build_perf_input, input_data_digest, write_perf_input_data
from deployment_toolkit.data.user import DataError, UserData
from deployment_toolkit.errors import UserInputError
from deployment_toolkit.export.verify import VerifyPlan, verify
from deployment_toolkit.spec import ModelSignature, TensorSpec

ROOT = Path(__file__).resolve().parents[3]
FIXTURE_LOADER = ROOT / "tests" / "fixtures" / "user_data" / "dataloader.py"
SIG = ModelSignature(inputs=(TensorSpec("input__0", (3, 4, 4)),), outputs=(TensorSpec("output__0", (10,)),))
TWO = ModelSignature(inputs=(TensorSpec("a", (2,)), TensorSpec("b", (-1,), "int64", example_shape=(3,))),
                     outputs=(TensorSpec("y", (1,)),))


def images(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 3, 4, 4)).astype(np.float32)


def write_loader_data(folder: Path, n: int = 10) -> tuple[np.ndarray, np.ndarray]:
    folder.mkdir(parents=True, exist_ok=True)
    x, y = images(n), np.arange(n, dtype=np.int64) % 10
    np.save(folder / "images.npy", x)
    np.save(folder / "labels.npy", y)
    return x, y


def write_loader(path: Path, body: str) -> Path:
    path.write_text("import numpy as np\n" + body)
    return path


# ---- folders -----------------------------------------------------------------------------------

def test_npz_batches_with_ids_and_labels_are_recut_to_the_batch_size(tmp_path):
    x = images(7)
    np.savez(tmp_path / "part0.npz", input__0=x[:5], ids=np.arange(5), labels=np.arange(5))
    np.savez(tmp_path / "part1.npz", input__0=x[5:], ids=np.arange(5, 7), labels=np.arange(5, 7))
    batches = list(UserData(SIG, data_dir=str(tmp_path)).batches(3))
    assert [len(b[0]) for b in batches] == [3, 3, 1]
    assert np.concatenate([b[0] for b in batches]).tolist() == list(range(7))
    np.testing.assert_array_equal(np.concatenate([b[1]["input__0"] for b in batches]), x)
    assert np.concatenate([b[2]["labels"] for b in batches]).tolist() == list(range(7))


def test_one_sample_per_file_gets_the_file_stem_as_id(tmp_path):
    x = images(3)
    for i in range(3):
        np.savez(tmp_path / f"s{i}.npz", input__0=x[i], label=np.int64(i))
    ids, inputs, labels = next(UserData(SIG, data_dir=str(tmp_path)).batches(8))
    assert ids.tolist() == ["s0", "s1", "s2"] and labels["label"].tolist() == [0, 1, 2]
    np.testing.assert_array_equal(inputs["input__0"], x)


def test_npy_pairs_in_the_seed_layout_carry_labels(tmp_path):
    x = images(2)
    for i in range(2):
        np.save(tmp_path / f"case{i}_x.npy", x[i])
        np.save(tmp_path / f"case{i}_y.npy", np.full((4, 4), i, dtype=np.int64))
    ids, inputs, labels = next(UserData(SIG, data_dir=str(tmp_path)).batches(2))
    assert ids.tolist() == ["case0", "case1"] and labels["labels"].shape == (2, 4, 4)
    np.save(tmp_path / "case9_y.npy", np.zeros((4, 4)))
    with pytest.raises(DataError, match="case9_y.npy.*no <id>_x.npy"):
        list(UserData(SIG, data_dir=str(tmp_path)).batches(2))


@pytest.mark.parametrize("array, words", [
    (np.zeros((2, 3, 8, 8), np.float32), ["'input__0'", "(3, 8, 8) float32", "(3 x 4 x 4) float32"]),
    (np.zeros((2, 3, 4, 4), np.float64), ["'input__0'", "float64", "float32", ".astype(np.float32)"]),
])
def test_a_tensor_contradicting_the_signature_is_named_with_both_shapes(tmp_path, array, words):
    np.savez(tmp_path / "bad.npz", input__0=array)
    with pytest.raises(DataError) as err:
        list(UserData(SIG, data_dir=str(tmp_path)).batches(2))
    assert all(w in str(err.value) for w in words) and "bad.npz" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_misspelt_array_name_is_refused(tmp_path):
    np.savez(tmp_path / "s.npz", input__0=images(1)[0], imput__0=images(1)[0])
    with pytest.raises(DataError, match=r"\['imput__0'\] are neither inputs"):
        list(UserData(SIG, data_dir=str(tmp_path)).batches(1))


def test_empty_or_mixed_folders_are_refused(tmp_path):
    with pytest.raises(DataError, match="no .npy or .npz files"):
        list(UserData(SIG, data_dir=str(tmp_path)).batches(1))
    np.save(tmp_path / "a.npy", images(1)[0])
    np.savez(tmp_path / "b.npz", input__0=images(1)[0])
    with pytest.raises(DataError, match="mixes .npy and .npz"):
        list(UserData(SIG, data_dir=str(tmp_path)).batches(1))


def test_limit_caps_the_samples(tmp_path):
    np.savez(tmp_path / "all.npz", input__0=images(9))
    assert sum(len(b[0]) for b in UserData(SIG, data_dir=str(tmp_path), limit=5).batches(2)) == 5


# ---- dataloader.py -----------------------------------------------------------------------------

def test_the_fixture_dataloader_gets_its_kwargs_and_yields_validated_batches(tmp_path):
    x, y = write_loader_data(tmp_path / "data", 10)
    data = UserData(SIG, data_dir=str(tmp_path / "data"), dataloader=str(FIXTURE_LOADER))
    batches = list(data.batches(4))
    assert [len(b[0]) for b in batches] == [4, 4, 2] and batches[0][0].tolist()[:2] == ["img000", "img001"]
    np.testing.assert_array_equal(np.concatenate([b[1]["input__0"] for b in batches]), x)
    assert np.concatenate([b[2]["labels"] for b in batches]).tolist() == y.tolist()
    assert data.describe()["dataloader_sha256"] and data.describe()["data_dir"] == str(tmp_path / "data")
    renamed = UserData(SIG, data_dir=str(tmp_path / "data"), dataloader=str(FIXTURE_LOADER),
                       dataloader_args=parse_pairs(["label_name=OUTPUT__0"], "--dataloader-arg"))
    assert set(next(renamed.batches(2))[2]) == {"OUTPUT__0"}


def test_dataloader_errors_are_one_clear_line(tmp_path):
    write_loader_data(tmp_path / "data", 4)
    cases = {
        "unknown": (str(FIXTURE_LOADER), {"colour": "red"}, "takes no argument(s) ['colour']"),
        "nofn": (write_loader(tmp_path / "nofn.py", "x = 1\n"), {}, "defines no get_dataloader_fn"),
        "broken": (write_loader(tmp_path / "broken.py", "import not_a_module_at_all\n"), {},
                   "failed to import: ModuleNotFoundError"),
        "raises": (write_loader(tmp_path / "raises.py", (
            "def get_dataloader_fn(**kw):\n"
            "    def fn():\n"
            "        yield [0], {'input__0': np.zeros((1, 3, 4, 4), np.float32)}, {}\n"
            "        raise RuntimeError('disk gone')\n"
            "    return fn\n")), {}, "RuntimeError: disk gone (raises.py:5) at batch 1"),
        "name": (write_loader(tmp_path / "name.py", (
            "def get_dataloader_fn(batch_size):\n"
            "    return lambda: iter([([0], {'image': np.zeros((1, 3, 4, 4), np.float32)}, None)])\n")), {},
            "the model's inputs are ['input__0'] (missing ['input__0']) (unknown ['image'])"),
        "ids": (write_loader(tmp_path / "ids.py", (
            "def get_dataloader_fn(**kw):\n"
            "    return lambda: iter([([0, 1, 2], {'input__0': np.zeros((2, 3, 4, 4), np.float32)}, None)])\n")), {},
            "3 ids for a batch of 2 samples"),
        "needs": (write_loader(tmp_path / "needs.py", "def get_dataloader_fn(*, root):\n    pass\n"), {},
                  "needs argument(s) ['root']"),
    }
    for key, (loader, extra, message) in cases.items():
        data = UserData(SIG, data_dir=str(tmp_path / "data"), dataloader=str(loader), dataloader_args=extra)
        with pytest.raises(DataError) as err:
            list(data.batches(2))
        assert message in str(err.value), (key, str(err.value))
        assert "\n" not in str(err.value)
    with pytest.raises(DataError, match="does not exist"):
        UserData(SIG, dataloader=str(tmp_path / "missing.py"))
    with pytest.raises(UserInputError, match="--dataloader-arg 'novalue': give KEY=VALUE"):
        parse_pairs(["novalue"], "--dataloader-arg")
    assert parse_pairs(["a=1", "b=0.5", "c=true", "d=text"], "--dataloader-arg") == \
        {"a": 1, "b": 0.5, "c": True, "d": "text"}


# ---- perf_analyzer input data ------------------------------------------------------------------

def test_perf_json_holds_each_real_sample_as_b64_with_its_shape(tmp_path):
    a = np.arange(8, dtype=np.float32).reshape(4, 2)
    b = np.arange(12, dtype=np.int64).reshape(4, 3)
    np.savez(tmp_path / "d.npz", a=a, b=b)
    path = write_perf_input_data(UserData(TWO, data_dir=str(tmp_path)), tmp_path / "in.json", max_samples=3)
    entries = json.loads(path.read_text())["data"]
    assert len(entries) == 3
    for i, entry in enumerate(entries):
        assert entry["a"]["shape"] == [2] and entry["b"]["shape"] == [3]
        got_a = np.frombuffer(base64.b64decode(entry["a"]["content"]["b64"]), dtype="<f4")
        got_b = np.frombuffer(base64.b64decode(entry["b"]["content"]["b64"]), dtype="<i8")
        np.testing.assert_array_equal(got_a, a[i])
        np.testing.assert_array_equal(got_b, b[i])


def test_input_data_digest_follows_the_content(tmp_path):
    np.savez(tmp_path / "d.npz", input__0=images(4))
    first = build_perf_input(UserData(SIG, data_dir=str(tmp_path)), tmp_path / "run", 4)
    assert first.name == f"input_data_{input_data_digest(first).removeprefix('sha256:')[:12]}.json"
    np.savez(tmp_path / "d.npz", input__0=images(4, seed=1))
    second = build_perf_input(UserData(SIG, data_dir=str(tmp_path)), tmp_path / "run", 4)
    assert input_data_digest(first) != input_data_digest(second) and first != second
    assert input_data_digest("random") == "random"
    assert not list((tmp_path / "run").glob(".*pending*"))
    with pytest.raises(FileNotFoundError):
        input_data_digest(tmp_path / "nope.json")


# ---- verification on real samples --------------------------------------------------------------

def test_real_samples_catch_what_random_inputs_miss():
    """A 'converted' model that clips large inputs matches on standard-normal inputs, not on real data."""
    sig = ModelSignature(inputs=(TensorSpec("x", (4,)),), outputs=(TensorSpec("y", (4,)),))
    reference = lambda inputs: {"y": inputs["x"] * 2.0}  # noqa: E731
    converted = lambda inputs: {"y": np.clip(inputs["x"], -10, 10) * 2.0}  # noqa: E731
    assert verify(reference, converted, sig, "embedding").passed
    real = [{"x": np.full((2, 4), 50.0, np.float32)}]
    result = verify(reference, converted, sig, "embedding", VerifyPlan(samples=real))
    assert not result.passed and "real-sample batch 0" in result.message and result.samples_checked == 2


def test_convert_refuses_contradicting_data_before_writing_anything(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "s.npy", np.zeros((3, 32, 32), np.float32))  # resnet18 small takes 3 x 64 x 64
    out = tmp_path / "art"
    proc = subprocess.run([sys.executable, str(ROOT / "triton" / "convert_model.py"), "--model", "resnet18",
                           "--output-type", "onnx", "--output-path", str(out), "--data-dir", str(data)],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert "input 'input__0' has per-sample shape (3, 32, 32) float32" in proc.stderr
    assert "(3 x 64 x 64) float32" in proc.stderr and not out.exists()


# ---- search and sizing take the same real samples ----------------------------------------------

def _manifest(signature: ModelSignature):
    from deployment_toolkit.spec import Manifest

    return Manifest(model="m", preset="small", family="f", task="classification", metric="top1", format="onnx",
                    artifact="model.onnx", signature=signature, max_batch_size=4)


def test_search_writes_the_real_samples_and_its_identity_follows_them(tmp_path):
    from deployment_toolkit.perf.analyzer import perf_options_from_args
    from deployment_toolkit.commands.search_config import build_parser, request_from_args
    from deployment_toolkit.search.orchestration import _with_real_input_data, search_identity
    from deployment_toolkit.search.engine import FormatInfo

    np.savez(tmp_path / "d.npz", input__0=images(5))
    args = build_parser().parse_args(["--model", "m", "--p99-ms", "100", "--data-dir", str(tmp_path),
                                      "--perf-samples", "3"])
    request = request_from_args(args)  # the typed request carries the samples and how many go to perf_analyzer
    assert request.data.data_dir == str(tmp_path) and request.job.perf_samples == 3
    base = perf_options_from_args(args, shared_memory="none")
    info = FormatInfo("onnx", _manifest(SIG), tmp_path, "digest")
    options = _with_real_input_data(request, base, [info], tmp_path / "run")
    assert options.input_data.startswith(str(tmp_path / "run" / "raw" / "input_data_"))
    assert len(json.loads(Path(options.input_data).read_text())["data"]) == 3
    real, random = search_identity("m", "small", options, [info]), search_identity("m", "small", base, [info])
    assert real.id != random.id and real.input_data.startswith("sha256:") and random.input_data == "random"
    both = build_parser().parse_args(["--model", "m", "--p99-ms", "100", "--data-dir", str(tmp_path),
                                      "--input-data", "zero"])
    with pytest.raises(ValueError, match="either --input-data or --data-dir"):
        _with_real_input_data(request_from_args(both), perf_options_from_args(both, shared_memory="none"), [info],
                              tmp_path / "r2")


def test_a_dataloader_may_define_dataclasses_and_import_its_neighbours(tmp_path):
    (tmp_path / "helpers.py").write_text("SCALE = 2.0\n")
    loader = write_loader(tmp_path / "dc.py", (
        "from dataclasses import dataclass\n"
        "from helpers import SCALE\n"
        "@dataclass\n"
        "class Item:\n"
        "    value: float\n"
        "def get_dataloader_fn(**kw):\n"
        "    item = Item(SCALE)\n"
        "    return lambda: iter([([7], {'input__0': np.full((1, 3, 4, 4), item.value, np.float32)}, {})])\n"))
    ids, x, _ = next(UserData(SIG, dataloader=str(loader)).batches(1))
    assert ids.tolist() == [7] and float(x["input__0"].max()) == 2.0
