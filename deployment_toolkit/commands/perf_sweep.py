"""The command line shared by the offline and online scripts (triton/run_*_performance_test_on_triton.py): flags,
then one sweep. A command body, so here above `perf` (which it runs), not in it: `perf-online` and `perf-offline`
are its two subcommands."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

from ..client import TritonClient
from ..config import Protocol, add_arguments, from_args
from ..errors import UserInputError
from ..results.ledger import add_reuse_arguments
from ..results.run_folder import add_result_path_argument
from ..perf.sweep import ServerAt, SweepSettings, signature_from_metadata

log = logging.getLogger(__name__)


def add_target_arguments(parser) -> None:
    """Server, model and output flags, named like the DLE scripts'."""
    g = parser.add_argument_group("server and model")
    g.add_argument("--server-url", default=None,
                   help="host:port of the server (default: 127.0.0.1:8001 for grpc, 127.0.0.1:8000 for http)")
    g.add_argument("--model-name", required=True)
    g.add_argument("--model-version", default="", help="default: the latest version")
    g.add_argument("--manifest", default=None, metavar="PATH",
                   help="manifest.json of the converted model (or its folder); without it the signature comes "
                        "from the server's model metadata and dynamic dims need --shape")
    g.add_argument("--shape", action="append", default=[], metavar="NAME:D1,D2",
                   help="size of an input's dynamic dims, without the batch axis (repeatable)")
    g.add_argument("--precision", default=None, help="recorded in the tables (default: the manifest's)")
    g.add_argument("--number-of-model-instances", type=int, default=None,
                   help="recorded; the server's instance_group count is what the tables show")
    o = parser.add_argument_group("results")
    add_result_path_argument(o, help="run folder (default: results/<model-name>); rerunning into it resumes")
    add_reuse_arguments(o, "points")
    add_arguments(o, SweepSettings, only=("remeasure_unstable", "build_report", "progress", "ready_timeout_s"))
    t = parser.add_argument_group("server telemetry (Triton's metrics endpoint, scraped during every point)")
    t.add_argument("--metrics-url", default=None, metavar="URL",
                   help="default: http://<server host>:8002/metrics (Triton's default port); 'none' turns it off")
    add_arguments(t, SweepSettings, only=("metrics_period_s",))


def parse_shapes(items: Sequence[str]) -> dict[str, list[int]]:
    shapes = {}
    for item in items:
        name, _, dims = item.rpartition(":")
        try:
            shapes[name] = [int(d) for d in dims.split(",")]
        except ValueError:
            raise UserInputError(f"--shape {item!r}: expected NAME:D1,D2,... with integer dims") from None
        if not name:
            raise UserInputError(f"--shape {item!r}: expected NAME:D1,D2,...")
    return shapes


def _with_real_input_data(args, options, manifest, url: str, result_dir: Path):
    """--data-dir/--dataloader: the user's samples as perf_analyzer JSON in the run folder, validated against
    the manifest's signature (or the served model's metadata); the options then point at that file."""
    from dataclasses import replace

    from ..perf.analyzer import real_input_data

    if getattr(args, "data_dir", None) is None and getattr(args, "dataloader", None) is None:
        return options
    with TritonClient(url, options.protocol) as client:
        client.wait_until_ready(args.model_name, args.model_version, args.ready_timeout_s)  # then write
        if manifest is not None:
            signature, batched, precision = manifest.signature, manifest.max_batch_size > 0, manifest.precision
        else:
            max_batch = client.config(args.model_name, args.model_version).max_batch_size
            metadata = client.metadata(args.model_name, args.model_version)
            signature = signature_from_metadata(metadata, max_batch, parse_shapes(args.shape))
            batched, precision = max_batch > 0, "fp32"
    path = real_input_data(args, signature, result_dir / "raw", precision=precision, batched=batched)
    if path is None:
        return options
    log.info(f"input data: {args.perf_samples} real sample(s) at most from {args.dataloader or args.data_dir} "
             f"-> {path}")
    return replace(options, input_data=path)


def run_cli(kind: str, args, points_arg: Sequence[int] | str, fixed: int) -> int:
    """Run one sweep from parsed flags; log the table; return the exit code. A dead server, an unknown model, a
    missing tool, bad flags or a refused --resume raise a UserError, which the commands' entry point (cli.run)
    prints as one line with exit 2; the completed points are kept and the same command resumes."""
    from ..repository.names import check_model_name
    from ..report.tables import full_table
    from ..spec import Manifest
    from ..perf.analyzer import perf_options_from_args, shared_memory_for

    url = args.server_url or ("127.0.0.1:8001" if args.protocol == Protocol.GRPC else "127.0.0.1:8000")
    options = perf_options_from_args(args, shared_memory=shared_memory_for(url, args.shared_memory))
    manifest = Manifest.load(args.manifest) if args.manifest else None
    result_dir = Path(args.result_path or Path("results") / check_model_name(args.model_name))
    options = _with_real_input_data(args, options, manifest, url, result_dir)
    settings = from_args(SweepSettings, args, model_version=args.model_version, precision=args.precision,
                         number_of_model_instances=args.number_of_model_instances, shapes=parse_shapes(args.shape),
                         manifest_path=args.manifest, reuse=args.reuse)
    where = ServerAt(url=url, metrics_url=args.metrics_url)
    if kind == "online":
        from ..perf.online import run_online

        outcome = run_online(args.model_name, where, manifest, points_arg, options, result_dir, batch_size=fixed,
                             settings=settings)
    else:
        from ..perf.offline import run_offline

        outcome = run_offline(args.model_name, where, manifest, points_arg, options, result_dir, concurrency=fixed,
                              settings=settings)
    log.info(f"\nFull tabular data ({kind}, {outcome.csv_path}):\n")
    log.info(full_table(kind, outcome.rows))
    if outcome.report:
        log.info(f"\nreport: {outcome.report.get('report.html')}")
    if outcome.unstable:
        log.warning(f"warning: {len(outcome.unstable)} point(s) are unstable (stable=False in {outcome.csv_path})")
    return 0
