"""The server-side table of a run's report: what Triton's metrics endpoint said during each point."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..results.server_metrics import read_series, read_summaries, server_csv
from ..tables import markdown_table

SHOWN = (("Client Batch Size", "batch"), ("Concurrent client requests", "concurrency"),
         ("client_infer_per_s", "client inf/s"), ("server_infer_per_s", "server inf/s"),
         ("client_vs_server_pct", "client vs server %"), ("avg_batch", "executed batch"),
         ("queue_us_per_request", "queue us/req"), ("compute_infer_us_per_request", "compute us/req"),
         ("compute_infer_us_per_exec", "compute us/exec"), ("pending_requests", "pending"),
         ("cpu_util_pct", "CPU %"), ("cpu_memory_gib", "host mem GiB"), ("gpu_util_pct", "GPU %"),
         ("gpu_memory_gib", "GPU mem GiB"), ("gpu_power_w", "GPU W"))


def summary_table(result_dir: Path, kind: str) -> str | None:
    """The markdown table of `<kind>_server.csv` (columns no point has are left out), or None without it."""
    rows = read_summaries(server_csv(result_dir, kind))
    if not rows:
        return None
    shown = [(c, h) for c, h in SHOWN if any(r.get(c) not in (None, "") for r in rows)]

    def cell(v: str) -> str:
        try:
            x = float(v)
        except (TypeError, ValueError):
            return v or ""
        return f"{x:.0f}" if abs(x) >= 100 or x.is_integer() else f"{x:.2f}"

    return markdown_table([h for _, h in shown], [[cell(r.get(c, "")) for c, _ in shown] for r in rows])


def _series(result_dir: Path, kind: str) -> list[dict[str, str]]:
    return read_series(result_dir, kind)  # plain or compressed (a committed run's is .csv.gz)


def timeline_plot(result_dir: Path, kind: str) -> Path | None:
    """`<kind>_server_timeline.png`: the server over the sweep, its points side by side in measurement order:
    CPU (and GPU) utilisation, memory, and queue vs compute time per request between scrapes, so a glance shows
    where a point was limited (compute saturated, or requests waiting). None without a telemetry series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = _series(result_dir, kind)
    if not rows:
        return None
    key_cols = [c for c in rows[0] if c not in ("t_s", "metric", "series", "value")]
    points: dict[tuple, dict[float, dict[str, float]]] = {}
    for r in rows:
        per_t = points.setdefault(tuple(r[c] for c in key_cols), {}).setdefault(float(r["t_s"]), {})
        per_t[r["metric"]] = per_t.get(r["metric"], 0.0) + float(r["value"])
    fig, axes = plt.subplots(3, 1, figsize=(10, 7.5), sharex=True)
    offset, ticks, labels = 0.0, [], []
    short = {"Client Batch Size": "batch", "Concurrent client requests": "concurrency"}
    for n, (key, samples) in enumerate(points.items()):
        ts = sorted(samples)
        _plot_point(axes, samples, ts, offset, first=n == 0)
        ticks.append(offset + (ts[-1] if ts else 0) / 2)
        labels.append(", ".join(f"{short.get(c, c)} {v}" for c, v in zip(key_cols, key)))
        offset += (ts[-1] if ts else 0) + 1.0
        for ax in axes:
            ax.axvline(offset - 0.5, color="#d9d9d9", linewidth=0.8)
    axes[0].set_ylabel("utilisation %")
    axes[1].set_ylabel("memory GiB")
    axes[1].set_ylim(bottom=0)
    axes[2].set_ylabel("ms per request")
    axes[2].set_xticks(ticks, labels, rotation=30, ha="right", fontsize=8)
    for ax in axes:
        ax.legend(loc="upper left", fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{kind}: the server during each point (Triton's metrics endpoint)")
    path = Path(result_dir) / f"{kind}_server_timeline.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def _plot_point(axes: Any, samples: dict[float, dict[str, float]], ts: list[float], offset: float,
                first: bool) -> None:
    """One point's scrapes from `offset` on: utilisation, memory (GPU lines where the host has one) and the queue
    and compute time per request between scrapes; `first` labels the lines once for the legend."""
    x = [offset + t for t in ts]
    util = [100 * samples[t].get("nv_cpu_utilization", float("nan")) for t in ts]
    axes[0].plot(x, util, color="#3182bd", label="CPU %" if first else None)
    if any("nv_gpu_utilization" in samples[t] for t in ts):
        axes[0].plot(x, [100 * samples[t].get("nv_gpu_utilization", float("nan")) for t in ts], color="#31a354",
                     label="GPU %" if first else None)
    axes[1].plot(x, [samples[t].get("nv_cpu_memory_used_bytes", float("nan")) / 2**30 for t in ts],
                 color="#3182bd", label="host GiB" if first else None)
    if any("nv_gpu_memory_used_bytes" in samples[t] for t in ts):
        axes[1].plot(x, [samples[t].get("nv_gpu_memory_used_bytes", float("nan")) / 2**30 for t in ts],
                     color="#31a354", label="GPU GiB" if first else None)
    mid, queue, compute = [], [], []
    for a, b in zip(ts, ts[1:]):
        done = samples[b].get("nv_inference_request_success", 0) - samples[a].get("nv_inference_request_success", 0)
        if done > 0:
            mid.append(offset + (a + b) / 2)
            queue.append((samples[b].get("nv_inference_queue_duration_us", 0)
                          - samples[a].get("nv_inference_queue_duration_us", 0)) / done / 1000)
            compute.append((samples[b].get("nv_inference_compute_infer_duration_us", 0)
                            - samples[a].get("nv_inference_compute_infer_duration_us", 0)) / done / 1000)
    axes[2].plot(mid, compute, color="#e6550d", marker=".", label="compute ms/request" if first else None)
    axes[2].plot(mid, queue, color="#fdae6b", marker=".", label="queue ms/request" if first else None)


COMPARED = (("server_infer_per_s", "server inf/s"), ("avg_batch", "executed batch"),
            ("queue_us_per_request", "queue us/req"), ("compute_infer_us_per_request", "compute us/req"),
            ("cpu_util_pct", "CPU %"), ("cpu_memory_gib", "host mem GiB"), ("gpu_util_pct", "GPU %"),
            ("gpu_memory_gib", "GPU mem GiB"))


def server_comparison(run_a: Path, run_b: Path, kind: str) -> str | None:
    """The server-side figures of the points both runs measured: A, B and B - A per figure present in both."""
    def keyed(run: Path) -> dict[tuple[str, str], dict[str, str]]:
        return {(r["Client Batch Size"], r["Concurrent client requests"]): r
                for r in read_summaries(server_csv(run, kind))}

    a, b = keyed(run_a), keyed(run_b)
    common = sorted(set(a) & set(b), key=lambda k: (int(k[0]), int(k[1] or 0)))
    shown = [(c, h) for c, h in COMPARED if any(a[k].get(c) and b[k].get(c) for k in common)]
    if not common or not shown:
        return None

    def num(v: str) -> float | None:
        try:
            return float(v)
        except (TypeError, ValueError):
            return None

    body = []
    for k in common:
        row = [k[0], k[1]]
        for c, _ in shown:
            x, y = num(a[k].get(c, "")), num(b[k].get(c, ""))
            row.append("" if x is None or y is None else f"{x:.3g} -> {y:.3g} ({y - x:+.3g})")
        body.append(row)
    return markdown_table(["batch", "concurrency", *[h for _, h in shown]], body)
