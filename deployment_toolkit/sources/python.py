"""The user's own code: `model.py` defining `get_model(**kwargs) -> nn.Module` (the seed's form, optionally
`get_signature(**kwargs)`), or `package.module:function`.

kwargs come from repeatable `--model-arg key=value`; a key the factory does not take is an error unless
--ignore-unknown-parameters drops it (the seed's flag). Import, factory and checkpoint failures become one
SourceError naming the file and the cause.
"""
from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from ..compat import prepare_user_imports
from ..watchdog import user_stage
from ..spec import ModelSignature, SpecError, TensorSpec
from .base import DEFAULT_MAX_BATCH, ModelSource, ResolvedModel, SourceError, display_name, register_source
from .common import input_specs, materialise, probe, task_and_metric, with_checkpoint
from ..userfile import first_line as _first_line, import_file

FACTORY = "get_model"
SIGNATURE_FN = "get_signature"


def is_module_ref(ref: str) -> bool:
    """`package.module:function` (not a path)."""
    head, sep, tail = ref.partition(":")
    return bool(sep) and bool(tail) and not head.endswith(".py") and "/" not in head and tail.isidentifier()


def load_module(ref: str) -> tuple[ModuleType, str, Path]:
    """(module, factory name, file) for a model.py path or `package.module:function`."""
    if is_module_ref(ref):
        mod_name, func = ref.split(":")
        prepare_user_imports()
        try:
            module = importlib.import_module(mod_name)
        except Exception as err:
            raise SourceError(f"module {mod_name} failed to import: {_first_line(err)}") from err
        return module, func, Path(getattr(module, "__file__", "") or mod_name)
    path = Path(ref)
    return import_file(path, "model file", SourceError), FACTORY, path


def accepted_kwargs(fn: Callable, kwargs: dict[str, Any], ignore_unknown: bool, what: str) -> dict[str, Any]:
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(kwargs)
    unknown = sorted(set(kwargs) - set(params))
    if unknown and not ignore_unknown:
        raise SourceError(f"{what} takes no parameter {', '.join(unknown)} (it takes {', '.join(params) or 'none'}); "
                          "fix --model-arg or pass --ignore-unknown-parameters")
    return {k: v for k, v in kwargs.items() if k in params}


def _signature(value: Any, where: str) -> tuple[ModelSignature, dict[str, Any]]:
    """get_signature's answer: a ModelSignature, or a dict with inputs/outputs lists (TensorSpec fields) and
    optionally max_batch_size and task."""
    if isinstance(value, ModelSignature):
        return value, {}
    if isinstance(value, dict) and "inputs" in value and "outputs" in value:
        try:
            return ModelSignature.from_dict(value), {k: value[k] for k in ("max_batch_size", "task") if k in value}
        except (SpecError, KeyError, TypeError) as err:
            raise SourceError(f"{where} returned a signature that does not parse: {err}") from err
    raise SourceError(f"{where} must return a ModelSignature or a dict with 'inputs' and 'outputs', "
                      f"got {type(value).__name__}")


@register_source("python")
def resolve_python(source: ModelSource) -> ResolvedModel:
    import torch

    module, factory_name, file = load_module(source.ref)
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise SourceError(f"{source.ref} defines no {factory_name}(**kwargs) function returning a torch.nn.Module")
    what = f"{file.name}:{factory_name}" if not is_module_ref(source.ref) else source.ref
    kwargs = accepted_kwargs(factory, source.kwargs, source.ignore_unknown_parameters, what)

    def build(seed: int):
        torch.manual_seed(seed)
        try:
            with user_stage(f"building the model ({what})"):
                model = factory(**kwargs)
        except Exception as err:
            raise SourceError(f"{what}(**{kwargs}) raised {_first_line(err)}") from err
        if isinstance(model, tuple) and model and isinstance(model[0], torch.nn.Module):
            model = model[0]  # the seed's get_model returns (model, tensor_names)
        if not isinstance(model, torch.nn.Module):
            raise SourceError(f"{what} returned a {type(model).__name__}, not a torch.nn.Module")
        return materialise(with_checkpoint(model, source, what), known_inputs, seed)

    known_inputs: list[TensorSpec] = []  # filled below, before the first build

    extra: dict[str, Any] = {}
    paths: dict[str, list] = {}
    sig_fn = getattr(module, SIGNATURE_FN, None)
    if source.input_shapes or (source.data_inputs and not callable(sig_fn)):
        inputs = input_specs(source, None if source.input_shapes else source.data_inputs)
        known_inputs.extend(inputs)
        max_batch = source.max_batch_size if source.max_batch_size is not None else DEFAULT_MAX_BATCH
        outputs, paths = probe(build(0), inputs, 2 if max_batch else 0, source.outputs or None)
        signature = ModelSignature(inputs=inputs, outputs=outputs)
    elif callable(sig_fn):
        sig_kwargs = accepted_kwargs(sig_fn, source.kwargs, True, f"{file.name}:{SIGNATURE_FN}")
        try:
            with user_stage(f"reading the signature ({file.name}:{SIGNATURE_FN})"):
                value = sig_fn(**sig_kwargs)
        except Exception as err:
            raise SourceError(f"{file.name}:{SIGNATURE_FN}(**{sig_kwargs}) raised {_first_line(err)}") from err
        if source.data_inputs and isinstance(value, dict):
            value = _with_examples(value, source.data_inputs)
        signature, extra = _signature(value, f"{file.name}:{SIGNATURE_FN}")
        known_inputs.extend(signature.inputs)
        if source.outputs:
            signature = _keep_outputs(signature, source.outputs)
    else:
        raise SourceError(f"{source.ref} has no {SIGNATURE_FN}(**kwargs): pass --dataloader or --data-dir (the inputs "
                          "are read from the first batches) or --input-shape NAME=D1,D2,... (per sample, without the "
                          "batch axis)")
    max_batch = source.max_batch_size if source.max_batch_size is not None else \
        int(extra.get("max_batch_size", DEFAULT_MAX_BATCH))
    task, metric = task_and_metric(source, signature.outputs, extra.get("task"))
    return ResolvedModel(source=source, name=display_name(source), family="user", task=task, metric=metric,
                         signature=signature, max_batch_size=max_batch, builder=build, output_paths=paths)


def _with_examples(value: dict[str, Any], known: dict[str, Any]) -> dict[str, Any]:
    """get_signature's inputs with a dynamic dim and no example_shape take it (and a missing value_range) from what
    the data showed for the input of that name (a preprocess's outputs on the raw samples): without it such a
    signature does not parse, and the data already says which sizes are real."""
    inputs = []
    for spec in value.get("inputs") or []:
        info = known.get(spec.get("name")) if isinstance(spec, dict) else None
        if not isinstance(info, dict):
            inputs.append(spec)
            continue
        spec = dict(spec)
        shape, example = list(spec.get("shape") or ()), list(info.get("example_shape") or info.get("shape") or ())
        if -1 in shape and spec.get("example_shape") is None and len(example) == len(shape) and -1 not in example:
            spec["example_shape"] = [e if d == -1 else d for d, e in zip(shape, example)]
        if spec.get("value_range") is None and info.get("value_range") is not None and \
                spec.get("dtype", "float32") == info.get("dtype"):
            spec["value_range"] = list(info["value_range"])
        inputs.append(spec)
    return {**value, "inputs": inputs}


def _keep_outputs(signature: ModelSignature, keep: list[str]) -> ModelSignature:
    """get_signature's outputs narrowed to --outputs, in that order."""
    by_name = {t.name: t for t in signature.outputs}
    missing = [n for n in keep if n not in by_name]
    if missing:
        raise SourceError(f"--outputs names {', '.join(missing)}, which get_signature does not declare; it declares "
                          f"{', '.join(by_name)}")
    return ModelSignature(inputs=signature.inputs, outputs=tuple(by_name[n] for n in keep))
