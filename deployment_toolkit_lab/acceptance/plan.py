"""What `make gpu-check` (`deployment-toolkit-lab gpu-check`) runs: an ordered list of steps, each a
`python triton/<script>.py ...` command of the toolkit's own scripts (or `python -m deployment_toolkit_lab bench
...`, the lab's framework bench) with a time budget, so the acceptance exercises exactly what a user types.

The plan is pure data (no torch, no GPU): tests read it on CPU, and the runner executes it on a CUDA host.
Placeholders in a command (`{grpc_url}`) are filled by the runner once the embedded server is up.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from deployment_toolkit.config import InstanceKind, SharedMemory
from deployment_toolkit.repository.config import instance_kind, kind_flag

# The models of the framework bench and the conversions (seed 004: a CNN, a ViT, the 3D nnU-Net of seed 001).
BENCH_MODELS = ("resnet50", "vit_base_patch16_224", "nnunet3d")
SERVED_MODEL = "resnet50"  # the offline/online sweeps with the per-stage breakdown
NNUNET = "nnunet3d"  # seed 001's online table: concurrency 1..8, max batch 4, preferred 2 4, queue delay 1 ms
DIFFUSION_STEPS = (8, 18)  # seed 000: low- and high-quality step counts
CONVERT_FORMATS = ("ts-trace", "onnx", "trt")
# the framework bench: the lab's `bench` command, through the lab's entry point
FRAMEWORK_BENCH = ("-m", "deployment_toolkit_lab", "bench")
# fp16 agreement of the served model with the framework: scale-free, so it holds for logits and masks alike.
FP16_AGREEMENT = "cosine_min>=0.999"

# Seconds one step of a stage may take. The runner also holds the whole check to --max-minutes (10 by default):
# a step gets the smaller of its budget and the time left, and steps past the deadline are skipped with that reason.
DEFAULT_BUDGETS: dict[str, float] = {
    "framework-eager": 80.0,
    "framework-no-tf32": 40.0,
    "convert": 40.0,  # per conversion; TensorRT is skipped at once where it does not import
    "configure": 10.0,
    "server": 45.0,  # start and load both models
    "accuracy": 20.0,
    "offline": 25.0,
    "online": 30.0,
    "nnunet-online": 90.0,  # 8 points of a 128^3 volume; the table seed 001 is compared in
    "diffusion": 75.0,  # deploy a third of it, the latency run two thirds
    "framework-compile": 180.0,  # last, takes what the others leave of --max-minutes
}


@dataclass(frozen=True)
class Step:
    """One command of the acceptance, with what it needs first and how long it may take."""

    name: str  # unique, e.g. "convert resnet50 ts-trace fp16"
    stage: str  # key of the budget table
    # run with sys.executable: a script relative to the repo root, ("triton/x.py", "--flag", ...), or a module,
    # ("-m", "deployment_toolkit_lab", "bench", "--flag", ...)
    argv: tuple[str, ...]
    budget_s: float
    requires: tuple[str, ...] = ()  # names of steps that must have succeeded
    server: bool = False  # needs the embedded tritonserver on the plan's repository
    skip_unless: str = ""  # a host capability this step needs ("tensorrt"); the runner records why it skips
    ok_codes: tuple[int, ...] = (0,)
    skip_codes: tuple[int, ...] = ()  # exit codes meaning "this host cannot" (convert_model.py: 3)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class PlanOptions:
    result_dir: Path
    workspace: Path
    device: str = "cuda:0"
    budgets: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_BUDGETS))
    bench_models: tuple[str, ...] = BENCH_MODELS
    preset: str = "full"
    served_model: str = SERVED_MODEL
    served_max_batch: int = 32
    diffusion_preset: str = "small"  # the full SD-1.x geometry does not fit the 10-minute budget with its export
    # what a GPU run uses; the CPU smoke test of the orchestration (tests_lab/integration) passes cpu / system
    instance_kind: InstanceKind = InstanceKind.GPU  # either spelling: "cpu" or InstanceKind.CPU
    shared_memory: SharedMemory = SharedMemory.CUDA
    # the served model's perf sweeps (the CPU smoke test measures fewer, shorter points)
    offline_batches: str = ""  # default: 1,8,<served_max_batch>
    online_concurrency: str = "1,4,16,32"
    measurement_interval_ms: int = 2000
    max_attempts: int = 2

    def __post_init__(self) -> None:
        self.instance_kind = instance_kind(self.instance_kind)
        self.shared_memory = SharedMemory(self.shared_memory)

    @property
    def repository(self) -> Path:
        return self.workspace / "model_repository"


def _art(opts: PlanOptions, model: str, fmt: str) -> Path:
    return opts.workspace / "convert" / model / f"{fmt}-fp16"


def framework_steps(opts: PlanOptions) -> list[Step]:
    """Seed 004's bench through `python -m deployment_toolkit_lab bench`, as three steps so
    a slow compile cannot starve the eager rows (each writes its rows as it goes; a rerun resumes): eager at every
    precision (fp32 rows with TF32, the seed's default), fp32 without TF32 (its own folder: the CSV's key has no
    TF32 column), and torch.compile at fp16, batch 32 (one compile per model fits the budget; run the bench
    directly for more)."""
    def bench(result: str, precisions: tuple[str, ...], batches: str, *extra: str) -> tuple[str, ...]:
        return (*FRAMEWORK_BENCH, "--models", *opts.bench_models, "--preset", opts.preset,
                "--precisions", *precisions, "--runtimes", "eager", "--batch-sizes", batches, "--device",
                opts.device, "--warmup", "3", "--duration", "2", "--min-iterations", "3", "--no-progress",
                "--result-path", str(opts.result_dir / result), *extra)

    compile_timeout = str(int(opts.budgets["framework-compile"] // 2))
    return [
        Step("framework bench eager", "framework-eager", bench("framework", ("fp32", "fp16", "bf16", "amp"), "1,32",
             "--compile-modes", "none", "--isolate", "none"), opts.budgets["framework-eager"]),
        Step("framework bench fp32 without TF32", "framework-no-tf32", bench(
            "framework-fp32-no-tf32", ("fp32",), "1,32", "--no-tf32", "--compile-modes", "none", "--isolate", "none"),
            opts.budgets["framework-no-tf32"]),
        Step("framework bench torch.compile", "framework-compile", bench("framework", ("fp16",), "32",
             "--compile-modes", "default", "--isolate", "compile", "--config-timeout", compile_timeout),
             opts.budgets["framework-compile"]),
    ]


def convert_steps(opts: PlanOptions) -> list[Step]:
    """Every bench model to TorchScript, ONNX and TensorRT at fp16, verified on the GPU against the framework
    with the fp16 tolerances of export/verify.py; TensorRT only where `import tensorrt` works."""
    steps = []
    for model in opts.bench_models:
        for fmt in CONVERT_FORMATS:
            argv = ("triton/convert_model.py", "--model", model, "--preset", opts.preset, "--output-type", fmt,
                    "--precision", "fp16", "--verify-device", opts.device, "--verify-batch-sizes", "1,2",
                    "--output-path", str(_art(opts, model, fmt)))
            steps.append(Step(f"convert {model} {fmt} fp16", "convert", argv, opts.budgets["convert"],
                              skip_unless="tensorrt" if fmt == "trt" else "", skip_codes=(3,)))
    return steps


def configure_step(opts: PlanOptions, model: str, max_batch: int, preferred: str, delay_us: int) -> Step:
    """The Python backend runs the TorchScript artifact with torch on CUDA: instance kind GPU, fp16."""
    art = _art(opts, model, "ts-trace")
    kind = opts.instance_kind.value
    argv = ("triton/config_model_on_triton.py", "--model-repository", str(opts.repository), "--model-path", str(art),
            "--model-format", "python", "--model-name", model, "--max-batch-size", str(max_batch),
            "--preferred-batch-sizes", preferred, "--max-queue-delay-us", str(delay_us),
            "--number-of-model-instances", "1", "--instance-kind", kind_flag(opts.instance_kind),
            "--precision", "fp16")
    return Step(f"configure {model} (python backend, torch, {kind}, fp16)", "configure", argv,
                opts.budgets["configure"], requires=(f"convert {model} ts-trace fp16",))


def _perf_common(opts: PlanOptions, model: str, result: Path) -> tuple[str, ...]:
    return ("--server-url", "{grpc_url}", "--model-name", model,
            "--manifest", str(_art(opts, model, "ts-trace") / "manifest.json"), "--precision", "fp16",
            "--shared-memory", opts.shared_memory.value, "--measurement-interval", str(opts.measurement_interval_ms),
            "--max-trials", "5", "--max-attempts", str(opts.max_attempts),
            "--number-of-model-instances", "1", "--no-progress", "--result-path", str(result))


def serving_steps(opts: PlanOptions) -> list[Step]:
    m, nn = opts.served_model, NNUNET
    conf_m = configure_step(opts, m, opts.served_max_batch, str(opts.served_max_batch), 1000)
    conf_nn = configure_step(opts, nn, 4, "2,4", 1000)
    nn_steps = [conf_nn] if nn in opts.bench_models else []
    work = opts.workspace / "accuracy"
    data = ("--data-dir", "synthetic", "--num-samples", "16", "--batch-size", "4")
    served = opts.result_dir / "serving" / m
    return [
        conf_m,
        *nn_steps,
        Step(f"accuracy {m}: served (Triton) dump", "accuracy", (
            "triton/run_inference_on_triton.py", "--server-url", "{grpc_url}", "--model-name", m,
            "--manifest", str(_art(opts, m, "ts-trace") / "manifest.json"), *data,
            "--output-dir", str(work / f"{m}_triton")), opts.budgets["accuracy"], (conf_m.name,), server=True),
        Step(f"accuracy {m}: framework dump", "accuracy", (
            "triton/run_inference_on_fw.py", "--model-path", str(_art(opts, m, "ts-trace")), "--runtime",
            "framework", "--device", opts.device, *data, "--output-dir", str(work / f"{m}_fw")),
            opts.budgets["accuracy"], (f"convert {m} ts-trace fp16",)),
        Step(f"accuracy {m}: Triton vs framework", "accuracy", (
            "triton/calculate_metrics.py", "--dump-dir", str(work / f"{m}_triton"), "--reference-dir",
            str(work / f"{m}_fw"), "--csv", str(served / "accuracy_metrics.csv"), "--threshold", FP16_AGREEMENT),
            opts.budgets["accuracy"], (f"accuracy {m}: served (Triton) dump", f"accuracy {m}: framework dump")),
        Step(f"offline {m} (batch sweep, CUDA shared memory)", "offline", (
            "triton/run_offline_performance_test_on_triton.py", *_perf_common(opts, m, served),
            "--batch-sizes", opts.offline_batches or f"1,8,{opts.served_max_batch}"), opts.budgets["offline"],
            (conf_m.name,), server=True),
        Step(f"online {m} (concurrency sweep, CUDA shared memory)", "online", (
            "triton/run_online_performance_test_on_triton.py", *_perf_common(opts, m, served),
            "--concurrency", opts.online_concurrency), opts.budgets["online"], (conf_m.name,), server=True),
        *[Step(f"online {nn} (concurrency 1..8, seed 001's table)", "nnunet-online", (
            "triton/run_online_performance_test_on_triton.py",
            *_perf_common(opts, nn, opts.result_dir / "serving" / nn), "--concurrency", "1:8:1"),
            opts.budgets["nnunet-online"], (conf_nn.name,), server=True) for _ in nn_steps],
    ]


def diffusion_steps(opts: PlanOptions) -> list[Step]:
    """Seed 000's method through the toolkit's diffusion scripts (their own embedded server). The denoiser runs
    in fp32: a traced sd_unet cast to half afterwards fails ("mat1 and mat2 must have the same dtype": the
    trace baked its timestep embedding's float32 in), checked on CPU."""
    repo = opts.workspace / "diffusion_repository"
    deploy = Step("deploy diffusion pipeline (TorchScript denoiser on CUDA, fp32)", "diffusion", (
        "triton/deploy_diffusion.py", "--model", "sd_unet", "--preset", opts.diffusion_preset, "--model-repository",
        str(repo), "--name", "sd_pipeline", "--format", "ts-trace", "--instance-kind", "gpu", "--precision", "fp32",
        "--workspace", str(opts.workspace / "diffusion")), opts.budgets["diffusion"] / 3)
    latency = Step("diffusion latency per request (8 and 18 steps)", "diffusion", (
        "triton/run_diffusion_latency.py", "--model-repository", str(repo), "--model-name", "sd_pipeline",
        "--targets", "triton,in-process", "--steps", ",".join(map(str, DIFFUSION_STEPS)), "--burn-in", "2",
        "--trials", "5", "--runs", "3", "--result-path", str(opts.result_dir / "diffusion")),
        opts.budgets["diffusion"] * 2 / 3, (deploy.name,))
    return [deploy, latency]


def build_plan(opts: PlanOptions) -> list[Step]:
    eager, no_tf32, compiled = framework_steps(opts)
    # torch.compile last: it is the greediest stage and resumable, so it takes what the others leave
    steps = [eager, no_tf32, *convert_steps(opts), *serving_steps(opts), *diffusion_steps(opts), compiled]
    names = [s.name for s in steps]
    assert len(names) == len(set(names)), "step names must be unique"
    return steps


def total_budget_s(steps: list[Step]) -> float:
    return sum(s.budget_s for s in steps)
