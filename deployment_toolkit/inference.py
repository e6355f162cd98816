"""A model's outputs on data, written as a dump (npz shards with ids, and labels/inputs when asked) that
`metrics` compares: through a served model (`triton_dump`) or the framework model / artifact runtime
(`framework_dump`). The infer commands parse flags and call these; the demos call them directly."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .config import Protocol, SharedMemory, check_numbers, setting
from .data.samples import DataSpec
from .errors import UserInputError


@dataclass
class Dump:
    """What a dump step wrote."""

    path: Path
    samples: int
    source: str  # triton | the framework source's name


@dataclass
class DumpSettings:
    """How either dump runs the samples and what it keeps; each default written once (the infer commands' flags are
    built from these fields)."""

    batch_size: int = setting(1, flag="--batch-size", low=1, high=65536, help="samples per request")
    # what --dataloader gets; None: the manifest's (else fp32)
    precision: str | None = setting(None, flag="--precision",
                                    help="given to --dataloader (default: the manifest's, else fp32)")
    dump_labels: bool = setting(False, flag="--dump-labels", action="store_true", help="also dump the labels")
    dump_inputs: bool = setting(False, flag="--dump-inputs", action="store_true", help="also dump the inputs")

    def __post_init__(self) -> None:
        check_numbers(self)  # the API refuses what the flags refuse


@dataclass
class TritonDumpSettings(DumpSettings):
    """A dump through a served model: how to reach it and how requests are sent."""

    manifest: Path | None = setting(None, flag="--manifest",
                                    help="manifest.json of the served artifact (default: ask the server)")
    protocol: Protocol | None = setting(None, flag="--protocol", type=Protocol, choices=tuple(Protocol),
                                        help="default: the URL's scheme, else grpc")
    model_version: str = setting("", flag="--model-version", help="default: the server's choice")
    in_flight: int = setting(2, flag="--in-flight", low=1, high=1 << 16, help="requests outstanding at once")
    shared_memory: SharedMemory = setting(SharedMemory.NONE, flag="--shared-memory",
                                          choices=(SharedMemory.NONE, SharedMemory.SYSTEM),
                                          help="how tensors travel to and from the server")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.shared_memory = SharedMemory(self.shared_memory)
        self.protocol = Protocol(self.protocol) if self.protocol else None


@dataclass
class FrameworkDumpSettings(DumpSettings):
    """A dump in this process: the framework model the artifact came from, or the artifact itself."""

    runtime: str = setting("framework", flag="--runtime", choices=("framework", "artifact"),
                           help="framework: eager PyTorch; artifact: the converted file with its runtime")
    device: str = setting("cpu", flag="--device", help="cpu or cuda:N")


@dataclass
class _Job:
    """What one dump reads and where it writes, shared by both doors."""

    source: Any  # data.batches: yields (ids, inputs, labels) batches
    signature: Any
    batched: bool  # max_batch_size > 0
    user_data: bool
    output_dir: Path
    meta: dict[str, Any]


def triton_dump(url: str, model_name: str, output_dir: str | Path, data: DataSpec,
                settings: TritonDumpSettings | None = None) -> Dump:
    """Send the samples through the served model (its signature from the settings' manifest or from the server)."""
    from .client import OutputRequest, TritonClient, infer_many
    from .data.batches import make_source
    from .spec import Manifest, ModelSignature

    s = settings or TritonDumpSettings()
    version = s.model_version
    with TritonClient(url, s.protocol) as client:
        client.require_ready(model_name, version)
        inputs, outputs, max_batch = client.signature(model_name, version)
        proto = client.protocol
    meta: dict[str, Any] = {"model": model_name, "source": "triton", "extra": {"server_url": url, "protocol": proto}}
    loaded = Manifest.load(s.manifest) if s.manifest else None
    if loaded is not None:
        signature = loaded.signature
        meta.update(task=loaded.task, model=loaded.model)
    else:
        signature = ModelSignature(tuple(inputs), tuple(outputs))
    if max_batch and s.batch_size > max_batch:
        raise UserInputError(f"--batch-size {s.batch_size} exceeds the model's max_batch_size {max_batch}")
    source = make_source(data, signature, precision=s.precision or (loaded.precision if loaded else "fp32"),
                         batched=max_batch > 0)
    if data.user_data:
        meta["extra"]["data"] = source.describe()
    # an output with a dynamic axis (one row per token) has no size before the answer: it comes in the response
    requested = [OutputRequest(t.name, 0 if t.is_dynamic else t.nbytes()) for t in signature.outputs]

    def send(items) -> Any:
        return infer_many(url, model_name, items, requested, protocol=s.protocol, shared_memory=s.shared_memory,
                          in_flight=s.in_flight, version=version)

    def predict_many(requests: list[dict]) -> list[dict]:
        answers = dict(send(enumerate(requests)))
        return [answers[i] for i in range(len(requests))]

    def plain(batches_in) -> tuple:  # answers written as they arrive
        batches = list(batches_in)
        results = send((i, b[1]) for i, b in enumerate(batches))
        return ((*batches[i], out) for i, out in results), len(batches)

    job = _Job(source, signature, max_batch > 0, data.user_data, Path(output_dir), meta)
    path, samples = _dump(job, s, predict_many, plain)
    return Dump(path, samples, "triton")


def framework_dump(model_path: str | Path, output_dir: str | Path, data: DataSpec,
                   settings: FrameworkDumpSettings | None = None) -> Dump:
    """Run the samples through the model the artifact in `model_path` came from (runtime `framework`: eager
    PyTorch rebuilt from the manifest's source record) or through the artifact itself (`artifact`)."""
    from .data.batches import make_source
    from .data.predict import predict_batches
    from .framework import framework_predictor

    s = settings or FrameworkDumpSettings()
    predict, manifest, source_name = framework_predictor(model_path, s.runtime, s.device)
    source = make_source(data, manifest.signature, precision=s.precision or manifest.precision,
                         batched=manifest.max_batch_size > 0)
    meta: dict[str, Any] = {"model": manifest.model, "task": manifest.task, "source": source_name,
                            "extra": {"format": manifest.format, "preset": manifest.preset}}
    if data.user_data:
        meta["extra"]["data"] = source.describe()
    job = _Job(source, manifest.signature, manifest.max_batch_size > 0, data.user_data, Path(output_dir), meta)
    path, samples = _dump(job, s, lambda requests: [predict(x) for x in requests],
                          lambda batches: (predict_batches(batches, predict), None))
    return Dump(path, samples, source_name)


def _dump(job: _Job, settings: DumpSettings, predict_many: Callable[[list[dict]], list[dict]],
          plain: Callable[[Any], tuple]) -> tuple[Path, int]:
    """The one sequence both dumps run: samples of different lengths padded where the model's mask makes it safe
    (data/padding.py), else `plain(batches) -> (rows, total)`; a max_batch_size 0 model's requests as one sample
    each; the dump written. Returns its directory and the samples it holds."""
    from .data.padding import Batching, padded_rows, padding_plan
    from .data.predict import write_dump

    plan = padding_plan(job.signature) if job.user_data and job.batched else None
    batching = Batching()
    counter = _Counter(job.source.batches(1 if plan is not None else settings.batch_size))
    if plan is not None:
        rows, total = padded_rows(counter, settings.batch_size, plan, predict_many, batching), None
    else:
        rows, total = plain(counter)
    if not job.batched:
        rows = _whole_requests(rows)
    path = write_dump(rows, job.output_dir, job.meta, batching, dump_inputs=settings.dump_inputs,
                      dump_labels=settings.dump_labels, total=total)
    return Path(path), counter.samples


def _whole_requests(rows):
    """A max_batch_size 0 model's requests as dump rows: each request one sample (its id), its tensors as they are
    with a sample axis in front."""
    for ids, inputs, labels, outputs in rows:
        yield ids, *({k: np.asarray(v)[None] for k, v in t.items()} for t in (inputs, labels, outputs))


class _Counter:
    """The source's batches as they pass, counting their samples."""

    def __init__(self, batches):
        self._batches, self.samples = batches, 0

    def __iter__(self):
        for batch in self._batches:
            self.samples += len(batch[0])
            yield batch
