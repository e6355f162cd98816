"""A pipeline run's folder: points.csv and steps.csv (row stores stamped with the run identity), verification.csv,
report.md (the ensemble, the verification, each point with every step's share, the speed comparison) and run.json
(RunFolder.record)."""
from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, Sequence

from ..config import PipelineLayout
from ..results import RowSchema, RunFolder, RunIdentity, host_identity, input_data_digest
from ..results.identity import file_digest, library_versions, toolkit_version
from ..results.ledger import IDENTITY_COLUMN, MEASURED_AT_COLUMN
from ..results.rows import to_csv
from ..results.schema import LATENCY_COLUMNS, THROUGHPUT
from ..spec import atomic_write_text
from ..tables import markdown_table
from .measure import PipelinePoint
from .plan import PipelinePlan
from .speed import SpeedResult
from .verify import Verification

log = logging.getLogger(__name__)
POINT_COLUMNS = ("concurrency", THROUGHPUT, *LATENCY_COLUMNS, "stable", "note")
POINTS_SCHEMA = RowSchema(
    columns=(*POINT_COLUMNS, MEASURED_AT_COLUMN, IDENTITY_COLUMN), key=("concurrency",), sort_by=("concurrency",),
    types={"concurrency": int, "stable": bool, THROUGHPUT: float, **{c: float for c in LATENCY_COLUMNS}},
    identity_column=IDENTITY_COLUMN, stamp_column=MEASURED_AT_COLUMN)
STEP_COLUMNS = ("concurrency", "model", "requests", "queue_ms", "compute_ms", "share")
STEPS_SCHEMA = RowSchema(
    columns=(*STEP_COLUMNS, MEASURED_AT_COLUMN, IDENTITY_COLUMN), key=("concurrency", "model"),
    types={"concurrency": int, "requests": int, "queue_ms": float, "compute_ms": float, "share": float},
    identity_column=IDENTITY_COLUMN, stamp_column=MEASURED_AT_COLUMN)
VERIFY_SCHEMA = RowSchema(columns=("sample", "output", "kind", "passed", "max_abs_err", "detail"),
                          key=("sample", "output"), types={"passed": bool, "max_abs_err": float})


def run_identity(plan: PipelinePlan, configs: dict[str, Any], server_version: str | None,
                 perf_options: dict[str, Any], input_json: Path) -> RunIdentity:
    """What the points were measured under: host, server, every loaded config, the artifact, perf_analyzer's
    options, the raw samples and the user's step files."""
    steps = {s.name: file_digest(s.path)[:16] for s in (plan.pre, plan.post) if s is not None}
    return RunIdentity(host=host_identity(), server_version=server_version, model_config=configs,
                       artifact_digest=(plan.manifest.artifact_sha256 or "")[:16] or None, perf_options=perf_options,
                       input_data=input_data_digest(input_json), toolkit_version=toolkit_version(),
                       libraries=library_versions(), extra={"kind": "pipeline", "steps": steps})


def write_rows(folder: RunFolder, points: Sequence[PipelinePoint], verification: Verification | None) -> None:
    if verification is not None:
        # this run's verdict whole: rows of samples an earlier run had are not kept beside it
        rows = [c.row() for c in verification.checks]
        atomic_write_text(folder.file("verification.csv"), to_csv(VERIFY_SCHEMA, rows))
    if not points:
        return
    store = folder.table("points.csv", POINTS_SCHEMA).open(say=log.info)
    store.put_many({"concurrency": p.concurrency, **p.values, "stable": p.stable, "note": p.note} for p in points)
    steps = folder.table("steps.csv", STEPS_SCHEMA).open(say=log.info)
    steps.put_many({"concurrency": p.concurrency, "model": s.model, "requests": s.requests, "queue_ms": s.queue_ms,
                    "compute_ms": s.compute_ms, "share": s.share} for p in points for s in p.steps)


def _ms(value: float) -> str:
    return "" if value is None or math.isnan(value) else f"{value:.2f}"


def _pipeline_section(plan: PipelinePlan, layout: PipelineLayout) -> list[str]:
    rows = [[s.model, ", ".join(p.describe() for p in s.inputs), ", ".join(p.describe() for p in s.outputs)]
            for s in plan.wiring.steps]
    fused = layout == PipelineLayout.FUSED
    title = (f"## The pipeline `{plan.names.ensemble}`, fused into one model" if fused
             else f"## The ensemble `{plan.names.ensemble}`")
    how = ("one Python-backend model runs its steps in order in one process (--layout fused), so the server's "
           "statistics have no per-step share" if fused else "its steps, in order")
    return [title, "", f"Clients send {', '.join(p.describe() for p in plan.wiring.inputs)} and get "
            f"{', '.join(p.describe() for p in plan.wiring.outputs)}; {how}:", "",
            markdown_table(["step" if fused else "model", "takes", "gives"], rows, ["l", "l", "l"]), ""]


def _verification_section(v: Verification) -> list[str]:
    rows = [[c.sample, c.output, c.kind, "yes" if c.passed else "NO",
             "" if c.max_abs_err is None else f"{c.max_abs_err:.3g}", c.detail] for c in v.checks]
    return ["## Verification", "", v.summary() + ".", "",
            markdown_table(["sample", "output", "compared", "equal", "max abs err", "detail"], rows,
                           ["l", "l", "l", "l", "r", "l"]), ""]


def _points_section(points: Sequence[PipelinePoint]) -> list[str]:
    rows = [[p.concurrency, f"{p.throughput:.1f}", _ms(p.values.get("P50 Latency")), _ms(p.values.get("P99 Latency")),
             _ms(p.values.get("Avg Latency")), "yes" if p.stable else "no"] for p in points]
    steps = [[p.concurrency, s.model, s.requests, _ms(s.queue_ms), _ms(s.compute_ms),
              "" if math.isnan(s.share) else f"{s.share:.0%}"] for p in points for s in p.steps]
    lines = ["## Performance (perf_analyzer, the raw samples)", "",
             markdown_table(["concurrency", "inf/s", "p50 ms", "p99 ms", "avg ms", "stable"], rows), ""]
    if steps:  # an ensemble's composing models; a fused pipeline is one model
        lines += ["Each step's share of the server's time per request (its statistics during the point):", "",
                  markdown_table(["concurrency", "step", "requests", "queue ms/req", "compute ms/req", "share"],
                                 steps, ["r", "l", "r", "r", "r", "r"]), ""]
    return lines


def _speed_section(s: SpeedResult) -> list[str]:
    rows = []
    for stage, local in s.stage_ms.items():
        queue, compute = s.served_steps.get(stage, (math.nan, math.nan))
        rows.append([stage, _ms(local), _ms(queue), _ms(compute), _ms(queue + compute - local)])
    rows += [["all steps, in the server", _ms(s.inprocess_ms), "", _ms(s.server_ms), _ms(s.server_ms - s.inprocess_ms)],
             ["round trip (client less server)", "", "", _ms(s.round_trip_ms), _ms(s.round_trip_ms)],
             ["served, as the client sees it", _ms(s.inprocess_ms), "", _ms(s.served_ms),
              _ms(s.served_ms - s.inprocess_ms)]]
    return ["## Served against in-process", "",
            f"{s.requests} requests, one at a time, in turns with the same steps in-process (the same functions and "
            f"the same artifact runtime): {s.text()}.", "",
            markdown_table(["median per request", "in-process ms", "served queue ms", "served ms",
                            "served - in-process"], rows, ["l", "r", "r", "r", "r"]), "",
            *(["A step's served time is its model's queue and compute (input, infer, output) from the server's "
               "statistics read around each request: it includes the hop between Triton and the Python backend's "
               "process. The steps' times overlap (a step's output is still being handed back while the next step "
               "starts), so they add up to more than the server's time for the request.", ""] if s.served_steps else
              ["The pipeline is one model (fused): the server's statistics have its time as a whole, with the one "
               "hop between Triton and the Python backend's process.", ""])]


def write_report(path: Path, plan: PipelinePlan, verification: Verification | None, points: Sequence[PipelinePoint],
                 speed: SpeedResult | None, layout: PipelineLayout = PipelineLayout.ENSEMBLE) -> Path:
    lines = [f"# Pipeline `{plan.names.ensemble}`", "",
             f"Model `{plan.manifest.model}` ({plan.manifest.format}, {plan.manifest.precision}, from "
             f"{plan.artifact_dir}); {plan.raw.describe()}.", ""]
    lines += _pipeline_section(plan, layout)
    if verification is not None:
        lines += _verification_section(verification)
    if points:
        lines += _points_section(points)
    if speed is not None:
        lines += _speed_section(speed)
    atomic_write_text(path, "\n".join(lines))
    return path


__all__ = ["POINTS_SCHEMA", "STEPS_SCHEMA", "VERIFY_SCHEMA", "run_identity", "write_report", "write_rows"]
