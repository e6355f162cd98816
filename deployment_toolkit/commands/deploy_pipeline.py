"""Deploy a model with its pre- and post-processing as a Triton ensemble and check it end to end: your
preprocess/postprocess functions become Python-backend models around the network, clients send raw bytes or text
(TYPE_STRING). The steps run in-process on your raw samples first (any mismatch between a step's outputs and the
model's inputs, text that is not UTF-8, an image that does not decode: one line, exit 2), then the repository is
written, served on the embedded tritonserver (loopback), compared sample by sample with the in-process run (exit 1
if it differs), measured with perf_analyzer on the raw samples (each step's share of the time), and reported in
the run folder (report.md, points.csv, steps.csv, verification.csv, run.json)."""
from pathlib import Path

from deployment_toolkit import cli  # noqa: E402
from deployment_toolkit.config import add_arguments, from_args  # noqa: E402
from deployment_toolkit.export import ConvertOptions  # noqa: E402
from deployment_toolkit.perf.analyzer import PerfOptions  # noqa: E402
from deployment_toolkit.pipeline.run import PIPELINE_PERF, PipelineRequest  # noqa: E402
from deployment_toolkit.repository.config import ConfigOptions  # noqa: E402
from deployment_toolkit.results import add_result_path_argument  # noqa: E402
from deployment_toolkit.sources.cli import add_source_arguments  # noqa: E402

NETWORK_FLAGS = ("instances", "intra_op_threads", "max_queue_delay_us")  # the network's serving, as config's flags


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
    add_arguments(g, PipelineRequest, only=("preprocess", "postprocess", "raw_data", "max_samples", "name", "layout",
                                            "step_instances", "step_queue_delay_us", "reference"))
    m = p.add_argument_group("network")
    add_arguments(m, ConvertOptions, only=("preset", "max_batch_size"))
    add_arguments(m, PipelineRequest, only=("fmt", "workspace"))
    m.add_argument("--runtime", choices=("python", "native"), default="python",
                   help="python: the Python backend runs the artifact (embedded server, any host); native: the "
                        "format's Triton backend (NGC container)")
    add_arguments(m, ConfigOptions, only=NETWORK_FLAGS)  # --instances, --intra-op-threads, --max-queue-delay-us
    r = p.add_argument_group("serving and measuring")
    add_result_path_argument(r, required=True, type=Path)
    add_arguments(r, PipelineRequest, only=("model_repository", "concurrencies", "serve", "speed_rounds",
                                            "start_timeout_s"))
    r.add_argument("--no-perf", action="store_true", help="verify only: no perf_analyzer points")
    add_arguments(r, PerfOptions, only=("measurement_interval_ms", "max_attempts"),
                  measurement_interval_ms=PIPELINE_PERF.measurement_interval_ms, max_attempts=PIPELINE_PERF.max_attempts)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    from deployment_toolkit import api
    from deployment_toolkit.pipeline.artifact import is_artifact_folder
    from deployment_toolkit.sources.cli import source_from_args

    folder = args.manifest or args.model
    if folder and is_artifact_folder(Path(folder).parent if folder.endswith("manifest.json") else folder):
        model = Path(folder).parent if folder.endswith("manifest.json") else Path(folder)
    else:
        model = source_from_args(args, args.preset, args.max_batch_size)
    network = from_args(ConfigOptions, args, model_name="model", runtime=args.runtime)
    request = from_args(PipelineRequest, args, model=model, result_path=args.result_path,
                        convert=from_args(ConvertOptions, args), network=network, perf=from_args(PerfOptions, args),
                        **({"concurrencies": ()} if args.no_perf else {}))
    run = api.deploy_pipeline(request)  # dt.deploy_pipeline, the one door
    print(f"repository: {run.written.repository} ({', '.join(run.written.models)})")
    if not request.serve:
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
