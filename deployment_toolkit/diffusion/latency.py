"""Diffusion latency and speedup tables: the statistics and the seed layouts, no I/O besides writing files.

Latency (CorrDiff NIM method): per request, burn-in requests first, then `trials` timed requests; repeated
for `runs` runs and averaged (the mean is the mean of run means). Table rows are step counts, columns the
device (and target, when a run measures several), cells "12.34s" like the seed's table.
Speedup (seed-003 layout): Model | Batch Size | Sampler | Inference Steps | converted latency |
framework latency | speedup, one row per batch size.
"""
from __future__ import annotations

import logging
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..config import setting
from ..config.fields import int_list
from ..errors import UserInputError
from ..results.rows import RowSchema, to_csv
from ..runtimes.timing import Budget, percentile, time_call, time_calls
from ..spec import atomic_write_text
from ..tables import markdown_table

log = logging.getLogger(__name__)

LATENCY_CSV_COLUMNS = (
    "target", "device", "sampler", "steps", "evaluations", "samples", "runs", "trials_per_run", "burn_in",
    "mean_s", "p50_s", "p95_s", "run_std_s", "s_per_step", "s_per_evaluation",
    "denoiser_s_per_evaluation", "denoiser_compute_s_per_evaluation", "sampler_overhead_s", "client_overhead_s",
)
BREAKDOWN_KEYS = LATENCY_CSV_COLUMNS[-4:]
SPEEDUP_CSV_COLUMNS = (
    "model", "batch_size", "sampler", "steps", "converted", "converted_latency_s", "framework",
    "framework_latency_s", "speedup_x", "converted_p50_s", "framework_p50_s", "speedup_p50_x", "trials",
    "max_abs_diff",
)


def time_requests(send: Callable[[], Any], burn_in: int, trials: int,
                  after_burn_in: Callable[[], Any] | None = None) -> list[float]:
    """Seed-000 loop: `burn_in` untimed requests (warm-up), then `trials` timed ones (seconds each), through the
    one timer (runtimes.timing). `after_burn_in` runs between the two (e.g. to snapshot server statistics)."""
    _check_counts(1, trials, burn_in)
    return time_call(send, _budget(burn_in, trials), after_burn_in).seconds


def _budget(burn_in: int, trials: int) -> Budget:
    """`trials` timed requests after `burn_in` untimed ones; no background-CPU probe (a request takes seconds)."""
    return Budget(warmup=burn_in, iterations=trials, min_iterations=trials, background=False)


def _check_counts(runs: int, trials: int, burn_in: int) -> None:
    if runs < 1 or trials < 1 or burn_in < 0:
        raise UserInputError(f"need runs >= 1, trials >= 1 and burn_in >= 0, got {runs}, {trials} and {burn_in}")


@dataclass
class LatencyPoint:
    """One (target, steps) measurement: per-run lists of per-request latencies in seconds."""

    target: str
    device: str
    steps: int
    samples: int
    runs: list[list[float]]
    sampler: str = ""
    evaluations: int | None = None
    burn_in: int = 0
    breakdown: dict[str, float] = field(default_factory=dict)

    @property
    def latencies(self) -> list[float]:
        return [t for run in self.runs for t in run]

    @property
    def mean(self) -> float:
        """Mean of run means ("averaged across runs")."""
        return statistics.fmean(statistics.fmean(run) for run in self.runs)

    @property
    def run_std(self) -> float:
        means = [statistics.fmean(run) for run in self.runs]
        return statistics.stdev(means) if len(means) > 1 else 0.0

    @property
    def per_step(self) -> float:
        return self.mean / self.steps

    @property
    def per_evaluation(self) -> float | None:
        return self.mean / self.evaluations if self.evaluations else None

    def row(self) -> dict[str, Any]:
        values = {
            "target": self.target, "device": self.device, "sampler": self.sampler, "steps": self.steps,
            "evaluations": self.evaluations if self.evaluations else "", "samples": self.samples,
            "runs": len(self.runs), "trials_per_run": len(self.runs[0]) if self.runs else 0, "burn_in": self.burn_in,
            "mean_s": self.mean, "p50_s": percentile(self.latencies, 50), "p95_s": percentile(self.latencies, 95),
            "run_std_s": self.run_std, "s_per_step": self.per_step,
            "s_per_evaluation": "" if self.per_evaluation is None else self.per_evaluation,
        }
        values.update({k: self.breakdown.get(k, "") for k in BREAKDOWN_KEYS})
        return {k: _round(v) for k, v in values.items()}


def _round(value: Any) -> Any:
    return round(value, 6) if isinstance(value, float) else value


def csv_text(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """The rows under `columns` through the one row writer (results.rows); numbers as the rows hold them (already
    rounded to 6 decimals by `row()`), so the cells read as before."""
    return to_csv(RowSchema(tuple(columns), float_format=str), rows)


def seconds(value: float) -> str:
    """Seed style ("17.66s"), with enough digits for sub-second CPU numbers."""
    if value >= 10:
        return f"{value:.2f}s"
    if value >= 0.1:
        return f"{value:.3f}s"
    return f"{value * 1000:.2f}ms"


def column_label(point: LatencyPoint, several_targets: bool) -> str:
    return f"{point.device} ({point.target})" if several_targets else point.device


def latency_table(points: Sequence[LatencyPoint], value: str = "mean") -> str:
    """Markdown like the seed: rows "8 Steps", one column per device (per device and target when several)."""
    several = len({p.target for p in points}) > 1
    columns = list(dict.fromkeys(column_label(p, several) for p in points))
    steps = sorted({p.steps for p in points})
    cell: dict[tuple[int, str], str] = {}
    for p in points:
        v = {"mean": p.mean, "per_step": p.per_step, "p50": percentile(p.latencies, 50),
             "p95": percentile(p.latencies, 95)}[value]
        cell[(p.steps, column_label(p, several))] = seconds(v)
    rows = [[f"{s} Steps", *(cell.get((s, c), "-") for c in columns)] for s in steps]
    return markdown_table(["Diffusion Steps", *columns], rows, ["l"] + ["r"] * len(columns)) + "\n"


def served_vs_in_process(points: Sequence[LatencyPoint], served: str = "triton",
                         reference: str = "in-process") -> list[dict[str, Any]]:
    """Per steps value: served and in-process seconds per step (mean), served / in-process of the means and of
    the medians (the median ratio shrugs off bursts of load from elsewhere on a shared host)."""
    by = {(p.target, p.steps): p for p in points}
    out = []
    for s in sorted({p.steps for p in points}):
        a, b = by.get((served, s)), by.get((reference, s))
        if a and b:
            out.append({"steps": s, "served_s_per_step": a.per_step, "in_process_s_per_step": b.per_step,
                        "ratio": a.per_step / b.per_step,
                        "p50_ratio": percentile(a.latencies, 50) / percentile(b.latencies, 50)})
    return out


def latency_report(points: Sequence[LatencyPoint], title: str, notes: Sequence[str] = ()) -> str:
    """The markdown file: mean latency per request (the seed's table), p50/p95, per step, served vs in-process."""
    parts = [f"# {title}\n"]
    parts += [f"{n}\n" for n in notes]
    parts += ["\n## Mean latency per request\n\n", latency_table(points, "mean"),
              "\n## p50 latency per request\n\n", latency_table(points, "p50"),
              "\n## p95 latency per request\n\n", latency_table(points, "p95"),
              "\n## Seconds per step\n\n", latency_table(points, "per_step")]
    ratios = served_vs_in_process(points)
    if ratios:
        parts.append("\n## Served (Triton) vs in-process, per step\n\n")
        parts.append(markdown_table(
            ["Diffusion Steps", "Triton", "in-process", "Triton / in-process (means)", "Triton / in-process (p50)"],
            [[f"{r['steps']} Steps", seconds(r["served_s_per_step"]), seconds(r["in_process_s_per_step"]),
              f"{r['ratio']:.3f}x", f"{r['p50_ratio']:.3f}x"] for r in ratios], ["l", "r", "r", "r", "r"]) + "\n")
    breakdown = [p for p in points if p.breakdown]
    if breakdown:
        parts.append("\n## Where the time goes (per request, averaged)\n\nTriton: from the server's statistics "
                     "(denoiser = its requests' time incl. queue; sampler outside denoiser = numpy + BLS round trips; "
                     "client + network = client latency - server request time, a residual that can dip below 0 "
                     "under load). In-process: timed around the denoiser calls.\n\n")
        rows = []
        for p in breakdown:
            b = {k: (seconds(p.breakdown[k]) if isinstance(p.breakdown.get(k), float) else "-") for k in BREAKDOWN_KEYS}
            rows.append([p.target, p.steps, seconds(p.mean), b["denoiser_s_per_evaluation"],
                         b["denoiser_compute_s_per_evaluation"], b["sampler_overhead_s"], b["client_overhead_s"]])
        parts.append(markdown_table(["Target", "Steps", "Total", "Denoiser per evaluation",
                                     "Denoiser compute per evaluation", "Sampler outside denoiser", "Client + network"],
                                    rows, ["l"] + ["r"] * 6) + "\n")
    return "".join(parts)


# ------------------------------------------------------------------------------------------------ speedup

@dataclass
class SpeedupRow:
    model: str
    batch_size: int
    sampler: str
    steps: int
    converted: str  # e.g. "ONNX Runtime FP32"
    converted_times: list[float]
    framework: str  # e.g. "FW FP32" / "FW FP16 (AMP)"
    framework_times: list[float]
    max_abs_diff: float | None = None

    @property
    def converted_latency_s(self) -> float:
        return statistics.fmean(self.converted_times)

    @property
    def framework_latency_s(self) -> float:
        return statistics.fmean(self.framework_times)

    @property
    def speedup(self) -> float:
        return self.framework_latency_s / self.converted_latency_s

    def row(self) -> dict[str, Any]:
        conv50, fw50 = percentile(self.converted_times, 50), percentile(self.framework_times, 50)
        return {"model": self.model, "batch_size": self.batch_size, "sampler": self.sampler, "steps": self.steps,
                "converted": self.converted, "converted_latency_s": _round(self.converted_latency_s),
                "framework": self.framework, "framework_latency_s": _round(self.framework_latency_s),
                "speedup_x": round(self.speedup, 3), "converted_p50_s": _round(conv50),
                "framework_p50_s": _round(fw50), "speedup_p50_x": round(fw50 / conv50, 3),
                "trials": len(self.converted_times),
                "max_abs_diff": "" if self.max_abs_diff is None else f"{self.max_abs_diff:.3g}"}


@dataclass(frozen=True)
class SpeedupPlan:
    """The seed-003 procedure: for each batch size (samples per conditioning), `burn_in` untimed then `trials` timed
    sampling runs of `steps` steps, converted and framework alternating; each default written once
    (diffusion-speedup's flags are built from these fields)."""

    steps: int = setting(50, flag="--steps", help="inference steps (the seed uses 50)")
    batch_sizes: tuple[int, ...] = setting((1, 2, 4), flag="--batch-sizes", type=int_list,
                                           help="samples per conditioning, comma-separated")
    burn_in: int = setting(3, flag="--burn-in", help="untimed runs per batch size (TorchScript needs >= 2)")
    trials: int = setting(3, flag="--trials", help="timed runs per batch size and runtime")
    threads: int = setting(0, flag="--threads",
                           help="intra-op threads of both runtimes (torch.set_num_threads, ONNX Runtime intra_op); 0: "
                                "their defaults. 1 is far steadier on a host shared with other jobs: spinning thread "
                                "pools collapse when the cores are oversubscribed")
    seed: int = setting(0, flag="--seed", help="seed of the conditioning and of the sampling")


def _short(label: str) -> str:
    """"TensorRT FP16" -> "TensorRT": the seed's "TRT vs FW Speedup (x)" names the format only."""
    return label.rsplit(" ", 1)[0] if label.split()[-1].startswith(("FP", "BF")) else label


def speedup_table(rows: Sequence[SpeedupRow]) -> str:
    if not rows:
        raise ValueError("no rows")
    conv, fw = rows[0].converted, rows[0].framework
    headers = ["Model", "Batch Size", "Sampler", "Inference Steps", f"{conv} Latency (s)", f"{fw} Latency (s)",
               f"{_short(conv)} vs FW Speedup (x)"]
    body = [[r.model, r.batch_size, r.sampler, r.steps, _latency(r.converted_latency_s),
             _latency(r.framework_latency_s), f"{r.speedup:.2f}"] for r in rows]
    return markdown_table(headers, body, ["l", "r", "l", "r", "r", "r", "r"]) + "\n"


def _latency(value: float) -> str:
    return f"{value:.1f}" if value >= 10 else f"{value:.3g}"


def write_text(path: str | Path, text: str) -> Path:
    atomic_write_text(path, text)
    return Path(path)


# ------------------------------------------------------------------------------------------------ measuring

@dataclass(frozen=True)
class LatencyPlan:
    """The seed-000 procedure for each steps value: `runs` x (`burn_in` untimed + `trials` timed requests) of
    `samples` samples drawn with `seed`; each default written once (diffusion-latency's flags are built from these
    fields). The default steps are the seed's 8 and 18."""

    steps: tuple[int, ...] = setting((8, 18), flag="--steps", type=int_list, help="steps values, comma-separated")
    samples: int = setting(1, flag="--samples", help="samples per request")
    seed: int = setting(0, flag="--seed", help="the request's sampling seed")
    burn_in: int = setting(3, flag="--burn-in", help="untimed requests per run")
    trials: int = setting(10, flag="--trials", help="timed requests per run")
    runs: int = setting(3, flag="--runs", help="runs, averaged")

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", tuple(int(s) for s in self.steps))
        _check_counts(self.runs, self.trials, self.burn_in)


def measure(targets: Sequence[Any], plan: LatencyPlan, devices: Sequence[str], samplers: Sequence[str],
            progress: bool = True) -> list[LatencyPoint]:
    """The seed-000 procedure: for each steps value, `runs` x (burn-in + trials) per target, averaged over runs
    (`progress`: a line per run through the log).

    With several targets, each run burns in every target, then the timed requests take turns (one request per
    target per trial, runtimes.timing's interleaving), so load from anything else on the host hits all targets
    alike and their ratio stays fair. A target is `target(steps, seed, samples)` with `name`, `reset()` (called
    after burn-in) and `breakdown(evaluations)` (averaged over runs)."""
    from .samplers import evaluations

    points = []
    for steps in plan.steps:
        per_run: list[list[list[float]]] = [[] for _ in targets]
        parts: list[list[dict[str, float]]] = [[] for _ in targets]
        evals = [evaluations(s, steps) if s else None for s in samplers]
        calls = {str(i): (lambda t=target: t(steps, plan.seed, plan.samples)) for i, target in enumerate(targets)}
        for run in range(plan.runs):
            timed = time_calls(calls, _budget(plan.burn_in, plan.trials),
                               after_warmup=lambda: [target.reset() for target in targets])
            for i, target in enumerate(targets):
                times = timed[str(i)].seconds
                per_run[i].append(times)
                b = target.breakdown(evals[i])
                if b:
                    parts[i].append(b)
                if progress:
                    log.info(f"  {target.name}: {steps} steps, run {run + 1}/{plan.runs}: mean "
                             f"{seconds(statistics.fmean(times))} over {plan.trials} trial(s)")
        for i, target in enumerate(targets):
            keys = set.intersection(*(set(p) for p in parts[i])) if parts[i] else set()
            breakdown = {k: statistics.fmean(p[k] for p in parts[i]) for k in sorted(keys)}
            points.append(LatencyPoint(target.name, devices[i], steps, plan.samples, per_run[i], sampler=samplers[i],
                                       evaluations=evals[i], burn_in=plan.burn_in, breakdown=breakdown))
    return points


def device_label(device: str = "cpu") -> str:
    """Column name for the host: the GPU's name for CUDA runs, else "<cpu model>, N cores"."""
    import re

    from ..results.runinfo import cpu_info, gpu_info

    if device.startswith("cuda"):
        gpus = gpu_info()
        if isinstance(gpus, list) and gpus:
            return gpus[0]["name"]
        return "GPU"
    cpu = cpu_info()
    model = re.sub(r"\((R|TM)\)|\bCPU\b|\bProcessor\b|@.*$", "", cpu["model"], flags=re.I)
    model = " ".join(model.split()) or cpu["arch"]
    return f"{model}, {cpu['usable_cores']} cores"
