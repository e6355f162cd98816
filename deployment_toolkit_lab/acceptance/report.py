"""README.md of a GPU acceptance folder, rebuilt from what the run wrote (steps.json, run.json, the stages'
CSVs): what ran, what failed and why, and the figures beside the seed's own. Nothing in it is typed by hand."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from deployment_toolkit.config import StepStatus
from deployment_toolkit.spec import atomic_write_text
from deployment_toolkit.tables import markdown_table
from .plan import NNUNET
from .runner import STEPS_JSON
from .seed_tables import SOURCE, load_seed_rows

CONVERSIONS_JSON = "conversions.json"
SEED_GPUS = ("A100", "T4")


def collect_conversions(workspace: Path) -> list[dict[str, Any]]:
    """Each converted artifact's verification against the framework (from its manifest.json)."""
    out = []
    for path in sorted((workspace / "convert").glob("*/*/manifest.json")):
        m = json.loads(path.read_text())
        v = m.get("verification") or {}
        out.append({"model": m.get("model"), "format": m.get("format"), "precision": m.get("precision"),
                    "passed": v.get("passed"), "max_abs_err": v.get("max_abs_err"),
                    "max_rel_err": v.get("max_rel_err"), "atol": v.get("atol"), "rtol": v.get("rtol"),
                    "batch_sizes": v.get("batch_sizes"), "device": v.get("device"),
                    "export_seconds": (m.get("export_options") or {}).get("export_seconds")})
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    return markdown_table(headers, [[_cell(c) for c in r] for r in rows], ["l"] * len(headers)).splitlines()


def host_lines(meta: dict[str, Any]) -> list[str]:
    acc = (meta.get("config") or {}).get("gpu_acceptance") or {}
    smi, tc = acc.get("nvidia_smi") or {}, acc.get("torch_cuda") or {}
    libs = acc.get("libraries") or {}
    rows = [["GPU", smi.get("name")], ["driver / driver CUDA", f"{smi.get('driver_version')} / "
                                                             f"{smi.get('driver_cuda_version')}"],
            ["torch / its CUDA / cuDNN", f"{tc.get('torch')} / {tc.get('cuda')} / {tc.get('cudnn')}"],
            ["SM clock now / max", f"{smi.get('clocks.sm')} / {smi.get('clocks.max.sm')}"],
            ["memory clock now / max", f"{smi.get('clocks.mem')} / {smi.get('clocks.max.mem')}"],
            ["power limit, pstate", f"{smi.get('power.limit')}, {smi.get('pstate')}"],
            ["triton (compiler) / tensorrt", f"{libs.get('triton')} / {libs.get('tensorrt')}"],
            ["nvidia-pytriton / tritonclient", f"{libs.get('nvidia-pytriton')} / {libs.get('tritonclient')}"]]
    return _table(["", "(from run.json)"], rows)


def steps_lines(steps: list[dict[str, Any]]) -> list[str]:
    rows = [[s["name"], f"**{s['status']}**", f"{s['seconds']:.0f} / {s['budget_s']:.0f}",
             s["reason"] or "", f"[log]({s['log']})" if s.get("log") else ""] for s in steps]
    counts = {k: sum(s["status"] == k for s in steps) for k in StepStatus.values()}
    stopped = f", {counts[StepStatus.STOPPED]} stopped" if counts[StepStatus.STOPPED] else ""
    return [f"{counts['ok']} ok, {counts['failed']} failed, {counts['skipped']} skipped{stopped}.", "",
            *_table(["step", "status", "s used / budget", "reason", "log"], rows)]


def conversion_lines(conversions: list[dict[str, Any]]) -> list[str]:
    rows = [[c["model"], c["format"], c["precision"], c["device"], c["passed"], c["max_abs_err"], c["max_rel_err"],
             f"{c['atol']} + {c['rtol']} x max abs(ref)" if c.get("atol") is not None else None]
            for c in conversions]
    return _table(["model", "format", "precision", "verified on", "passed", "max abs err", "max rel err",
                   "tolerance"], rows)


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def nnunet_lines(result_dir: Path, gpu_name: str) -> list[str]:
    """This GPU's online table at concurrency 1..8 (seed 001's layout), then its throughput and latency beside
    the seed's A100/T4 FP16 rows, labelled as the seed's."""
    from deployment_toolkit.report.tables import full_table, load_rows

    run_dir = result_dir / "serving" / NNUNET
    if not (run_dir / "online.csv").exists():
        return ["(not measured in this run: see the steps table)"]
    rows = load_rows(run_dir, "online")
    seed = [r for r in load_seed_rows() if r["precision"] == "FP16" and r["gpu_short"] in SEED_GPUS]
    ours = {int(float(r["Concurrent client requests"])): r for r in rows}
    theirs = {(r["gpu_short"], int(r["Concurrent client requests"])): r for r in seed}
    side = []
    for c in range(1, 9):
        mine = ours.get(c, {})
        side.append([c, mine.get("Inferences/second"), mine.get("Avg Latency"),
                     *[theirs.get((g, c), {}).get(k) for g in SEED_GPUS for k in ("Inferences/second", "Avg Latency")]])
    headers = ["Concurrent client requests", f"{gpu_name} FP16 (this run) inf/s", "avg ms (this run)"]
    for g in SEED_GPUS:
        headers += [f"{g} FP16 inf/s (seed 001)", f"{g} avg ms (seed 001)"]
    return ["Full tabular data, this GPU (FP16, Python backend running TorchScript on CUDA, max batch 4, "
            "preferred 2 4, queue delay 1 ms, 1 instance, 4x128x128x128):", "", full_table("online", rows), "",
            f"Beside the seed's figures (quoted from {SOURCE}; measured there with Triton's native PyTorch "
            "backend and a scripted TorchScript model, not by this toolkit):", "", *_table(headers, side)]


def build_readme(result_dir: Path) -> str:
    from deployment_toolkit.results.runinfo import commit_text, read_run_json

    meta = read_run_json(result_dir)
    steps = json.loads((result_dir / STEPS_JSON).read_text()) if (result_dir / STEPS_JSON).exists() else []
    gpu = ((meta.get("config") or {}).get("gpu_acceptance") or {}).get("nvidia_smi", {}).get("name") or "this GPU"
    lines = [f"# GPU acceptance on {gpu}", "",
             f"Written by `{meta.get('command', 'deployment-toolkit-lab gpu-check')}` at {meta.get('timestamp')} "
             f"(git {commit_text(meta.get('git') or {})}). Every figure below is read from this "
             "folder's files.", "", "## Host", "", *host_lines(meta), "", "## Steps", "", *steps_lines(steps), ""]
    fw = sorted(result_dir.glob("framework*/*.csv"))
    if fw:
        from deployment_toolkit.results.bench_store import BenchCSV
        from ..framework_bench import summary_table

        lines += ["## Framework bench (in-process, seed 004's method)", ""]
        for path in fw:
            lines += [f"`{path.relative_to(result_dir)}`:", "", summary_table(BenchCSV(path).read()), ""]
    conv = result_dir / CONVERSIONS_JSON
    if conv.exists():
        lines += ["## Conversions at fp16, verified against the framework", "",
                  *conversion_lines(json.loads(conv.read_text())), ""]
    serving = result_dir / "serving"
    if serving.exists():
        lines += ["## Served: Python backend, torch on CUDA (KIND_GPU, fp16), perf_analyzer over CUDA shared memory",
                  ""]
        for model_dir in sorted(p for p in serving.iterdir() if p.is_dir()):
            acc = model_dir / "accuracy_metrics.csv"
            if acc.exists():
                for r in _csv_rows(acc):
                    keys = [k for k in r if k in ("cosine_min", "max_abs_err", "top1_agreement", "num_samples",
                                                  "dice_agreement_mean", "passed")]
                    lines += [f"Accuracy of `{model_dir.name}` vs the framework (fp32 on the GPU):", "",
                              *_table(keys, [[r[k] for k in keys]]), ""]
            for kind in ("offline", "online"):
                if (model_dir / f"{kind}.md").exists():
                    lines.append(f"- `{model_dir.name}` {kind}: [{kind}.md]({model_dir.name}/{kind}.md)")
        lines += ["", "## 3D nnU-Net online, concurrency 1..8 (seed 001's table)", "",
                  *nnunet_lines(result_dir, gpu), ""]
    diff = sorted((result_dir / "diffusion").glob("**/diffusion_latency.md"))
    if diff:
        lines += ["## Diffusion latency per request, 8 and 18 steps (seed 000's method)", ""]
        lines += [f"`{p.relative_to(result_dir)}`:\n\n" + p.read_text().strip() + "\n" for p in diff]
    return "\n".join(lines).rstrip() + "\n"


def write_readme(result_dir: Path) -> Path:
    path = result_dir / "README.md"
    atomic_write_text(path, build_readme(result_dir))
    return path
