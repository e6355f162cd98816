"""One run folder (issue 27, item 4): results.run_folder owns the output flag, run.json and identities, and
results.rows is the one typed row store the sweep, bench, open-loop and search stores write through. The committed
results under results/ were written before the row store existed: they must read back (and rewrite) the same."""
from __future__ import annotations

import argparse
import csv
import json
import math
import multiprocessing as mp
import shutil
from pathlib import Path

import pytest

from deployment_toolkit.results.bench_store import BenchCSV, rows_to_csv as bench_csv
from deployment_toolkit.results.identity import RunIdentity
from deployment_toolkit.results.ledger import IdentityMismatch
from deployment_toolkit.results.rows import RowSchema, RowStore, read_csv
from deployment_toolkit.results.run_folder import RunFolder, add_result_path_argument
from deployment_toolkit.results.schema import INT_COLUMNS, STORE_COLUMNS
from deployment_toolkit.results.store import ResultsStore, read_store_csv, rows_to_csv as store_csv
from deployment_toolkit.search.store import SearchStore
from deployment_toolkit.perf.openloop.ratestore import RateKey, RateStore, read_rows, rows_to_csv as rate_csv
from deployment_toolkit.spec import atomic_write

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "tests" / "fixtures" / "stores"  # committed runs of earlier formats, copied

SCHEMA = RowSchema(columns=("name", "batch", "rate", "ok", "series", "note", "identity", "measured_at"),
                   key=("name", "batch"), sort_by=("name", "batch"),
                   types={"batch": int, "rate": float, "ok": bool, "series": list},
                   identity_column="identity", stamp_column="measured_at")


def ident(server: str = "2.51.0") -> RunIdentity:
    return RunIdentity(host={"cpu_model": "cpu-a", "usable_cores": 2, "arch": "x86_64", "gpus": []},
                       server_version=server, model_config=None, artifact_digest=None, perf_options={},
                       input_data="random", toolkit_version="0.1.0")


def row(name: str = "a", batch: int = 1, rate: float = 1.5, **extra) -> dict:
    return {"name": name, "batch": batch, "rate": rate, "ok": True, "series": [1.0, 2.5], "note": "", **extra}


# ---- the row store ---------------------------------------------------------------------------------------------

def test_typed_rows_round_trip(tmp_path):
    table = RunFolder(tmp_path, ident()).table("t.csv", SCHEMA)
    table.put(row("b", 2, 0.1234567, note="x,y"))
    table.put(row("a", 8, math.nan, ok=False, series=[]))
    back = RunFolder(tmp_path, ident()).table("t.csv", SCHEMA).open().rows()
    assert [(r["name"], r["batch"]) for r in back] == [("a", 8), ("b", 2)], "the file is sorted by sort_by"
    a, b = back
    assert isinstance(a["batch"], int) and a["ok"] is False and math.isnan(a["rate"]) and a["series"] == []
    assert b["rate"] == 0.123457 and b["ok"] is True and b["series"] == [1.0, 2.5] and b["note"] == "x,y"
    assert {r["identity"] for r in back} == {ident().id} and all(r["measured_at"].endswith("+00:00") for r in back)
    assert ident().id in RunFolder(tmp_path).identities(), "run.json resolves the identity the rows carry"


def test_a_put_replaces_the_row_of_its_key(tmp_path):
    table = RowStore(tmp_path / "t.csv", SCHEMA)
    table.put(row("a", 1, 1.0))
    table.put(row("a", 2, 2.0))
    table.put({**row("a", 1, 3.0), "batch": "1"})  # "1" and 1 key the same int row
    assert [(r["batch"], r["rate"]) for r in read_csv(SCHEMA, table.path)] == [(1, 3.0), (2, 2.0)]
    assert table.get(("a", 1))["rate"] == 3.0 and table.get({"name": "a", "batch": 2.0})["rate"] == 2.0
    assert (tmp_path / "t.csv").read_text().count("name,batch") == 1, "one header, never repeated"


def test_without_sort_a_replaced_row_moves_to_the_end(tmp_path):
    schema = RowSchema(columns=("k", "v"), key=("k",))
    table = RowStore(tmp_path / "t.csv", schema)
    for k, v in (("x", 1), ("y", 2), ("x", 3)):
        table.put({"k": k, "v": v})
    assert (tmp_path / "t.csv").read_text() == "k,v\ny,2\nx,3\n"


def test_a_store_not_yet_opened_keeps_the_rows_the_file_holds(tmp_path):
    RowStore(tmp_path / "t.csv", SCHEMA).put(row("a", 1))
    RowStore(tmp_path / "t.csv", SCHEMA).put(row("a", 2))  # a second writer that never called open()
    assert [r["batch"] for r in read_csv(SCHEMA, tmp_path / "t.csv")] == [1, 2]


def test_a_row_of_another_identity_is_set_aside(tmp_path):
    RunFolder(tmp_path, ident("2.51.0")).table("t.csv", SCHEMA).put(row())
    said: list[str] = []
    again = RunFolder(tmp_path, ident("2.52.0")).table("t.csv", SCHEMA).open(say=said.append)
    assert again.rows() == [] and not (tmp_path / "t.csv").exists()
    assert len(said) == 1 and 'server_version: stored "2.51.0", now "2.52.0"' in said[0]
    kept = list((tmp_path / "superseded").glob("*/t.csv"))
    assert len(kept) == 1 and len(read_csv(SCHEMA, kept[0])) == 1, "set aside, never deleted"


def test_resume_refuses_another_identity_and_moves_nothing(tmp_path):
    RunFolder(tmp_path, ident("2.51.0")).table("t.csv", SCHEMA).put(row())
    with pytest.raises(IdentityMismatch, match="cannot resume"):
        RunFolder(tmp_path, ident("2.52.0")).table("t.csv", SCHEMA).open("resume")
    assert (tmp_path / "t.csv").exists()
    assert len(RunFolder(tmp_path, ident("2.51.0")).table("t.csv", SCHEMA).open("resume").rows()) == 1


def test_writes_are_atomic_and_leave_no_temp_file(tmp_path):
    table = RowStore(tmp_path / "t.csv", SCHEMA)
    for b in range(5):
        table.put(row(batch=b))
    before = table.path.read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]

    def half_then_fail(fh) -> None:
        fh.write(b"name,batch\na,")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(table.path, half_then_fail)
    assert table.path.read_text() == before, "a write that dies leaves the previous file whole"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def _put_many(path: str, start: int, count: int) -> None:
    table = RowStore(path, SCHEMA, lock=True)
    for b in range(start, start + count):
        table.put(row("w", b))


def test_concurrent_writers_under_the_lock_lose_no_rows(tmp_path):
    path = str(tmp_path / "t.csv")
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_put_many, args=(path, 100 * k, 12)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    expected = sorted(100 * k + i for k in range(4) for i in range(12))
    assert sorted(r["batch"] for r in read_csv(SCHEMA, path)) == expected


def test_a_schema_refuses_columns_it_does_not_have():
    with pytest.raises(ValueError, match="does not have"):
        RowSchema(columns=("a",), key=("b",))
    with pytest.raises(ValueError, match="int, float, bool, str or list"):
        RowSchema(columns=("a",), types={"a": dict})


# ---- the run folder --------------------------------------------------------------------------------------------

def test_run_json_goes_through_the_folder(tmp_path):
    folder = RunFolder(tmp_path / "run", ident())
    meta = folder.record({"kind": "test"})
    assert folder.run_json_path.exists() and folder.run_json()["config"] == {"kind": "test"} == meta["config"]
    assert folder.stored_identity(ident().id) == ident().to_dict()
    RunFolder(tmp_path / "run", ident("2.52.0")).record({"kind": "again"})
    assert set(folder.identities()) == {ident().id, ident("2.52.0").id}, "a later run keeps earlier identities"


def test_the_output_flag_has_one_spelling_and_keeps_the_old_one():
    p = argparse.ArgumentParser()
    add_result_path_argument(p, "--result-dir", dest="result_dir", default="results/x", help="default: %(default)s")
    assert p.parse_args(["--result-path", "a"]).result_dir == "a" == p.parse_args(["--result-dir", "a"]).result_dir
    assert p.parse_args([]).result_dir == "results/x"
    with pytest.raises(ValueError, match="alias"):
        add_result_path_argument(argparse.ArgumentParser(), "--out")


# ---- the four stores on files written before the row store -----------------------------------------------------

def _raw(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _same(typed, cell: str) -> bool:
    """A typed value is what its cell in the file says."""
    if isinstance(typed, float) and math.isnan(typed):
        return cell == ""
    if isinstance(typed, bool):
        return typed == (cell.lower() in ("true", "1", "yes"))
    if isinstance(typed, list):
        return typed == [float(x) for x in cell.split(";") if x]
    if isinstance(typed, (int, float)):
        return typed == float(cell)
    return typed == cell


SWEEPS = sorted(RESULTS.glob("overhead-resnet50-cpu/sweeps/*/online.csv")) + [
    RESULTS / "sizing-example-cpu" / "resnet18_i1" / "online.csv"]


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: str(p.relative_to(RESULTS)))
def test_committed_sweep_csvs_read_back_the_same(path, tmp_path):
    raw, typed = _raw(path), read_store_csv(path)
    assert len(typed) == len(raw) > 0
    for cells, r in zip(raw, typed):
        assert list(r) == list(STORE_COLUMNS)
        for col, cell in cells.items():
            assert _same(r[col], cell), (col, cell, r[col])
        assert all(isinstance(r[c], int) for c in INT_COLUMNS if cells.get(c))
    assert _equal(read_store_csv(_write(tmp_path, store_csv(typed))), typed), "a rewrite reads back the same"


def test_a_committed_sweep_rewrites_byte_for_byte_and_resumes(tmp_path):
    run = RESULTS / "sizing-example-cpu" / "resnet18_i1"
    src = run / "online.csv"
    assert store_csv(read_store_csv(src)) == src.read_text(), "a file in today's format rewrites byte for byte"
    stored = read_store_csv(src)
    (row_id,) = {r["identity"] for r in stored}
    identity = RunIdentity.from_dict(RunFolder(run).identities()[row_id]["identity"])
    assert identity.id == row_id
    shutil.copy(src, tmp_path / "online.csv")
    # reopened under the identity its rows carry (as a resumed sweep does), every point is reused
    store = ResultsStore(tmp_path, "online", identity).open()
    assert store.completed() == {(r["Client Batch Size"], r["Concurrent client requests"]) for r in stored}
    assert _equal(store.rows(), stored) and store_csv(store.rows()) == src.read_text()
    assert not (tmp_path / "superseded").exists()


def test_committed_open_loop_points_read_back_the_same(tmp_path):
    for src in sorted(RESULTS.glob("sizing-example-cpu/*/openloop.csv")):
        raw, typed = _raw(src), read_rows(src)
        assert len(typed) == len(raw) > 0
        for cells, r in zip(raw, typed):
            for col, cell in cells.items():
                assert _same(r[col], cell), (src, col, cell, r[col])
        shutil.copy(src, tmp_path / "openloop.csv")
        store = RateStore(tmp_path)  # no identity: planning from stored points replays them as they are
        for r in typed:
            assert _equal([store.get(RateKey.from_row(r))], [r])
    src = RESULTS / "plan-my_model-cpu" / "search" / "search_openloop.csv"  # an older format (fewer columns)
    today = rate_csv(read_rows(src))
    (tmp_path / "today.csv").write_text(today)
    assert rate_csv(read_rows(tmp_path / "today.csv")) == today, "a file in today's format rewrites byte for byte"


def test_the_committed_bench_csv_reads_back_as_strings_and_rewrites_its_cells(tmp_path):
    src = next(RESULTS.glob("framework-bench/*.csv"))
    store = BenchCSV(tmp_path / src.name)
    shutil.copy(src, store.path)
    rows = store.read()
    assert rows == _raw(src), "bench rows read back exactly as the file holds them"
    store.upsert([{**rows[0], "throughput": 1.23456789}])
    again = _raw(store.path)
    assert len(again) == len(rows) and again[-1]["throughput"] == "1.23457", "the replaced row moves to the end"
    assert again[:-1] == [{**r, "identity": ""} for r in rows[1:]], "the other rows' cells are unchanged"
    assert _raw(_write(tmp_path, bench_csv(rows))) == [{**r, "identity": ""} for r in rows]


def test_a_committed_search_checkpoint_is_reused_and_its_fields_kept(tmp_path):
    src = RESULTS / "example-my_model-cpu" / "search" / "search_points.json"
    shutil.copy(src, tmp_path / src.name)
    doc = json.loads(src.read_text())
    identity = RunIdentity.from_dict(doc["identity"])
    assert identity.id == doc["identity_id"]
    store = SearchStore(tmp_path, identity).open()
    assert store.path == store.folder.file("search_points.json") and set(store.points) == set(doc["points"])
    again = json.loads((tmp_path / src.name).read_text())
    assert {k: v for k, v in again.items() if k != "points"} == {k: v for k, v in doc.items() if k != "points"}
    assert all({k: again["points"][key][k] for k in point} == point for key, point in doc["points"].items()), \
        "every stored field is rewritten unchanged (fields added since read back as empty)"
    assert identity.id in store.folder.identities()


def test_a_checkpoint_from_before_identities_is_set_aside(tmp_path):
    src = RESULTS / "search-resnet50-cpu" / "search_points.json"
    shutil.copy(src, tmp_path / src.name)
    store = SearchStore(tmp_path, ident()).open()
    assert store.points == {}
    (kept,) = (tmp_path / "superseded").glob("*/search_points.json")
    assert kept.read_text() == src.read_text()


# ---- helpers ---------------------------------------------------------------------------------------------------

def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rewritten.csv"
    path.write_text(text)
    return path


def _equal(a: list[dict], b: list[dict]) -> bool:
    """Rows equal, NaN equal to NaN."""
    def norm(v):
        return "nan" if isinstance(v, float) and math.isnan(v) else v
    return [{k: norm(v) for k, v in r.items()} for r in a] == [{k: norm(v) for k, v in r.items()} for r in b]
