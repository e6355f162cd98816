"""Write a data folder of token-id samples of different lengths, one .npz per sample (no batch axis), the way a
tokenizer hands over real text: `python examples/token_classifier/make_data.py DIR [--samples 64]`.
`--one-length N` cuts or pads every sample to N tokens instead (padding has attention mask 0)."""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

MIN_TOKENS, MAX_TOKENS = 6, 64


def write_samples(folder: Path, samples: int = 64, seed: int = 0, one_length: int | None = None) -> dict[str, int]:
    """{sample id: tokens} of the written files; the same seed gives the same token ids, cut or not."""
    folder.mkdir(parents=True, exist_ok=False)
    rng = np.random.default_rng(seed)
    lengths = {}
    for i in range(samples):
        ids = rng.integers(1, 120, size=int(rng.integers(MIN_TOKENS, MAX_TOKENS))).astype(np.int64)
        mask = np.ones(len(ids), np.int64)
        if one_length is not None:
            ids, mask = ids[:one_length], mask[:one_length]
            pad = one_length - len(ids)
            ids, mask = np.pad(ids, (0, pad)), np.pad(mask, (0, pad))
        np.savez(folder / f"s{i:03d}.npz", input_ids=ids, attention_mask=mask)
        lengths[f"s{i:03d}"] = len(ids)
    return lengths


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                epilog="example: python examples/token_classifier/make_data.py workspace/tokens")
    p.add_argument("folder", type=Path)
    p.add_argument("--samples", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--one-length", type=int, default=None)
    a = p.parse_args()
    got = write_samples(a.folder, a.samples, a.seed, a.one_length)
    print(f"wrote {len(got)} samples of {min(got.values())}..{max(got.values())} tokens to {a.folder}")
