"""perf_analyzer's command-line flags, shared by the offline/online scripts, the search and sizing; parsed flags
to PerfOptions, and --data-dir/--dataloader samples to perf_analyzer JSON."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ...config import Protocol, SharedMemory
from ...errors import UserInputError
from .command import HasSignature, MeasurementMode, PerfOptions

AUTO = "auto"  # --shared-memory auto: system for a server on this host (loopback URL), else none


def _default(name: str) -> Any:
    """PerfOptions' own default for a field: each default is written once, there."""
    field = next(f for f in dataclasses.fields(PerfOptions) if f.name == name)
    return field.default.value if hasattr(field.default, "value") else field.default


def add_perf_arguments(parser) -> None:
    """The perf_analyzer flags of triton/run_*_performance_test_on_triton.py (names follow perf_analyzer's), with
    PerfOptions' defaults and choices (config.Protocol, config.SharedMemory plus `auto`)."""
    g = parser.add_argument_group("perf_analyzer")
    g.add_argument("--protocol", choices=Protocol.values(), default=_default("protocol"), help="default: %(default)s")
    g.add_argument("--shared-memory", choices=(AUTO, *SharedMemory.values()), default=AUTO,
                   help="tensor transport; auto = system for a server on this host (loopback URL), else none")
    g.add_argument("--output-shared-memory-size", type=int, default=_default("output_shared_memory_size"),
                   metavar="BYTES", help="per sample and output; default: the manifest's largest output + 25%% "
                                         "(min 100 KB)")
    g.add_argument("--input-data", default=_default("input_data"), metavar="random|zero|PATH",
                   help="inputs with fixed values in the manifest always get those values (default: %(default)s)")
    g.add_argument("--data-dir", default=None, metavar="DIR",
                   help="real samples instead of --input-data: a folder of .npy/.npz samples, or the data_dir of "
                        "--dataloader; written as perf_analyzer JSON (input_data_<sha12>.json) in the run folder")
    g.add_argument("--dataloader", default=None, metavar="FILE",
                   help="a dataloader.py defining get_dataloader_fn(**kwargs) (the DLE form) for the real samples")
    g.add_argument("--dataloader-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="extra keyword argument for get_dataloader_fn (repeatable)")
    g.add_argument("--perf-samples", type=int, default=16,
                   help="real samples written for perf_analyzer, sent round-robin (default: %(default)s)")
    g.add_argument("--measurement-mode", choices=MeasurementMode.values(), default=_default("measurement_mode"))
    g.add_argument("--measurement-interval", type=int, default=_default("measurement_interval_ms"), metavar="MS",
                   help="window length for time_windows (default: %(default)s)")
    g.add_argument("--measurement-request-count", type=int, default=_default("measurement_request_count"),
                   help="requests per window for count_windows (default: %(default)s)")
    g.add_argument("--stability-percentage", type=float, default=_default("stability_percentage"),
                   help="default: %(default)s")
    g.add_argument("--max-trials", type=int, default=_default("max_trials"),
                   help="windows per attempt (default: %(default)s)")
    g.add_argument("--percentile", type=int, default=_default("percentile"),
                   help="stabilise on this latency percentile (e.g. 99)")
    g.add_argument("--async", dest="async_mode", action="store_true", help="perf_analyzer --async")
    g.add_argument("--max-attempts", type=int, default=_default("max_attempts"),
                   help="attempts per point, each with a longer window (+2000 ms or +50 requests); default %(default)s")
    g.add_argument("--perf-analyzer-arg", action="append", default=[], metavar="ARG",
                   help="extra argument passed to perf_analyzer as is (repeatable)")


def shared_memory_for(url: str, choice: str) -> SharedMemory:
    """--shared-memory as the enum: `auto` is system for a server on this host (a loopback URL), else none."""
    if choice != AUTO:
        return SharedMemory(choice)
    host = url.split("://")[-1].rsplit(":", 1)[0]
    return SharedMemory.SYSTEM if host in ("localhost", "127.0.0.1", "::1", "[::1]") else SharedMemory.NONE


def real_input_data(args, signature: HasSignature, directory: str | Path, *, precision: str = "fp32",
                    batched: bool = True) -> str | None:
    """With --data-dir/--dataloader: the user's samples, validated against `signature`, written as
    perf_analyzer JSON in `directory`; returns its path (None without those flags). --input-data must then
    be left at its default."""
    from ...data.samples import DataSpec

    return sample_input_data(DataSpec.from_args(args), signature, directory, args.perf_samples, precision=precision,
                             batched=batched, input_data=getattr(args, "input_data", "random"))


def sample_input_data(data, signature: HasSignature, directory: str | Path, samples: int | None, *,
                      precision: str = "fp32", batched: bool = True, input_data: str = "random") -> str | None:
    """The user's samples (`data`, a data.samples.DataSpec), validated against `signature`, written as
    perf_analyzer --input-data JSON (at most `samples` of them) in `directory`; None for random inputs. Refused
    beside another --input-data than random (`input_data`): the two would name different inputs."""
    from ...data.perf_input import build_perf_input
    from ...spec import ModelSignature

    if not data.user_data:
        return None
    if input_data != "random":
        raise UserInputError("give either --input-data or --data-dir/--dataloader, not both")
    sig = getattr(signature, "signature", signature)  # a Manifest carries one
    if not isinstance(sig, ModelSignature):
        sig = ModelSignature(tuple(signature.inputs), tuple(signature.outputs))
    return str(build_perf_input(data.dataset(sig, precision=precision, batched=batched), directory, samples))


def perf_options_from_args(args, shared_memory: SharedMemory | str | None = None) -> PerfOptions:
    """PerfOptions from the parsed flags; `shared_memory` replaces --shared-memory (which may say `auto`)."""
    return PerfOptions(
        protocol=args.protocol,
        shared_memory=shared_memory or args.shared_memory,
        output_shared_memory_size=args.output_shared_memory_size,
        input_data=args.input_data,
        measurement_mode=args.measurement_mode,
        measurement_interval_ms=args.measurement_interval,
        measurement_request_count=args.measurement_request_count,
        stability_percentage=args.stability_percentage,
        max_trials=args.max_trials,
        percentile=args.percentile,
        async_mode=args.async_mode,
        max_attempts=args.max_attempts,
        extra_args=tuple(args.perf_analyzer_arg),
    )
