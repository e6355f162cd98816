"""A model's outputs on data, written as a dump (npz shards with ids, and labels/inputs when asked) that
`metrics` compares: through a served model (`triton_dump`) or the framework model / artifact runtime
(`framework_dump`). The infer commands parse flags and call these; the demos call them directly."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .data.samples import DataSpec
from .errors import UserInputError


@dataclass
class Dump:
    """What a dump step wrote."""

    path: Path
    samples: int
    source: str  # triton | the framework source's name


def triton_dump(url: str, model_name: str, output_dir: str | Path, data: DataSpec, *,
                manifest: str | Path | None = None, protocol: str | None = None, model_version: str = "",
                batch_size: int = 1, in_flight: int = 2, shared_memory: str = "none", precision: str | None = None,
                dump_labels: bool = False, dump_inputs: bool = False) -> Dump:
    """Send the samples through the served model (its signature from `manifest` or from the server)."""
    from .client import OutputRequest, TritonClient, infer_many
    from .data.batches import make_source
    from .spec import Manifest, ModelSignature

    with TritonClient(url, protocol) as client:
        client.require_ready(model_name, model_version)
        inputs, outputs, max_batch = client.signature(model_name, model_version)
        proto = client.protocol
    meta: dict[str, Any] = {"model": model_name, "source": "triton", "extra": {"server_url": url, "protocol": proto}}
    loaded = Manifest.load(manifest) if manifest else None
    if loaded is not None:
        signature = loaded.signature
        meta.update(task=loaded.task, model=loaded.model)
    else:
        signature = ModelSignature(tuple(inputs), tuple(outputs))
    if max_batch and batch_size > max_batch:
        raise UserInputError(f"--batch-size {batch_size} exceeds the model's max_batch_size {max_batch}")
    source = make_source(data.data_dir, signature, data.num_samples or 16, data.seed, dataloader=data.dataloader,
                         dataloader_args=data.dataloader_args,
                         precision=precision or (loaded.precision if loaded else "fp32"), limit=data.num_samples,
                         batched=max_batch > 0)
    if data.user_data:
        meta["extra"]["data"] = source.describe()
    # an output with a dynamic axis (one row per token) has no size before the answer: it comes in the response
    requested = [OutputRequest(t.name, 0 if t.is_dynamic else t.nbytes()) for t in signature.outputs]

    def predict_many(requests: list[dict]) -> list[dict]:
        answers = dict(infer_many(url, model_name, enumerate(requests), requested, protocol=protocol,
                                  shared_memory=shared_memory, in_flight=in_flight, version=model_version))
        return [answers[i] for i in range(len(requests))]

    def plain(batches_in) -> tuple:  # answers written as they arrive
        batches = list(batches_in)
        results = infer_many(url, model_name, ((i, b[1]) for i, b in enumerate(batches)), requested,
                             protocol=protocol, shared_memory=shared_memory, in_flight=in_flight, version=model_version)
        return ((*batches[i], out) for i, out in results), len(batches)

    path, samples = _dump(source, signature, max_batch > 0, data.user_data, batch_size, predict_many, plain,
                          output_dir, meta, dump_inputs, dump_labels)
    return Dump(path, samples, "triton")


def framework_dump(model_path: str | Path, output_dir: str | Path, data: DataSpec, *, runtime: str = "framework",
                   device: str = "cpu", batch_size: int = 1, precision: str | None = None, dump_labels: bool = False,
                   dump_inputs: bool = False) -> Dump:
    """Run the samples through the model the artifact in `model_path` came from (runtime `framework`: eager
    PyTorch rebuilt from the manifest's source record) or through the artifact itself (`artifact`)."""
    from .data.batches import make_source
    from .data.predict import predict_batches
    from .framework import framework_predictor

    predict, manifest, source_name = framework_predictor(model_path, runtime, device)
    source = make_source(data.data_dir, manifest.signature, data.num_samples or 16, data.seed,
                         dataloader=data.dataloader, dataloader_args=data.dataloader_args,
                         precision=precision or manifest.precision, limit=data.num_samples,
                         batched=manifest.max_batch_size > 0)
    meta: dict[str, Any] = {"model": manifest.model, "task": manifest.task, "source": source_name,
                            "extra": {"format": manifest.format, "preset": manifest.preset}}
    if data.user_data:
        meta["extra"]["data"] = source.describe()
    path, samples = _dump(source, manifest.signature, manifest.max_batch_size > 0, data.user_data, batch_size,
                          lambda requests: [predict(x) for x in requests],
                          lambda batches: (predict_batches(batches, predict), None), output_dir, meta, dump_inputs,
                          dump_labels)
    return Dump(path, samples, source_name)


def _dump(source, signature, batched: bool, user_data: bool, batch_size: int, predict_many, plain, output_dir, meta,
          dump_inputs: bool, dump_labels: bool) -> tuple[Path, int]:
    """The one sequence both dumps run: samples of different lengths padded where the model's mask makes it safe
    (data/padding.py), else `plain(batches) -> (rows, total)`; a max_batch_size 0 model's requests as one sample
    each; the dump written. Returns its directory and the samples it holds."""
    from .data.padding import Batching, padded_rows, padding_plan
    from .data.predict import write_dump

    plan = padding_plan(signature) if user_data and batched else None
    batching = Batching()
    counter = _Counter(source.batches(1 if plan is not None else batch_size))
    if plan is not None:
        rows, total = padded_rows(counter, batch_size, plan, predict_many, batching), None
    else:
        rows, total = plain(counter)
    if not batched:
        rows = _whole_requests(rows)
    path = write_dump(rows, output_dir, meta, batching, dump_inputs=dump_inputs, dump_labels=dump_labels, total=total)
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
