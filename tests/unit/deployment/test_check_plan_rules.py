"""check-plan's reading of a plan folder, its verdict rule and its inputs, with no server: each plan is a run.json
written here (never one of results/)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from deployment_toolkit.client.openloop import StreamTrace
from deployment_toolkit.deployment import checkplan_inputs as inputs
from deployment_toolkit.deployment import checkplan_report as report
from deployment_toolkit.deployment.checkplan import (CLIENT_CPU_LIMIT, CheckSettings, GroupCheck, GroupRound,
                                                     ModelRound, PlanCheck, PlannedGroup, Verdict, chosen_groups,
                                                     group_urls, group_verdict, judge, read_plan)
from deployment_toolkit.deployment.checkplan_run import result_folder
from deployment_toolkit.errors import UserError, UserFileNotFoundError, UserInputError

H, F, V = Verdict.HOLDS, Verdict.FAILS, Verdict.VOID


def _plan(folder: Path, groups=None, models=None, kind="deployment-plan") -> Path:
    models = models if models is not None else {"a": {"p99_ms": 50, "peak_rps": 40}, "b": {"p99_ms": 200},
                                                "c": {"p99_ms": 10}}
    groups = groups if groups is not None else [
        {"models": ["a", "b"], "replicas": 2, "rates": {"a": 22.0, "b": 11.0}},
        {"models": ["c"], "replicas": 1, "rates": {"c": 5.5}}]
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"command": "deployment-toolkit plan --deployment d.yaml",
           "config": {"kind": kind, "models": models, "groups": groups, "confirmed": True}}
    (folder / "run.json").write_text(json.dumps(doc))
    return folder


# ---- the plan on file ----------------------------------------------------------------------------------------

def test_a_plan_folder_gives_its_groups_rates_and_slos(tmp_path):
    plan = read_plan(_plan(tmp_path / "plan"))
    assert plan.slo_ms == {"a": 50.0, "b": 200.0, "c": 10.0} and plan.confirmed is True
    assert [g.label for g in plan.groups] == ["a-b", "c"]
    assert plan.groups[0] == PlannedGroup(("a", "b"), 2, {"a": 22.0, "b": 11.0})


@pytest.mark.parametrize("change, words", [
    (dict(kind="deployment-vs-model-analyzer"), "records a deployment-vs-model-analyzer, not a deployment plan"),
    (dict(groups=[]), "records no replica groups"),
    (dict(models={}), "records no models"),
    (dict(models={"a": {"peak_rps": 1}, "b": {"p99_ms": 1}, "c": {"p99_ms": 1}}), "config.models.a.p99_ms"),
    (dict(groups=[{"models": ["a", "x"], "replicas": 1, "rates": {"a": 1, "x": 1}}]), "model(s) x"),
    (dict(groups=[{"models": ["a"], "replicas": 1, "rates": {}}]), "no planned rate for every model"),
    (dict(groups=[{"models": ["a"], "replicas": 1, "rates": {"a": -3}}]), "rates.a must be a number >= 0"),
    (dict(groups=[{"models": ["a"], "replicas": 0, "rates": {"a": 3}}]), "replicas must be a number >= 1"),
    (dict(groups=[{"models": ["a"], "replicas": 1, "rates": {"a": "fast"}}]), "got 'fast'"),
    (dict(groups=["a"]), "is not a replica group"),
])
def test_what_is_not_a_plan_is_one_line_saying_why(tmp_path, change, words):
    with pytest.raises(UserInputError, match="^.*" + words.replace("(", r"\(").replace(")", r"\)")):
        read_plan(_plan(tmp_path / "plan", **change))


def test_a_folder_without_run_json_is_refused_and_a_plan_inside_it_is_pointed_at(tmp_path):
    with pytest.raises(UserFileNotFoundError, match="no such plan folder"):
        read_plan(tmp_path / "none")
    _plan(tmp_path / "bench" / "plan")
    with pytest.raises(UserFileNotFoundError, match=r"has no run.json.*bench/plan holds one"):
        read_plan(tmp_path / "bench")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "run.json").write_text("{not json")
    with pytest.raises(UserInputError, match="not valid JSON"):
        read_plan(tmp_path / "bad")


def test_groups_are_chosen_by_label_and_get_their_urls(tmp_path):
    plan = read_plan(_plan(tmp_path / "plan"))
    assert chosen_groups(plan, []) == plan.groups
    assert [g.label for g in chosen_groups(plan, ["c"])] == ["c"]
    with pytest.raises(UserInputError, match="no such group; its groups are a-b, c"):
        chosen_groups(plan, ["a"])
    urls = group_urls(plan.groups, ["c=10.0.0.2:9001", "grpc://10.0.0.1:8001"])
    assert urls["a-b"].address == "10.0.0.1:8001" and urls["c"].address == "10.0.0.2:9001"
    with pytest.raises(UserInputError, match=r"no --url for group\(s\) a-b"):
        group_urls(plan.groups, ["c=h:1"])
    with pytest.raises(UserInputError, match="sends over gRPC"):
        group_urls(plan.groups, ["http://h:8000"])
    with pytest.raises(UserInputError, match="--url HOST:PORT is required"):
        group_urls(plan.groups, [])


def test_settings_refuse_a_scale_of_zero_and_say_the_majority():
    with pytest.raises(UserInputError, match="--scale must be > 0"):
        CheckSettings(url=("h:1",), scale=0)
    assert [CheckSettings(rounds=n).needed for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]
    assert CheckSettings(window_s=2).warmup_s == 0.5 and CheckSettings().warmup_s == 1.0


def test_the_result_goes_beside_the_plan_unless_given(tmp_path):
    plan = read_plan(_plan(tmp_path / "plan"))  # tmp_path: no git tracks it
    assert result_folder(plan, None).parent == tmp_path / "plan"
    assert result_folder(plan, None).name.startswith("check-")
    assert result_folder(plan, tmp_path / "mine") == tmp_path / "mine"


# ---- judging ---------------------------------------------------------------------------------------------------

def _trace(intended_ms, latency_ms, ok=None) -> StreamTrace:
    intended = (np.asarray(intended_ms, float) * 1e6).astype(np.int64)
    ok = np.ones(len(intended), bool) if ok is None else np.asarray(ok)
    done = np.where(ok, intended + (np.asarray(latency_ms, float) * 1e6).astype(np.int64), -1)
    return StreamTrace("m", intended, sent_ns=intended.copy(), done_ns=done, ok=ok)


def test_a_round_counts_only_requests_meant_for_its_window_and_answers_that_came_in_it():
    # warm-up [0, 1000) ms, window [1000, 3000): 1 warm-up request answered in the window, 1 answered after it
    intended = [500, 990, 1000, 1500, 2000, 2500, 2990]
    latency = [100, 50, 10, 10, 10, 400, 20]
    m = judge(_trace(intended, latency), 2.5, 100.0, 1_000_000_000, 3_000_000_000)
    assert (m.offered, m.errors, m.window_s) == (5, 0, 2.0)
    assert m.answered == 5  # 990+50 and 500+100 (warm-up) in; 2990+20 out; the window's first four in
    assert m.p50_ms == 10.0 and m.p99_ms == pytest.approx(400, rel=0.05)
    assert m.within_slo == pytest.approx(4 / 5)
    assert m.misses() == [f"p99 {m.p99_ms:,.1f} ms > SLO 100 ms"] and not m.holds


def test_an_error_or_a_missing_answer_fails_a_round_with_its_reason():
    trace = _trace([100, 200, 300], [5, 5, 5], ok=[True, False, True])
    trace.first_error = "model m: deadline exceeded"
    m = judge(trace, 1.0, 100.0, 0, 1_000_000_000)
    assert m.errors == 1 and m.p99_ms is not None and m.p99_ms <= 5.0
    assert m.misses() == ["1 error(s): model m: deadline exceeded"]


def _model(offered, answered, p99=10.0, slo=50.0, errors=0) -> ModelRound:
    return ModelRound("m", 10.0, slo, 1.0, offered, answered, errors, p99, p99, 1.0, 0.1)


def test_answered_may_fall_short_of_offered_by_the_poisson_tolerance_only():
    assert _model(100, 70).holds  # 100 - 3 * sqrt(100) = 70
    assert _model(100, 69).misses() == ["answered 69 < offered 100 - 30"]
    assert _model(0, 0, p99=None).holds  # nothing offered (a rate below one per window): nothing to miss
    assert not _model(100, 100, p99=50.1).holds and _model(100, 100, p99=50.0).holds


def test_a_round_whose_load_generator_was_too_busy_is_void_not_failed():
    failing = (_model(100, 100, p99=999.0),)
    assert GroupRound(1, 1, failing, CLIENT_CPU_LIMIT + 0.01).verdict is V
    assert GroupRound(1, 1, failing, CLIENT_CPU_LIMIT).verdict is F
    assert GroupRound(1, 1, (_model(100, 100), _model(10, 10)), 0.2).verdict is H


@pytest.mark.parametrize("outcomes, rounds, verdict", [
    ([H, H, H], 3, H), ([H, F, H], 3, H), ([F, H, F], 3, F), ([H, F, V], 3, V), ([F, F, V], 3, F),
    ([H, H, V], 3, H), ([H, F], 2, F), ([H, V], 2, V), ([H, H], 2, H), ([H], 1, H), ([F], 1, F),
    ([H, H, F, F, H], 5, H), ([H, H, F, F, F], 5, F),
])
def test_a_group_holds_in_a_majority_of_its_rounds(outcomes, rounds, verdict):
    assert group_verdict(outcomes, rounds) is verdict


def _check(rounds) -> GroupCheck:
    from deployment_toolkit.client.url import ServerUrl

    group = PlannedGroup(("m",), 1, {"m": 10.0})
    return GroupCheck(group, ServerUrl.parse("127.0.0.1:8001"), {"m": "m"}, {"m": "4 seeded random request(s)"},
                      rounds)


def test_a_void_round_run_again_counts_by_its_second_attempt():
    good, bad = (_model(100, 100),), (_model(100, 100, p99=99.0),)
    check = _check([GroupRound(1, 1, good, 0.9), GroupRound(1, 2, good, 0.1), GroupRound(2, 1, bad, 0.1),
                    GroupRound(3, 1, good, 0.1)])
    assert [(r.index, r.attempt) for r in check.counted()] == [(1, 2), (2, 1), (3, 1)]
    assert check.verdict(3) is H


def test_the_output_says_every_round_and_the_rule_and_its_json_is_plain(tmp_path):
    check = _check([GroupRound(1, 1, (_model(100, 100),), 0.12), GroupRound(2, 1, (_model(100, 60, p99=70),), 0.95),
                    GroupRound(2, 2, (_model(100, 100, p99=70.0),), 0.2)])
    plan = read_plan(_plan(tmp_path / "plan"))
    result = PlanCheck(plan, CheckSettings(url=("h:1",), rounds=2), [check])
    text = report.markdown(result)
    for words in ("| round ", "target/s", "offered/s", "answered/s", "p99 ms", "within SLO", "client CPU", "(group)",
                  "0.95 cores", "| void", "2 (again)", "p99 70.0 ms > SLO 50 ms", "**m: fails** (held in 1 of 2",
                  "majority of its rounds", "0 of 1 group(s) hold", "exit 1"):
        assert words in text, words
    assert result.code == 1
    doc = json.loads(json.dumps(report.to_dict(result)))
    assert doc["groups"][0]["verdict"] == "fails" and doc["client_cpu_limit"] == CLIENT_CPU_LIMIT
    assert doc["groups"][0]["rounds"][1]["verdict"] == "void"


# ---- inputs ----------------------------------------------------------------------------------------------------

def _served(*inputs_, batched=True) -> inputs.ServedModel:
    return inputs.ServedModel("m", "m", tuple(inputs.ServedInput(*i) for i in inputs_), batched)


def test_random_requests_follow_the_servers_dtypes_with_dynamic_dims_of_one():
    model = _served(("x", "FP32", (-1, 16)), ("ids", "INT64", (-1, -1)), ("flag", "BOOL", (-1, 1)))
    r = inputs.requests_for(model, None, seed=3)
    assert len(r.arrays) == inputs.RANDOM_REQUESTS and r.datatypes == {"x": "FP32", "ids": "INT64", "flag": "BOOL"}
    first = r.arrays[0]
    assert first["x"].shape == (1, 16) and first["x"].dtype == np.float32
    assert first["ids"].shape == (1, 1) and first["ids"].dtype == np.int64 and first["flag"].dtype == bool
    again = inputs.requests_for(model, None, seed=3)
    assert all((a["x"] == b["x"]).all() for a, b in zip(r.arrays, again.arrays))  # seeded


def test_samples_are_fitted_to_the_server_and_a_batch_becomes_requests_of_one(tmp_path):
    model = _served(("x", "FP32", (-1, 4)), ("text", "BYTES", (-1, 1)))
    folder = tmp_path / "samples" / "m"
    folder.mkdir(parents=True)
    np.savez(folder / "one.npz", x=np.ones(4), text=np.array(["hi"]))  # no batch axis, float64, a str
    np.savez(folder / "batch.npz", x=np.zeros((3, 4), np.float32), text=np.array([b"a", b"b", b"c"], dtype=object)
             .astype("S1"))
    r = inputs.requests_for(model, tmp_path / "samples", seed=0)
    assert len(r.arrays) == 4  # batch.npz's three rows, then one.npz
    assert all(a["x"].shape == (1, 4) and a["x"].dtype == np.float32 for a in r.arrays)
    assert r.arrays[3]["text"].shape == (1, 1) and r.arrays[3]["text"][0, 0] == b"hi"


def test_samples_that_do_not_fit_are_one_line_naming_the_file(tmp_path):
    folder = tmp_path / "s" / "m"
    folder.mkdir(parents=True)
    np.savez(folder / "wrong.npz", x=np.ones((1, 5), np.float32))
    with pytest.raises(UserInputError, match=r"wrong.npz: input 'x' has shape \[1, 5\], but the server takes "):
        inputs.requests_for(_served(("x", "FP32", (-1, 4))), tmp_path / "s", 0)
    np.savez(folder / "wrong.npz", y=np.ones((1, 4), np.float32))
    with pytest.raises(UserInputError, match=r"no array for input\(s\) x of m \(it has y\)"):
        inputs.requests_for(_served(("x", "FP32", (-1, 4))), tmp_path / "s", 0)
    np.savez(folder / "wrong.npz", x=np.ones((1, 4), np.float32))
    with pytest.raises(UserInputError, match="is float32, but the server takes INT32"):
        inputs.requests_for(_served(("x", "INT32", (-1, 4))), tmp_path / "s", 0)


def test_raw_files_feed_a_pipeline_and_strings_without_samples_are_refused(tmp_path):
    pipeline = inputs.ServedModel("shop", "shop_pipeline", (inputs.ServedInput("image", "BYTES", (-1, 1)),), True)
    with pytest.raises(UserInputError, match=r"shop \(shop_pipeline: image\) take TYPE_STRING inputs.*--samples"):
        inputs.refuse_strings_without_samples([pipeline, _served(("x", "FP32", (-1, 4)))], None)
    with pytest.raises(UserFileNotFoundError, match="--samples .*: no such folder"):
        inputs.refuse_strings_without_samples([pipeline], tmp_path / "none")
    raw = tmp_path / "raw" / "shop"
    raw.mkdir(parents=True)
    (raw / "a.jpg").write_bytes(b"\xff\xd8jpeg")
    (raw / "b.jpg").write_bytes(b"\xff\xd8other")
    inputs.refuse_strings_without_samples([pipeline], tmp_path / "raw")
    r = inputs.requests_for(pipeline, tmp_path / "raw", 0)
    assert r.model == "shop_pipeline" and r.datatypes == {"image": "BYTES"}
    assert [a["image"].shape for a in r.arrays] == [(1, 1), (1, 1)] and r.arrays[0]["image"][0, 0] == b"\xff\xd8jpeg"


class _FakeClient:
    def __init__(self, ready):
        self._ready = set(ready)

    def ready(self, model: str = "", version: str = "") -> bool:
        return model in self._ready

    def repository_index(self):
        return [{"name": n, "state": "READY"} for n in sorted(self._ready)] + [{"name": "off", "state": "UNAVAILABLE"}]


def test_a_pipeline_is_called_by_its_ensemble_and_a_missing_model_is_none():
    client = _FakeClient({"shop", "shop_pipeline", "plain"})
    assert inputs.served_name(client, "shop") == "shop_pipeline"
    assert inputs.served_name(client, "plain") == "plain"
    assert inputs.served_name(client, "ghost") is None
    assert inputs.ready_models(client) == ["plain", "shop", "shop_pipeline"]


def test_a_server_that_does_not_answer_is_one_line_before_any_load(tmp_path, capsys):
    from deployment_toolkit.__main__ import main

    plan = _plan(tmp_path / "plan")
    with pytest.raises(SystemExit) as info:
        main(["check-plan", str(plan), "--url", "127.0.0.1:1", "--rounds", "1"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: nothing answers over gRPC at grpc://127.0.0.1:1: start the server, or give its gRPC port "
                   "(Triton's default is 8001; 8000 is its HTTP port)"]
    assert not list(plan.glob("check-*"))  # nothing written


def test_user_errors_are_the_toolkits():
    assert issubclass(UserInputError, UserError)


def _host(others: float):
    from deployment_toolkit.perf.neighbours import Disturbance

    return Disturbance(6.0, others, 2.0, "/proc/stat")


def test_a_round_the_hosts_other_processes_disturbed_is_void_where_judged_and_run_again_once_quiet(monkeypatch):
    from deployment_toolkit.deployment import checkplan_run
    from deployment_toolkit.perf import neighbours

    failing = (_model(100, 100, p99=999.0),)
    busy = GroupRound(1, 1, failing, 0.1, _host(0.73), judged=True)
    assert busy.disturbed and busy.verdict is V
    assert busy.void_text() == "the host's other processes took 0.73 of 2 cores (36%) for 6.0 s (/proc/stat)"
    assert GroupRound(1, 1, failing, 0.1, _host(0.73), judged=False).verdict is F  # recorded, not judged
    assert GroupRound(1, 1, failing, 0.1, _host(0.4), judged=True).verdict is F  # 20%: under the rule's share
    assert GroupRound(1, 1, failing, 0.9).void_text().startswith("the load generator used 0.90 of a core")

    waits = []
    monkeypatch.setattr(neighbours, "wait_quiet", lambda **kw: waits.append(kw))
    target = checkplan_run._Target(_check([]), {"m": 50.0}, {}, (4242,), True)
    assert [checkplan_run._again(busy, a, target) for a in (1, 2, 3, 4)] == [True, True, True, False]
    assert waits == [{"also": (4242,)}] * 3  # each time after waiting for a quiet host, the server counted as ours
    client_busy = GroupRound(1, 1, failing, 0.9)
    assert [checkplan_run._again(client_busy, a, target) for a in (1, 2)] == [True, False] and len(waits) == 3
    assert not checkplan_run._again(GroupRound(1, 1, failing, 0.1), 1, target)


def test_the_report_names_the_hosts_load_and_why_a_round_was_void(tmp_path):
    check = _check([GroupRound(1, 1, (_model(100, 100, p99=99.0),), 0.1, _host(0.9), judged=True),
                    GroupRound(1, 2, (_model(100, 100),), 0.1, _host(0.02), judged=True)])
    check.server = "the server's processes (pid 7, tritonserver, and those below it) count as the measurement's"
    result = PlanCheck(read_plan(_plan(tmp_path / "plan")), CheckSettings(url=("h:1",), rounds=1), [check])
    text = report.markdown(result)
    for words in ("host's others", "0.90 cores", "0.02 cores", "Neighbours: the server's processes (pid 7",
                  "- round 1: void, the host's other processes took 0.90 of 2 cores (45%)", "**m: holds**",
                  "other processes took more than 25% of its cores"):
        assert words in text, words
    doc = report.to_dict(result)
    assert doc["groups"][0]["rounds"][0]["host_others"]["disturbed"] is True
    assert doc["groups"][0]["neighbours"].startswith("the server's processes")


def test_the_server_is_told_from_the_hosts_other_processes_by_its_listening_port():
    import os
    import socket

    from deployment_toolkit.client.url import ServerUrl
    from deployment_toolkit.deployment.checkplan_run import server_processes
    from deployment_toolkit.perf.neighbours import listening

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert os.getpid() in listening(port)
        pids, judged, how = server_processes(ServerUrl.parse(f"127.0.0.1:{port}"))
        assert pids == () and not judged and f"port {port} is held by " in how and "not a tritonserver" in how
    assert listening(port) == []
    assert server_processes(ServerUrl.parse("triton.example:8001"))[1] is True  # elsewhere: this host is the client
