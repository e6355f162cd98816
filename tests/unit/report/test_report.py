"""Reports from recorded perf_analyzer CSVs: DLE-style tables, configuration table, plots, HTML, comparison."""
from __future__ import annotations

import base64
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from deployment_toolkit.perf.analyzer import PointResult, parse_csv
from deployment_toolkit.results.store import rows_to_csv
from deployment_toolkit.report.build import build_report, compare_runs
from deployment_toolkit.report.tables import config_table, fmt, full_table, load_rows
from deployment_toolkit.results.runinfo import run_metadata, write_run_json

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "perf"
ROOT = Path(__file__).resolve().parents[3]
SEED_ONLINE_HEADER = [
    "Concurrent client requests", "Inferences/second", "Client Send", "Network+server Send/recv", "Server Queue",
    "Server Compute Input", "Server Compute Infer", "Server Compute Output", "Client Recv", "P50 Latency",
    "P90 Latency", "P95 Latency", "P99 Latency", "Avg Latency",
]
SEED_OFFLINE_HEADER = [
    "Precision", "Client Batch Size", "Inferences/second", "P90 Latency", "P95 Latency", "P99 Latency", "Avg Latency",
]


def _store_row(parsed: dict, batch: int, stable: bool = True, scale: float = 1.0) -> dict:
    values = dict(parsed)
    values["Inferences/second"] *= scale
    res = PointResult(batch, parsed["Concurrent client requests"], values, stable, 1 if stable else 6,
                      bool(parsed["residual_clamped"]), note="" if stable else "unstable after 5 attempt(s)",
                      window="500 ms windows")
    row = res.row()
    row.update({"Precision": "FP32", "Triton Instances": 2})
    return row


def make_run(run_dir: Path, *, unstable_c: int | None = 5, clamp_c: int | None = 7, scale: float = 1.0) -> Path:
    """A run folder built from recorded CSVs: online c1..c8 (rows as perf_analyzer ordered them, by
    throughput) and offline b1,2,4,8, plus a run.json holding the real server's model config."""
    run_dir.mkdir(parents=True)
    online = []
    for parsed in parse_csv(FIX / "grpc_c1-8_rows_by_throughput.csv"):
        c = parsed["Concurrent client requests"]
        if c == clamp_c:
            parsed["Network+server Send/recv"], parsed["residual_clamped"] = 0.0, True
        online.append(_store_row(parsed, 1, stable=c != unstable_c, scale=scale))
    online.reverse()  # stored in any order: the tables must sort
    (run_dir / "online.csv").write_text(rows_to_csv(online))
    offline = []
    for b in (8, 2, 4, 1):
        (parsed,) = parse_csv(FIX / f"offline_grpc_b{b}_c1.csv")
        offline.append(_store_row(parsed, b, scale=scale))
    (run_dir / "offline.csv").write_text(rows_to_csv(offline))
    model_config = json.loads((FIX / "model_config_double.json").read_text())
    model_config["instance_group"][0]["count"] = 2
    model_config["dynamic_batching"]["preferred_batch_size"] = [4, 8]
    model_config["dynamic_batching"]["max_queue_delay_microseconds"] = 100
    config = {
        "model_name": "double", "model_version": "latest", "server_url": "127.0.0.1:8001", "protocol": "grpc",
        "precision": "FP32", "manifest": None, "model_config": model_config, "triton_instances": 2,
        "sweeps": {
            kind: {"perf_options": {"protocol": "grpc", "shared_memory": "system", "input_data": "random",
                                    "measurement_mode": "time_windows", "measurement_interval_ms": 500,
                                    "measurement_request_count": 50, "stability_percentage": 10.0, "max_trials": 10}}
            for kind in ("online", "offline")
        },
    }
    write_run_json(run_dir, run_metadata(config, "2.51.0"))
    return run_dir


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table_rows(md: str, header: list[str]) -> list[list[str]]:
    """The data rows of the table whose header has exactly these columns, in this order."""
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|") and _cells(line) == header)
    block = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        block.append(_cells(line))
    return block


def test_full_online_table_is_seed_shaped_sorted_and_marks_problems(tmp_path):
    run = make_run(tmp_path / "run")
    md = full_table("online", load_rows(run, "online"))
    assert _cells(md.splitlines()[0]) == SEED_ONLINE_HEADER
    rows = _table_rows(md, SEED_ONLINE_HEADER)
    assert [r[0] for r in rows] == ["1", "2", "3", "4", "5 (unstable)", "6", "7", "8"]
    # concurrency 1, recorded in µs: 1,2365.84,3,152,58,10,106,54,0,384,...: ms, 3 decimals, no trailing zeros
    raw = (FIX / "grpc_c1-8_rows_by_throughput.csv").read_text().splitlines()
    c1 = next(line.split(",") for line in raw if line.startswith("1,"))
    assert rows[0][1] == fmt(float(c1[1]), "Inferences/second")
    assert rows[0][2:14] == [fmt(int(v) / 1000) for v in c1[2:14]]
    assert rows[6][3] == "0 (clamped)"
    assert "(unstable): perf_analyzer never reached a stable measurement" in md
    assert "(clamped): the residual" in md


def test_full_offline_table(tmp_path):
    run = make_run(tmp_path / "run")
    md = full_table("offline", load_rows(run, "offline"))
    assert _cells(md.splitlines()[0]) == SEED_OFFLINE_HEADER
    assert md.splitlines()[1].startswith("|:")  # precision left-aligned like the seed
    rows = _table_rows(md, SEED_OFFLINE_HEADER)
    assert [r[1] for r in rows] == ["1", "2", "4", "8"]
    assert rows[0] == ["FP32", "1", "2875.6", "0.413", "0.449", "1.055", "0.344"]


def test_fmt_like_the_seed():
    assert fmt(26.1, "Inferences/second") == "26.1"
    assert fmt(32.0, "Inferences/second") == "32"
    assert fmt(38.3180) == "38.318"
    assert fmt(0.0) == "0"
    assert fmt(math.nan) == "n/a"


def test_configuration_table(tmp_path):
    run = make_run(tmp_path / "run")
    meta = json.loads((run / "run.json").read_text())
    table = config_table(meta, "online")
    rows = _table_rows(table, ["Parameter Name", "Parameter Value"])
    assert table.startswith("| Parameter Name ")
    for row in (["Number of model instances", "2"], ["Max Batch Size", "8"], ["Triton Max Queue Delay", "100 us"],
                ["Triton Preferred Batch Sizes", "4 8"], ["Precision", "FP32"], ["Protocol", "GRPC"],
                ["Instance Kind", "CPU"]):
        assert row in rows, row


def test_build_report_writes_md_html_and_plots(tmp_path):
    run = make_run(tmp_path / "run")
    paths = build_report(run)
    for name in ("report.md", "report.html", "online_throughput_latency", "online_latency_breakdown",
                 "offline_throughput_latency", "offline_latency_breakdown"):
        assert paths[name].exists() and paths[name].stat().st_size > 1000, name
    md = paths["report.md"].read_text()
    online, offline = _table_rows(md, SEED_ONLINE_HEADER), _table_rows(md, SEED_OFFLINE_HEADER)
    assert len(online) == 8 and len(offline) == 4
    assert md.count("Full tabular data") == 2
    assert [r[0] for r in online].count("5 (unstable)") == 1
    assert "- GPU: none" in md and "- CPU: " in md and "Triton server: 2.51.0" in md
    assert "![online_latency_breakdown](online_latency_breakdown.png)" in md
    html = paths["report.html"].read_text()
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(images) == 4 and all(base64.b64decode(i)[:8] == b"\x89PNG\r\n\x1a\n" for i in images)
    assert 'class="unstable"' in html and "<th>Server Compute Infer</th>" in html
    assert "src=\"http" not in html and "<link" not in html  # self-contained


def test_compare_runs(tmp_path):
    a = make_run(tmp_path / "baseline", unstable_c=None, clamp_c=None)
    b = make_run(tmp_path / "faster", unstable_c=5, clamp_c=None, scale=1.5)
    text = compare_runs(a, b)
    assert (b / "compare.md").read_text().strip() == text.strip()
    assert "## Online" in text and "## Offline" in text
    online = text[text.index("## Online"):]
    rows = [_cells(ln) for ln in online.splitlines() if ln.startswith("|")]
    cells = next(r for r in rows if r[:2] == ["1", "1"])
    assert cells[5] == "+50.0%" and cells[9] == "+0.0%"
    assert ["1", "5*"] in [r[:2] for r in rows]


def test_report_script(tmp_path):
    a = make_run(tmp_path / "a", unstable_c=None)
    b = make_run(tmp_path / "b", scale=0.8)
    out = subprocess.run([sys.executable, str(ROOT / "triton" / "report.py"), str(a), str(b)],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "-20.0%" in out.stdout and (b / "compare.md").exists() and (a / "report.html").exists()
    missing = subprocess.run([sys.executable, str(ROOT / "triton" / "report.py"), str(tmp_path / "nope")],
                             capture_output=True, text=True, cwd=ROOT)
    assert missing.returncode == 2 and "run a performance test first" in missing.stderr


@pytest.mark.parametrize("kind", ["online", "offline"])
def test_empty_run_has_a_placeholder_table(kind):
    assert "(no points measured yet)" in full_table(kind, [])


def test_markdown_section_to_html(tmp_path):
    """The analyses' markdown as a report.html fragment: headings one level down, tables, local images embedded
    (relative to base_dir; a missing one dropped), raw HTML escaped, a line break kept."""
    from deployment_toolkit.report.sections import markdown_to_html

    png = b"\x89PNG\r\n\x1a\n"
    (tmp_path / "plot.png").write_bytes(png)
    md = ("# Fleet sizing\n\nfirst <b>line</b>\nsecond with `code` and **bold**\n\n- a\n- b\n\n"
          "| x | y |\n|:--|--:|\n| a \\| b | 2 |\n\n![plot](plot.png)\n\n![gone](missing.png)\n\n###### deep\n")
    html = markdown_to_html(md, tmp_path, css_class="sizing")
    assert html.startswith('<section class="sizing">') and html.endswith("</section>\n")
    assert "<h2>Fleet sizing</h2>" in html and "<h6>deep</h6>" in html and "<h1>" not in html
    assert "first &lt;b&gt;line&lt;/b&gt;<br>\nsecond with <code>code</code> and <strong>bold</strong>" in html
    assert "<ul>\n<li>a</li>\n<li>b</li>\n</ul>" in html
    assert '<td style="text-align: left;">a | b</td>' in html and '<th style="text-align: right;">y</th>' in html
    assert f'src="data:image/png;base64,{base64.b64encode(png).decode()}"' in html
    assert "missing.png" not in html and "gone" not in html
