"""What the exporter fallback costs a model that exports on the first try: the same ONNX conversion (export and
verification) with `--onnx-exporter auto` and `torchscript`, alternated so that drift of the host hits both
sides alike; medians and their ratio (target: 1.0 within noise, since auto runs the same first exporter)."""
from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from deployment_toolkit.export import ConvertOptions, convert
from deployment_toolkit.sources import parse_reference, resolve
from .architectures import ARCHITECTURES

FALLBACK_MODEL = "tv-resnet18"
FALLBACK_REPEATS = 3  # conversions per side (bench-corpus --fallback-repeats)


def fallback_cost(work: Path, repeats: int = FALLBACK_REPEATS, name: str = FALLBACK_MODEL) -> dict[str, Any]:
    arch = ARCHITECTURES[name]
    from deployment_toolkit.data.infer import inputs_from_data
    from .run import write_samples

    source = parse_reference(arch.factory, max_batch_size=arch.max_batch_size)
    source.data_inputs = inputs_from_data(str(write_samples(arch, work / "data")))
    resolved = resolve(source)
    times: dict[str, list[float]] = {"auto": [], "torchscript": []}
    for i in range(repeats):
        for exporter in (("auto", "torchscript") if i % 2 == 0 else ("torchscript", "auto")):
            t0 = time.perf_counter()
            manifest = convert(resolved, "onnx", work / exporter, ConvertOptions(onnx_exporter=exporter))
            times[exporter].append(time.perf_counter() - t0)
            if len(manifest.export_options["attempts"]) != 1:
                raise RuntimeError(f"{name} needed a fallback exporter: pick a model that exports on the first try")
    auto, ts = statistics.median(times["auto"]), statistics.median(times["torchscript"])
    return {"model": name, "repeats": repeats, "auto_s": times["auto"], "torchscript_s": times["torchscript"],
            "median_auto_s": auto, "median_torchscript_s": ts, "ratio": auto / ts}
