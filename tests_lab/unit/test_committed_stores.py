"""The committed runs' open-loop stores (the lab's housekeeping keeps them small): no raw per-request file is
committed, and every row's figures are the ones its kept profile summary gives."""
from __future__ import annotations

import math
import subprocess
from pathlib import Path

import pytest

from deployment_toolkit.perf.analyzer import read_schedule
from deployment_toolkit.perf.analyzer.profile_summary import read_summary, regenerate_schedule, stem, summarise, \
    summary_path
from deployment_toolkit.perf.openloop.ratestore import read_rows

ROOT = Path(__file__).resolve().parents[2]


# ---- the committed runs --------------------------------------------------------------------------------------

def _committed_stores() -> list[Path]:
    """The committed open-loop stores: CSVs (tracked or to be committed) with a profile_export column."""
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard",
                            "results"], capture_output=True, text=True, check=True).stdout.split()
    stores = []
    for f in files:
        path = ROOT / f
        if f.endswith(".csv") and path.is_file():
            with open(path) as fh:
                if "profile_export" in fh.readline().split(","):
                    stores.append(path)
    return stores


def test_no_raw_per_request_file_is_committed():
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard",
                            "results"], capture_output=True, text=True, check=True).stdout.split()
    raw = [f for f in files if f.endswith((".profile.json", ".profile.json.gz", ".intervals"))]
    assert not raw, f"{len(raw)} raw per-request files would be committed, e.g. {raw[:3]}"


def test_every_committed_open_loop_row_has_the_summary_its_figures_came_from():
    """The rows' latency from the intended send time was computed from the raw exports when the runs were made;
    the raw files are no longer committed, so each row's summary (derived from that raw file, whose SHA-256 it
    records) must give the same figures. Where the raw file is still on disk (the checkout that compacted the
    run), one point per store is derived again from it."""
    stores = _committed_stores()
    assert len(stores) >= 5  # the head-to-head and search runs against Model Analyzer keep theirs
    missing, checked = set(), 0
    for store in stores:
        rederived = False
        for row in read_rows(store):
            export = row.get("profile_export")
            if not export:
                continue
            path = ROOT / export
            if not summary_path(path).is_file():
                missing.add(export)
                continue
            s = read_summary(path)
            checked += 1
            assert s.schedule.get("seed") == row["schedule_seed"] and s.schedule.get("rate") == row["request_rate"]
            sched = row.get("sched_p99_ms")
            if sched is not None and not math.isnan(sched):
                assert s.latency.sched_p99_ms == pytest.approx(sched, rel=1e-5, abs=1e-3), export
                assert s.latency.late_pct == pytest.approx(row["late_pct"], rel=1e-5, abs=1e-3), export
            assert sum(s.windows["requests"][-s.reported_windows:]) == s.latency.requests
            assert len(regenerate_schedule(s.schedule).intervals_us) == s.schedule["intervals"]  # the dropped file
            gz = path.with_name(stem(path) + ".profile.json.gz")
            intervals = path.with_name(stem(path) + ".intervals")
            if not rederived and gz.is_file() and intervals.is_file():
                again = summarise(read_schedule(intervals), gz, s.derived_by, s.schedule)
                assert again.as_json() == s.as_json(), export
                rederived = True
    assert not missing, f"committed rows whose profile summary is missing: {sorted(missing)}"
    assert checked >= 200
