"""Padding samples of different lengths into one request (data/padding.py): used where the model's attention
mask makes the answer the same, checked on the first mixed batch, and given up (by shape) where it is not."""
from __future__ import annotations

import numpy as np
from deployment_toolkit.data.padding import Batching, padded_rows, padding_plan
from deployment_toolkit.spec import ModelSignature, TensorSpec

EMB = np.random.default_rng(0).standard_normal((50, 3))


def signature(outputs=(("pooled", (3,)), ("tokens", (-1, 3))), mask=True):
    inputs = [TensorSpec("input_ids", (-1,), "int64", example_shape=(4,))]
    if mask:
        inputs.append(TensorSpec("attention_mask", (-1,), "int64", example_shape=(4,)))
    return ModelSignature(tuple(inputs), tuple(TensorSpec(n, s, example_shape=tuple(4 if d == -1 else d for d in s))
                                               for n, s in outputs))


def samples(lengths):
    rng = np.random.default_rng(1)
    for i, n in enumerate(lengths):
        yield (np.array([f"s{i}"]), {"input_ids": rng.integers(1, 50, (1, n)), "attention_mask": np.ones((1, n), np.int64)},
               {})


def masked(x):  # a model that honours its mask: padding changes nothing at the real positions
    emb, mask = EMB[x["input_ids"]], x["attention_mask"][..., None]
    return {"pooled": (emb * mask).sum(1) / mask.sum(1), "tokens": emb * 2}


def unmasked(x):  # one that averages the padding in
    emb = EMB[x["input_ids"]]
    return {"pooled": emb.mean(1), "tokens": emb * 2}


def run(predict, lengths=(3, 5, 4, 7, 3, 6), batch_size=4, sig=None):
    batching = Batching()
    rows = list(padded_rows(samples(lengths), batch_size, padding_plan(sig or signature()),
                            lambda reqs: [predict(x) for x in reqs], batching))
    return rows, batching


def test_padding_needs_a_mask_over_the_dynamic_axes():
    assert padding_plan(signature(mask=False)) is None
    plan = padding_plan(signature())
    assert plan.mask == "attention_mask" and plan.padded == ("input_ids", "attention_mask")
    assert plan.trimmed == {"pooled": (), "tokens": (0,)}


def test_masked_model_is_padded_and_each_sample_cut_back_to_its_length():
    rows, batching = run(masked)
    assert batching.padded and "padded vs alone: max abs err" in batching.reason
    assert len(rows) == 2  # 6 samples of 5 lengths in 2 requests of at most 4
    for ids, inputs, _, outputs in rows:
        for k, sid in enumerate(ids):
            alone = masked({n: v[k][None] for n, v in inputs.items()})
            assert outputs["tokens"][k].shape == (inputs["input_ids"][k].shape[0], 3)
            np.testing.assert_allclose(outputs["pooled"][k], alone["pooled"][0])
            np.testing.assert_allclose(outputs["tokens"][k], alone["tokens"][0])


def test_a_model_whose_answer_changes_with_padding_goes_by_shape():
    rows, batching = run(unmasked)
    assert not batching.padded and batching.mode == "grouped by shape"
    assert "differs by" in batching.reason and "padded vs alone" in batching.reason
    for ids, inputs, _, outputs in rows:  # every request one length, answers exact
        assert len({v.shape for v in inputs.values()}) == 1
        np.testing.assert_allclose(outputs["pooled"], unmasked(inputs)["pooled"])
    assert sorted(i for r in rows for i in r[0].tolist()) == [f"s{i}" for i in range(6)]


def test_an_output_whose_dynamic_axis_is_not_the_tokens_goes_by_shape():
    def halves(x):  # one row per two tokens: cannot be cut back by the token count
        return {"pooled": masked(x)["pooled"], "tokens": EMB[x["input_ids"]][:, ::2] * 1.0}

    rows, batching = run(halves)
    assert not batching.padded and "output tokens axis 0" in batching.reason


def test_one_length_needs_no_padding_and_no_check():
    rows, batching = run(masked, (4, 4, 4, 4, 4))
    assert not batching.padded and not batching.checks and [len(r[0]) for r in rows] == [4, 1]
