"""The server-side table of a run's report: what Triton's metrics endpoint said during each point."""
from __future__ import annotations

from pathlib import Path

from ..results.server_metrics import read_summaries, server_csv
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
