"""What samples of different lengths cost the accuracy check: the same token-id samples as they are (6..63 tokens)
and cut or padded to one length (their mean, so both hold about as many tokens), each through the whole check
(Triton dump, framework dump, metrics) on one embedded server, in alternating rounds, both as the commands a user
runs and in one warm process; prints ragged / one-length per part (the target: the whole check within 1.5x). Writes ragged_cost.md, .csv and run.json to --result-path.
A benchmark: it prints the ratios; it does not pass or fail."""
from __future__ import annotations

import importlib.util
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from deployment_toolkit import cli
from deployment_toolkit.errors import UserInputError
from deployment_toolkit.results.run_folder import add_result_path_argument

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "token_classifier"
PARTS = ("triton dump", "framework dump", "metrics", "whole check")
TARGET = 1.5


def _make_data():
    spec = importlib.util.spec_from_file_location("token_classifier_make_data", EXAMPLE / "make_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write_samples


def _check(server, art: Path, data: Path, out: Path, batch_size: int) -> dict[str, float]:
    """One accuracy check in this process (imports and model code warm), each part timed in seconds."""
    from deployment_toolkit.data.dump import load_dump
    from deployment_toolkit.data.samples import DataSpec
    from deployment_toolkit.inference import FrameworkDumpSettings, TritonDumpSettings, framework_dump, triton_dump
    from deployment_toolkit.metrics import compute_metrics

    spec = DataSpec(str(data))
    times: dict[str, float] = {}
    start = time.perf_counter()
    triton_dump(server.grpc_url, "tok", out / "triton", spec, TritonDumpSettings(
        manifest=art / "manifest.json", batch_size=batch_size, shared_memory="system"))
    times["triton dump"] = time.perf_counter() - start
    mark = time.perf_counter()
    framework_dump(art, out / "fw", spec, FrameworkDumpSettings(batch_size=batch_size))
    times["framework dump"] = time.perf_counter() - mark
    mark = time.perf_counter()
    metrics = compute_metrics(load_dump(out / "triton"), load_dump(out / "fw"))
    times["metrics"] = time.perf_counter() - mark
    times["whole check"] = time.perf_counter() - start
    if metrics["cosine_min"] < 0.9999:
        raise RuntimeError(f"served and framework answers disagree on {data}: cosine_min {metrics['cosine_min']}")
    return times


def _check_commands(server, art: Path, data: Path, out: Path, batch_size: int) -> dict[str, float]:
    """The same check as a user runs it: the three commands, each a new process, timed by the wall clock."""
    common = ["--data-dir", str(data), "--batch-size", str(batch_size)]
    steps = {
        "triton dump": ["infer", "--server-url", server.grpc_url, "--model-name", "tok", "--manifest",
                        str(art / "manifest.json"), "--shared-memory", "system", "--output-dir", str(out / "triton"),
                        *common],
        "framework dump": ["infer-fw", "--model-path", str(art), "--output-dir", str(out / "fw"), *common],
        "metrics": ["metrics", "--dump-dir", str(out / "triton"), "--reference-dir", str(out / "fw"), "--csv",
                    str(out / "metrics.csv"), "--threshold", "cosine_min>=0.9999"],
    }
    times: dict[str, float] = {}
    for part, argv in steps.items():
        mark = time.perf_counter()
        subprocess.run([sys.executable, "-m", "deployment_toolkit", *argv], check=True, capture_output=True)
        times[part] = time.perf_counter() - mark
    times["whole check"] = sum(times.values())
    return times


def main(argv: list[str] | None = None) -> int:
    p = cli.parser(__doc__, """
        deployment-toolkit-lab bench-ragged --samples 64 --rounds 3 --result-path results/ragged-cost-cpu
    """)
    p.add_argument("--samples", type=int, default=64, help="token-id samples (default 64)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of (ragged, one length), alternating (default 3)")
    p.add_argument("--batch-size", type=int, default=8, help="requests' batch size (default 8)")
    p.add_argument("--workspace", default=None, help="data, artifact, repository, dumps (default workspace/ragged-cost)")
    add_result_path_argument(p, help="default: results/local/ragged-cost-<UTC time>")
    args = p.parse_args(argv)
    for flag, value in (("--samples", args.samples), ("--rounds", args.rounds), ("--batch-size", args.batch_size)):
        if value < 1:
            raise UserInputError(f"{flag} must be >= 1, got {value}")

    from deployment_toolkit.api import convert
    from deployment_toolkit.data.samples import DataSpec
    from deployment_toolkit.committed import refuse_committed
    from deployment_toolkit.repository import ConfigOptions, write_model
    from deployment_toolkit.results.rows import RowSchema, to_csv
    from deployment_toolkit.results.run_folder import RunFolder
    from deployment_toolkit.server import LocalTritonServer, ServerConfig
    from deployment_toolkit.spec import atomic_write_text
    from deployment_toolkit.tables import markdown_table

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = Path(args.result_path or f"results/local/ragged-cost-{stamp}")
    refuse_committed(out, "--result-path")
    ws = Path(args.workspace or f"workspace/ragged-cost-{stamp}")
    write_samples = _make_data()
    lengths = write_samples(ws / "ragged", args.samples)
    one = round(statistics.mean(lengths.values()))
    write_samples(ws / "one-length", args.samples, one_length=one)
    manifest = convert(str(EXAMPLE / "model.py"), "onnx", ws / "onnx", inputs=DataSpec(str(ws / "ragged")))
    write_model(ws / "repository", ws / "onnx", ConfigOptions(model_name="tok", max_batch_size=args.batch_size))
    variants = {"ragged": ws / "ragged", "one length": ws / "one-length"}
    ways = {"commands": _check_commands, "in process": _check}
    records = []
    with LocalTritonServer(ServerConfig(ws / "repository", log_dir=ws / "logs")) as server:
        server.require_models(["tok"])
        _check(server, ws / "onnx", variants["ragged"], ws / "dumps-warm-up", args.batch_size)  # imports, not data
        for r in range(args.rounds):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            for how, check in ways.items():
                for name in order:
                    times = check(server, ws / "onnx", variants[name], ws / f"dumps-{r}-{how}-{name}".replace(" ", "-"),
                                  args.batch_size)
                    records.append({"round": r, "how": how, "data": name,
                                    **{k.replace(" ", "_"): round(v, 4) for k, v in times.items()}})
                    print(f"round {r + 1}/{args.rounds} {how}, {name}: whole check {times['whole check']:.2f} s",
                          flush=True)
    rows = []
    ratios: dict[str, float] = {}
    for how in ways:
        for part in PARTS:
            key = part.replace(" ", "_")
            mine = [x for x in records if x["how"] == how]
            med = {name: statistics.median(x[key] for x in mine if x["data"] == name) for name in variants}
            paired = [a[key] / b[key] for a, b in zip((x for x in mine if x["data"] == "ragged"),
                                                       (x for x in mine if x["data"] == "one length"))]
            ratios[f"{how}: {part}"] = statistics.median(paired)
            rows.append([how, part, f"{med['ragged']:.2f}", f"{med['one length']:.2f}",
                         f"{statistics.median(paired):.2f}x [{min(paired):.2f}..{max(paired):.2f}]"])
    verdicts = [f"{how}: whole check {ratios[f'{how}: whole check']:.2f}x the one-length time, "
                f"{'met' if ratios[f'{how}: whole check'] <= TARGET else 'not met'} (target <= {TARGET}x)"
                for how in ways]
    verdict = "; ".join(verdicts)
    table = markdown_table(["how", "part", "ragged (s, median)", "one length (s, median)",
                            "ragged / one length (paired by round, median [min..max])"], rows, "llrrr")
    part_columns = tuple(part.replace(" ", "_") for part in PARTS)
    schema = RowSchema(columns=("round", "how", "data", *part_columns),
                       types={"round": int, **dict.fromkeys(part_columns, float)})
    batching = {name: json.loads((ws / f"dumps-0-in-process-{name}".replace(" ", "-") / "fw" / "dump.json")
                                 .read_text())["batching"] for name in variants}
    batches = {name: b["batches"] for name, b in batching.items()}
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "ragged_cost.csv", to_csv(schema, records))
    atomic_write_text(out / "ragged_cost.md", (
        f"# What samples of different lengths cost the accuracy check\n\n{manifest.model}: a BERT token classifier "
        f"(examples/token_classifier, random weights), ONNX in the embedded server's Python backend. {args.samples} "
        f"token-id samples of {min(lengths.values())}..{max(lengths.values())} tokens as they are (as the dumps "
        f"batch them: {batching['ragged']['mode']}, {batches['ragged']} batches), against the same samples cut or "
        f"padded to {one} tokens (their mean; {batches['one length']} batches); each through the Triton dump (gRPC, system shared memory, "
        f"batch {args.batch_size}), the framework dump (eager PyTorch, rebuilt from the manifest) and the metrics, "
        f"{args.rounds} rounds alternating the order. `commands`: the three commands as a user runs them, each a new "
        f"process; `in process`: the same steps in one warm process (no imports), where only the per-batch "
        f"work remains.\n\n{table}\n\nVerdict: {verdict}.\n"))
    RunFolder(out).record({"kind": "ragged-cost", **vars(args), "one_length": one, "batches": batches,
                           "ratios": ratios})
    print(table)
    print(f"Verdict: {verdict}.")
    print(f"wrote {out / 'ragged_cost.md'}")
    return 0


if __name__ == "__main__":
    cli.run(main)
