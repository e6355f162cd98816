"""Compacting a run folder (`deployment-toolkit-lab compact-results`): perf_analyzer's raw per-request exports
summarised (perf/analyzer/profile_summary.py, tested in tests/unit/perf/test_profile_summary.py) and compressed,
the telemetry series gzipped, losing no figure; a committed folder is refused without --update-committed."""
from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from deployment_toolkit import committed
from deployment_toolkit.perf.analyzer import read_profile_export, read_schedule, schedule_latency
from deployment_toolkit.perf.analyzer.profile_summary import read_summary
from deployment_toolkit.results.server_metrics import read_series
from deployment_toolkit.perf.openloop.ratestore import RateKey, RateStore
from deployment_toolkit_lab.housekeeping.compact import compact_run

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "schedule_latency"
RECORDED = DATA / "poisson_r40.profile.json"
SCHEDULE = read_schedule(DATA / "poisson_r40.intervals", 40.0)


@pytest.fixture(autouse=True)
def _default_keep_raw():
    committed.reset_keep_raw()
    yield
    committed.reset_keep_raw()


def _old_run(tmp_path: Path) -> Path:
    """A run folder as measured before summaries: the raw export, its schedule, the row naming it, a series."""
    run = tmp_path / "results" / "old"
    pts = run / "raw" / "open_loop"
    pts.mkdir(parents=True)
    shutil.copy(RECORDED, pts / "cfg_t1_poisson_r40.profile.json")
    shutil.copy(DATA / "poisson_r40.intervals", pts / "cfg_t1_poisson_r40.intervals")
    key = RateKey("cfg", "poisson", 40.0, 1, "{}", 1)
    RateStore(run, "search_openloop.csv").put(key, {"schedule_seed": 1234, "sched_p99_ms": 1.0, "profile_export":
                                                    "elsewhere/old/raw/open_loop/cfg_t1_poisson_r40.profile.json"})
    (pts / "telemetry").mkdir()
    (pts / "telemetry" / "openloop_series.csv").write_text("config,t_s,metric,series,value\na,0.0,m,,1\na,0.1,m,,2\n")
    return run


def test_compacting_an_old_run_summarises_compresses_and_loses_nothing(tmp_path):
    run = _old_run(tmp_path)
    pts = run / "raw" / "open_loop"
    series = (pts / "telemetry" / "openloop_series.csv").read_text()
    done = compact_run(run, "deployment-toolkit-lab compact-results results/old")
    assert [p.name for p in done.summaries] == ["cfg_t1_poisson_r40.profile.summary.json"] and not done.unreadable
    s = read_summary(pts / "cfg_t1_poisson_r40.profile.json")  # the row's path, mapped to the summary
    assert s.schedule["seed"] == 1234 and s.schedule["rate"] == 40.0 and s.derived_by.endswith("results/old")
    assert s.latency.sched_p99_ms == pytest.approx(schedule_latency(SCHEDULE, read_profile_export(RECORDED)).sched_p99_ms,
                                                   abs=5e-4)
    assert sorted(p.name for p in pts.iterdir()) == ["cfg_t1_poisson_r40.intervals", "cfg_t1_poisson_r40.profile.json.gz",
                                                     "cfg_t1_poisson_r40.profile.summary.json", "telemetry"]
    gz = pts / "telemetry" / "openloop_series.csv.gz"
    assert gzip.decompress(gz.read_bytes()).decode() == series and not (pts / "telemetry" / "openloop_series.csv").exists()
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    compact_run(run, "deployment-toolkit-lab compact-results results/old")  # again: the same files
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    # a point's samples appended after compaction join the compressed series; the report reads both
    (pts / "telemetry" / "openloop_series.csv").write_text("config,t_s,metric,series,value\nb,0.0,m,,3\n")
    assert [r["value"] for r in read_series(pts, "openloop")] == ["1", "2", "3"]
    compact_run(run, "again")
    assert [r["value"] for r in read_series(pts, "openloop")] == ["1", "2", "3"]
    assert not (pts / "telemetry" / "openloop_series.csv").exists()


def test_compact_results_refuses_a_committed_folder_without_update_committed():
    from deployment_toolkit_lab.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main(["compact-results", "results/plan-my_model-cpu"])
    assert exc.value.code == 2
