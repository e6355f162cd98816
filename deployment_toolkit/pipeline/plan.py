"""The pipeline run in-process on the raw samples before anything is written: the preprocess on each sample (a
failure names the sample file), its outputs checked against what it declares and against the model's inputs, the
model (the framework predictor), the postprocess likewise. What comes out is the plan the repository is written from
(each step's tensors, the ensemble's wiring) and the reference outputs the served ensemble is compared with."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from ..errors import UserInputError
from ..repository.names import check_model_name
from ..sources.base import DEFAULT_MAX_BATCH
from ..spec import Manifest
from ..watchdog import user_stage
from .ports import Port, port_of_arrays
from .raw import DEFAULT_MAX_SAMPLES, RawData, read_raw
from .stepfile import StepFile
from .wiring import Providers, WiredStep, Wiring, check_preprocess, post_by_position, wire

log = logging.getLogger(__name__)
Arrays = dict[str, np.ndarray]
Predict = Callable[[Arrays], Arrays]


@dataclass(frozen=True)
class PipelineNames:
    """The models a pipeline named `name` writes: the network keeps the name, the steps and ensemble add suffixes."""

    name: str

    def __post_init__(self) -> None:
        check_model_name(self.name, "the pipeline's name")
        check_model_name(self.ensemble, "the ensemble's name")

    @property
    def model(self) -> str:
        return self.name

    @property
    def preprocess(self) -> str:
        return f"{self.name}_preprocess"

    @property
    def postprocess(self) -> str:
        return f"{self.name}_postprocess"

    @property
    def ensemble(self) -> str:
        return f"{self.name}_pipeline"


@dataclass
class SampleRun:
    """One raw sample through the steps in-process: each stage's outputs (a batch of one)."""

    name: str
    raw: Arrays
    pre: Arrays = field(default_factory=dict)
    model: Arrays = field(default_factory=dict)
    post: Arrays = field(default_factory=dict)

    @property
    def final(self) -> Arrays:
        return self.post or self.model


@dataclass(frozen=True)
class PipelinePlan:
    names: PipelineNames
    manifest: Manifest
    artifact_dir: Path
    raw: RawData
    wiring: Wiring
    pre: StepFile | None
    post: StepFile | None
    runs: tuple[SampleRun, ...]  # the in-process reference, one per raw sample

    @property
    def max_batch_size(self) -> int:
        return self.manifest.max_batch_size

    def step(self, model: str) -> WiredStep:
        return next(s for s in self.wiring.steps if s.model == model)


def _outputs_port(step: StepFile, outputs: Sequence[Arrays], samples: Sequence[str]) -> tuple[Port, ...]:
    """The step's output ports: read from what it returned on every sample, or checked against what it declares."""
    names = list(outputs[0])
    for out, sample in zip(outputs, samples):
        if set(out) != set(names):
            raise UserInputError(f"{step.name} returned {', '.join(out)} on {_where(sample)} but {', '.join(names)} "
                                 f"on {samples[0]}: return the same names for every sample")
    seen = tuple(port_of_arrays(n, (o[n] for o in outputs)) for n in names)
    if step.declared_outputs is None:
        return seen
    by_name = {p.name: p for p in seen}
    for declared in step.declared_outputs:
        got = by_name.get(declared.name)
        if got is None:
            raise UserInputError(f"{step.path.name}: OUTPUTS declares {declared.describe()}, but {step.name} returned "
                                 f"{', '.join(names)}: return it, or fix OUTPUTS")
        if not got.fits(declared) or (declared.dtype != got.dtype and not (declared.is_string and got.is_string)):
            raise UserInputError(f"{step.name} returned {got.describe()}, but {step.path.name} declares "
                                 f"{declared.describe()}: return that dtype and shape, or fix OUTPUTS")
    return step.declared_outputs


def _where(sample: str) -> str:
    """A sample's path, or a batch's description (check_batches), as error lines name it."""
    return sample if sample.startswith("a batch of") else f"raw sample {sample}"


def _run_step(step: StepFile, inputs: Sequence[Arrays], samples: Sequence[str]) -> list[Arrays]:
    with user_stage(f"running {step.name} on {len(samples)} raw sample(s)"):
        return [step.call(x, where=f"raw sample {s}") for x, s in zip(inputs, samples)]


def batch_sizes(count: int, max_batch_size: int) -> tuple[int, ...]:
    """The batch sizes a step is checked at besides one sample, as the dynamic batcher hands them: 2 and the max
    batch size, as far as `count` samples go (a batch of one was each sample's own run)."""
    return tuple(sorted({min(size, count) for size in (2, max_batch_size)} - {0, 1}))


def _shape_key(feed: Arrays) -> tuple:
    return tuple((name, arr.shape[1:]) for name, arr in sorted(feed.items()))


def _batch_of(feeds: Sequence[Arrays], samples: Sequence[str], size: int) -> tuple[Arrays, list[str]] | None:
    """The first `size` samples whose inputs share their per-sample shapes (only such requests are merged into one
    call, step_runtime.run_requests), concatenated; None when no `size` samples do."""
    groups: dict[tuple, list[int]] = {}
    for index, feed in enumerate(feeds):
        group = groups.setdefault(_shape_key(feed), [])
        group.append(index)
        if len(group) == size:
            merged = {name: np.concatenate([feeds[i][name] for i in group]) for name in feeds[group[0]]}
            return merged, [samples[i] for i in group]
    return None


def check_batches(step: StepFile, feeds: Sequence[Arrays], samples: Sequence[str], max_batch_size: int,
                  what: str = "raw samples") -> list[tuple[str, Arrays]]:
    """Run the step on batches of several samples, as Triton hands it merged requests: a step that ignores the
    batch (one row for any batch) is refused here, naming the batch size and the rows it returned. Returns (which
    batch, what it gave): their shapes count towards the step's output ports (a batch padded to its longest text).
    """
    outputs = []
    names = [Path(s).name for s in samples]
    for size in batch_sizes(len(feeds), max_batch_size):
        batch = _batch_of(feeds, names, size)
        if batch is None:
            continue
        merged, members = batch
        where = f"a batch of {size} {what} ({', '.join(members[:3])}{', ...' if size > 3 else ''})"
        with user_stage(f"running {step.name} on {where}"):
            out = step.call(merged, where=where)
        outputs.append((where, out))
    return outputs


def _post_inputs(post: StepFile, providers: Providers) -> tuple[Port, ...]:
    """The postprocess's input ports: declared, or those of the providers' tensors its parameters name (the model's
    only output for the one parameter no tensor names: wired by position). Two or more outputs for a parameter that
    matches none are refused here, naming the file, the outputs and the parameter."""
    names = [p.name for p in post.declared_inputs] if post.declared_inputs is not None else list(post.parameters)
    positions = {b.taken: b.given for b in post_by_position(
        names, providers, {p.name: p for p in post.declared_inputs or ()}, where=post.path.name)}
    if post.declared_inputs is not None:
        return post.declared_inputs
    found = {}
    for _, ports in reversed(providers):
        found.update({p.name: p for p in ports})
    model_outputs = list(dict(providers)["model"])
    left = [o for o in model_outputs if o.name not in post.parameters]
    out = []
    for name in post.parameters:
        given = found.get(positions.get(name, name))
        if given is None:
            hint = f"name the parameter {left[0].name!r}" if left else "declare INPUTS"
            raise UserInputError(f"postprocess takes {name!r}, which the model does not give (it gives "
                                 f"{', '.join(p.describe() for p in model_outputs)}): {hint}")
        out.append(Port(name, given.dtype, given.shape))
    return tuple(out)


@dataclass
class Prepared:
    """The raw samples read and, with a preprocess, run through it: all that needs no model (checked first, before
    a model is converted)."""

    raw: RawData
    runs: list[SampleRun]
    pre: StepFile | None = None
    pre_outputs: tuple[Port, ...] = ()

    @property
    def samples(self) -> list[str]:
        return [str(s.path) for s in self.raw.samples]


def prepare(raw_folder: str | Path, pre: StepFile | None, model_inputs: Sequence[Port] = (),
            max_samples: int = DEFAULT_MAX_SAMPLES, max_batch_size: int = DEFAULT_MAX_BATCH) -> Prepared:
    """Read the raw samples (as the preprocess takes them, else as the model's inputs) and run the preprocess on
    each, then on batches of them up to `max_batch_size` (check_batches); a sample or batch it fails on, or
    outputs that contradict what it declares, is one line."""
    if pre is None:
        raw = read_raw(raw_folder, [p.name for p in model_inputs], model_inputs, "the model", max_samples)
        return Prepared(raw, [SampleRun(s.name, dict(s.inputs)) for s in raw.samples])
    raw = read_raw(raw_folder, pre.input_names, pre.declared_inputs, "preprocess", max_samples)
    prepared = Prepared(raw, [SampleRun(s.name, dict(s.inputs)) for s in raw.samples], pre)
    for run, out in zip(prepared.runs, _run_step(pre, [r.raw for r in prepared.runs], prepared.samples)):
        run.pre = out
    batches = check_batches(pre, [r.raw for r in prepared.runs], prepared.samples, max_batch_size)
    prepared.pre_outputs = _outputs_port(pre, [r.pre for r in prepared.runs] + [out for _, out in batches],
                                         prepared.samples + [where for where, _ in batches])
    return prepared


def plan_pipeline(names: PipelineNames, artifact_dir: str | Path, prepared: Prepared, post: StepFile | None,
                  predict: Predict) -> PipelinePlan:
    """Check the preprocess against the model, run the model and the postprocess in-process on the prepared
    samples, checking every hand-over; raises UserInputError with one line at the first mismatch."""
    manifest = Manifest.load(artifact_dir)
    if manifest.max_batch_size <= 0:
        raise UserInputError(f"{manifest.model} is served with max_batch_size 0 (each request one whole batch); a "
                             "pipeline batches samples: convert the model with --max-batch-size N")
    model_in = tuple(Port.from_spec(t) for t in manifest.inputs)
    model_out = tuple(Port.from_spec(t) for t in manifest.outputs)
    wiring = check_steps(names, model_in, model_out, prepared, post, predict, manifest.max_batch_size)
    log.info("pipeline %s: %s -> %s%s", names.ensemble, ", ".join(p.describe() for p in wiring.inputs),
             ", ".join(p.describe() for p in wiring.outputs),
             f" ({wiring.describe_positions()})" if wiring.by_position else "")
    return PipelinePlan(names, manifest, Path(artifact_dir), prepared.raw, wiring, prepared.pre, post,
                        tuple(prepared.runs))


def check_steps(names: PipelineNames, model_in: Sequence[Port], model_out: Sequence[Port], prepared: Prepared,
                post: StepFile | None, predict: Predict, max_batch_size: int) -> Wiring:
    """The steps and the model in-process on the prepared samples (`prepared.runs` filled with each stage's
    outputs), every hand-over checked: the wiring, or one UserInputError line at the first mismatch. The model's
    tensors are given (a manifest's, or before any conversion the names its export will have: pipeline.precheck)."""
    pre, raw, runs, samples = prepared.pre, prepared.raw, prepared.runs, prepared.samples
    model_in, model_out = tuple(model_in), tuple(model_out)
    pre_wired, positions = None, ()
    if pre is not None:
        positions = check_preprocess(prepared.pre_outputs, model_in)
        pre_wired = WiredStep(names.preprocess, raw.ports, prepared.pre_outputs)
    model = WiredStep(names.model, model_in, model_out, by_position=positions)
    with user_stage(f"running the model in-process on {len(runs)} raw sample(s)"):
        for run, sample in zip(runs, samples):
            run.model = _predict(predict, model.feed(run.pre if pre is not None else run.raw), sample)
    post_wired = None
    if post is not None:
        providers = [("model", model_out), ("preprocess", pre_wired.outputs if pre_wired else ()), ("raw", raw.ports)]
        post_in = _post_inputs(post, providers)
        # checks the postprocess's inputs before running it
        post_step = wire(raw.ports, pre_wired, model, WiredStep(names.postprocess, post_in, ())).steps[-1]
        feeds = [post_step.feed({**r.raw, **r.pre, **r.model}) for r in runs]
        outs = _run_step(post, feeds, samples)
        for run, out in zip(runs, outs):
            run.post = out
        batches = check_batches(post, feeds, samples, max_batch_size, "samples' model outputs")
        post_wired = WiredStep(names.postprocess, post_in, _outputs_port(
            post, outs + [out for _, out in batches], samples + [where for where, _ in batches]))
    return wire(raw.ports, pre_wired, model, post_wired)


def _predict(predict: Predict, inputs: Mapping[str, np.ndarray], sample: str) -> Arrays:
    try:
        return {k: np.asarray(v) for k, v in predict(dict(inputs)).items()}
    except Exception as err:  # noqa: BLE001 - the model is the user's; say which sample it failed on
        from ..userfile import first_line

        raise UserInputError(f"the model failed in-process on raw sample {sample}: {first_line(err)}") from err


__all__ = ["PipelineNames", "PipelinePlan", "Prepared", "SampleRun", "batch_sizes", "check_batches", "check_steps",
           "plan_pipeline", "prepare"]
