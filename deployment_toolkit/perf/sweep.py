"""A sweep of perf_analyzer points against a live server, resumable and safe to interrupt.

- Each finished point is saved at once: the whole `<kind>.csv` is rewritten through a temp file and a
  rename, so the file never holds a repeated header or half a row, whatever kills the process.
- A rerun of the same command skips the points already in the CSV ("skipping N completed points").
- Each row records when it was measured and under which identity (results.identity: host, server version, the
  config the server loaded, artifact digest, perf options, input data, toolkit version). A rerun reuses only the
  rows of the same identity; rows of another are moved aside (never deleted) with one line saying what differs.
- Before each point the server is health-checked; if it died, the sweep stops with the server's log
  tail (or perf_analyzer's output), keeps what was measured and can be resumed by running it again.
"""
from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..binaries import check_perf_analyzer
from ..client import ServerNotReady, TritonClient, instance_count
from ..committed import refuse_committed
from ..data.whole import samples_per_request
from ..errors import UserError
from ..results.identity import (RunIdentity, artifact_digest, host_identity, input_data_digest, key_fields,
                                library_versions, served_config, toolkit_version)
from ..results.run_folder import RunFolder
from ..results.schema import THROUGHPUT
from ..results.store import ResultsStore
from ..spec import ModelSignature, SpecError, TensorSpec, atomic_write_text, numpy_dtype
from . import telemetry
from .analyzer import (
    HasSignature,
    PerfAnalyzerError,
    PerfOptions,
    PerfTarget,
    build_command,
    needs_input_file,
    run_point,
    write_input_data_json,
)
from .sweep_config import PointCallback, ServerAt, SweepPoint, SweepSettings, sweep_arguments

log = logging.getLogger(__name__)


class SweepError(UserError, RuntimeError):
    """A sweep could not go on; completed points are kept and a rerun resumes."""


class ServerDiedError(SweepError):
    pass


# ---- the run's identity (rows are stored through results.store) ---------------------------------

def sweep_identity(model_config: dict[str, Any], server_version: str | None, manifest_path: str | Path | None,
                   options: PerfOptions, input_data: str | Path | None) -> RunIdentity:
    """What defines a sweep's numbers (results.identity). The server URL is left out: a restarted server may get new
    ports; the points are not in it either: a sweep extended by new points reuses the ones it has."""
    return RunIdentity(
        host=host_identity(),
        server_version=server_version,
        model_config=served_config(model_config),
        artifact_digest=artifact_digest(manifest_path),
        perf_options=key_fields(options.measurement_fields()),
        input_data=input_data_digest(input_data if input_data is not None else options.input_data),
        toolkit_version=toolkit_version(),
        libraries=library_versions(),
    )


# ---- talking to the server ---------------------------------------------------------------------

def signature_from_metadata(metadata: dict[str, Any], max_batch_size: int,
                            shapes: dict[str, Sequence[int]] | None = None) -> ModelSignature:
    """A signature derived from the server's model metadata, for runs without a manifest.

    The batch axis is dropped when the model batches; other -1 dims take their size from `shapes`
    (the `--shape NAME:dims` flags) and are refused without one, because perf_analyzer cannot guess them.
    """
    shapes = {k: tuple(int(d) for d in v) for k, v in (shapes or {}).items()}

    def spec(t: dict[str, Any], is_input: bool) -> TensorSpec:
        dims = list(t["shape"])[1:] if max_batch_size > 0 else list(t["shape"])
        example = shapes.get(t["name"])
        if -1 in dims and example is None:
            if is_input:
                raise SpecError(
                    f"input {t['name']!r} has dynamic dims {dims}: pass --shape {t['name']}:"
                    + ",".join("N" if d == -1 else str(d) for d in dims) + " or --manifest PATH"
                )
            example = tuple(1 if d == -1 else d for d in dims)  # unknown output size: shm size falls back to 100 KB
        return TensorSpec(name=t["name"], shape=tuple(dims), dtype=numpy_dtype(t["datatype"]), example_shape=example)

    return ModelSignature(
        inputs=tuple(spec(t, True) for t in metadata.get("inputs", [])),
        outputs=tuple(spec(t, False) for t in metadata.get("outputs", [])),
    )


# ---- the sweep ---------------------------------------------------------------------------------

@dataclass
class SweepOutcome:
    kind: str
    result_dir: Path
    csv_path: Path
    rows: list[dict[str, Any]]
    measured: list[SweepPoint] = field(default_factory=list)
    skipped: list[SweepPoint] = field(default_factory=list)
    report: dict[str, Path] = field(default_factory=dict)

    @property
    def unstable(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if not r.get("stable", True)]


@dataclass
class _Served:
    """The model as the server serves it, read once before the sweep."""

    url: str
    model_config: dict[str, Any]
    max_batch: int
    signature: HasSignature
    server_version: str | None
    instances: int


def _served(model_name: str, at: ServerAt, signature: HasSignature | None, options: PerfOptions,
            s: SweepSettings) -> _Served:
    """Wait for the model, then read its loaded config, the server's version and (without a signature) the model's
    metadata."""
    url = at.url_for(options.protocol)
    with TritonClient(url, options.protocol) as client:
        client.wait_until_ready(model_name, s.model_version, s.ready_timeout_s)
        try:
            model_config = client.config_json(model_name, s.model_version)
            max_batch = client.config(model_name, s.model_version).max_batch_size
            if signature is None:
                metadata = client.metadata(model_name, s.model_version)
        except Exception as err:  # noqa: BLE001 - tritonclient raises its own exception types
            raise ServerNotReady(f"cannot read model {model_name!r} from {url} ({options.protocol}): {err}") from err
        server_version = client.server_version()
    if signature is None:
        signature = signature_from_metadata(metadata, max_batch, s.shapes)
    return _Served(url, model_config, max_batch, signature, server_version, instance_count(model_config))


def run_sweep(kind: str, model_name: str, where: ServerAt | str | None, signature: HasSignature | None,
              points: Sequence[SweepPoint], options: PerfOptions, result_dir: str | Path,
              settings: SweepSettings | None = None) -> SweepOutcome:
    """Measure every point not yet in `<result_dir>/<kind>.csv` under this run's identity, then write the tables,
    run.json and report. Nothing is written before the server has answered a real request (a run that never
    started leaves no trace); `settings.reuse` is results.ledger's policy: auto | resume | fresh."""
    s = settings or SweepSettings()
    at = ServerAt.of(where)
    result_dir = Path(result_dir)
    refuse_committed(result_dir, "--result-path")
    binary, _ = check_perf_analyzer()
    points = sorted(dict.fromkeys(points), key=lambda p: p.key)
    served = _checked(model_name, at, signature, options, s, points)
    run = _start(kind, model_name, served, options, s, result_dir, binary)
    done = run.store.completed(include_unstable=not s.remeasure_unstable)
    todo = [p for p in points if p.key not in done]
    skipped = [p for p in points if p.key in done]
    if skipped:
        log.info(f"{kind}: skipping {len(skipped)} completed points (already in {run.store.csv_path})")
    section, config = _sections(run, points)
    _record_run(run.store.folder, kind, config, section, served.server_version)

    outcome = SweepOutcome(kind, result_dir, run.store.csv_path, run.store.rows(), skipped=skipped)
    scrapes = _measure(run, todo, outcome, at, (len(points), len(skipped)))
    section["completed"] = len(outcome.rows)
    # whether the server's own figures are in this run, and why not: a refused endpoint is said in run.json and
    # the report, not only in one console line
    section["telemetry"] = {"metrics_url": scrapes.url, "off": scrapes.off or (None if scrapes.url else
                                                                             "no metrics endpoint")}
    section["unstable_points"] = [[r["Client Batch Size"], r["Concurrent client requests"]] for r in outcome.unstable]
    _record_run(run.store.folder, kind, config, section, served.server_version)
    if s.build_report:
        from ..report.build import build_report as _build

        outcome.report = _build(result_dir)
    return outcome


@dataclass
class _SweepRun:
    """What every point of one sweep shares: where it writes, what perf_analyzer targets, and the row store."""

    kind: str
    model_name: str
    result_dir: Path
    served: _Served
    options: PerfOptions
    settings: SweepSettings
    precision: str
    target: PerfTarget
    identity: RunIdentity
    store: ResultsStore

    @property
    def raw_dir(self) -> Path:
        return self.result_dir / "raw"


def _checked(model_name: str, at: ServerAt, signature: HasSignature | None, options: PerfOptions, s: SweepSettings,
             points: Sequence[SweepPoint]) -> _Served:
    """The served model, refused where a batch size exceeds its max_batch_size, and answering a real request
    (preflight) before anything is written."""
    served = _served(model_name, at, signature, options, s)
    too_big = [p.batch_size for p in points if p.batch_size > max(served.max_batch, 1)]
    if too_big:
        raise SweepError(f"batch sizes {sorted(set(too_big))} exceed the model's max_batch_size {served.max_batch}")
    with TritonClient(served.url, options.protocol) as client:
        client.preflight(model_name, s.model_version, served.signature, served.max_batch > 0, s.ready_timeout_s)
    if s.number_of_model_instances and s.number_of_model_instances != served.instances:
        log.warning(f"warning: --number-of-model-instances {s.number_of_model_instances} but the server's config has "
                    f"{served.instances}; recording the server's value")
    return served


def _start(kind: str, model_name: str, served: _Served, options: PerfOptions, s: SweepSettings, result_dir: Path,
           binary: str) -> _SweepRun:
    """The precision recorded, the generated input file (where the model needs one), perf_analyzer's target and
    the row store opened under the run's identity (rows of another identity are moved aside)."""
    signature = served.signature
    precision = (s.precision or getattr(signature, "precision", "") or _io_precision(signature)).upper()
    raw_dir = result_dir / "raw"
    input_data = None
    if needs_input_file(signature) and options.input_data in ("random", "zero"):
        input_data = str(write_input_data_json(signature, raw_dir / f"{kind}_input_data.json", options.input_data))
    # a model served one whole batch per request counts each sample it stacks (data.whole)
    per_request = samples_per_request(signature, input_data or options.input_data)
    target = PerfTarget(model_name, served.url, signature, s.model_version, input_data, binary, per_request)
    identity = sweep_identity(served.model_config, served.server_version, s.manifest_path, options, input_data)
    store = ResultsStore(result_dir, kind, identity, s.reuse).open()
    return _SweepRun(kind, model_name, result_dir, served, options, s, precision, target, identity, store)


def _sections(run: _SweepRun, points: Sequence[SweepPoint]) -> tuple[dict[str, Any], dict[str, Any]]:
    """run.json's section of this sweep and the run's config, recorded before the first point is measured."""
    s, options, first = run.settings, run.options, points[0]
    section = {
        "points": [p.key for p in points],
        "perf_options": options.measurement_fields(),
        "perf_command_example": build_command(run.target, first.batch_size, first.load, options,
                                              run.raw_dir / f"{run.kind}_{first.name}.csv"),
        "identity": run.identity.id,
    }
    config = {
        "model_name": run.model_name, "model_version": s.model_version or "latest", "server_url": run.served.url,
        "protocol": options.protocol.value, "precision": run.precision,
        "manifest": str(s.manifest_path) if s.manifest_path else None,
        "signature": _signature_dict(run.served.signature), "model_config": run.served.model_config,
        "triton_instances": run.served.instances, "number_of_model_instances_flag": s.number_of_model_instances,
    }
    return section, config


def _measure(run: _SweepRun, todo: list[SweepPoint], outcome: SweepOutcome, at: ServerAt,
             counts: tuple[int, int]) -> telemetry.RunTelemetry:
    """Each point to do, saved as it finishes, with the server's own figures scraped beside it and its health
    checked before it; the tables are written whatever stops the loop. `counts`: points in all, and done."""
    s = run.settings
    bar = _progress(counts[0], counts[1], run.kind, s.progress)
    scrapes = telemetry.RunTelemetry(at.metrics_for(run.served.url), run.model_name, s.metrics_period_s,
                                     log=lambda m: _warn(m, bar))
    checks = _Liveness(run.kind, run.model_name, at, run.served.url, run.options.protocol, s.model_version)
    try:
        for point in todo:
            if bar is not None:
                bar.set_postfix_str(f"batch {point.batch_size}, concurrency {point.concurrency}")
            checks.check(point, run.store, None)
            result = _measure_point(run, point, scrapes, checks)
            outcome.measured.append(point)
            if not result.stable:
                _warn(f"{run.kind} {point.name}: UNSTABLE - {result.note} (marked stable=False)", bar)
            if bar is not None:
                bar.update(1)
            if s.on_point_done is not None:
                s.on_point_done(point, result)
    finally:
        if bar is not None:
            bar.close()
        outcome.rows = run.store.rows()
        _write_markdown(run.result_dir, run.kind, outcome.rows)
    return scrapes


def _measure_point(run: _SweepRun, point: SweepPoint, scrapes: telemetry.RunTelemetry, checks: _Liveness) -> Any:
    """One point through perf_analyzer, its row stored at once and the server's figures recorded beside it; a
    failed point says how to resume (the completed ones are kept)."""
    try:
        with scrapes.scrape() as scraper:
            result = run_point(run.target, point.batch_size, point.load, run.options,
                               run.raw_dir / f"{run.kind}_{point.name}.csv")
    except PerfAnalyzerError as err:
        checks.check(point, run.store, err)
        raise SweepError(
            f"{err}\n{len(run.store.rows())} completed point(s) are kept in {run.store.csv_path}; fix the cause and "
            "rerun the same command to resume."
        ) from err
    row = result.row()
    row.update({"Precision": run.precision, "Triton Instances": run.served.instances})
    run.store.add(row)
    client = result.values.get(THROUGHPUT)
    if samples := scrapes.owned(scraper, client):  # the measured server's own figures only
        telemetry.record_point(run.result_dir, run.kind, {"Client Batch Size": point.batch_size,
                                                          "Concurrent client requests": point.concurrency,
                                                          "client_infer_per_s": client},
                               telemetry.summarise(samples, client), samples)
    return result


def _io_precision(signature: HasSignature) -> str:
    """Without a manifest, the datatype of the first floating-point input stands in for the precision."""
    for spec in signature.inputs:
        if np.issubdtype(np.dtype(spec.dtype), np.floating):
            return spec.triton_dtype
    return "N/A"


def _signature_dict(signature: HasSignature) -> dict[str, Any]:
    return {"inputs": [t.to_dict() for t in signature.inputs], "outputs": [t.to_dict() for t in signature.outputs]}


@dataclass
class _Liveness:
    """Whether the measured server still answers, asked before each point and after a failed one."""

    kind: str
    model: str
    at: ServerAt
    url: str
    protocol: str
    version: str

    def check(self, point: SweepPoint, store: ResultsStore, err: PerfAnalyzerError | None) -> None:
        """Raise ServerDiedError (with the server log tail, else perf_analyzer's output) if the server is gone."""
        server, reason = self.at.server, None
        if server is not None and not server.is_alive():
            code = server.process.poll() if getattr(server, "process", None) else None
            reason = (f"tritonserver was killed by signal {-code}" if isinstance(code, int) and code < 0
                      else f"tritonserver process exited (code {code})")
        if reason is None:
            with TritonClient(self.url, self.protocol) as client:
                reason = client.health_reason(self.model, self.version)
        if reason is None and err is not None and err.connection:
            reason = "perf_analyzer lost the connection"
        if reason is None:
            return
        if server is not None:
            detail = f"Server log tail ({getattr(server, 'log_path', '')}):\n{server.log_tail(30)}"
        else:
            detail = "perf_analyzer output:\n" + (err.output.strip()[-3000:] if err is not None else "(not started)")
        raise ServerDiedError(
            f"the server stopped answering during the {self.kind} sweep at batch {point.batch_size}, concurrency "
            f"{point.concurrency}: {reason}.\n{len(store.rows())} completed point(s) are kept in {store.csv_path}; "
            f"restart the server and rerun the same command to resume.\n{detail}"
        ) from err


def _progress(total: int, done: int, kind: str, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=done, desc=f"{kind} sweep", unit="point", dynamic_ncols=True)


def _warn(message: str, bar) -> None:
    """A warning: above the progress bar while there is one (written by the bar, so it stays whole), else logged."""
    if bar is not None:
        bar.write(message, file=sys.stderr)
    else:
        log.warning(message)


def _write_markdown(result_dir: Path, kind: str, rows: list[dict[str, Any]]) -> None:
    from ..report.tables import full_table

    atomic_write_text(result_dir / f"{kind}.md", "Full tabular data\n\n" + full_table(kind, rows) + "\n")


def _record_run(folder: RunFolder, kind: str, config: dict[str, Any], section: dict[str, Any],
                server_version: str | None) -> None:
    """run.json: this invocation's metadata, the other sweep kind's section when both share a folder, and every
    identity whose rows the folder holds (results.ledger)."""
    sweeps = dict(folder.run_json().get("config", {}).get("sweeps", {}))
    sweeps[kind] = section
    folder.record({**config, "sweeps": sweeps}, server_version)


__all__ = ["PointCallback", "ServerAt", "ServerDiedError", "ServerNotReady", "SweepError", "SweepOutcome",
           "SweepPoint", "SweepSettings", "run_sweep", "signature_from_metadata", "sweep_arguments", "sweep_identity"]
