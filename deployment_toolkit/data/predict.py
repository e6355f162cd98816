"""Run a data source through any predictor (Triton, ONNX Runtime, TorchScript, eager) into a dump."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np
from tqdm import tqdm

from .dump import DumpWriter
from .rebatch import shape_key

Arrays = dict[str, np.ndarray]


def write_dump(batches: Iterable[tuple[np.ndarray, Arrays, Arrays, Arrays]], output_dir: str | Path, meta: dict,
               dump_inputs: bool = False, dump_labels: bool = False, total: int | None = None) -> Path:
    """`batches` yields (ids, inputs, labels, outputs). Returns the dump directory (dump.json written last), whose
    `batching` says how the samples were batched: grouped by shape, never padded (data/rebatch.py)."""
    shapes: set = set()
    count = 0
    with DumpWriter(output_dir, meta, overwrite=True) as writer:
        for ids, inputs, labels, outputs in tqdm(batches, total=total, unit="batch", desc="inference"):
            writer.write(ids, outputs, inputs=inputs if dump_inputs else None,
                         labels=labels if (dump_labels and labels) else None)
            shapes.add(shape_key((ids, inputs, labels)))
            count += 1
        writer.meta["batching"] = {"mode": "grouped by shape" if len(shapes) > 1 else "one shape", "padded": False,
                                   "batches": count, "input_shapes": len(shapes)}
    return Path(output_dir)


def predict_batches(source_batches: Iterable[tuple[np.ndarray, Arrays, Arrays]],
                    predict: Callable[[Arrays], Arrays]) -> Iterator[tuple[np.ndarray, Arrays, Arrays, Arrays]]:
    for ids, inputs, labels in source_batches:
        yield ids, inputs, labels, predict(inputs)
