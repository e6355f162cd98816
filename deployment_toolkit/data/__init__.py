"""Data: sets the toolkit can make itself, so accuracy checks need no download (`shapes`), and the user's
own data (`user`: a dataloader.py or a .npy/.npz folder checked against the signature; `perf_input`: those
samples as perf_analyzer JSON and the digest a run records; `infer`: the model's inputs read from that data),
the batches every inference run iterates (`batches`), and the npz dumps of outputs (`dump`, written by
`predict`) that accuracy compares.

`deployment_toolkit.data.shapes` is imported on first use, not here: `python -m
deployment_toolkit.data.shapes` would otherwise find it imported twice (runpy warns about that).
"""
from __future__ import annotations

from typing import Any

__all__ = ["CLASSES", "ShapesConfig", "draw_sample", "make_split", "write_npz_folder"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import shapes

        return getattr(shapes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
