"""A deployment's model with pre/post-processing (a `preprocess:`/`postprocess:` entry): after its network's search,
its steps are checked in-process on the raw samples (pipeline.plan_request), written around the searched network
config as the ensemble `<name>_pipeline` (or, `layout: fused`, as one model of that name), verified served against
in-process, and measured as clients call it: the
ensemble fed the raw samples (bytes, text), so the capacity, the mix and the confirmation count the server's
pre/post-processing too."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import SharedMemory
from ..errors import UserInputError
from ..sources.base import DEFAULT_MAX_BATCH
from .errors import DeploymentPlanError
from .file import ModelEntry


@dataclass
class ServedPipeline:
    plan: Any  # pipeline.PipelinePlan
    written: Any  # pipeline.WrittenPipeline
    input_json: Path
    verification: Any = None  # pipeline.Verification once served

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(self.written.models)

    @property
    def ensemble(self) -> str:
        return self.written.ensemble


def search_inputs(entry: ModelEntry, source: Any, data: Any, folder: Path) -> tuple[Any, Any]:
    """What a pipeline's network is searched with: its inputs as the preprocess gives them on the raw samples
    (pipeline.network_inputs; the per-sample values written into `folder`), so a model.py needs no get_signature and
    the entry no `data:`; given, each is checked against them (one line). Returns (source, data) for the search:
    the source fed those inputs, and the entry's own data if it has some, else the preprocess's outputs. Without
    a preprocess: (source, data) as they are."""
    if entry.preprocess is None:
        return source, data
    from ..pipeline.network_inputs import network_inputs

    if entry.raw_data is None:
        raise UserInputError(f"{entry.name}: a model with preprocess needs raw_data: (the samples its clients send, "
                             "e.g. image files or text files), which the network's inputs are read from")
    inputs = network_inputs(entry.preprocess, entry.raw_data, folder,
                            max_batch_size=source.max_batch_size or DEFAULT_MAX_BATCH)
    fed = inputs.source(source)
    if data is not None and data.user_data:
        inputs.check_data(data)
        return fed, data
    return fed, inputs.data


def write(entry: ModelEntry, search: Any, repository: Path, out_dir: Path) -> ServedPipeline:
    """Check the steps in-process and write them and the ensemble around the searched network (its winner config)."""
    from ..pipeline import PipelineRequest, StepServing, plan_request, write_input_json, write_pipeline

    if entry.raw_data is None:
        raise UserInputError(f"{entry.name}: a model with preprocess/postprocess needs raw_data: (the samples its "
                             "clients send, e.g. image files or text files)")
    winner = search.outcome.decision.winner.candidate
    artifact = next(f.artifact_dir for f in search.formats if f.format == winner.format)
    request = PipelineRequest(model=Path(artifact), raw_data=entry.raw_data, result_path=out_dir,
                              preprocess=entry.preprocess, postprocess=entry.postprocess, name=entry.name,
                              model_repository=repository, serve=False)
    plan = plan_request(request)
    network = winner.config_options(entry.name)
    written = write_pipeline(repository, plan, StepServing(plan.max_batch_size), network, layout=entry.layout)
    return ServedPipeline(plan, written, write_input_json(plan, out_dir / f"{entry.name}.input.json"))


def verify(served: ServedPipeline, url: str) -> Any:
    """The served ensemble against the same steps in-process, sample by sample; a mismatch stops the plan."""
    from ..client import TritonClient
    from ..pipeline import verify_served

    with TritonClient(url) as client:
        served.verification = verify_served(client, served.plan)
    if not served.verification.passed:
        raise DeploymentPlanError(f"{served.ensemble}: the served pipeline differs from its steps run in-process: "
                                  f"{served.verification.summary()}")
    return served.verification


def target(served: ServedPipeline, base: Any) -> Any:
    """The network's open-loop target turned into the ensemble's: its name, tensors and raw samples (sent over the
    network: bytes tensors, and a mix never shares memory regions)."""
    from ..pipeline.measure import signature

    options = dataclasses.replace(base.options, shared_memory=SharedMemory.NONE.value,
                                  input_data=str(served.input_json))
    return dataclasses.replace(base, model_name=served.ensemble, signature=signature(served.plan), options=options,
                               config=f"{base.config}/pipeline", samples_per_request=1.0)  # one raw sample each


__all__ = ["ServedPipeline", "search_inputs", "target", "verify", "write"]
