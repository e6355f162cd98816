"""Real accuracy through Triton with nothing downloaded: train a small U-Net on synthetic shapes, serve
it as ONNX on the embedded tritonserver (Python backend), and show that Triton's Dice against the labels
equals the framework's.

Each step calls the toolkit's function for it through the one step runner and prints the command that does the
same from a shell: data (deployment_toolkit.data.shapes) -> train_segmentation.py (train, held-out Dice, ONNX
export with verification) -> config_model_on_triton.py -> embedded server -> run_inference_on_triton.py
--dump-labels -> framework dump of the trained model on the same folder -> calculate_metrics.py for
Triton vs labels, framework vs labels, and Triton vs framework. Exit status 1 names every check missed
(Dice below --min-dice, |dice_mean Triton - framework| above --max-dice-diff); 2: a step failed.
"""
import argparse
import contextlib
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# Idle OpenMP threads sleep instead of spinning (a busy 2-core host made torch steps 3-10x slower); set before
# torch loads (training and the framework dump run in this process).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.results.run_folder import add_result_path_argument  # noqa: E402
from deployment_toolkit.committed import refuse_committed  # noqa: E402
from deployment_toolkit.steps import StepFailed, StepRunner, relative  # noqa: E402
from deployment_toolkit.steps import shown as _shown  # noqa: E402
from deployment_toolkit.tables import markdown_table  # noqa: E402
ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "triton"
RUN_NAME = "accuracy-shapes-unet"


def _command(*argv: str) -> str:
    """The shell command that does the same as a step, paths from the checkout's root."""
    return _shown(argv)


def checks(triton: dict[str, float], fw: dict[str, float], min_dice: float, max_diff: float) -> list[dict]:
    diff = abs(triton["dice_mean"] - fw["dice_mean"])
    return [
        {"check": "dice_mean (Triton) vs labels", "value": triton["dice_mean"], "bound": f">= {min_dice:g}",
         "passed": triton["dice_mean"] >= min_dice},
        {"check": "dice_mean (framework) vs labels", "value": fw["dice_mean"], "bound": f">= {min_dice:g}",
         "passed": fw["dice_mean"] >= min_dice},
        {"check": "abs(dice_mean Triton - dice_mean framework)", "value": diff, "bound": f"<= {max_diff:g}",
         "passed": diff <= max_diff},
    ]


def summary_markdown(training: dict, triton: dict, fw: dict, versus: dict, results: list[dict], steps: StepRunner,
                     server_version: str | None) -> str:
    res = training["result"]
    classes = sorted(k for k in triton if k.startswith("dice_class_"))
    lines = [
        "# Accuracy demo: U-Net trained on synthetic shapes, Triton vs framework",
        "",
        f"`{training['model']}` ({training['preset']} preset, MONAI BasicUNet, {training['parameters']:,} parameters) "
        f"trained {res['seconds']:.1f} s ({res['steps']} steps, batch {training['config']['batch_size']}, "
        f"{training['config']['threads']} threads) on {training['train_samples']} synthetic images; scored on "
        f"{int(triton['num_samples'])} held-out images. Task: find the discs among rectangles and triangles "
        "(class 1 = disc, class 0 = background and distractors); `dice_mean` averages class 1 only. "
        "Served as ONNX by ONNX Runtime inside Triton's Python backend "
        f"(embedded tritonserver {server_version or '?'}).",
        "",
        markdown_table(["run", "dice_mean", *classes],
                       [[name, *(f"{scores[k]:.4f}" for k in ["dice_mean", *classes])]
                        for name, scores in (("framework (PyTorch eager)", fw),
                                             ("Triton (ONNX Runtime, Python backend)", triton))],
                       ["l"] + ["r"] * (1 + len(classes))),
        "",
        markdown_table(["check", "value", "bound", "status"],
                       [[c["check"], f"{c['value']:.6f}", c["bound"], "ok" if c["passed"] else "FAIL"] for c in results],
                       "lrll"),
        "",
        "Triton vs framework outputs (same samples, paired by id): "
        f"dice_agreement_mean {versus.get('dice_agreement_mean', float('nan')):.6f}, "
        f"max_abs_err of the logits {versus.get('max_abs_err', float('nan')):.3g}.",
        "",
        "Metrics CSVs: `metrics_triton.csv` (Triton vs labels), `metrics_framework.csv` (framework vs labels), "
        "`metrics_triton_vs_framework.csv` (Triton vs the framework dump); machine and versions in `run.json`.",
        "",
        "## Commands",
        "",
        steps.table(),
        "",
    ]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = cli.parser(__doc__, f"""
        deployment-toolkit accuracy-demo                      # about 3 min on 2 CPU cores
        deployment-toolkit accuracy-demo --max-seconds 20 --min-dice 0.6 --train-samples 1000 \\
            --heldout-samples 64 --workspace /tmp/acc --result-path /tmp/acc/results   # quick check
    """)
    from deployment_toolkit.train import DUMP_BATCH_SIZE, TrainConfig

    # --seed, --max-seconds, --threads, --no-progress: TrainConfig's defaults, --batch-size: the trained model's
    # dumps', written once in deployment_toolkit.train (train may not import config, so declared here)
    p.add_argument("--workspace", type=Path, default=ROOT / "workspace" / RUN_NAME,
                   help="data, weights, ONNX, model repository, dumps and server log")
    add_result_path_argument(p, "--results-dir", dest="results_dir", type=Path,
                   help=f"default: a new results/local/{RUN_NAME}-<UTC time> (git-ignored); the committed "
                        f"results/{RUN_NAME} is rewritten only with --result-path results/{RUN_NAME} --update-committed")
    p.add_argument("--train-samples", type=int, default=3000)
    p.add_argument("--heldout-samples", type=int, default=256)
    p.add_argument("--seed", type=int, default=TrainConfig.seed,
                   help="training data and weights; the held-out split uses seed+1")
    p.add_argument("--max-seconds", type=float, default=TrainConfig.max_seconds, help="training time budget")
    p.add_argument("--threads", type=int, default=TrainConfig.threads, help="torch / ONNX Runtime threads")
    p.add_argument("--batch-size", type=int, default=DUMP_BATCH_SIZE,
                   help="inference batch size (<= the model's max batch 8)")
    p.add_argument("--model-name", default="shapes_unet", help="name in the Triton model repository")
    p.add_argument("--min-dice", type=float, default=0.90, help="bound for dice_mean vs labels (Triton and framework)")
    p.add_argument("--max-dice-diff", type=float, default=0.001, help="bound for |dice_mean Triton - framework|")
    p.add_argument("--no-progress", action="store_true", help="no training progress bar (logs, CI)")
    return p


def main(argv: list[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    if args.results_dir is None:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        args.results_dir = ROOT / "results" / "local" / f"{RUN_NAME}-{stamp}"
    refuse_committed(args.results_dir, "--result-path")

    try:
        return run_chain(args)
    except StepFailed as err:
        print(f"\nerror: {err}", file=sys.stderr)
        return 2


def metrics_step(dump: Path, csv_path: Path, reference: Path | None = None) -> dict[str, float]:
    """A dump's metrics (against its labels, or against `reference`), written as a one-row CSV and shown."""
    from deployment_toolkit.metrics.calculate import calculate_metrics, format_table, write_metrics_csv

    metrics = calculate_metrics(dump, reference)
    write_metrics_csv(metrics, csv_path)
    print(format_table(metrics))
    return metrics


@dataclass(frozen=True)
class _Folders:
    """Where each step of the chain reads and writes: the workspace's data, model, artifact, repository and dumps,
    and the results folder."""

    ws: Path
    out: Path

    @property
    def train(self) -> Path:
        return self.ws / "data" / "train"

    @property
    def heldout(self) -> Path:
        return self.ws / "data" / "heldout"

    @property
    def model(self) -> Path:
        return self.ws / "model"

    @property
    def onnx(self) -> Path:
        return self.ws / "onnx"

    @property
    def repo(self) -> Path:
        return self.ws / "model_repository"

    @property
    def triton(self) -> Path:
        return self.ws / "dumps" / "triton"

    @property
    def framework(self) -> Path:
        return self.ws / "dumps" / "framework"


def run_chain(args) -> int:
    """The whole chain, step by step: data, training and the repository, Triton's and the framework's dumps,
    the metrics, then the summary and run.json; exit 1 names every check missed."""
    at = _Folders(args.workspace.resolve(), args.results_dir.resolve())
    steps = StepRunner()
    t_start = time.perf_counter()
    training = _train_and_write(args, at, steps)
    server_version = _triton_dump(args, at, steps)
    scores, versus = _metrics(args, at, steps)
    return _report(args, at, steps, training, scores, versus, server_version, t_start)


def _train_and_write(args, at: _Folders, steps: StepRunner) -> dict:
    """Training and held-out data, the model trained and exported to ONNX, and its Triton model repository."""
    from deployment_toolkit.config import InstanceKind
    from deployment_toolkit.data.shapes import generate
    from deployment_toolkit.repository import ConfigOptions, write_model
    from deployment_toolkit.train import TrainConfig, train_segmentation

    for split, folder, n, seed in (("train", at.train, args.train_samples, args.seed),
                                   ("held-out", at.heldout, args.heldout_samples, args.seed + 1)):
        steps.call(f"generate {split} data", lambda folder=folder, n=n, seed=seed: generate(folder, n, seed),
                   _command("python", "-m", "deployment_toolkit.data.shapes", "--output-dir", str(folder),
                           "--num-samples", str(n), "--seed", str(seed)))
    cfg = TrainConfig(max_seconds=args.max_seconds, seed=args.seed, threads=args.threads,
                      progress=not args.no_progress)
    training = steps.call("train, score held-out, export ONNX", lambda: train_segmentation(
        at.train, at.model, cfg, at.heldout, at.onnx),
        _command("python", str(SCRIPTS / "train_segmentation.py"), "--train-dir", str(at.train), "--heldout-dir",
                str(at.heldout), "--output-dir", str(at.model), "--export-dir", str(at.onnx), "--max-seconds",
                f"{args.max_seconds:g}", "--seed", str(args.seed), "--threads", str(args.threads),
                *(["--no-progress"] if args.no_progress else [])))
    steps.call("write the Triton model repository", lambda: write_model(at.repo, at.onnx, ConfigOptions(
        model_name=args.model_name, runtime="python", instance_kind=InstanceKind.CPU, intra_op_threads=args.threads)),
        _command("python", str(SCRIPTS / "config_model_on_triton.py"), "--model-repository", str(at.repo),
                "--model-path", str(at.onnx), "--model-format", "python", "--model-name", args.model_name,
                "--instance-kind", "cpu", "--intra-op-threads", str(args.threads)))
    return training


def _triton_dump(args, at: _Folders, steps: StepRunner) -> str | None:
    """The held-out folder through the embedded tritonserver (stopped once the dump is written); its version."""
    from deployment_toolkit.inference import DataSpec, TritonDumpSettings, triton_dump
    from deployment_toolkit.server import LocalTritonServer, ServerConfig

    with contextlib.ExitStack() as stack:  # the server, once started, stops after the Triton inference
        def start() -> LocalTritonServer:
            started = stack.enter_context(LocalTritonServer(ServerConfig(at.repo, log_dir=at.ws / "logs")))
            started.require_models([args.model_name])
            return started

        server = steps.call("start tritonserver", start,
                            _command("python", "-m", "deployment_toolkit", "serve", "--model-repository",
                                     str(at.repo)))
        server_version = server.metadata().get("version")
        print(f"tritonserver {server_version} ready: gRPC {server.grpc_url}, log {server.log_path}")
        steps.call("inference on Triton", lambda: triton_dump(
            server.grpc_url, args.model_name, at.triton, DataSpec(str(at.heldout)), TritonDumpSettings(
                manifest=at.onnx / "manifest.json", batch_size=args.batch_size, dump_labels=True)),
            _command("python", str(SCRIPTS / "run_inference_on_triton.py"), "--server-url", server.grpc_url,
                    "--model-name", args.model_name, "--manifest", str(at.onnx / "manifest.json"), "--data-dir",
                    str(at.heldout), "--batch-size", str(args.batch_size), "--output-dir", str(at.triton),
                    "--dump-labels"))
    return server_version


def _metrics(args, at: _Folders, steps: StepRunner) -> tuple[dict[str, dict], dict]:
    """The framework's dump of the same folder, then Dice of Triton and of the framework against the labels, and
    Triton against the framework; a missed bound is named by the checks after everything is written."""
    from deployment_toolkit.train import WEIGHTS_NAME, framework_dump

    steps.call("framework inference (PyTorch eager, same folder)", lambda: framework_dump(
        at.model / WEIGHTS_NAME, at.heldout, at.framework, batch_size=args.batch_size, threads=args.threads),
        f"deployment_toolkit.train.framework_dump({relative(at.heldout)})")

    out = at.out
    out.mkdir(parents=True, exist_ok=True)
    calc = ("python", str(SCRIPTS / "calculate_metrics.py"))
    scores = {}
    for name, dump, csv_name in (("Triton", at.triton, "metrics_triton.csv"),
                                 ("framework", at.framework, "metrics_framework.csv")):
        # a missed bound is named by the checks below, after everything is written
        scores[name] = steps.call(f"metrics: {name} vs labels", lambda dump=dump, csv_name=csv_name: metrics_step(
            dump, out / csv_name), _command(*calc, "--dump-dir", str(dump), "--csv", str(out / csv_name),
                                           "--threshold", f"dice_mean>={args.min_dice:g}"))
    versus = steps.call("metrics: Triton vs framework", lambda: metrics_step(
        at.triton, out / "metrics_triton_vs_framework.csv", at.framework),
        _command(*calc, "--dump-dir", str(at.triton), "--reference-dir", str(at.framework), "--csv",
                str(out / "metrics_triton_vs_framework.csv")))
    return scores, versus


def _report(args, at: _Folders, steps: StepRunner, training: dict, scores: dict[str, dict], versus: dict,
            server_version: str | None, t_start: float) -> int:
    """summary.md, training.json and run.json with the checks; exit 1 naming each check missed, else 0."""
    from deployment_toolkit.results.run_folder import RunFolder
    from deployment_toolkit.train import TRAINING_JSON

    out = at.out
    triton, fw = scores["Triton"], scores["framework"]
    training = {k: v for k, v in training.items() if k != "manifest"}
    shutil.copy2(at.model / TRAINING_JSON, out / TRAINING_JSON)
    results = checks(triton, fw, args.min_dice, args.max_dice_diff)
    summary = summary_markdown(training, triton, fw, versus, results, steps, server_version)
    (out / "summary.md").write_text(summary)
    missed = [c for c in results if not c["passed"]]
    config = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    config["measured"] = {
        "dice_mean_triton": triton["dice_mean"], "dice_mean_framework": fw["dice_mean"],
        "dice_mean_abs_diff": abs(triton["dice_mean"] - fw["dice_mean"]),
        "dice_agreement_mean": versus.get("dice_agreement_mean"), "max_abs_err": versus.get("max_abs_err"),
        "training_seconds": training["result"]["seconds"], "training_steps": training["result"]["steps"],
        "total_seconds": round(time.perf_counter() - t_start, 1), "checks": results, "passed": not missed,
        "steps": [r.to_dict() for r in steps.results],
    }
    RunFolder(out).record(config, server_version)

    print(f"\n{summary}")
    print(f"results: {relative(out)}/ (summary.md, metrics_*.csv, training.json, run.json)")
    if missed:
        for c in missed:
            print(f"FAILED: {c['check']} = {c['value']:.6f}, bound {c['bound']}", file=sys.stderr)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    cli.run(main)
