"""perf_analyzer's command-line flags, shared by the offline/online scripts, the search and sizing: built from
the fields of PerfOptions and RealSamples (each setting declared once, with its flag) and parsed back into
PerfOptions; --data-dir/--dataloader samples to perf_analyzer JSON."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...config import SharedMemory, add_arguments, from_args, setting
from ...config.keyvalue import VALUE_RULE
from ...data.perf_input import DEFAULT_PERF_SAMPLES
from ...errors import UserInputError
from .command import AUTO, HasSignature, PerfOptions

PERF_FLAGS_SKIP = ("timeout_s",)  # a PerfOptions setting of the Python API alone: its `flag` names it in errors


@dataclass(frozen=True)
class RealSamples:
    """The user's samples perf_analyzer sends instead of --input-data: the flags data.samples.DataSpec.from_args
    reads, and how many of the samples go into perf_analyzer's input file."""

    data_dir: str | None = setting(
        None, flag="--data-dir", metavar="DIR",
        help="real samples instead of --input-data: a folder of .npy/.npz samples, or the data_dir of --dataloader; "
             "written as perf_analyzer JSON (input_data_<sha12>.json) in the run folder")
    dataloader: str | None = setting(
        None, flag="--dataloader", metavar="FILE",
        help="a dataloader.py defining get_dataloader_fn(**kwargs) (the DLE form) for the real samples")
    dataloader_arg: tuple[str, ...] = setting((), flag="--dataloader-arg", action="append", metavar="KEY=VALUE",
                                              help=f"extra keyword argument for get_dataloader_fn (repeatable; {VALUE_RULE})")
    perf_samples: int = setting(DEFAULT_PERF_SAMPLES, flag="--perf-samples",
                                help="real samples written for perf_analyzer, sent round-robin")


def add_perf_arguments(parser, **defaults: Any) -> None:
    """The perf_analyzer flags of triton/run_*_performance_test_on_triton.py (names follow perf_analyzer's): the
    fields of PerfOptions and RealSamples; --shared-memory defaults to `auto` here. `defaults` override a field's
    default for one command (the search's shorter windows)."""
    g = parser.add_argument_group("perf_analyzer")
    add_arguments(g, PerfOptions, skip=PERF_FLAGS_SKIP, **{"shared_memory": AUTO, **defaults})
    add_arguments(g, RealSamples)


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
    return from_args(PerfOptions, args, shared_memory=shared_memory or args.shared_memory)
