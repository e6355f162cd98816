"""The corpus run's files: corpus.csv (one row per architecture), corpus.md (how far each got, and why it stops
there; counts per stage and format; the fallback cost), summary.md (the counts alone, quoted by the README) and
run.json (where and with what it ran)."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from deployment_toolkit.results.rows import RowSchema, to_csv
from deployment_toolkit.results.run_folder import RunFolder
from deployment_toolkit.spec import atomic_write_text
from deployment_toolkit.tables import markdown_table
from .run import COLUMNS, FORMATS, STAGES, CorpusRow, rows_as_dicts

SHOWN = ("model", "library", "kind", "params_m", "onnx", "ts_trace", "ts_script", "served_as", "triton_vs_framework",
         "accuracy", "infer_per_s", "p99_ms", "reached", "stopped_by")
HEADERS = ("model", "library", "kind", "params (M)", "onnx", "ts-trace", "ts-script", "served as",
           "max abs err served vs framework", "accuracy on the data folder", "inf/s (c=1)", "p99 ms", "reached",
           "why it stops there")


def summary_lines(rows: Sequence[CorpusRow]) -> list[str]:
    reached = Counter(r.reached or "nothing" for r in rows)
    lines = [f"{len(rows)} architectures; last stage reached: " +
             ", ".join(f"{s} {reached[s]}" for s in ("nothing", *STAGES) if reached.get(s))]
    for fmt in FORMATS:
        cells = [getattr(r, fmt.replace("-", "_")) for r in rows]
        tried = [c for c in cells if c]
        if tried:
            fell_back = sum(1 for c in tried if c.startswith("ok") and ";" in c)
            lines.append(f"{fmt}: {sum(c.startswith('ok') for c in tried)} of {len(tried)} converted and verified"
                         + (f" ({fell_back} after a fallback exporter)" if fell_back else ""))
    return lines


# corpus.csv: one row per architecture, every cell text, in the order run
SCHEMA = RowSchema(columns=tuple(COLUMNS), key=("model",))


def write_report(out: Path, rows: Sequence[CorpusRow], speed: dict[str, Any] | None, config: dict[str, Any]) -> Path:
    atomic_write_text(out / "corpus.csv", to_csv(SCHEMA, rows_as_dicts(rows)))
    parts = ["# The models people bring: how far each gets", "", *[f"- {ln}" for ln in summary_lines(rows)], "",
             markdown_table(HEADERS, [[getattr(r, c) for c in SHOWN] for r in rows]), ""]
    times = [[r.model, r.onnx_s, r.ts_trace_s, r.ts_script_s] for r in rows]
    parts += ["Convert + verify wall time per format (s):", "",
              markdown_table(("model", "onnx", "ts-trace", "ts-script"), times), ""]
    if speed:
        parts += [f"Exporter fallback cost on {speed['model']} (ONNX convert + verify, median of {speed['repeats']}, "
                  "alternated):", "",
                  markdown_table(("--onnx-exporter", "median s", "runs (s)"),
                                 [["auto", f"{speed['median_auto_s']:.2f}", " ".join(f"{t:.2f}" for t in speed['auto_s'])],
                                  ["torchscript", f"{speed['median_torchscript_s']:.2f}",
                                   " ".join(f"{t:.2f}" for t in speed['torchscript_s'])]]),
                  "", f"auto / torchscript: {speed['ratio']:.3f}", ""]
    report = out / "corpus.md"
    atomic_write_text(report, "\n".join(parts))
    summary = [*[f"- {ln}" for ln in summary_lines(rows)]]
    if speed:
        summary.append(f"- ONNX convert + verify of {speed['model']}, median of {speed['repeats']} alternated runs: "
                       f"{speed['median_auto_s']:.2f} s with the fallback on (auto), {speed['median_torchscript_s']:.2f} s "
                       f"with --onnx-exporter torchscript (ratio {speed['ratio']:.3f})")
    atomic_write_text(out / "summary.md", "\n".join(summary) + "\n")
    RunFolder(out).record({"corpus": config, "fallback_cost": speed})
    if speed:
        atomic_write_text(out / "fallback_cost.json", json.dumps(speed, indent=2) + "\n")
    return report
