"""Deploy a model with its pre- and post-processing as a Triton ensemble and check it end to end: your
preprocess/postprocess functions become Python-backend models around the network, clients send raw bytes or text
(TYPE_STRING). The steps run in-process on your raw samples first (any mismatch between a step's outputs and the
model's inputs, text that is not UTF-8, an image that does not decode: one line, exit 2), then the repository is
written, served on the embedded tritonserver (loopback), compared sample by sample with the in-process run (exit 1
if it differs), measured with perf_analyzer on the raw samples (each step's share of the time), and reported in
the run folder (report.md, points.csv, steps.csv, verification.csv, run.json)."""
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.results import add_result_path_argument  # noqa: E402
from deployment_toolkit.sources.cli import add_source_arguments  # noqa: E402
from deployment_toolkit.spec import FORMATS  # noqa: E402


def _parser():
    p = cli.parser(__doc__, """
        python examples/image_pipeline/make_images.py --output workspace/image_pipeline/images
        deployment-toolkit deploy-pipeline --model timm:resnet18 --num-classes 10 \\
            --preprocess examples/image_pipeline/preprocess.py --postprocess examples/image_pipeline/postprocess.py \\
            --raw-data workspace/image_pipeline/images --name classifier --result-path results/local/image_pipeline \\
            --concurrency 1,2 --speed-rounds 3
    """)
    add_source_arguments(p, required=True)
    g = p.add_argument_group("pipeline")
    g.add_argument("--preprocess", type=Path, default=None, metavar="FILE",
                   help="Python file defining preprocess(<raw input>...) -> {model input: array}")
    g.add_argument("--postprocess", type=Path, default=None, metavar="FILE",
                   help="Python file defining postprocess(<model output>...) -> {name: array}")
    g.add_argument("--raw-data", type=Path, required=True, metavar="DIR",
                   help="raw samples: one file per sample (image.jpg, review.txt), or one folder per sample with one "
                        "file per input name; .npy for numeric inputs")
    g.add_argument("--max-samples", type=int, default=64, help="raw samples used (the first, by name)")
    g.add_argument("--name", default=None, help="the network's model name (default: from the model); the steps are "
                                                "<name>_preprocess/_postprocess, the ensemble <name>_pipeline")
    g.add_argument("--step-instances", type=int, default=1, help="instances of each pre/post-processing model")
    g.add_argument("--step-queue-delay-us", type=int, default=0,
                   help="dynamic batching delay of the pre/post-processing models")
    g.add_argument("--layout", choices=("ensemble", "fused"), default=None,
                   help="ensemble (the default): one model per step, each step's share measured; fused: one "
                        "Python-backend model runs every step in one process (one hop between Triton and a stub "
                        "instead of one per step; needs --runtime python)")
    g.add_argument("--verify-with", choices=("framework", "artifact"), default="framework",
                   help="what runs the model in-process for the comparison: the framework model or the artifact")
    m = p.add_argument_group("network")
    m.add_argument("--preset", default="small", help="small (CI size) or full (benchmark size)")
    m.add_argument("--format", default="onnx", choices=FORMATS, help="artifact a reference is converted to")
    m.add_argument("--max-batch-size", type=int, default=None, help="default: the model's")
    m.add_argument("--workspace", type=Path, default=Path("workspace/pipeline"), help="where conversions go")
    m.add_argument("--runtime", choices=("python", "native"), default="python",
                   help="python: the Python backend runs the artifact (embedded server, any host); native: the "
                        "format's Triton backend (NGC container)")
    m.add_argument("--instances", type=int, default=1, help="instances of the network")
    m.add_argument("--intra-op-threads", type=int, default=0, help="network runtime threads (0: runtime default)")
    m.add_argument("--max-queue-delay-us", type=int, default=0, help="the network's dynamic batching delay")
    r = p.add_argument_group("serving and measuring")
    add_result_path_argument(r, required=True, type=Path)
    r.add_argument("--model-repository", type=Path, default=None, help="default: <result-path>/model_repository")
    r.add_argument("--concurrency", type=cli.int_list, default=(1, 2),
                   help="perf_analyzer closed-loop levels against the ensemble, e.g. 1,2,4 (default: 1,2)")
    r.add_argument("--no-perf", action="store_true", help="verify only: no perf_analyzer points")
    r.add_argument("--write-only", action="store_true",
                   help="check the steps in-process and write the repository, but serve nothing (for a server "
                        "elsewhere, e.g. the NGC container with --runtime native)")
    r.add_argument("--measurement-interval", type=int, default=2000, metavar="MS", help="perf_analyzer window")
    r.add_argument("--max-attempts", type=int, default=2, help="perf_analyzer attempts per point")
    r.add_argument("--speed-rounds", type=int, default=0, metavar="N",
                   help="also time the served pipeline against its steps in-process, side by side, N rounds over "
                        "the samples (the speed benchmark; 0: not run)")
    r.add_argument("--server-timeout", type=float, default=300.0, metavar="SECONDS", help="server start limit")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    from deployment_toolkit import api
    from deployment_toolkit.export import ConvertOptions
    from deployment_toolkit.perf.analyzer import PerfOptions
    from deployment_toolkit.pipeline import PipelineRequest
    from deployment_toolkit.pipeline.artifact import is_artifact_folder
    from deployment_toolkit.repository.config import ConfigOptions
    from deployment_toolkit.sources.cli import source_from_args

    folder = args.manifest or args.model
    if folder and is_artifact_folder(Path(folder).parent if folder.endswith("manifest.json") else folder):
        model = Path(folder).parent if folder.endswith("manifest.json") else Path(folder)
    else:
        model = source_from_args(args, args.preset, args.max_batch_size)
    request = PipelineRequest(
        model=model, raw_data=args.raw_data, result_path=args.result_path, preprocess=args.preprocess,
        postprocess=args.postprocess, name=args.name, model_repository=args.model_repository,
        workspace=args.workspace, fmt=args.format,
        convert=ConvertOptions(preset=args.preset, max_batch_size=args.max_batch_size),
        network=ConfigOptions(model_name="model", runtime=args.runtime, max_batch_size=args.max_batch_size,
                              instances=args.instances, intra_op_threads=args.intra_op_threads,
                              max_queue_delay_us=args.max_queue_delay_us),
        step_instances=args.step_instances, step_queue_delay_us=args.step_queue_delay_us,
        reference=args.verify_with, concurrencies=() if args.no_perf else tuple(args.concurrency),
        perf=PerfOptions(measurement_interval_ms=args.measurement_interval, max_attempts=args.max_attempts),
        speed_rounds=args.speed_rounds, max_samples=args.max_samples, start_timeout_s=args.server_timeout,
        serve=not args.write_only, **({"layout": args.layout} if args.layout else {}))
    run = api.deploy_pipeline(request)  # dt.deploy_pipeline, the one door
    print(f"repository: {run.written.repository} ({', '.join(run.written.models)})")
    if args.write_only:
        print(f"report: {run.report} (not served: --write-only)")
        return 0
    print(f"verification: {run.verification.summary()}")
    for point in run.points:
        shares = ", ".join(f"{s.model} {s.share:.0%}" for s in point.steps if s.share == s.share)
        print(f"concurrency {point.concurrency}: {point.throughput:.1f} inf/s, p99 "
              f"{point.values.get('P99 Latency', float('nan')):.1f} ms ({shares})")
    if run.speed is not None:
        print(f"speed: {run.speed.text()}")
    print(f"report: {run.report}")
    return 0 if run.passed else cli.EXIT_NOT_MET


if __name__ == "__main__":
    cli.run(main)
