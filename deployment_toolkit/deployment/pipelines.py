"""A deployment's model with pre/post-processing (a `preprocess:`/`postprocess:` entry): before any model is
converted or searched, every such entry is checked in process on one raw sample (`check`: pipeline.precheck, the
wiring made by position where it is unambiguous, an entry that cannot be wired refused in one line naming it); after
its network's search, its steps are checked in-process on the raw samples (pipeline.plan_request), written around the
searched network config as the ensemble `<name>_pipeline` (or, `layout: fused`, as one model of that name), verified
served against in-process, and measured as clients call it: the ensemble fed the raw samples (bytes, text), so the
capacity, the mix and the confirmation count the server's pre/post-processing too."""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import SharedMemory
from ..errors import UserError, UserInputError
from ..sources.base import DEFAULT_MAX_BATCH
from .errors import DeploymentPlanError
from .file import Deployment, ModelEntry

log = logging.getLogger(__name__)


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
                            max_batch_size=source.max_batch_size or DEFAULT_MAX_BATCH, model=source)
    fed = inputs.source(source)
    if data is not None and data.user_data:
        inputs.check_data(data)
        return fed, data
    return fed, inputs.data


def _source(entry: ModelEntry, template: Any) -> Any:
    """The entry's network as its search builds it (deployment.plan.search_request): the template's own source (a
    plan of one model), else the entry's reference with its preset, checkpoint and model_args."""
    if template.source is not None:
        return dataclasses.replace(template.source)
    from ..sources import parse_reference

    return parse_reference(entry.model, preset=template.job.preset,
                           checkpoint=str(entry.checkpoint) if entry.checkpoint else None,
                           kwargs=dict(entry.model_args))


def check_entry(entry: ModelEntry, template: Any) -> Any:
    """One entry's pipeline in process on one raw sample (pipeline.precheck.check_pipeline)."""
    from ..pipeline.precheck import check_pipeline

    if entry.raw_data is None:
        raise UserInputError("a model with preprocess/postprocess needs raw_data: (the samples its clients send, "
                             "e.g. image files or text files)")
    return check_pipeline(entry.name, _source(entry, template), entry.raw_data, entry.preprocess, entry.postprocess,
                          preset=template.job.preset)


def check(deployment: Deployment, template: Any, only: int | None = None) -> dict[str, Any]:
    """Every pipeline entry (or, for a fan-out index, its own) checked in process before any search: the first that
    cannot be wired is one UserInputError line naming it (`<file>: models[i] (name): ...`). Returns each entry's
    pipeline.precheck.PipelineCheck by name; each is logged, with the hand-overs made by position. A gathering run
    does not call it: its searches ran in the indexes, each of which checked its own entry first."""
    where = str(deployment.source) if deployment.source else "deployment"
    checked = {}
    for index, entry in enumerate(deployment.models):
        if not entry.has_pipeline or only not in (None, index):
            continue
        try:
            checked[entry.name] = check_entry(entry, template)
        except UserError as err:
            raise UserInputError(f"{where}: models[{index}] ({entry.name}): {err}") from None
        log.info("%s", checked[entry.name].text())
    return checked


def write(entry: ModelEntry, search: Any, repository: Path, out_dir: Path, checked: Any = None) -> ServedPipeline:
    """Check the steps in-process and write them and the ensemble around the searched network (its winner config).
    `checked`: the entry's pipeline as checked before its search (check), whose wiring this one must have."""
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
    if checked is not None and plan.wiring.by_position != checked.by_position:
        log.warning("%s: wired %s after the search, but %s before it (the searched model's tensors are named "
                    "otherwise than its reference's)", entry.name, plan.wiring.describe_positions() or "by name",
                    checked.wiring.describe_positions() or "by name")
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


__all__ = ["ServedPipeline", "check", "check_entry", "search_inputs", "target", "verify", "write"]
