"""`make gpu-check` (`deployment-toolkit-lab gpu-check`) on CPU: its plan (steps, commands, options, budgets), its
refusal on a host without a GPU, the runner's step semantics (real child processes), and the README built from a
recorded (synthetic) run."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deployment_toolkit_lab.acceptance.plan import DEFAULT_BUDGETS, PlanOptions, Step, build_plan
from deployment_toolkit_lab.acceptance.report import build_readme
from deployment_toolkit_lab.acceptance.runner import SERVER_STEP, Runner
from deployment_toolkit_lab.acceptance.seed_tables import SEED_CSV, load_seed_rows, parse_online_tables, seed_csv

pytestmark = pytest.mark.slow  # real exports or subprocesses: `make test` runs it, `make test-unit` does not

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "gpu_acceptance"
GPU_CHECK = [sys.executable, "-m", "deployment_toolkit_lab", "gpu-check"]
SEED_001 = sorted((ROOT.parent / "shared" / "seeds").glob("001_*.txt")) or sorted(
    Path("/work/shared/seeds").glob("001_*.txt"))


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    base = tmp_path_factory.mktemp("plan")
    return build_plan(PlanOptions(result_dir=base / "results", workspace=base / "ws"))


def _by_name(plan, pattern: str) -> Step:
    hits = [s for s in plan if re.search(pattern, s.name)]
    assert len(hits) == 1, [s.name for s in plan]
    return hits[0]


def _flag(step: Step, flag: str) -> str:
    return step.argv[step.argv.index(flag) + 1]


# ------------------------------------------------------------------------------------------------ the plan


def test_plan_covers_every_stage_the_issue_asks_for(plan):
    assert {s.stage for s in plan} == set(DEFAULT_BUDGETS) - {"server"}
    eager, compiled = _by_name(plan, "bench eager$"), _by_name(plan, "torch.compile$")
    no_tf32 = _by_name(plan, "without TF32$")
    for step in (eager, no_tf32, compiled):
        assert step.argv[:3] == ("-m", "deployment_toolkit_lab", "bench")  # the lab's bench, through its entry point
        models = step.argv[step.argv.index("--models") + 1:step.argv.index("--preset")]
        assert set(models) == {"resnet50", "vit_base_patch16_224", "nnunet3d"}
        assert _flag(step, "--device") == "cuda:0" and _flag(step, "--runtimes") == "eager"
        assert "32" in _flag(step, "--batch-sizes")  # big enough for the 3D nnU-Net to exercise OOM halving
    precisions = eager.argv[eager.argv.index("--precisions") + 1:eager.argv.index("--runtimes")]
    assert precisions == ("fp32", "fp16", "bf16", "amp") and "--no-tf32" not in eager.argv  # fp32 = TF32
    assert "--no-tf32" in no_tf32.argv and _flag(no_tf32, "--result-path") != _flag(eager, "--result-path")
    assert _flag(eager, "--compile-modes") == "none" and _flag(compiled, "--compile-modes") == "default"
    assert _flag(compiled, "--result-path") == _flag(eager, "--result-path")  # one table, eager beside compiled
    assert plan[-1] is compiled  # the greediest stage goes last and takes what is left


def test_conversions_are_fp16_verified_on_the_gpu_and_tensorrt_only_where_it_imports(plan):
    conv = [s for s in plan if s.stage == "convert"]
    assert {(_flag(s, "--model"), _flag(s, "--output-type")) for s in conv} == {
        (m, f) for m in ("resnet50", "vit_base_patch16_224", "nnunet3d") for f in ("ts-trace", "onnx", "trt")}
    for s in conv:
        assert _flag(s, "--precision") == "fp16" and _flag(s, "--verify-device") == "cuda:0"
        assert s.skip_codes == (3,)  # convert_model.py's "this host cannot" exit
        assert s.skip_unless == ("tensorrt" if _flag(s, "--output-type") == "trt" else "")


def test_serving_is_python_backend_torch_on_cuda_fp16_with_cuda_shared_memory(plan):
    for model in ("resnet50", "nnunet3d"):
        conf = _by_name(plan, f"^configure {model}")
        assert (_flag(conf, "--model-format"), _flag(conf, "--instance-kind"), _flag(conf, "--precision")) == (
            "python", "gpu", "fp16")
        assert _flag(conf, "--model-path").endswith(f"{model}/ts-trace-fp16")
    nn_conf = _by_name(plan, "^configure nnunet3d")
    assert (_flag(nn_conf, "--max-batch-size"), _flag(nn_conf, "--preferred-batch-sizes"),
            _flag(nn_conf, "--max-queue-delay-us")) == ("4", "2,4", "1000")  # seed 001's online configuration
    perf = [s for s in plan if s.stage in ("offline", "online", "nnunet-online")]
    assert len(perf) == 3
    for s in perf:
        assert s.server and _flag(s, "--shared-memory") == "cuda" and _flag(s, "--server-url") == "{grpc_url}"
    assert _flag(_by_name(plan, "^online nnunet3d"), "--concurrency") == "1:8:1"
    assert _by_name(plan, "^offline resnet50").argv[0] == "triton/run_offline_performance_test_on_triton.py"
    metrics = _by_name(plan, "Triton vs framework")
    assert _flag(metrics, "--threshold") == "cosine_min>=0.999"
    assert set(metrics.requires) == {"accuracy resnet50: served (Triton) dump", "accuracy resnet50: framework dump"}
    assert _flag(_by_name(plan, "framework dump"), "--device") == "cuda:0"


def test_diffusion_latency_at_8_and_18_steps(plan):
    deploy, latency = _by_name(plan, "^deploy diffusion"), _by_name(plan, "^diffusion latency")
    assert _flag(deploy, "--instance-kind") == "gpu" and _flag(deploy, "--format") == "ts-trace"
    assert _flag(deploy, "--precision") == "fp32"  # a traced sd_unet cast to half fails (plan.diffusion_steps)
    assert _flag(latency, "--steps") == "8,18" and latency.requires == (deploy.name,)
    assert _flag(latency, "--model-repository") == _flag(deploy, "--model-repository")


def _help_flags(script: tuple[str, ...]) -> set[str]:
    """The flags a step's script (or `-m module [command]`) shows in its --help."""
    run = list(script) if script[0] == "-m" else [str(ROOT / script[0]), *script[1:]]
    out = subprocess.run([sys.executable, *run, "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return set(re.findall(r"--[a-z][a-z0-9-]*", out.stdout))


def test_every_flag_of_the_plan_exists_in_its_script(plan):
    """The plan is only strings: check each against the real script's --help (a renamed flag fails here)."""
    by_script: dict[tuple[str, ...], set[str]] = {}
    for s in plan:
        # what runs (a script, or -m, the lab and its command), then its flags
        first_flag = next(i for i, a in enumerate(s.argv) if a.startswith("--"))
        script, args = s.argv[:first_flag], s.argv[first_flag:]
        by_script.setdefault(script, set()).update(a for a in args if a.startswith("--"))
    for script, flags in by_script.items():
        missing = flags - _help_flags(script)
        assert not missing, f"{' '.join(script)} has no {sorted(missing)}"


def test_dry_run_prints_the_plan_on_a_host_without_gpu():
    out = subprocess.run([*GPU_CHECK, "--dry-run", "--budget", "convert=5"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "--shared-memory cuda" in out.stdout and "convert resnet50 onnx fp16 (5 s)" in out.stdout


def test_bad_budget_is_a_one_line_error_with_exit_2():
    out = subprocess.run([*GPU_CHECK, "--dry-run", "--budget", "nope=3"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 2 and "STAGE=SECONDS" in out.stderr


# ------------------------------------------------------------------------------------------------ no GPU


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this host has an NVIDIA GPU")
def test_no_gpu_says_so_in_one_line_and_exits_2(tmp_path):
    out = subprocess.run([*GPU_CHECK, "--result-path", str(tmp_path / "r")],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "no NVIDIA GPU" in lines[0], out.stderr
    assert not (tmp_path / "r").exists()  # nothing half-written


# ------------------------------------------------------------------------------------------------ the runner


def _step(name: str, code: int, sleep: float = 0.0, budget: float = 30.0, **kw) -> Step:
    rel = str((FIXTURES / "step.py").relative_to(ROOT))
    return Step(name, "convert", (rel, str(code), str(sleep), f"message of {name}"), budget, **kw)


def test_runner_records_ok_failed_skipped_and_goes_on_after_a_failure(tmp_path):
    started = []

    def broken_server():
        started.append(1)
        raise RuntimeError("tritonserver exited with code 1\nmore lines")

    steps = [
        _step("a", 0),
        _step("b", 1),
        _step("c", 0, requires=("b",)),
        _step("d", 3, skip_codes=(3,)),
        _step("e", 0, skip_unless="tensorrt"),
        _step("f", 0, sleep=30, budget=2),
        _step("g", 0, server=True),
        _step("h", 0, server=True),
        _step("i", 0),
    ]
    runner = Runner(tmp_path, 120, {"tensorrt": "`import tensorrt` fails: no module"}, broken_server, log=lambda _: None)
    results = {r.name: r for r in runner.run(steps)}
    assert [r["name"] for r in json.loads((tmp_path / "steps.json").read_text())] == list(results)
    assert results["a"].status == "ok" and results["i"].status == "ok"  # a failure does not stop the rest
    assert results["b"].status == "failed" and results["b"].reason == "exit 1: message of b"
    assert results["c"].status == "skipped" and results["c"].reason == "needs 'b', which failed"
    assert results["d"].status == "skipped" and results["d"].reason == "message of d"
    assert results["e"].status == "skipped" and "import tensorrt" in results["e"].reason
    assert results["f"].status == "failed" and "time budget of 2 s" in results["f"].reason
    assert results["f"].seconds < 20  # killed at its budget, not after its sleep
    assert results[SERVER_STEP].status == "failed" and results[SERVER_STEP].reason == "tritonserver exited with code 1"
    assert results["g"].status == results["h"].status == "skipped" and "did not start" in results["h"].reason
    assert started == [1]  # one attempt to start the server
    assert (tmp_path / results[SERVER_STEP].log).read_text() == "tritonserver exited with code 1\nmore lines\n"
    assert (tmp_path / results["b"].log).read_text().startswith("$ python ")


def test_runner_stops_at_the_deadline_and_fills_the_server_url(tmp_path):
    class Server:
        """Entered by the runner when a step needs it, left once none does (as check._server_factory's is)."""
        grpc_url = "127.0.0.1:1234"
        stopped = False

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            Server.stopped = True

    rel = str((FIXTURES / "step.py").relative_to(ROOT))
    steps = [Step("s", "online", (rel, "0", "0", "{grpc_url}"), 30, server=True), _step("slow", 0, sleep=30),
             _step("late", 0)]
    runner = Runner(tmp_path, 8, {}, Server, log=lambda _: None)
    results = {r.name: r for r in runner.run(steps, fill=lambda a: a.replace("{grpc_url}", runner.server.grpc_url)
                                               if runner.server else a)}
    assert "127.0.0.1:1234" in (tmp_path / results["s"].log).read_text()
    assert Server.stopped  # stopped once no later step needs it
    assert results["slow"].status == "failed" and results["slow"].budget_s < 9  # cut to what was left
    assert results["late"].status == "skipped" and "--max-minutes" in results["late"].reason


# ------------------------------------------------------------------------------------------------ outputs


def test_readme_from_a_recorded_run(table_rows):
    text = build_readme(FIXTURES / "recorded_run")
    rows = table_rows(text)
    assert text.startswith("# GPU acceptance on SYNTHETIC TEST GPU")
    assert "5 ok, 1 failed, 2 skipped." in text
    assert ["diffusion latency per request (8 and 18 steps)", "**failed**", "3 / 50",
            "exit 1: SYNTHETIC failure reason for the test", "[log](logs/19_diffusion_latency.log)"] in rows
    assert "No module named 'tensorrt'" in text and "1 MHz / 2 MHz" in text
    assert "out of memory at batch 32, 16 and 8: halved to 4" in text  # the framework CSV's rows
    assert ["resnet50", "ts-trace", "fp16", "cuda:0", "True"] in [r[:5] for r in rows]
    assert "cosine_min" in text and "0.99998" in text
    # the nnU-Net table: this run's rows beside seed 001's A100/T4 FP16 rows, labelled as the seed's
    assert ["1", "112", "10", "26.1", "38.284", "9.1", "109.369"] in rows
    assert ["8", "119", "80", "49.2", "163.357", "10", "817.849"] in rows
    assert "A100 FP16 inf/s (seed 001)" in text and "8 (unstable)" in text
    assert "SYNTHETIC diffusion table" in text


def test_readme_of_a_run_that_measured_nothing_says_so(tmp_path):
    (tmp_path / "steps.json").write_text(json.dumps([{"name": "x", "stage": "convert", "status": "skipped",
                                                      "reason": "why", "seconds": 0, "budget_s": 1, "command": "",
                                                      "log": ""}]))
    (tmp_path / "serving").mkdir()
    text = build_readme(tmp_path)
    assert "0 ok, 0 failed, 1 skipped." in text and "(not measured in this run" in text


# ------------------------------------------------------------------------------------------------ seed figures


def test_seed_tables_parse_the_seed_layout():
    text = ("Online: NVIDIA T4 with FP16\n\nFull tabular data | Concurrent client requests | Inferences/second | "
            "Avg Latency | |---:|---:|---:| | 1 | 9.1 | 109.369 | | 2 | 9.2 | 218.099 |\n")
    rows = parse_online_tables(text)
    assert rows == [{"gpu": "NVIDIA T4", "precision": "FP16", "Concurrent client requests": "1",
                     "Inferences/second": "9.1", "Avg Latency": "109.369"},
                    {"gpu": "NVIDIA T4", "precision": "FP16", "Concurrent client requests": "2",
                     "Inferences/second": "9.2", "Avg Latency": "218.099"}]


@pytest.mark.skipif(not SEED_001, reason="the seed text (../shared/seeds/001_*.txt) is not on this host")
def test_committed_seed_csv_is_what_the_command_makes_from_the_seed_text():
    assert SEED_CSV.read_text() == seed_csv(parse_online_tables(SEED_001[0].read_text()))


def test_seed_csv_has_the_a100_and_t4_fp16_rows():
    rows = [r for r in load_seed_rows() if r["precision"] == "FP16"]
    assert {r["gpu_short"] for r in rows} >= {"A100", "T4"}
    assert [int(r["Concurrent client requests"]) for r in rows if r["gpu_short"] == "A100"] == list(range(1, 9))


# ------------------------------------------------------------------------------------------------ the whole flow


def test_check_writes_run_json_steps_and_readme_even_when_every_step_skips(tmp_path, monkeypatch):
    """The flow after the GPU probe, on CPU: only the configure stage, whose conversions did not run."""
    import argparse

    from deployment_toolkit_lab.acceptance import check

    monkeypatch.setattr(check, "require_cuda", lambda: "Stand-in GPU")
    monkeypatch.setattr(check, "nvidia_smi", lambda: {"name": "Stand-in GPU", "clocks.sm": "1 MHz"})
    monkeypatch.setattr(check, "torch_cuda", lambda: {"torch": "x"})
    monkeypatch.setattr(check, "capabilities", lambda: {"tensorrt": "no tensorrt here"})
    repo = tmp_path / "ws" / "model_repository" / "stale_model"
    repo.mkdir(parents=True)
    args = argparse.Namespace(result_path=None, workspace=str(tmp_path / "ws"), max_minutes=1.0, budget=[],
                              stages=["configure"], device="cuda:0", dry_run=False)
    monkeypatch.chdir(tmp_path)
    assert check.run_check(args) == 0
    result = tmp_path / "results" / "gpu-stand-in-gpu"
    meta = json.loads((result / "run.json").read_text())
    acc = meta["config"]["gpu_acceptance"]
    assert acc["nvidia_smi"]["clocks.sm"] == "1 MHz" and acc["capabilities"]["tensorrt"] == "no tensorrt here"
    assert [s["stage"] for s in acc["plan"]] == ["configure", "configure"]
    assert acc["libraries"]["triton-deployment-toolkit"] and meta["versions"]["python"]
    steps = json.loads((result / "steps.json").read_text())
    assert [s["status"] for s in steps] == ["skipped", "skipped"]
    assert steps[0]["reason"] == "needs 'convert resnet50 ts-trace fp16', which did not run"
    assert not repo.exists()  # an earlier run's models would be loaded and measured again
    assert json.loads((result / "conversions.json").read_text()) == []
    assert "0 ok, 0 failed, 2 skipped." in (result / "README.md").read_text()
