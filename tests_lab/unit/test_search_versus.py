"""The Model Analyzer comparison's bookkeeping: which winners go head to head, and how they are shown."""

from conftest import require_tool

from deployment_toolkit_lab.versus.head_to_head import Contender, table
from deployment_toolkit_lab.versus.model_analyzer import MAMeasurement, MAResult
from deployment_toolkit.search.space import Candidate
from deployment_toolkit_lab.versus.search import winners

class _Ours:
    """Our side as the comparison sees it: a search result whose winner is known."""

    def __init__(self, winner):
        self._winner = winner

    def winner(self):
        return self._winner


def test_our_side_comes_from_the_search_outcome_in_memory(tmp_path):
    """The comparison takes our winner and figures from the search step's result, not from a file read back."""
    from conftest import toolkit_test

    run = toolkit_test("unit/search/test_search.py").run
    from deployment_toolkit.search.trials import SearchRun
    from deployment_toolkit_lab.versus.search import our_failure, our_result

    outcome, _, _ = run(tmp_path)
    searched = SearchRun(outcome, tmp_path, 1.0)
    winner = outcome.decision.winner
    assert winner is not None and winner.confirmation is not None
    assert searched.winner() == (winner.candidate, winner.confirmation.concurrency)
    ours = our_result(searched, 12.0)
    assert ours.winner == winner.candidate.slug and ours.wall_s == 12.0 and ours.configs >= 1
    assert ours.best_throughput == max(t.best.throughput for t in outcome.trials if t.best is not None)
    assert ours.returncode == 0 and searched.found
    failed = our_failure("nothing to search", 0.5)  # the search could not start (search_step raised)
    assert failed.error == "nothing to search" and failed.best_throughput is None and failed.returncode == 2


def _ma(*measurements):
    return MAResult(ran=True, measurements=[MAMeasurement(*m) for m in measurements])


def test_winners_take_model_analyzers_best_within_budget_and_drop_a_duplicate(tmp_path):
    ours = _Ours((Candidate("onnx", 1, 0, 32), 8))
    ma = _ma(("v0", 1, 32, 64, 40.0, 1800.0), ("v6", 1, 8, 16, 36.0, 476.0), ("v2", 1, 2, 4, 32.0, 155.0))
    both = winners(ours, ma, "onnx", budget_ms=500)
    assert [(c.side, c.candidate, c.concurrency) for c in both] == [
        ("this toolkit's search", Candidate("onnx", 1, 0, 32), 8), ("Model Analyzer", Candidate("onnx", 1, 0, 8), 16)]
    same = winners(ours, _ma(("v", 1, 32, 8, 30.0, 300.0)), "onnx", budget_ms=500)
    assert len(same) == 1
    assert winners(ours, _ma(("v", 1, 8, 16, 36.0, 900.0)), "onnx", budget_ms=500)[0].side.startswith("this")


def test_table_shows_spread_and_rounds_within_budget(table_rows):
    a = Contender("ours", Candidate("onnx", 1, 0, 32), 8, [31.0, 33.0, 32.0], [300.0, 520.0, 310.0],
                  capacities=[20.0, 24.0, 22.0])
    b = Contender("MA", Candidate("onnx", 1, 0, 8), 16, error="refused: no")
    lines = table([a, b], 500)
    rows = table_rows("\n".join(lines))
    assert rows[1][3:] == ["32.0 [31.0..33.0]", "310.0 [300.0..520.0]", "2 of 3", "22.0 [20.0..24.0]"]
    assert rows[2][3:] == ["-", "-", "- (refused: no)", "-"]


def test_capacity_ratio_of_the_two_picks():
    from deployment_toolkit_lab.versus.head_to_head import capacity_ratio

    ours = Contender("ours", Candidate("onnx", 2, 1, 8), 8, capacities=[110.0, 120.0, 100.0])
    theirs = Contender("MA", Candidate("onnx", 1, 0, 8), 16, capacities=[100.0, 90.0, 95.0])
    assert capacity_ratio(ours, theirs) == 110.0 / 95.0
    assert capacity_ratio(ours, Contender("MA", Candidate("onnx", 1, 0, 8), 16)) is None


def test_summary_shows_each_sides_time_limit(table_rows):
    from deployment_toolkit_lab.versus.search import OurResult, summary_lines

    ours = OurResult(0, 150.0, 3, 33.0, "onnx_i1", 8, 300.0, "onnx_i1", "32.0 [31.0..33.0] inf/s", limit_minutes=3)
    ma = _ma(("v0", 1, 32, 8, 33.9, 294.4))
    ma.wall_s, ma.limit_minutes = 366.0, 10
    lines = summary_lines(500, ours, ma)
    rows = table_rows("\n".join(lines))
    assert rows[0][:3] == ["side", "time limit (min)", "wall (min)"]
    assert rows[1][:5] == ["this toolkit's search", "3", "2.5", "3", "33.0"]
    assert rows[2][:5] == ["Model Analyzer", "10", "6.1", "1", "33.9"]


def test_target_is_checked_from_the_head_to_head_medians():
    from deployment_toolkit_lab.versus.search import OURS, THEIRS, OurResult, target_lines

    ours = OurResult(0, 150.0, 3, 33.0, "onnx_i1", 8, 300.0, "onnx_i1", "")
    ma = _ma(("v0", 1, 32, 8, 33.9, 294.4))
    ma.wall_s = 366.0
    mine = Contender(OURS, Candidate("onnx", 1, 0, 32), 8, [31.0, 33.0, 32.0], [300.0, 520.0, 310.0])
    theirs = Contender(THEIRS, Candidate("onnx", 1, 0, 4), 4, [26.0, 30.0, 29.0], [200.0, 210.0, 205.0])
    lines = target_lines(500, ours, ma, [mine, theirs])
    assert lines[0].endswith("= 0.41 of its time (target: at most 0.50): met")
    # our pick broke the budget in one round of three: that target is not met, and the line says where and why
    assert lines[1].startswith("- budget: our pick's p99 within 500 ms in 2 of 3 head-to-head rounds (target: "
                               "every round): not met: p99 520.0 ms in the rounds over it, at concurrency 8")
    assert "32.0 vs 29.0 inf/s = 1.103x" in lines[2] and lines[2].endswith(": met")
    held = Contender(OURS, mine.candidate, 8, mine.throughputs, [300.0, 490.0, 310.0])
    assert target_lines(500, ours, ma, [held, theirs])[1].endswith("(target: every round): met")
    slow = OurResult(0, 200.0, 3, 33.0, "onnx_i1", 8, 300.0, "onnx_i1", "")
    assert target_lines(500, slow, ma, [mine, theirs])[0].endswith(
        "not met: 0.3 min over half of Model Analyzer's time")
    # past its own limit: the line says by how much, and the search's note on why
    note = "finished 14 s past --max-minutes 3.05: the final re-measurement took longer than the time reserved for it"
    late = OurResult(0, 200.0, 3, 33.0, "onnx_i1", 8, 300.0, "onnx_i1", "", limit_minutes=3.05,
                     notes=("every dimension was explored", note))
    assert target_lines(500, late, ma, [mine, theirs])[0].endswith(
        f"not met: 0.3 min over half of Model Analyzer's time; our search ran 0.3 min past its own limit of 3.05 min "
        f"({note})")
    edge = OurResult(0, 184.5, 3, 33.0, "onnx_i1", 8, 300.0, "onnx_i1", "")
    assert "= 0.504 of its time (target: at most 0.50): not met" in target_lines(500, edge, ma, [mine, theirs])[0]
    over = Contender(OURS, mine.candidate, 8, [40.0, 41.0, 42.0], [600.0, 620.0, 480.0])
    assert target_lines(500, ours, ma, [over, theirs])[2].endswith(
        "not met: our pick's median p99 600.0 ms is over the budget, so its throughput does not count")
    assert target_lines(500, ours, ma, [held])[2].endswith("same config at the same concurrency: met")
    close = Contender(THEIRS, theirs.candidate, 4, [32.5, 31.0, 33.5], [200.0, 210.0, 205.0])
    tie = target_lines(500, ours, ma, [held, close])[2]
    assert ": not met: 1.5% less throughput than Model Analyzer's pick (onnx, 1 inst x default threads, max batch 4" \
        in tie and "at concurrency 4 vs ours at 8)" in tie
    assert tie.endswith("(a tie within the spread of the rounds: ours 31.0..33.0, Model Analyzer's 31.0..33.5 inf/s)")
    none = OurResult(3, 100.0, 1, None, "", None, None, "", "", error="exit code 3")
    lines = target_lines(500, none, ma, [theirs])
    assert lines[1] == "- budget held in every head-to-head round: not met: our search named no config (exit code 3)"
    assert lines[2] == "- throughput: not met: our search named no config (exit code 3)"
    assert target_lines(500, ours, MAResult(ran=False, error="not installed"), [mine]) == []


def test_the_three_model_benchmark_script_runs_each_model_into_its_own_folder():
    import shlex
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "deployment_toolkit_lab" / "scripts" / "search_vs_ma.sh"
    out = subprocess.run([str(script), "--dry-run"], capture_output=True, text=True, check=True).stdout
    runs = [shlex.split(line) for line in out.splitlines()]
    got = {(r[r.index("--model") + 1], r[r.index("--preset") + 1], r[r.index("--p99-ms") + 1],
            r[r.index("--result-path") + 1]) for r in runs}
    assert got == {("resnet50", "full", "500", "results/search-vs-ma-resnet50-cpu"),
                   ("resnet18", "small", "50", "results/search-vs-ma-resnet18-cpu"),
                   ("efficientnet_b0", "full", "150", "results/search-vs-ma-efficientnet_b0-cpu")}
    assert all(r[1] == "deployment_toolkit_lab/scripts/benchmark_vs_model_analyzer.py"
               and r[r.index("--our-max-minutes") + 1] == "half" for r in runs)
    one = subprocess.run([str(script), "--dry-run", "--only", "resnet18"], capture_output=True, text=True, check=True)
    assert len(one.stdout.splitlines()) == 1 and "resnet18" in one.stdout
    bad = subprocess.run([str(script), "--only", "resnet"], capture_output=True, text=True)
    assert bad.returncode == 2 and "not one of the benchmarked models" in bad.stderr
    assert "Example:" in subprocess.run([str(script), "--help"], capture_output=True, text=True).stdout


def test_the_three_model_benchmark_script_is_shellcheck_clean():
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "deployment_toolkit_lab" / "scripts" / "search_vs_ma.sh"
    shellcheck = require_tool("shellcheck", "apt-get install shellcheck (or `make install` as root)")
    lint = subprocess.run([str(shellcheck), str(script)], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout


def test_the_same_config_picked_by_both_has_one_capacity():
    """Both tools picked one config at different concurrencies (resnet18 here, 2026-11-25): open loop does not use
    the concurrency, so the two sides' capacity searches are of one config and their ratio is the host's noise."""
    from deployment_toolkit_lab.versus.search import OURS, THEIRS, OurResult, target_lines

    ours = OurResult(0, 60.0, 1, 182.5, "onnx_i1", 4, 30.0, "onnx_i1", "")
    ma = _ma(("v0", 1, 8, 8, 40.3, 265.3))
    ma.wall_s = 180.0
    mine = Contender(OURS, Candidate("onnx", 1, 0, 8), 4, [196.2, 196.6, 176.5], [35.8, 25.4, 29.0],
                     capacities=[214.6, 134.0, 185.2])
    theirs = Contender(THEIRS, Candidate("onnx", 1, 0, 8), 8, [271.7, 194.3, 220.1], [39.8, 53.9, 46.9],
                       capacities=[133.8, 209.0, 149.9])
    line = target_lines(50, ours, ma, [mine, theirs])[3]
    assert "both tools picked the same config (onnx, 1 inst x default threads, max batch 8" in line
    assert "one capacity, 167.6 [133.8..214.6] inf/s from the 6 searches of both sides" in line
    assert "1.000x by construction (target: at least 1x): met" in line and "185.2 vs 149.9" in line
    other = Contender(THEIRS, Candidate("onnx", 1, 0, 4), 8, theirs.throughputs, theirs.p99s,
                      capacities=theirs.capacities)
    assert target_lines(50, ours, ma, [mine, other])[3].endswith("= 1.235x (target: at least 1x): met")


def test_our_side_runs_the_search_a_user_would_run_with_those_flags(monkeypatch, tmp_path):
    """The comparison builds our search's typed request directly (no second parse of the search's flags): it is the
    request the search command builds from the flags it shows, so its wall time and pick are a user's search's."""
    from deployment_toolkit.commands.search_config import build_parser, request_from_args
    from deployment_toolkit.search import orchestration
    from deployment_toolkit.search.trials import SearchError
    from deployment_toolkit_lab.versus.search import Comparison, run_ours

    asked = []

    def stand_in(request):
        asked.append(request)
        raise SearchError("stand-in: nothing measured")

    monkeypatch.setattr(orchestration, "search_step", stand_in)
    config = Comparison(model="resnet18", budget_ms=50.0, workspace=tmp_path / "ws", result_dir=tmp_path / "out")
    ours, run = run_ours(config, 2.5)
    assert run is None and ours.returncode == 2 and "stand-in" in ours.error  # could not start: said, not raised
    (request,) = asked
    flags = request.job.command.split(" ", 2)[2].split(" ")  # deployment-toolkit search <flags>
    same = request_from_args(build_parser().parse_args(flags), request.job.command)
    assert request.settings == same.settings and request.options == same.options
    assert request.job == same.job and request.source.ref == same.source.ref
