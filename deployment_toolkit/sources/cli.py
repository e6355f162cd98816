"""The model-source flags every tool that takes a model shares, and their translation into a ModelSource."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..config.keyvalue import VALUE_RULE, parse_pairs
from ..models.registry import TASKS
from ..spec import MANIFEST_NAME, Manifest
from . import ModelSource, ResolvedModel, SourceError, parse_reference, rebuild, resolve

MODEL_HELP = "a zoo name (python -m deployment_toolkit models), timm:<arch>, a model.py, package.module:function, " \
             "an ONNX/TorchScript file or an artifact folder"


def add_source_arguments(p: argparse.ArgumentParser, *, required: bool = True, manifest: bool = True,
                         model_help: str = MODEL_HELP) -> argparse._ArgumentGroup:
    """--model / --input-path / --manifest and the flags that shape a source. `required`: one of them must
    be given (checked by source_from_args, so --help still works)."""
    g = p.add_argument_group("model source (one of --model, --input-path" + (", --manifest)" if manifest else ")"))
    g.add_argument("--model", default=None, help=model_help)
    g.add_argument("--input-path", default=None,
                   help="your model: model.py defining get_model(**kwargs), package.module:function, model.onnx, "
                        "model.pt (TorchScript) or model.plan (TensorRT)")
    g.add_argument("--input-type", choices=("pyt", "onnx", "ts", "trt"), default=None,
                   help="what --input-path is (default: from its suffix)")
    g.add_argument("--checkpoint", "--checkpoint-dir", dest="checkpoint", default=None,
                   help="weights: .safetensors or a torch state dict (loaded with weights_only=True; a "
                        "'state_dict'/'model' wrapper and a 'module.' prefix are handled)")
    g.add_argument("--model-arg", action="append", default=[], metavar="KEY=VALUE",
                   help=f"keyword argument for get_model (repeatable; {VALUE_RULE})")
    g.add_argument("--ignore-unknown-parameters", action="store_true",
                   help="drop --model-arg keys get_model does not take instead of failing")
    g.add_argument("--num-classes", type=int, default=None, help="timm: classifier width (0: pooled features)")
    g.add_argument("--in-chans", type=int, default=None, help="timm: input channels")
    g.add_argument("--input-size", type=int, default=None, help="timm: input height/width in pixels")
    g.add_argument("--input-shape", action="append", default=[], metavar="NAME=D1,D2,...[:dtype]",
                   help="per-sample shape of an input the source cannot describe (model.py without "
                        "get_signature, TorchScript file, ONNX dynamic axes); repeatable")
    g.add_argument("--dynamic-axis", action="append", default=[], metavar="NAME:AXIS",
                   help="an input axis whose size varies (a sequence length): AXIS counts per-sample axes, 0 = the "
                        "first after the batch; with --input-shape the given size is the example. Axes whose size "
                        "differs between samples of --dataloader/--data-dir are dynamic without it; repeatable")
    g.add_argument("--outputs", default=None, metavar="NAME,...",
                   help="serve only these outputs, in this order (a model that also returns hidden states or "
                        "attentions); names as the model's keys give them (logits, last_hidden_state, out). Without "
                        "it every tensor is served; a decoder's cache, not a tensor, is left out with one line")
    g.add_argument("--task", choices=TASKS, default=None,
                   help="how converted outputs are compared (default: the zoo's, else classification for one "
                        "vector output, embedding otherwise)")
    if manifest:
        g.add_argument("--manifest", default=None,
                       help="an artifact folder (or its manifest.json): the model its manifest records")
    g.required_source = required  # type: ignore[attr-defined]
    return g


def input_shapes(items: list[str], dynamic: list[str] | None = None) -> dict[str, Any]:
    """--input-shape values; axes named by --dynamic-axis NAME:AXIS become -1 with the given size as example."""
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        name, sep, dims = item.rpartition("=")
        name = name if sep else f"input__{i}"
        dims, _, dtype = dims.partition(":")
        try:
            shape = [int(d) for d in dims.replace("x", ",").split(",") if d.strip()]
        except ValueError:
            raise SourceError(f"--input-shape expects NAME=D1,D2,...[:dtype], got {item!r}") from None
        out[name] = {"shape": shape, "dtype": dtype} if dtype else shape
    for item in dynamic or []:
        name, sep, axis = item.rpartition(":")
        if not sep or not axis.strip().isdigit():
            raise SourceError(f"--dynamic-axis expects NAME:AXIS (e.g. input_ids:0), got {item!r}")
        if not out:
            return out  # the axes apply to inputs read from the data (data.infer)
        if name not in out:
            raise SourceError(f"--dynamic-axis names {name}, which --input-shape does not give ({', '.join(out)})")
        entry = out[name] if isinstance(out[name], dict) else {"shape": out[name]}
        example = list(entry.get("example_shape") or entry["shape"])
        if not 0 <= int(axis) < len(example):
            raise SourceError(f"--dynamic-axis {item}: {name} has {len(example)} per-sample axes (0..{len(example) - 1})")
        shape = list(entry["shape"])
        shape[int(axis)] = -1
        out[name] = {**entry, "shape": shape, "example_shape": example}
    return out


def output_names(text: str | None) -> list[str]:
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    if text is not None and not names:
        raise SourceError("--outputs expects NAME,... (the output names to serve)")
    return names


def _manifest_path(value: str) -> Path:
    path = Path(value)
    return path.parent if path.name == MANIFEST_NAME else path


def source_from_args(args: argparse.Namespace, preset: str | None = None,
                     max_batch_size: int | None = None) -> ModelSource:
    """The ModelSource the flags describe (from the manifest's record for --manifest)."""
    given = [f for f in ("model", "input_path", "manifest") if getattr(args, f, None)]
    if len(given) != 1:
        flags = "--model, --input-path or --manifest" if hasattr(args, "manifest") else "--model or --input-path"
        raise SourceError(f"give exactly one of {flags}" + (f" (got {', '.join('--' + g.replace('_', '-') for g in given)})"
                                                            if given else ""))
    if given[0] == "manifest":
        return rebuild(Manifest.load(_manifest_path(args.manifest))).source
    ref = args.model or args.input_path
    if args.model and (Path(ref) / MANIFEST_NAME).is_file():
        return rebuild(Manifest.load(ref)).source
    kwargs = parse_pairs(getattr(args, "model_arg", []) or [], "--model-arg")
    for flag in ("num_classes", "in_chans", "input_size"):
        if getattr(args, flag, None) is not None:
            kwargs[flag] = getattr(args, flag)
    return parse_reference(
        ref, getattr(args, "input_type", None), preset=preset or getattr(args, "preset", None) or "small",
        kwargs=kwargs, checkpoint=getattr(args, "checkpoint", None),
        ignore_unknown_parameters=bool(getattr(args, "ignore_unknown_parameters", False)),
        input_shapes=input_shapes(getattr(args, "input_shape", []) or [], getattr(args, "dynamic_axis", []) or []),
        task=getattr(args, "task", None), max_batch_size=max_batch_size, outputs=output_names(getattr(args, "outputs", None)),
    )


def resolve_args(args: argparse.Namespace, preset: str | None = None,
                 max_batch_size: int | None = None) -> ResolvedModel:
    return resolve(source_from_args(args, preset, max_batch_size))
