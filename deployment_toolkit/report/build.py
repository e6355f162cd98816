"""Turn a run folder (CSV + run.json) into report.md, report.html and PNGs; compare two runs."""
from __future__ import annotations

import math
from pathlib import Path

from ..results.runinfo import read_run_json
from ..spec import atomic_write_text
from .server import server_comparison, summary_table, timeline_plot
from ..tables import markdown_table
from .sections import EXTRA_SECTIONS, include_extra_sections
from . import html as html_report
from .plots import plots_for
from .tables import KINDS, config_table, fmt, full_table, hardware_section, load_rows
from ..errors import UserFileNotFoundError

THROUGHPUT = "Inferences/second"
P99 = "P99 Latency"


def build_report(run_dir: str | Path) -> dict[str, Path]:
    """Write report.md, report.html and one PNG per plot into run_dir; return their paths by name."""
    run_dir = Path(run_dir)
    meta = read_run_json(run_dir)
    sections = []
    for kind in KINDS:
        rows = load_rows(run_dir, kind)
        if rows:
            plots = plots_for(kind, rows, run_dir)
            timeline = timeline_plot(run_dir, kind)
            if timeline is not None:
                plots[f"{kind}_server_timeline"] = timeline
            sections.append({"kind": kind, "rows": rows, "plots": plots})
    has_extra = any((run_dir / f"{name}.md").exists() for name in EXTRA_SECTIONS)
    if not sections and not has_extra:
        raise UserFileNotFoundError(f"{run_dir} has no online.csv or offline.csv (nor a sizing or search section): "
                                "run a performance test first")
    cfg = meta.get("config", {})
    model = cfg.get("model_name") or cfg.get("model") or run_dir.name
    title = f"Triton performance report: {model} ({run_dir.name})"

    all_rows = [r for section in sections for r in section["rows"]]
    md = [f"# {title}", "", hardware_section(meta, all_rows), "", f"Command: `{meta.get('command', 'n/a')}`", ""]
    for section in sections:
        kind = section["kind"]
        md += [f"## {kind.capitalize()} scenario", "", config_table(meta, kind), ""]
        for name, path in section["plots"].items():
            md += [f"![{name}]({path.name})", ""]
        md += ["Full tabular data", "", full_table(kind, section["rows"]), "",
               "Times in milliseconds; throughput in inferences per second.", ""]
        server = summary_table(run_dir, kind)
        if server:
            md += ["What the server measured (its metrics endpoint, scraped during each point; queue and compute "
                   "in microseconds, from Triton's cumulative counters):", "", server, ""]
    paths: dict[str, Path] = {name: p for s in sections for name, p in s["plots"].items()}
    paths["hardware.md"] = run_dir / "hardware.md"  # alone, for READMEs that quote a run (the lab's embed-results)
    atomic_write_text(paths["hardware.md"], hardware_section(meta, all_rows) + "\n")
    paths["report.md"] = run_dir / "report.md"
    atomic_write_text(paths["report.md"], "\n".join(md))
    paths["report.html"] = run_dir / "report.html"
    atomic_write_text(paths["report.html"], html_report.render(title, meta, sections))
    paths.update(include_extra_sections(run_dir))  # sizing / search sections written next to the run
    return paths


def _delta(a: float | None, b: float | None) -> tuple[str, str]:
    if a is None or b is None or math.isnan(a) or math.isnan(b):
        return "n/a", "n/a"
    pct = f"{(b - a) / a * 100:+.1f}%" if a else "n/a"
    return f"{b - a:+.4g}", pct


def compare_runs(run_a: str | Path, run_b: str | Path, out: str | Path | None = None) -> str:
    """Per-point throughput and p99 deltas of run B against baseline A (absolute and %); writes compare.md
    (into run B unless `out` is given) and returns the text."""
    run_a, run_b = Path(run_a), Path(run_b)
    lines = [f"# {run_b.name} vs {run_a.name}", "",
             f"Baseline A: `{run_a}`  ", f"Compared B: `{run_b}`", "",
             "Throughput in inferences/s, P99 latency in ms; deltas are B - A. `*` marks a point unstable in A or B.",
             ""]
    found = False
    for kind in KINDS:
        rows_a = {(r["Client Batch Size"], r["Concurrent client requests"]): r for r in load_rows(run_a, kind)}
        rows_b = {(r["Client Batch Size"], r["Concurrent client requests"]): r for r in load_rows(run_b, kind)}
        if not rows_a and not rows_b:
            continue
        found = True
        common = sorted(set(rows_a) & set(rows_b), key=lambda k: (k[1], k[0]) if kind == "online" else k)
        body = []
        for key in common:
            a, b = rows_a[key], rows_b[key]
            mark = "*" if a.get("stable") is False or b.get("stable") is False else ""
            dt, dtp = _delta(a[THROUGHPUT], b[THROUGHPUT])
            dl, dlp = _delta(a[P99], b[P99])
            body.append([str(key[0]), str(key[1]) + mark, fmt(a[THROUGHPUT], THROUGHPUT), fmt(b[THROUGHPUT], THROUGHPUT),
                         dt, dtp, fmt(a[P99]), fmt(b[P99]), dl, dlp])
        headers = ["Client Batch Size", "Concurrent client requests", "Throughput A", "Throughput B", "Δ throughput",
                   "Δ throughput %", "P99 A", "P99 B", "Δ P99", "Δ P99 %"]
        lines += [f"## {kind.capitalize()}", ""]
        lines += [markdown_table(headers, body) if body else "(no common points)", ""]
        server = server_comparison(run_a, run_b, kind)
        if server:
            lines += ["What the servers measured (their metrics endpoints), B - A:", "", server, ""]
        only_a = sorted(set(rows_a) - set(rows_b))
        only_b = sorted(set(rows_b) - set(rows_a))
        if only_a or only_b:
            lines += [f"Points only in A (batch, concurrency): {only_a or 'none'}; only in B: {only_b or 'none'}", ""]
    if not found:
        raise UserFileNotFoundError(f"neither {run_a} nor {run_b} has online.csv or offline.csv")
    text = "\n".join(lines)
    target = Path(out) if out else run_b / "compare.md"
    atomic_write_text(target, text + "\n")
    return text
