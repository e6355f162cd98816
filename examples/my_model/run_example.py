#!/usr/bin/env python3
"""The worked example end to end: a model the toolkit has never seen (model.py + a trained checkpoint), its own
data (dataloader.py) and metric (metrics.py), taken through every step with the same commands a user types
(each printed before it runs), timed step by step.

Steps: train a checkpoint -> write sample data -> convert to ONNX (verified on the samples) -> configure ->
serve (embedded tritonserver) -> inference through Triton and in the framework with labels -> metrics against
the labels (and Triton vs framework) -> offline and online perf on the samples -> a short config search.
Writes a new run folder each time (default results/local/example-my_model-<UTC time>) with every step's output
and example_timings.md.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import deployment_toolkit  # noqa: E402,F401  - first: hides the triton/ scripts folder from torch

from deployment_toolkit.demo import RunFolderTaken, check_new_run_dir, write_timings  # noqa: E402
from deployment_toolkit.steps import StepFailed, StepRunner, shown  # noqa: E402
from deployment_toolkit.server.local import LocalTritonServer, ServerConfig  # noqa: E402

EXAMPLE = "examples/my_model"
NAME = "my_model"


def run_example(out: Path, workspace: Path, fast: bool) -> Path:
    ws, data, onnx = workspace, workspace / "data", workspace / "onnx"
    repo = workspace / "model_repository"
    weights = ws / "weights.safetensors"
    window = "500" if fast else "3000"
    steps = StepRunner()
    run_step = steps.script
    t0 = time.perf_counter()
    run_step("train a checkpoint (your weights)", f"{EXAMPLE}/make_checkpoint.py", "--output", str(weights),
             "--steps", "60" if fast else "200")
    run_step("write sample data (your data)", f"{EXAMPLE}/dataloader.py", "--write-samples", str(data),
             "--num-samples", "32" if fast else "64")
    source = ["--input-path", f"{EXAMPLE}/model.py", "--input-type", "pyt", "--model-arg", "width=16",
              "--checkpoint", str(weights)]
    loader = ["--dataloader", f"{EXAMPLE}/dataloader.py", "--data-dir", str(data)]
    run_step("convert to ONNX, verified on the samples", "convert_model.py", *source, "--output-type", "onnx",
             "--output-path", str(onnx), *loader)
    run_step("configure on Triton", "config_model_on_triton.py", "--model-repository", str(repo),
             "--model-path", str(onnx), "--model-format", "python", "--model-name", NAME,
             "--preferred-batch-sizes", "8", "--max-queue-delay-us", "500", "--number-of-model-instances", "1")
    out.mkdir(parents=True, exist_ok=True)
    server = LocalTritonServer(ServerConfig(repo, log_dir=ws / "logs"))

    def start() -> None:
        server.start()
        try:
            server.require_models([NAME])
        except BaseException:
            server.stop()
            raise

    steps.call("start the embedded tritonserver (health check)", start,
               shown(["python", "-m", "deployment_toolkit", "serve", "--model-repository", str(repo)]))
    with server:
        url = server.grpc_url
        run_step("inference through Triton, with labels", "run_inference_on_triton.py", "--server-url", url,
                 "--model-name", NAME, "--manifest", str(onnx), *loader, "--batch-size", "8",
                 "--output-dir", str(ws / "dump_triton"), "--dump-labels")
        run_step("inference in the framework (your model.py + checkpoint)", "run_inference_on_fw.py",
                 "--manifest", str(onnx), "--runtime", "framework", *loader, "--batch-size", "8",
                 "--output-dir", str(ws / "dump_fw"), "--dump-labels")
        run_step("your metric against the labels, and Triton vs framework", "calculate_metrics.py",
                 "--metrics", f"{EXAMPLE}/metrics.py", "--dump-dir", str(ws / "dump_triton"),
                 "--reference-dir", str(ws / "dump_fw"), "--csv", str(out / "accuracy_metrics.csv"),
                 "--threshold", "accuracy>=0.9", "--threshold", "max_abs_err<=1e-4")
        perf = ["--server-url", url, "--model-name", NAME, "--manifest", str(onnx), *loader,
                "--result-path", str(out / "perf"), "--measurement-interval", window, "--max-attempts", "1",
                "--no-progress"]
        run_step("offline performance on the samples", "run_offline_performance_test_on_triton.py", *perf,
                 "--batch-sizes", "1,8")
        run_step("online performance on the samples", "run_online_performance_test_on_triton.py", *perf,
                 "--concurrency", "1:4:1" if not fast else "1:2:1")
    run_step("config search under a p99 budget, on the samples", "search_config.py", *source, *loader,
             "--p99-ms", "50", "--max-minutes", "1" if fast else "4", "--formats", "onnx",
             "--workspace", str(ws / "search"), "--model-repository", str(ws / "search_repository"),
             "--model-name", NAME, "--result-path", str(out / "search"), "--measurement-interval", window,
             *(["--objective", "closed-loop", "--max-configs", "1", "--max-concurrency", "4", "--noise-repeats", "1",
                "--confirm-samples", "2"] if fast else []), "--no-progress")
    total = time.perf_counter() - t0
    write_timings(out / "example_timings.md", total, steps, what="The worked example (examples/my_model/run_example.py)")
    from deployment_toolkit.results.runinfo import run_metadata, write_run_json

    # the folder's own record (the timings and accuracy_metrics.csv; perf/ and search/ keep theirs)
    write_run_json(out, run_metadata({"kind": "worked-example", "workspace": str(ws), "fast": fast,
                                      "total_s": round(total, 1),
                                      "steps": [r.to_dict() for r in steps.results]}))
    print(f"\nworked example finished in {total / 60:.1f} min: {out}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  python examples/my_model/run_example.py\n"
               "  python examples/my_model/run_example.py --fast --workspace /tmp/ws --output /tmp/example-run")
    p.add_argument("--result-path", "--output", dest="output", default=None, metavar="DIR", help="run folder to create (must not exist or be "
                   "empty; default: results/local/example-my_model-<UTC time>, git-ignored)")
    p.add_argument("--workspace", default=str(ROOT / "workspace" / NAME), metavar="DIR")
    p.add_argument("--fast", action="store_true", help="shorter training, fewer samples and points (CI)")
    args = p.parse_args(argv)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = Path(args.output) if args.output else ROOT / "results" / "local" / f"example-{NAME}-{stamp}"
    try:
        check_new_run_dir(out)
        run_example(out, Path(args.workspace), args.fast)
    except RunFolderTaken as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except StepFailed as err:
        print(f"\nerror: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
