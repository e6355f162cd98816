"""The corpus run: every architecture through the path a user's own model takes, and how far each one gets.

Each architecture is named to the toolkit as a user names a model (`package.module:function`), with its samples
written as a user's data folder, so its inputs come from the data exactly as a user's would (data.infer). Then:
convert to each format (verified against the framework on random and real samples), configure the first format
that verified, serve it on the real tritonserver (explicit loading, so one model that fails to load is a row,
not the end), compare the served answers on the real samples with the framework model rebuilt from the
manifest's provenance, run the accuracy check on the whole data folder as a user would (Triton and framework
dumps, samples of different lengths included, compared sample by sample), and measure one online point with
perf_analyzer. A failure is a row with its stage and
its first line; nothing stops the sweep but Ctrl-C.
"""
from __future__ import annotations

import logging
import math
import shutil
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from deployment_toolkit.data.infer import inputs_from_data
from deployment_toolkit.data.user import UserData
from deployment_toolkit.errors import UserError
from deployment_toolkit.export import ConvertOptions, convert
from deployment_toolkit.framework import framework_predictor
from deployment_toolkit.repository import ConfigOptions, write_model
from deployment_toolkit.sources import parse_reference, resolve
from deployment_toolkit.spec import TOLERANCES, Manifest
from .architectures import ARCHITECTURES, Architecture

log = logging.getLogger(__name__)

FORMATS = ("onnx", "ts-trace", "ts-script")
STAGES = ("resolve", "convert", "serve", "infer", "accuracy", "perf", "done")
SAMPLES = 8
CHECKED_SAMPLES = 4


@dataclass(frozen=True)
class CorpusSettings:
    """How far each architecture goes and how it is measured; each default written once (bench-corpus's flags take
    theirs from these fields: corpus may not import config, so they are plain fields)."""

    formats: tuple[str, ...] = FORMATS  # in order of preference for serving
    serve: bool = True  # False: convert and verify only
    perf_window_ms: int = 1500  # perf_analyzer's window at the one online point
    timeout_s: float | None = 600.0  # per exporter attempt (None: no limit)

    def __post_init__(self) -> None:
        object.__setattr__(self, "formats", tuple(self.formats))


@dataclass
class CorpusRow:
    model: str
    library: str
    kind: str
    params_m: str = ""
    onnx: str = ""
    ts_trace: str = ""
    ts_script: str = ""
    onnx_s: str = ""  # convert + verify wall seconds per format
    ts_trace_s: str = ""
    ts_script_s: str = ""
    served_as: str = ""
    triton_vs_framework: str = ""  # max abs err over the real samples, served vs the rebuilt framework model
    accuracy: str = ""  # the accuracy check on the whole data folder (dumps + metrics): how far it went
    infer_per_s: str = ""  # perf_analyzer, batch 1, concurrency 1
    p99_ms: str = ""
    reached: str = ""  # the last stage passed: see STAGES
    stopped_by: str = ""  # why it stops there (first line)


COLUMNS = [f.name for f in fields(CorpusRow)]


def one_line(err: BaseException | str, limit: int = 240) -> str:
    text = " / ".join(ln.strip() for ln in str(err).splitlines() if ln.strip()) or type(err).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def attempt_errors(err: BaseException) -> str:
    """What each exporter said, without the log's path (the lines after 'failed with every exporter tried')."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return "; ".join(lines[1:]) if len(lines) > 1 and "every exporter tried" in lines[0] else (lines or [""])[0]


def stop(row: CorpusRow, why: str) -> None:
    """Say why the row stops where it does, keeping what an earlier stage said (a format that failed)."""
    row.stopped_by = "; ".join(filter(None, [why, row.stopped_by]))


def write_samples(arch: Architecture, folder: Path, count: int = SAMPLES, seed: int = 0) -> Path:
    """The architecture's samples as a user's data folder: one .npz per sample, named in order."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for i, sample in enumerate(arch.samples(count, seed)):
        np.savez(folder / f"sample_{i:03d}.npz", **sample)
    return folder


def _data(signature, folder: Path, batched: bool, limit: int = CHECKED_SAMPLES) -> UserData:
    return UserData(signature, data_dir=str(folder), limit=limit, batched=batched)


def _cell(manifest: Manifest) -> str:
    attempts = manifest.export_options.get("attempts") or []
    how = attempts[-1]["exporter"] if attempts else "?"
    before = [f"{a['exporter']} {a['outcome']}" for a in attempts[:-1]]
    return f"ok ({how}" + (f"; {', '.join(before)}" if before else "") + ")"


def convert_all(arch: Architecture, work: Path, formats: Sequence[str], row: CorpusRow,
                timeout_s: float | None) -> dict[str, Path]:
    """Resolve from the data, convert to each format; fills the row's format cells, returns the verified ones."""
    data_dir = write_samples(arch, work / "data")
    try:
        source = parse_reference(arch.factory, outputs=list(arch.outputs), max_batch_size=arch.max_batch_size)
        source.data_inputs = inputs_from_data(str(data_dir))
        resolved = resolve(source)
        row.params_m = f"{sum(p.numel() for p in resolved.build(0).parameters()) / 1e6:.2f}"
    except UserError as err:
        row.reached, row.stopped_by = "", f"resolve: {one_line(err)}"
        return {}
    batched = resolved.max_batch_size > 0
    ok: dict[str, Path] = {}
    reasons = []
    for fmt in formats:
        attr = fmt.replace("-", "_")
        t0 = time.perf_counter()
        opts = ConvertOptions(export_timeout_s=timeout_s, verify_batch_sizes=(1, 2) if batched else (1,),
                              verify_data=lambda sig: [x for _, x, _ in _data(sig, data_dir, batched).batches(1)])
        try:
            manifest = convert(resolved, fmt, work / fmt, opts)
            setattr(row, attr, _cell(manifest))
            ok[fmt] = work / fmt
        except UserError as err:
            setattr(row, attr, "failed")
            reasons.append(f"{fmt}: {one_line(attempt_errors(err), 200)}")
        setattr(row, f"{attr}_s", f"{time.perf_counter() - t0:.1f}")
    row.reached = "convert" if ok else "resolve"
    row.stopped_by = "" if ok else "; ".join(reasons)
    if ok and reasons:  # a format that failed is part of the story even when another one serves
        row.stopped_by = "(" + "; ".join(reasons) + ")"
    return ok


def check_served(client, name: str, artifact: Path, data_dir: Path) -> float:
    """Max abs error over the real samples, served vs the framework model rebuilt from the manifest; raises
    UserError when it passes the fp32 tolerance."""
    predict, manifest, _ = framework_predictor(artifact, "framework")
    out_names = [t.name for t in manifest.outputs]
    atol, rtol = TOLERANCES["fp32"]
    worst = 0.0
    for _, x, _ in _data(manifest.signature, data_dir, manifest.max_batch_size > 0).batches(1):
        got, ref = client.infer(name, x, out_names), predict(x)
        for n in out_names:
            r, g = np.asarray(ref[n], np.float64), np.asarray(got[n], np.float64)
            if r.shape != g.shape:
                raise UserError(f"{n}: served shape {g.shape} != framework {r.shape}")
            err = float(np.max(np.abs(r - g))) if r.size else 0.0
            if err > atol + rtol * float(np.max(np.abs(r)) if r.size else 0.0):
                raise UserError(f"{n}: served differs from the framework by {err:.3g}")
            worst = max(worst, err)
    return worst


def check_accuracy(url: str, name: str, artifact: Path, data_dir: Path, work: Path) -> str:
    """The user's accuracy check on the whole data folder, as the commands run it: the Triton dump and the framework
    dump (batches of 4, samples of different lengths as the dumps batch them), compared sample by sample. Says how
    the samples were batched and how close the answers are; raises UserError when they disagree."""
    from deployment_toolkit.data.dump import load_dump
    from deployment_toolkit.data.samples import DataSpec
    from deployment_toolkit.inference import FrameworkDumpSettings, TritonDumpSettings, framework_dump, triton_dump
    from deployment_toolkit.metrics import compute_metrics

    manifest = Manifest.load(artifact)
    batch = min(4, manifest.max_batch_size) or 1
    data = DataSpec(str(data_dir))
    served = triton_dump(url, name, work / "dump-triton", data, TritonDumpSettings(
        manifest=artifact / "manifest.json", batch_size=batch, shared_memory="system"))
    framework_dump(artifact, work / "dump-framework", data, FrameworkDumpSettings(batch_size=batch))
    dump = load_dump(served.path)
    metrics = compute_metrics(dump, load_dump(work / "dump-framework"), task="generic")
    cosines = {k: v for k, v in metrics.items() if k.startswith("cosine_min")}
    worst = min(cosines.values())
    batching = dump.meta.get("batching", {})
    how = "padded" if batching.get("padded") else batching.get("mode", "?")
    shapes = len({tuple(np.shape(o)) for o in dump.outputs[next(iter(dump.outputs))]})
    text = (f"{served.samples} samples ({shapes} output shape{'s' if shapes > 1 else ''}), {how}: cosine_min "
            f"{worst:.4f}, max abs err {metrics['max_abs_err']:.2g}")
    near_zero = int(metrics.get("near_zero_samples", 0))
    if near_zero:
        text += f", {near_zero} near-zero sample(s) agreeing by the absolute tolerance"
    if not worst >= 0.999:
        raise UserError(f"accuracy: served and framework disagree ({text})")
    return text


def serve_and_measure(rows: dict[str, CorpusRow], served: dict[str, Path], work: Path, repo: Path,
                      perf_window_ms: int, say: Callable[[str], None] = log.info) -> None:
    """One embedded server, each model loaded, checked, measured and unloaded in turn."""
    from deployment_toolkit.client import TritonClient
    from deployment_toolkit.perf.analyzer import PerfOptions
    from deployment_toolkit.perf.analyzer import Concurrency, PerfTarget, run_point
    from deployment_toolkit.results.schema import THROUGHPUT
    from deployment_toolkit.server import LocalTritonServer, ServerConfig

    perf = PerfOptions(shared_memory="system", measurement_interval_ms=perf_window_ms, max_attempts=2, max_trials=5)
    config = ServerConfig(repo, model_control_mode="explicit", log_dir=work / "server-logs", exit_on_error=False)
    with LocalTritonServer(config) as server, TritonClient(server.grpc_url) as client:
        for k, (name, artifact) in enumerate(served.items(), 1):
            row = rows[name]
            say(f"[{k}/{len(served)}] serving {name} ({row.served_as})")
            try:
                server.load_model(name)
            except UserError as err:
                stop(row, f"serve: {one_line(err)}")
                continue
            row.reached = "serve"
            try:
                row.triton_vs_framework = f"{check_served(client, name, artifact, work / name / 'data'):.2g}"
                row.reached = "infer"
                row.accuracy = check_accuracy(server.grpc_url, name, artifact, work / name / "data", work / name)
                row.reached = "accuracy"
                manifest = Manifest.load(artifact)
                point = run_point(PerfTarget(name, server.grpc_url, manifest), 1, Concurrency(1), perf,
                                  work / name / "perf" / "online.csv")
                thr, p99 = point.values.get(THROUGHPUT, math.nan), point.values.get("P99 Latency", math.nan)
                row.infer_per_s, row.p99_ms = f"{thr:.1f}", f"{p99:.2f}"
                row.reached = "done" if point.stable else "perf"
                if not point.stable:
                    stop(row, f"perf: {point.note}")
            except UserError as err:
                stage = {"serve": "infer", "infer": "accuracy"}.get(row.reached, "perf")
                if stage == "accuracy":
                    row.accuracy = f"failed: {one_line(err, 160)}"
                stop(row, f"{stage}: {one_line(err)}")
            finally:
                try:
                    server.unload_model(name)
                except UserError:
                    pass


def run_corpus(names: Sequence[str], work: Path, settings: CorpusSettings | None = None, *,
               say: Callable[[str], None] = log.info, **changes: Any) -> list[CorpusRow]:
    """Every named architecture as far as it goes (module docstring); rows in the order given. `changes`: fields of
    `settings` to change for this run (`formats=("onnx",)`). `say`: where the progress lines go (this module's logger
    unless a caller collects them)."""
    settings = replace(settings or CorpusSettings(), **changes)
    formats, timeout_s = settings.formats, settings.timeout_s
    rows: dict[str, CorpusRow] = {}
    served: dict[str, Path] = {}
    repo = work / "model_repository"
    t_start = time.perf_counter()
    for k, name in enumerate(names, 1):
        arch = ARCHITECTURES[name]
        eta = "" if k == 1 else \
            f", about {(time.perf_counter() - t_start) / (k - 1) * (len(names) - k + 1) / 60:.1f} min of converting left"
        say(f"[{k}/{len(names)}] converting {name} ({arch.library}, {arch.kind}){eta}")
        row = rows[name] = CorpusRow(model=name, library=arch.library, kind=arch.kind)
        ok = convert_all(arch, work / name, formats, row, timeout_s)
        if not ok or not settings.serve:
            continue
        fmt = next(f for f in formats if f in ok)
        row.served_as = fmt
        try:
            write_model(repo, ok[fmt], ConfigOptions(model_name=name, host_has_gpu=False))
            served[name] = ok[fmt]
        except UserError as err:
            stop(row, f"config: {one_line(err)}")
    if served:
        serve_and_measure(rows, served, work, repo, settings.perf_window_ms, say)
    return [rows[n] for n in names]


def rows_as_dicts(rows: Sequence[CorpusRow]) -> list[dict]:
    return [asdict(r) for r in rows]
