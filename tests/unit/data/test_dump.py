"""The dump format: round trips, atomic shards, incomplete/empty dumps and id-based alignment."""
from __future__ import annotations

import json

import numpy as np
import pytest

from deployment_toolkit.data import dump as dump_mod
from deployment_toolkit.data.dump import (
    DumpError,
    DumpMismatchError,
    DumpWriter,
    align,
    load_dump,
)

META = {"model": "resnet18", "task": "classification", "source": "triton", "extra": {"precision": "fp16"}}


def _batch(ids, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    n = len(ids)
    return (
        {"output__0": rng.standard_normal((n, classes)).astype(np.float32)},
        {"input__0": rng.standard_normal((n, 2, 2)).astype(np.float32)},
        {"label": np.arange(n, dtype=np.int64) % classes},
    )


def test_round_trip_keeps_file_order_and_meta(tmp_path):
    out_a, in_a, lab_a = _batch([5, 3], seed=1)
    out_b, in_b, lab_b = _batch([9, 1, 7], seed=2)
    with DumpWriter(tmp_path / "d", META) as w:
        w.write([5, 3], out_a, in_a, lab_a)
        w.write(np.array([9, 1, 7]), out_b, in_b, lab_b)

    d = load_dump(tmp_path / "d")
    assert d.ids.tolist() == [5, 3, 9, 1, 7]  # file order, not sorted
    assert d.ids.dtype == np.int64
    np.testing.assert_array_equal(d.outputs["output__0"], np.concatenate([out_a["output__0"], out_b["output__0"]]))
    np.testing.assert_array_equal(d.inputs["input__0"], np.concatenate([in_a["input__0"], in_b["input__0"]]))
    np.testing.assert_array_equal(d.labels["label"], [0, 1, 0, 1, 2])
    assert (d.task, d.model, d.source, d.num_samples) == ("classification", "resnet18", "triton", 5)
    assert d.meta["extra"] == {"precision": "fp16"}
    assert d.meta["tensors"]["outputs"]["output__0"] == {"shape": [3], "dtype": "float32"}
    assert d.meta["num_shards"] == 2
    for section in ("outputs", "inputs", "labels"):
        assert sorted(p.name for p in (tmp_path / "d" / section).iterdir()) == ["shard_00000.npz", "shard_00001.npz"]


def test_optional_sections_and_string_ids(tmp_path):
    with DumpWriter(tmp_path, {"task": "embedding"}) as w:
        w.write(["img_b", "img_a"], {"emb": np.ones((2, 4), np.float16)})
        w.write(np.array([b"img_c"], dtype=object), {"emb": np.zeros((1, 4), np.float16)})
    d = load_dump(tmp_path)
    assert d.ids.tolist() == ["img_b", "img_a", "img_c"]
    assert d.inputs == {} and d.labels == {}
    assert d.outputs["emb"].dtype == np.float16
    assert not (tmp_path / "inputs").exists()


def test_object_bytes_tensor_is_stored_without_pickle(tmp_path):
    with DumpWriter(tmp_path, {}) as w:
        w.write([0, 1], {"text": np.array([b"ab", b"c"], dtype=object)})
    assert load_dump(tmp_path).outputs["text"].tolist() == [b"ab", b"c"]


def test_failed_run_leaves_incomplete_dump(tmp_path):
    out, _, _ = _batch([0, 1])
    with pytest.raises(RuntimeError):
        with DumpWriter(tmp_path, META) as w:
            w.write([0, 1], out)
            raise RuntimeError("server died")
    assert not (tmp_path / "dump.json").exists()
    with pytest.raises(DumpError, match="incomplete: 1 shard files but no dump.json"):
        load_dump(tmp_path)


def test_shard_write_is_atomic(tmp_path, monkeypatch):
    def broken_savez(fh, **arrays):
        fh.write(b"PK half a zip")
        raise OSError("disk full")

    w = DumpWriter(tmp_path, META)
    monkeypatch.setattr(dump_mod.np, "savez", broken_savez)
    with pytest.raises(OSError, match="disk full"):
        w.write([0], {"y": np.zeros((1, 2))})
    assert list((tmp_path / "outputs").iterdir()) == []  # neither the shard nor the temp file


def test_empty_and_missing_directories(tmp_path):
    with pytest.raises(DumpError, match="is empty"):
        load_dump(tmp_path)
    with pytest.raises(DumpError, match="does not exist"):
        load_dump(tmp_path / "nope")


def test_missing_shard_is_reported(tmp_path):
    with DumpWriter(tmp_path, META) as w:
        w.write([0], {"y": np.zeros((1, 2))})
        w.write([1], {"y": np.zeros((1, 2))})
    (tmp_path / "outputs" / "shard_00001.npz").unlink()
    with pytest.raises(DumpError, match="1 shards on disk, dump.json says 2"):
        load_dump(tmp_path)


def test_writer_refuses_existing_dump_unless_overwrite(tmp_path):
    with DumpWriter(tmp_path, META) as w:
        w.write([0, 1], {"y": np.zeros((2, 2))})
        w.write([2], {"y": np.zeros((1, 2))})
    with pytest.raises(DumpError, match="already holds a dump"):
        DumpWriter(tmp_path, META)
    with DumpWriter(tmp_path, META, overwrite=True) as w:
        w.write([7], {"y": np.ones((1, 2))})
    d = load_dump(tmp_path)
    assert d.ids.tolist() == [7]  # the old second shard is gone, not mixed in
    assert not (tmp_path / "outputs" / "shard_00001.npz").exists()


@pytest.mark.parametrize(
    "second, message",
    [
        (([2, 3], {"y": np.zeros((2, 3, 1))}), r"earlier shards float64 of rank 1 \(2,\); one tensor keeps its dtype and rank"),
        (([2, 3], {"y": np.zeros((2, 2), np.float32)}), r"holds float32 samples .* earlier shards float64"),
        (([2, 3], {"z": np.zeros((2, 2))}), "outputs tensors"),
        (([2, 3], {"y": np.zeros((3, 2))}), "first axis must be the batch"),
        (([1, 2], {"y": np.zeros((2, 2))}), "duplicate sample ids"),
        (([2, 2], {"y": np.zeros((2, 2))}), "duplicate sample ids"),
        ((["a", "b"], {"y": np.zeros((2, 2))}), "ids switched from int to str"),
        (([2, 3], {"ids": np.zeros((2, 2))}), "reserved"),
    ],
)
def test_inconsistent_writes_are_rejected(tmp_path, second, message):
    w = DumpWriter(tmp_path, META)
    w.write([0, 1], {"y": np.zeros((2, 2))})
    with pytest.raises(DumpError, match=message):
        w.write(*second)


def test_sections_must_stay_the_same(tmp_path):
    w = DumpWriter(tmp_path, META)
    w.write([0], {"y": np.zeros((1, 2))}, labels={"l": np.zeros(1)})
    with pytest.raises(DumpError, match="sections"):
        w.write([1], {"y": np.zeros((1, 2))})


def test_writer_guards_meta_and_empty_close(tmp_path):
    with pytest.raises(DumpError, match="computed by DumpWriter"):
        DumpWriter(tmp_path / "a", {"num_samples": 3})
    with pytest.raises(DumpError, match="no samples were written"):
        DumpWriter(tmp_path / "b", META).close()


def _write(path, ids, outputs, meta=META):
    with DumpWriter(path, meta) as w:
        w.write(ids, outputs)
    return load_dump(path)


def test_align_reorders_by_id(tmp_path):
    y = np.arange(8, dtype=np.float32).reshape(4, 2)
    a = _write(tmp_path / "a", [10, 11, 12, 13], {"y": y})
    b = _write(tmp_path / "b", [13, 11, 10, 12], {"y": y[[3, 1, 0, 2]] * 2})
    al = align(a, b)
    assert al.ids.tolist() == [10, 11, 12, 13]
    np.testing.assert_array_equal(al.a["y"], y)
    np.testing.assert_array_equal(al.b["y"], y * 2)
    np.testing.assert_array_equal(b.ids[al.b_index], a.ids)


def test_align_reports_missing_and_extra_ids(tmp_path):
    a = _write(tmp_path / "a", list(range(10)), {"y": np.zeros((10, 2))})
    b = _write(tmp_path / "b", list(range(3, 12)), {"y": np.zeros((9, 2))})
    with pytest.raises(DumpMismatchError) as err:
        align(a, b)
    text = str(err.value)
    assert "10 in" in text and "9 in" in text
    assert "3 ids of" in text and "0, 1, 2" in text  # missing from b
    assert "2 ids of" in text and "10, 11" in text  # extra in b


def test_align_rejects_other_tensor_names_shapes_and_id_types(tmp_path):
    a = _write(tmp_path / "a", [0, 1], {"y": np.zeros((2, 2))})
    b = _write(tmp_path / "b", [0, 1], {"logits": np.zeros((2, 2))})
    with pytest.raises(DumpMismatchError, match=r"only in .*a: \['y'\], only in .*b: \['logits'\]"):
        align(a, b)
    c = _write(tmp_path / "c", [1, 0], {"y": np.zeros((2, 3))})
    with pytest.raises(DumpMismatchError, match=r"sample 0 has shape \(2,\) in .*a vs \(3,\) in .*c"):
        align(a, c)
    s = _write(tmp_path / "s", ["0", "1"], {"y": np.zeros((2, 2))})
    with pytest.raises(DumpMismatchError, match="different types"):
        align(a, s)


def test_dump_json_is_plain_json(tmp_path):
    _write(tmp_path, [0], {"y": np.zeros((1, 2))})
    meta = json.loads((tmp_path / "dump.json").read_text())
    assert meta["num_samples"] == 1 and meta["id_dtype"] == "int" and meta["format_version"] == 1


def test_ragged_samples_round_trip_and_align_by_id(tmp_path):
    """Token logits of different lengths: each shard one length; read back one array per sample, paired by id."""
    rng = np.random.default_rng(0)
    lengths = {10: 6, 11: 6, 12: 8, 13: 3}
    logits = {i: rng.standard_normal((n, 5)).astype(np.float32) for i, n in lengths.items()}
    with DumpWriter(tmp_path / "a", META) as w:
        w.write([10, 11], {"logits": np.stack([logits[10], logits[11]])})
        w.write([12], {"logits": logits[12][None]})
        w.write([13], {"logits": logits[13][None]})
    meta = json.loads((tmp_path / "a" / "dump.json").read_text())
    assert meta["tensors"]["outputs"]["logits"] == {"shape": [-1, 5], "dtype": "float32", "ragged": True}
    a = load_dump(tmp_path / "a")
    assert [x.shape for x in a.outputs["logits"]] == [(6, 5), (6, 5), (8, 5), (3, 5)]
    with DumpWriter(tmp_path / "b", META) as w:  # the other run grouped its batches otherwise
        for i in (13, 12, 11, 10):
            w.write([i], {"logits": logits[i][None] * 2})
    al = align(a, load_dump(tmp_path / "b"))
    for k, i in enumerate(al.ids.tolist()):
        np.testing.assert_array_equal(al.b["logits"][k], logits[i] * 2)
    with DumpWriter(tmp_path / "c", META) as w:
        w.write([10, 11, 12, 13], {"logits": np.zeros((4, 6, 5), np.float32)})
    with pytest.raises(DumpMismatchError, match=r"sample 12 has shape \(8, 5\) in .*a vs \(6, 5\)"):
        align(a, load_dump(tmp_path / "c"))


def test_samples_of_different_shapes_in_one_shard_keep_each_shape(tmp_path):
    """A padded request cut back per sample: one shard records every sample's own shape beside its values."""
    rows = [np.arange(6, dtype=np.float32).reshape(3, 2), np.ones((1, 2), np.float32), np.zeros((4, 2), np.float32)]
    with DumpWriter(tmp_path, META) as w:
        w.write(["a", "b", "c"], {"logits": rows}, inputs={"ids_in": [np.arange(3), np.arange(1), np.arange(4)]})
        w.write(["d", "e"], {"logits": [np.ones((2, 2), np.float32)] * 2}, inputs={"ids_in": [np.arange(2)] * 2})
    assert len(list((tmp_path / "outputs").iterdir())) == 2
    with np.load(tmp_path / "outputs" / "shard_00000.npz") as npz:
        assert npz["shapes:logits"].tolist() == [[3, 2], [1, 2], [4, 2]] and npz["logits"].shape == (16,)
    d = load_dump(tmp_path)
    assert d.meta["tensors"]["outputs"]["logits"] == {"shape": [-1, 2], "dtype": "float32", "ragged": True}
    for got, want in zip(d.outputs["logits"], [*rows, np.ones((2, 2)), np.ones((2, 2))]):
        np.testing.assert_array_equal(got, want)
    assert [x.tolist() for x in d.inputs["ids_in"]] == [[0, 1, 2], [0], [0, 1, 2, 3], [0, 1], [0, 1]]
    with pytest.raises(DumpError, match="differ in rank or dtype"):
        DumpWriter(tmp_path / "bad", META).write([0, 1], {"y": [np.zeros(2), np.zeros((2, 2))]})
