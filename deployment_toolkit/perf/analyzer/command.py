"""perf_analyzer's options and its command line: what to measure and how, as argv (never a shell string). The
load level is one tagged value (config.Load: Concurrency | RequestRate | Schedule), matched on its kind here, so
"exactly one of concurrency or request rate" is a type, not a check at run time."""
from __future__ import annotations

import base64
import enum
import functools
import json
import math
import typing
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from ...binaries import find_perf_analyzer
from ...config import Choice, Concurrency, Load, Protocol, RequestRate, Schedule, SharedMemory, check_numbers, setting
from ...errors import UserInputError
from ...spec import TensorSpec, atomic_write_text


DEFAULT_OUTPUT_SHM_BYTES = 100 * 1024  # perf_analyzer's own default
AUTO = "auto"  # --shared-memory auto: system for a server on this host (loopback URL), else none

class HasSignature(typing.Protocol):
    """A Manifest or a ModelSignature: anything with inputs and outputs."""

    @property
    def inputs(self) -> Sequence[TensorSpec]: ...

    @property
    def outputs(self) -> Sequence[TensorSpec]: ...


class MeasurementMode(Choice):
    """How perf_analyzer delimits a measurement window: by time or by a number of requests."""
    TIME_WINDOWS = "time_windows"
    COUNT_WINDOWS = "count_windows"


def _choice(kind: type[Choice], name: str, value: Any) -> Choice:
    """`value` as the enum `kind` (a member, or the string a flag or an older caller gives), else one line."""
    try:
        return kind(value)
    except ValueError:
        raise UserInputError(f"{name}={value!r}: choose one of {', '.join(kind.values())}") from None


@dataclass(frozen=True)
class PerfOptions:
    """How perf_analyzer measures a point. Fields that change the numbers go into a sweep's fingerprint. Each
    setting is declared here once, its flag with it: the commands' flags are built from these fields
    (flags.add_perf_arguments) and parsed back into them (flags.perf_options_from_args)."""

    protocol: Protocol = setting(Protocol.GRPC, flag="--protocol", help="perf_analyzer -i")
    # the flag also takes `auto` (its default there): system for a server on this host, else none
    shared_memory: SharedMemory = setting(
        SharedMemory.NONE, flag="--shared-memory", type=str, choices=(AUTO, *SharedMemory.values()),
        help="tensor transport; auto = system for a server on this host (loopback URL), else none")
    # None = from the manifest
    output_shared_memory_size: int | None = setting(
        None, flag="--output-shared-memory-size", unit="bytes", low=1, high=1 << 40, metavar="BYTES",
        help="bytes per sample and output; default: the manifest's largest output + 25%% (min 100 KB)")
    input_data: str = setting("random", flag="--input-data", metavar="random|zero|PATH",
                              help="inputs with fixed values in the manifest always get those values")
    measurement_mode: MeasurementMode = setting(MeasurementMode.TIME_WINDOWS, flag="--measurement-mode",
                                                help="a window ends after a time or after a number of requests")
    measurement_interval_ms: int = setting(5000, flag="--measurement-interval", unit="ms", low=1, high=3_600_000,
                                           metavar="MS", help="window length for time_windows")
    measurement_request_count: int = setting(50, flag="--measurement-request-count", low=1, high=10_000_000,
                                             help="requests per window for count_windows")
    # the relaxed final run sets 100000: stability unchecked
    stability_percentage: float = setting(
        10.0, flag="--stability-percentage", unit="%", low=0, low_open=True, high=1_000_000,
        help="how far (%%) the last windows may be from their average for a stable point")
    max_trials: int = setting(10, flag="--max-trials", low=1, high=1000, help="windows per attempt")
    # stabilise on this latency percentile instead of the average
    percentile: int | None = setting(None, flag="--percentile", low=1, high=99,
                                     help="stabilise on this latency percentile (e.g. 99)")
    async_mode: bool = setting(False, flag="--async", action="store_true", help="perf_analyzer --async")
    extra_args: tuple[str, ...] = setting((), flag="--perf-analyzer-arg", action="append", metavar="ARG",
                                          help="extra argument passed to perf_analyzer as is (repeatable)")
    # retries of an unstable point (not part of the measurement definition)
    max_attempts: int = setting(5, flag="--max-attempts", low=1, high=100,
                                help="attempts for a stable point, each with a longer window (+2000 ms or +50 "
                                     "requests); then one with stability unchecked")
    retry_interval_step_ms: int = 2000
    retry_request_count_step: int = 50
    relaxed_fallback: bool = True  # after the last unstable attempt, measure once with stability unchecked
    # per perf_analyzer call; None = derived from the window settings (no command-line flag: the name is for errors)
    timeout_s: float | None = setting(None, flag="timeout_s", unit="s", low=0, low_open=True, high=86_400)

    def __post_init__(self) -> None:
        # strings from flags and older callers are still taken: each becomes its enum (which equals that string)
        for name, kind in (("protocol", Protocol), ("shared_memory", SharedMemory),
                           ("measurement_mode", MeasurementMode)):
            object.__setattr__(self, name, _choice(kind, name, getattr(self, name)))
        check_numbers(self)  # each number finite and in its range, said with its flag and unit
        object.__setattr__(self, "extra_args", tuple(self.extra_args))
        # one value, one identity: stability 100 from Python and 100.0 from a flag must name the same measurement
        for name, kind in (("stability_percentage", float), ("measurement_interval_ms", int),
                           ("measurement_request_count", int), ("max_trials", int)):
            object.__setattr__(self, name, kind(getattr(self, name)))

    def measurement_fields(self) -> dict[str, Any]:
        """The fields that define what is measured (for fingerprints and run.json)."""
        skip = {"max_attempts", "retry_interval_step_ms", "retry_request_count_step", "relaxed_fallback", "timeout_s"}
        return {k: _plain(v) for k, v in asdict(self).items() if k not in skip}

    def lengthened(self) -> "PerfOptions":
        """The next retry's options: a longer window, as the DLE runner does (+2000 ms or +50 requests)."""
        if self.measurement_mode == MeasurementMode.TIME_WINDOWS:
            return replace(self, measurement_interval_ms=self.measurement_interval_ms + self.retry_interval_step_ms)
        return replace(self, measurement_request_count=self.measurement_request_count + self.retry_request_count_step)

    def window_label(self) -> str:
        if self.measurement_mode == MeasurementMode.TIME_WINDOWS:
            return f"{self.measurement_interval_ms} ms windows"
        return f"{self.measurement_request_count}-request windows"

    def call_timeout_s(self) -> float:
        if self.timeout_s is not None:
            return self.timeout_s
        if self.measurement_mode == MeasurementMode.TIME_WINDOWS:
            return 60.0 + 3.0 * self.max_trials * self.measurement_interval_ms / 1000.0
        return 600.0


def _plain(value: Any) -> Any:
    """A field as run.json and fingerprints hold it: an enum's value, a tuple as a list."""
    if isinstance(value, enum.Enum):
        return value.value
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class PerfTarget:
    """The model perf_analyzer drives: its name and version on the server at `url`, its tensors (a Manifest or a
    ModelSignature), the `--input-data` file to send (None: the options' random|zero|path) and the binary."""

    model_name: str
    url: str
    signature: HasSignature
    model_version: str = ""
    input_data: str | None = None
    binary: str | Path | None = None
    # inferences per request beyond perf_analyzer's client batch: a model served one whole batch per request counts
    # each stacked sample (data.whole.samples_per_request); Inferences/second is scaled by it
    samples_per_request: float = 1.0

    def data(self, options: PerfOptions) -> str:
        return str(self.input_data or options.input_data)


def output_shared_memory_size(outputs: Iterable[TensorSpec], headroom: float = 1.25, axis_growth: float = 1.0) -> int:
    """Bytes per sample for `--output-shared-memory-size`: the largest output with headroom.

    perf_analyzer multiplies this by the batch size (checked: 8 bytes at -b 4 gives a 32-byte region), so
    a per-sample size is right; it never goes below perf_analyzer's 100 KB default. `axis_growth`: how much
    longer than the example a dynamic axis gets in the input data (real samples of varying length); each dynamic
    axis of an output is assumed to grow as much (a per-token output with the sequence, an attention map twice).
    """
    largest = max((t.nbytes(1) * max(axis_growth, 1.0) ** list(t.shape).count(-1) for t in outputs), default=0)
    return max(DEFAULT_OUTPUT_SHM_BYTES, int(math.ceil(largest * headroom / 4096.0)) * 4096)


def dynamic_axis_growth(signature: HasSignature, input_data: str | Path | None) -> float:
    """The largest size a dynamic input axis takes in an `--input-data` JSON file over its example size (1.0
    without a file or dynamic axes): real samples are longer than the example the outputs were sized from."""
    dynamic = {t.name: t for t in signature.inputs if t.is_dynamic}
    if not dynamic or not input_data or not Path(input_data).is_file():
        return 1.0
    try:
        entries = json.loads(Path(input_data).read_text()).get("data", [])
    except (OSError, ValueError, AttributeError):
        return 1.0
    growth = 1.0
    for entry in entries if isinstance(entries, list) else []:
        for name, spec in dynamic.items():
            shape = entry.get(name, {}).get("shape") if isinstance(entry.get(name), dict) else None
            if not shape or len(shape) != len(spec.shape):
                continue
            for dim, size, example in zip(spec.shape, shape, spec.concrete_shape):
                if dim == -1 and example > 0:
                    growth = max(growth, size / example)
    return growth


def needs_input_file(signature: HasSignature) -> bool:
    """True when perf_analyzer's own random data would be wrong: fixed values, or integers (perf_analyzer draws
    them past any vocabulary; ours stay in the spec's value_range, learnt from the user's data)."""
    return any(t.value is not None or t.value_range is not None or np.dtype(t.dtype).kind in "iub"
               for t in signature.inputs)


def write_input_data_json(signature: HasSignature, path: str | Path, kind: str = "random", seed: int = 0) -> Path:
    """A perf_analyzer `--input-data` JSON file: fixed `value`s for non-data inputs, random/zero data for the rest.

    One batch-1 entry; perf_analyzer repeats it to fill larger batches. Binary tensors are base64 encoded
    (compact for image-sized inputs); string tensors are listed as content.
    """
    if kind not in ("random", "zero"):
        raise UserInputError(f"generated input data is 'random' or 'zero', not {kind!r}")
    rng = np.random.default_rng(seed)
    entry: dict[str, Any] = {}
    for spec in signature.inputs:
        sample = spec.example(0, rng, kind)
        shape = list(spec.concrete_shape or spec.wire_shape)  # a scalar per sample: [1], its config dims
        if sample.dtype == object:
            entry[spec.name] = {"content": [str(v) for v in sample.ravel()], "shape": shape}
        else:
            data = np.ascontiguousarray(sample).tobytes()
            entry[spec.name] = {"b64": base64.b64encode(data).decode("ascii"), "shape": shape}
    atomic_write_text(path, json.dumps({"data": [entry]}) + "\n")
    return Path(path)


def shape_args(signature: HasSignature, shaped: Iterable[str] = ()) -> list[str]:
    """`--shape NAME:d1,d2` for every input with a dynamic (-1) dim, from its example shape, except the `shaped`
    ones, whose --input-data entries carry their own shape: a --shape beside them is refused by perf_analyzer when a
    sample's length differs from the example's ("The supplied shape of [16] ... is incompatible")."""
    skip = set(shaped)
    args: list[str] = []
    for spec in signature.inputs:
        if spec.is_dynamic and spec.name not in skip:
            args += ["--shape", f"{spec.name}:" + ",".join(str(d) for d in spec.concrete_shape)]
    return args


def shaped_inputs(input_data: str | Path) -> frozenset[str]:
    """The inputs whose entries in an --input-data JSON file carry a "shape" (every file the toolkit writes does)."""
    path = Path(str(input_data))
    if str(input_data) in ("random", "zero") or not path.is_file():
        return frozenset()
    return _shaped(str(path), path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _shaped(path: str, _mtime_ns: int) -> frozenset[str]:
    try:
        entries = json.loads(Path(path).read_text()).get("data") or [{}]
    except (OSError, ValueError, AttributeError):
        return frozenset()
    first = entries[0] if isinstance(entries[0], dict) else {}
    return frozenset(name for name, v in first.items() if isinstance(v, dict) and "shape" in v)


def load_args(load: Load) -> list[str]:
    """The flags of one load level, matched on its kind (perf_analyzer refuses a schedule file beside a range)."""
    if isinstance(load, Concurrency):
        return ["--concurrency-range", f"{int(load.clients)}:{int(load.clients)}:1"]
    if isinstance(load, Schedule):
        return ["--request-intervals", str(load.intervals)]
    if isinstance(load, RequestRate):
        return ["--request-rate-range", f"{load.per_second:g}:{load.per_second:g}:1"]
    raise TypeError(f"a load is Concurrency, RequestRate or Schedule, not {type(load).__name__}")


def build_command(target: PerfTarget, batch_size: int, load: Load, options: PerfOptions, csv_path: str | Path,
                  profile_export: str | Path | None = None) -> list[str]:
    """The perf_analyzer argument list for one load level: `Concurrency` (closed loop), `RequestRate` or `Schedule`
    (open loop; a schedule file of send intervals drives the rate instead of `--request-rate-range`).
    `profile_export`: where perf_analyzer writes every request's send and response times."""
    signature, data = target.signature, target.data(options)
    if data in ("random", "zero") and needs_input_file(signature):
        fixed = [t.name for t in signature.inputs if t.value is not None or np.dtype(t.dtype).kind in "iub"]
        raise UserInputError(
            f"inputs {fixed} have fixed values or integers: pass input_data= a JSON file from write_input_data_json() "
            "so perf_analyzer does not send random numbers there"
        )
    cmd = [
        str(target.binary or find_perf_analyzer()),
        "-m", target.model_name,
        "-u", target.url,
        "-i", options.protocol.value,
        "-b", str(int(batch_size)),
        "--input-data", data,
        "--measurement-mode", options.measurement_mode.value,
        "--stability-percentage", f"{options.stability_percentage:g}",
        "--max-trials", str(options.max_trials),
        "-f", str(csv_path),
        "--verbose-csv",
        "-v",
    ]
    if target.model_version:
        cmd += ["-x", str(target.model_version)]
    cmd += load_args(load)
    if profile_export is not None:
        cmd += ["--profile-export-file", str(profile_export)]
    if options.measurement_mode == MeasurementMode.TIME_WINDOWS:
        cmd += ["--measurement-interval", str(options.measurement_interval_ms)]
    else:
        cmd += ["--measurement-request-count", str(options.measurement_request_count)]
    if options.shared_memory != SharedMemory.NONE:
        size = options.output_shared_memory_size or output_shared_memory_size(
            signature.outputs, axis_growth=dynamic_axis_growth(signature, data))
        cmd += ["--shared-memory", options.shared_memory.value, "--output-shared-memory-size", str(size)]
    if options.percentile is not None:
        cmd += ["--percentile", str(options.percentile)]
    if options.async_mode:
        cmd.append("--async")
    cmd += shape_args(signature, shaped_inputs(data))
    cmd += list(options.extra_args)
    return cmd
