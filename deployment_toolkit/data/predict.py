"""Run a data source through any predictor (Triton, ONNX Runtime, TorchScript, eager) into a dump."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
from tqdm import tqdm

from .dump import DumpWriter
from .padding import Batching

Arrays = dict[str, np.ndarray]
NOT_PADDED = "the model takes no attention_mask covering its dynamic inputs, so only samples of one shape share a batch"


def write_dump(rows: Iterable[tuple[np.ndarray, Any, Any, Any]], output_dir: str | Path, meta: dict,
               batching: Batching | None = None, dump_inputs: bool = False, dump_labels: bool = False,
               total: int | None = None) -> Path:
    """`rows` yields (ids, inputs, labels, outputs), each tensor an array with the batch axis first or a list of
    per-sample arrays (a padded request cut back to each sample's length). Returns the dump directory (dump.json
    written last), whose `batching` says how the samples were batched (data/padding.py)."""
    batching = batching or Batching()  # a source that batches on its own: counted and described here
    shapes: set = set()
    with DumpWriter(output_dir, meta, overwrite=True) as writer:
        for ids, inputs, labels, outputs in tqdm(rows, total=total, unit="batch", desc="inference"):
            writer.write(ids, outputs, inputs=inputs if dump_inputs else None,
                         labels=labels if (dump_labels and labels) else None)
            batching.batches += 1
            if not batching.padded:
                shapes.add(tuple((k, np.shape(v)[1:]) for k, v in inputs.items()))
        if not batching.padded and len(shapes) <= 1:
            batching.mode, batching.reason = "one shape", ""
        elif not batching.padded and not batching.reason:
            batching.reason = NOT_PADDED
        writer.meta["batching"] = batching.meta()
    return Path(output_dir)


def predict_batches(source_batches: Iterable[tuple[np.ndarray, Arrays, Arrays]],
                    predict: Callable[[Arrays], Arrays]) -> Iterator[tuple[np.ndarray, Arrays, Arrays, Arrays]]:
    for ids, inputs, labels in source_batches:
        yield ids, inputs, labels, predict(inputs)
