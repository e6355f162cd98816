"""A pipeline checked whole in process before anything is converted or searched (issue 53): a deployment whose
second entry cannot be wired is refused in seconds, not after the first model's search.

The framework model is built from its reference and run on one raw sample as its steps hand it over: the preprocess
on the sample, the network on what it gave, the postprocess on the network's outputs, every name, dtype and shape
matched by the wiring's rules (wiring.py), by position where that is unambiguous. The network's tensors are those its
export will have (sources.resolve: a bare tensor is `output__0`, a dict keeps its keys, an ONNX file its graph's
names), fed as its search feeds it (network_inputs: a model.py without get_signature takes what the preprocess
gives), so what passes here is wired the same once the searched artifact is written around (plan.plan_pipeline).
No export, no server, one sample.

    check = check_pipeline("photos", "model.py", Path("images"), Path("pre.py"), Path("post.py"))
    check.text()   # "photos: 'image' bytes [] -> ... ; wired by position: output__0 → logits"
"""
from __future__ import annotations

import logging
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..sources import ModelSource, resolve
from ..sources.outputs import torch_callable
from .network_inputs import as_source, inputs_from_prepared
from .plan import PipelineNames, Prepared, check_steps, prepare
from .ports import Port
from .stepfile import StepKind, load_step
from .wiring import ByPosition, Wiring

log = logging.getLogger(__name__)
CHECKED_SAMPLES = 1  # raw samples the check runs: enough for names, dtypes and shapes, and seconds for small models


@dataclass(frozen=True)
class PipelineCheck:
    """What the check found: the wiring the served pipeline will have, and how long the check took."""

    name: str
    wiring: Wiring
    sample: str  # the raw sample it ran on
    seconds: float

    @property
    def by_position(self) -> tuple[ByPosition, ...]:
        return self.wiring.by_position

    def text(self) -> str:
        """One line: what clients send and get, and each hand-over made by position."""
        flow = (f"{self.name}: {', '.join(p.describe() for p in self.wiring.inputs)} -> "
                f"{', '.join(p.describe() for p in self.wiring.outputs)} on raw sample {self.sample} "
                f"({self.seconds:.2f} s)")
        return flow + (f"; {self.wiring.describe_positions()}" if self.by_position else "")


def _network(source: ModelSource, prepared: Prepared | None) -> ModelSource:
    """The network's source as its search takes it: behind a preprocess, fed what it gives (network_inputs), the
    one sample's values written to a scratch folder and gone after."""
    if prepared is None:
        return source
    with tempfile.TemporaryDirectory(prefix="pipeline-check-") as folder:
        return inputs_from_prepared(prepared, folder, model=source).source(source)


def check_pipeline(name: str, model: "str | ModelSource", raw_data: Path, preprocess: Path | None,
                   postprocess: Path | None, preset: str = "small") -> PipelineCheck:
    """Load the steps, build the framework model from `model` (a reference or its source record), run preprocess ->
    model -> postprocess on one raw sample and match every hand-over; a mismatch or an ambiguous wiring is one
    UserInputError line (SourceError where the model itself cannot be built or run)."""
    t0 = time.perf_counter()
    names = PipelineNames(name)
    pre = load_step(preprocess, StepKind.PREPROCESS) if preprocess is not None else None
    post = load_step(postprocess, StepKind.POSTPROCESS) if postprocess is not None else None
    prepared = prepare(raw_data, pre, max_samples=CHECKED_SAMPLES, max_batch_size=1) if pre is not None else None
    source = _network(as_source(model, preset), prepared)
    resolved = resolve(source)
    model_in = tuple(Port.from_spec(t) for t in resolved.signature.inputs)
    model_out = tuple(Port.from_spec(t) for t in resolved.signature.outputs)
    if prepared is None:
        prepared = prepare(raw_data, None, model_in, max_samples=CHECKED_SAMPLES)
    predict = torch_callable(resolved.build(0), [p.name for p in model_in], [p.name for p in model_out],
                             output_paths=resolved.output_paths)
    wiring = check_steps(names, model_in, model_out, prepared, post, predict, max_batch_size=1)
    return PipelineCheck(name, wiring, prepared.raw.samples[0].name, time.perf_counter() - t0)


__all__ = ["CHECKED_SAMPLES", "PipelineCheck", "check_pipeline"]
