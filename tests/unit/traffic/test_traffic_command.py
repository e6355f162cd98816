"""Issue 57, item 2: `deployment-toolkit traffic FILE... [--deployment FILE]` shows what the planner will use before
anything is measured (one row per model, its name first and its peak the first number; the fleet's peak of the sum
against the sum of peaks; a plot), and refuses a malformed file in one line naming the file and the series or row,
exit 2, no traceback."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from traffic_fixtures import write  # noqa: F401  (a fixture)
from traffic_fixtures import START, alpha_rate, beta_rate, gamma_rate, prometheus_answer, true_peak

ROOT = Path(__file__).resolve().parents[3]


def traffic(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "deployment_toolkit", "traffic", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def table_rows(out: str) -> dict[str, list[str]]:
    """Each model's row: its cells, the name first."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in out.splitlines()
            if line.startswith("| ") and not line.startswith("| model")]
    return {cells[0]: cells[1:] for cells in rows}


def test_each_model_s_peak_is_the_first_number_of_its_line_within_1_percent(write, tmp_path):
    prom = write("prom.json", prometheus_answer())
    log = write("requests.jsonl", "".join(json.dumps({"ts": START + k * 0.01, "model": "delta"}) + "\n"
                                          for k in range(30_000)))  # 100/s for 5 minutes, evenly
    proc = traffic(prom, log, "--result-path", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    rows = table_rows(proc.stdout)
    assert list(rows) == ["alpha", "beta", "gamma", "delta"]
    for name, rate in (("alpha", alpha_rate), ("beta", beta_rate), ("gamma", gamma_rate)):
        assert float(rows[name][0]) == pytest.approx(true_peak(rate), rel=0.01), name
        assert rows[name][3] == "-"  # no per-request times: no dispersion
    assert float(rows["delta"][0]) == pytest.approx(100, rel=0.01) and float(rows["delta"][3]) < 0.1  # evenly spaced
    t = np.arange(START, START + 7200, 15.0)
    fleet = [ln for ln in proc.stdout.splitlines() if ln.startswith("fleet of 4 models: peak of the sum")]
    assert len(fleet) == 1, proc.stdout
    peak_of_sum = float(fleet[0].split("peak of the sum ")[1].split()[0].replace(",", ""))
    assert peak_of_sum == pytest.approx(float((alpha_rate(t) + beta_rate(t) + gamma_rate(t)).max()) + 100, rel=0.01)
    out = tmp_path / "out"
    assert (out / "traffic.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "traffic.md").read_text() in proc.stdout
    assert json.loads((out / "run.json").read_text())["config"]["files"] == [str(prom), str(log)]


def test_a_deployment_shows_its_models_as_the_planner_reads_them(write, tmp_path):
    write("prom.json", prometheus_answer())
    write("m.onnx", "")
    deployment = write("fleet.yaml", "name: fleet\nmodels:\n"
                       "  - {name: alpha, model: m.onnx, p99_ms: 50, traffic: prom.json}\n"
                       "  - {name: gamma2, model: m.onnx, p99_ms: 50, peak_rps: 660, traffic: prom.json, "
                       "series: {model: gamma}}\n"
                       "  - {name: flat, model: m.onnx, p99_ms: 50, peak_rps: 75}\n")
    proc = traffic("--deployment", deployment, "--plot", tmp_path / "fleet.png", "--result-path", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    rows = table_rows(proc.stdout)
    assert float(rows["alpha"][0]) == pytest.approx(true_peak(alpha_rate), rel=0.01)
    assert float(rows["gamma2"][0]) == pytest.approx(660) and "to peak_rps" in rows["gamma2"][-1]  # scaled, said
    assert rows["flat"][:3] == ["75.0", "75.0", "-"] and (tmp_path / "fleet.png").exists()


@pytest.mark.parametrize("name, content, says", [
    ("prom.json", "value", "series 2 {model=\"beta\", version=\"1\"} at 2026-05-04T00:02:30+00:00: value 'abc' is "
                           "not a number"),
    ("log.csv", "time,model\n2026-05-04T00:00:00Z,a\n2026-05-04T00:00:01Z,a\n,b\n", "line 4: no time"),
    ("log.csv", "time,model\n1777852900,a\n1777852800,b\n", "line 3: time 2026-05-04T00:00:00+00:00 is 100 s before "
                                                            "line 2's: rows must be in time order within 1 s"),
    ("prom.json", "label", "series 0 {version=\"1\"} has no 'model' label"),
])
def test_a_malformed_file_is_refused_in_one_line_naming_the_file_and_where(write, name, content, says):
    if name == "prom.json":
        doc = prometheus_answer()
        if content == "value":
            doc["data"]["result"][2]["values"][5][1] = "abc"
        else:
            del doc["data"]["result"][0]["metric"]["model"]
        content = doc
    path = write(name, content)
    proc = traffic(path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}") and says in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_nothing_to_show_or_a_model_twice_is_refused(write):
    prom = write("prom.json", prometheus_answer())
    proc = traffic()
    assert proc.returncode == 2 and "give a traffic FILE or --deployment FILE" in proc.stderr
    proc = traffic(prom, prom)
    assert proc.returncode == 2 and "model 'alpha' is also in" in proc.stderr
