"""Batches grouped by shape (data/rebatch.py): samples of different lengths never share a batch, none is lost or
repeated, the sample limit holds, and the samples held for grouping stay bounded."""
from __future__ import annotations

import numpy as np

from deployment_toolkit.data import rebatch as rb


def samples(lengths, labels=False):
    """One batch of one sample per length, ids 0.., like a folder of per-sample .npz files."""
    for i, n in enumerate(lengths):
        y = {"label": np.full((1, n), i)} if labels else {}
        yield np.array([i]), {"input_ids": np.full((1, n), i, np.int64), "mask": np.ones((1, n), np.int64)}, y


def test_samples_of_one_shape_share_batches_and_none_is_lost():
    lengths = [5, 7, 5, 5, 7, 9, 5, 5, 7]
    out = list(rb.rebatch(samples(lengths, labels=True), batch_size=2, limit=None))
    seen = []
    for ids, x, y in out:
        assert len({x["input_ids"].shape[1], x["mask"].shape[1], y["label"].shape[1]}) == 1  # one shape a batch
        assert len(ids) <= 2
        np.testing.assert_array_equal(x["input_ids"][:, 0], ids)  # rows stay with their ids
        seen += ids.tolist()
    assert sorted(seen) == list(range(len(lengths)))
    assert sorted(len(b[0]) for b in out) == [1, 1, 1, 2, 2, 2]  # 5 fives: 2+2+1, 3 sevens: 2+1, one nine


def test_limit_counts_the_samples_held_for_grouping():
    out = list(rb.rebatch(samples([5, 6, 5, 6, 5, 6, 5, 6]), batch_size=4, limit=5))
    assert sum(len(b[0]) for b in out) == 5


def test_memory_stays_bounded_when_every_shape_is_new(monkeypatch):
    monkeypatch.setattr(rb, "MIN_HELD", 3)
    monkeypatch.setattr(rb, "HELD_BATCHES", 1)
    stream = rb.rebatch(samples(range(1, 11)), batch_size=2, limit=None)
    first = next(stream)  # the fourth distinct shape pushes the oldest out before the data ends
    assert first[0].tolist() == [0]
    assert sorted(i for b in [first, *stream] for i in b[0].tolist()) == list(range(10))
