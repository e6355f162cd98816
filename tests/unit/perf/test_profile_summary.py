"""Raw per-request exports summarised where they are written (issue 37 item 5): the summary holds what the toolkit
reads (the counted requests' latency from the intended send time, per window too), the raw files are dropped or,
with --keep-raw, kept compressed, and the committed runs' summaries agree with the rows they stand behind.

tests/data/schedule_latency/ is the recorded perf_analyzer run that test_schedule_latency describes (48 requests,
three 300 ms windows); the stalled copy is the same run with a sender frozen for 200 ms.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from deployment_toolkit import cli, committed
from deployment_toolkit.perf.analyzer import read_profile_export, read_schedule, schedule_latency
from deployment_toolkit.perf.analyzer.profile_summary import (compress_raw, finish_point, read_summary,
                                                              regenerate_schedule, stem, summarise, summary_path,
                                                              write_summary)

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "schedule_latency"
RECORDED = DATA / "poisson_r40.profile.json"
STALLED = DATA / "poisson_r40_stalled.profile.json"
SCHEDULE = read_schedule(DATA / "poisson_r40.intervals", 40.0)


@pytest.fixture(autouse=True)
def _default_keep_raw():
    committed.reset_keep_raw()
    yield
    committed.reset_keep_raw()


def test_the_summary_holds_the_counted_latency_and_each_window():
    s = summarise(SCHEDULE, RECORDED, "test")
    full = schedule_latency(SCHEDULE, read_profile_export(RECORDED))
    assert s.latency == full  # exactly what the open-loop row stores
    assert s.requests == 48 and s.unanswered == 0 and len(s.boundaries_ns) == 4
    w = s.windows
    assert all(len(v) == 3 for v in w.values())
    assert sum(w["requests"][-s.reported_windows:]) == full.requests  # the counted requests are the windows'
    for k in ("sched_p50_ms", "sched_p99_ms", "p99_ms"):
        assert all(v is not None and v > 0 for v in w[k])
    times = _times(RECORDED).encode()  # the digest is of the times-only JSON, what a kept .gz holds
    assert s.source == {"bytes": len(times), "sha256": hashlib.sha256(times).hexdigest()}


def _times(path: Path) -> str:
    from deployment_toolkit.perf.analyzer.schedule import load_export, times_only

    return times_only(load_export(path))


def test_a_stall_shows_in_its_window_from_the_intended_send_only():
    calm, stall = summarise(SCHEDULE, RECORDED, "t").windows, summarise(SCHEDULE, STALLED, "t").windows
    worst = int(np.argmax(np.array(stall["sched_p99_ms"]) - np.array(calm["sched_p99_ms"])))
    assert stall["sched_p99_ms"][worst] > calm["sched_p99_ms"][worst] + 100.0  # the 200 ms stall, in its window
    assert stall["late_max_ms"][worst] == pytest.approx(200.0, abs=1.0)
    # from the actual send the stall is invisible in every window (the requests only move, as a block)
    assert max(stall["p99_ms"]) < calm["sched_p99_ms"][worst] + 100.0


def test_written_and_read_back_to_the_microsecond(tmp_path):
    s = summarise(SCHEDULE, RECORDED, "test")
    path = write_summary(s, tmp_path / "p.profile.summary.json")
    back = read_summary(tmp_path / "p.profile.json")  # the row names the raw export in older runs
    assert back.windows == json.loads(path.read_text())["windows"] and back.requests == s.requests
    for k in ("sched_p50_ms", "sched_p90_ms", "sched_p99_ms", "late_pct", "late_p99_ms"):
        assert getattr(back.latency, k) == pytest.approx(getattr(s.latency, k), abs=5e-4)
    assert path.stat().st_size < 2000  # a kB, against the export's 9 kB here and MBs on a real run


def test_summary_names_map_between_the_raw_files_and_the_summary():
    for name in ("a_r40.profile.json", "a_r40.profile.json.gz", "a_r40.profile.summary.json"):
        assert stem(name) == "a_r40" and summary_path(Path("d") / name) == Path("d/a_r40.profile.summary.json")
    with pytest.raises(ValueError, match="not a profile export"):
        stem("a_r40.json")


def test_kept_raw_is_the_times_compressed_reproducibly_and_still_readable(tmp_path):
    raw = shutil.copy(RECORDED, tmp_path / "p.profile.json")
    summary = summarise(SCHEDULE, Path(raw), "t")
    gz = compress_raw(Path(raw))
    assert gz.name == "p.profile.json.gz" and not Path(raw).exists()
    assert hashlib.sha256(gzip.decompress(gz.read_bytes())).hexdigest() == summary.source["sha256"]
    a, b = read_profile_export(RECORDED), read_profile_export(gz)
    assert (a.send_ns == b.send_ns).all() and (a.end_ns == b.end_ns).all()
    first = gz.read_bytes()
    shutil.copy(RECORDED, raw)
    assert compress_raw(Path(raw)).read_bytes() == first  # no time or name in the gzip header
    assert summarise(SCHEDULE, gz, "t").latency == summary.latency


def test_finish_point_drops_the_raw_file_unless_kept(tmp_path):
    raw = Path(shutil.copy(RECORDED, tmp_path / "p.profile.json"))
    (tmp_path / "p.profile.json.gz").write_bytes(b"stale")  # kept by an earlier measurement with --keep-raw
    finish_point(SCHEDULE, raw, False, "t")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.profile.summary.json"]
    shutil.copy(RECORDED, raw)
    finish_point(SCHEDULE, raw, True, "t")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.profile.json.gz", "p.profile.summary.json"]
    raw.write_text("")  # perf_analyzer left an empty export: no summary of the earlier point stays
    with pytest.raises(ValueError):
        finish_point(SCHEDULE, raw, False, "t")
    assert not summary_path(raw).exists()


def _measure(tmp_path: Path, monkeypatch) -> dict:
    """One open-loop point through ratepoint.measure, perf_analyzer replaced by the recorded export."""
    from deployment_toolkit.perf.analyzer import PerfOptions, PointResult
    from deployment_toolkit.perf.openloop import ratepoint
    from deployment_toolkit.perf.openloop.ratestore import RateStore

    def fake_run_point(target, batch, load, *args, profile_export=None, **kw):
        assert Path(load.intervals).is_file()  # perf_analyzer gets its schedule file
        shutil.copy(RECORDED, profile_export)
        return PointResult(1, None, {"Inferences/second": 40.0, "P99 Latency": 12.0, "P50 Latency": 5.0,
                                     "Avg Latency": 6.0}, True, 1, request_rate=40.0,
                           profile_export=Path(profile_export))

    monkeypatch.setattr(ratepoint, "run_point", fake_run_point)
    target = ratepoint.Target("cfg", "m", "127.0.0.1:1", 1, None,
                              ratepoint.open_loop_options(PerfOptions(shared_memory="system")))
    return ratepoint.measure(target, 40.0, RateStore(tmp_path), tmp_path).row


def test_a_measured_point_keeps_its_summary_and_drops_the_raw_files(tmp_path, monkeypatch):
    row = _measure(tmp_path, monkeypatch)
    names = sorted(p.name for p in tmp_path.glob("cfg_*"))
    assert names == ["cfg_t1_poisson_r40.profile.summary.json"]  # no export, no schedule file left
    summary = read_summary(row["profile_export"])
    assert Path(row["profile_export"]).name == "cfg_t1_poisson_r40.profile.summary.json"
    assert row["sched_p99_ms"] == pytest.approx(summary.latency.sched_p99_ms, abs=5e-4)
    assert summary.schedule["seed"] == row["schedule_seed"] and summary.schedule["rate"] == 40.0
    # the schedule file is gone; the summary's record draws it again, and says when it cannot
    assert regenerate_schedule(summary.schedule).mean_rate == pytest.approx(40.0, rel=0.2)
    with pytest.raises(ValueError, match="digest"):
        regenerate_schedule({**summary.schedule, "seed": summary.schedule["seed"] + 1})
    with pytest.raises(ValueError, match="does not say"):
        regenerate_schedule({"intervals": 3, "sha256": "x"})


def test_keep_raw_keeps_the_export_compressed_and_the_schedule(tmp_path, monkeypatch):
    cli.parser("d", "x").parse_args(["--keep-raw"])
    cli.parser("d", "x").parse_args([])  # a composite command's own parse of a step's flags does not undo it
    assert committed.keeping_raw()
    row = _measure(tmp_path, monkeypatch)
    names = sorted(p.name for p in tmp_path.glob("cfg_*"))
    assert names == ["cfg_t1_poisson_r40.intervals", "cfg_t1_poisson_r40.profile.json.gz",
                     "cfg_t1_poisson_r40.profile.summary.json"]
    again = summarise(read_schedule(tmp_path / "cfg_t1_poisson_r40.intervals"),
                      tmp_path / "cfg_t1_poisson_r40.profile.json.gz", "t")  # re-analysis from what was kept
    assert again.latency.sched_p99_ms == pytest.approx(row["sched_p99_ms"], abs=5e-4)
