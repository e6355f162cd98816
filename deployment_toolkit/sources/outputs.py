"""Structured model outputs -> named tensors: the one flattening every stage uses.

Models return a tensor, a tuple or list, a dict or `OrderedDict` (torchvision's segmentation models), a
namedtuple, or a Hugging Face `ModelOutput` (a dict subclass whose unset fields are absent), nested at will.
Triton serves a flat list of named tensors, so the structure is walked once and each tensor leaf gets a name
from its keys (`logits`, `out`, `hidden_states__3`); `output__<i>` only where no key names it (a bare tensor,
a top-level tuple). `None` leaves are dropped. Each served output keeps its *path* (the keys and indices that
reach it) in the manifest, so the framework reference (`torch_callable`: numpy in and out, like the converted
runtimes), the ONNX/TorchScript exporters (through `FlatOutputs`) and every later rebuild pick exactly the same
tensors.

Leaves that are not tensors (a decoder's `past_key_values` Cache, Mamba's `cache_params`) are left out unless
--outputs names them: a causal LM or a seq2seq model is served by its tensors without listing them, and
`left_out` names what was dropped so the converter can say so in one line.
"""
from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from .base import SourceError

OutputPath = tuple  # tuple[str | int, ...]


@dataclass(frozen=True)
class Leaf:
    """One leaf of a model's output: where it is, the tensor name it gets, and the value (a tensor, or
    something the flattening cannot serve, kept so that an error can name it only if it is selected)."""

    path: OutputPath
    name: str
    value: Any

    @property
    def is_tensor(self) -> bool:
        import torch

        return isinstance(self.value, torch.Tensor)


def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def _walk(obj: Any, path: OutputPath) -> Iterable[tuple[OutputPath, Any]]:
    import torch

    if obj is None:
        return
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            yield from _walk(value, (*path, str(key)))
    elif _is_namedtuple(obj):
        for key in obj._fields:
            yield from _walk(getattr(obj, key), (*path, key))
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            yield from _walk(value, (*path, i))
    else:
        yield path, obj  # not servable; reported only if it is kept


def _clean(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", part).strip("_") or "out"


def path_name(path: OutputPath) -> str:
    """`('logits',)` -> logits; `('hidden_states', 2)` -> hidden_states__2; `()` and `(1,)` -> output__0 / output__1."""
    if not path:
        return "output__0"
    parts = [str(p) if isinstance(p, int) else _clean(p) for p in path]
    if isinstance(path[0], int):
        parts.insert(0, "output")
    return "__".join(parts)


def leaves(out: Any, avoid: Sequence[str] = ()) -> list[Leaf]:
    """Every non-None leaf of `out` in order, named; names clashing with `avoid` (the input names) or with
    each other get a suffix, so the signature's names stay unique."""
    taken = set(avoid)
    result = []
    for path, value in _walk(out, ()):
        name = path_name(path)
        base, k = name, 1
        while name in taken:
            name = f"{base}__out" if k == 1 else f"{base}__out{k}"
            k += 1
        taken.add(name)
        result.append(Leaf(path, name, value))
    return result


def describe(value: Any) -> str:
    return type(value).__module__.split(".")[0] + "." + type(value).__name__ \
        if type(value).__module__ != "builtins" else type(value).__name__


def select(all_leaves: list[Leaf], keep: Sequence[str] | None = None) -> list[Leaf]:
    """The leaves to serve: every tensor (other leaves, such as a decoder's cache, are left out: see
    `left_out`), or those `keep` names (--outputs), in that order. A kept leaf that is not a tensor, a name that
    is not there, or a model with no tensor at all is a SourceError naming it and what to do."""
    by_name = {leaf.name: leaf for leaf in all_leaves}
    if keep:
        missing = [n for n in keep if n not in by_name]
        if missing:
            raise SourceError(f"--outputs names {', '.join(missing)}, which the model does not return; it returns "
                              f"{', '.join(by_name) or 'nothing'}")
        chosen = [by_name[n] for n in keep]
    else:
        chosen = [leaf for leaf in all_leaves if leaf.is_tensor]
        if not chosen and all_leaves:
            raise SourceError(f"the model returns only {_what(all_leaves)}, no tensor: nothing to serve" +
                              (" (a cache alone: return the logits or hidden states too)" if _has_cache(all_leaves)
                               else ""))
    if not chosen:
        raise SourceError("the model returned no tensor (only None values)")
    bad = [leaf for leaf in chosen if not leaf.is_tensor]
    if bad:
        tensors = [leaf.name for leaf in all_leaves if leaf.is_tensor]
        raise SourceError(f"the model returns {_what(bad)}, which is not a tensor and cannot be served: keep the "
                          f"tensor outputs with --outputs {','.join(tensors) or 'NAME'}" +
                          (" (or build the model with use_cache=False)" if _has_cache(bad) else ""))
    return chosen


def left_out(all_leaves: list[Leaf], served: Sequence[str]) -> dict[str, str]:
    """{name: what it is} of the leaves that are not tensors and not served (a cache): what a conversion says
    it dropped."""
    return {leaf.name: describe(leaf.value) for leaf in all_leaves if not leaf.is_tensor and leaf.name not in served}


def left_out_line(left: dict[str, str], served: Sequence[str]) -> str:
    """The one line saying what `left_out` dropped and what is served instead."""
    cache = any("cache" in what.lower() or "past_key" in name or "cache" in name for name, what in left.items())
    return (f"left out {', '.join(f'{name} (a {what})' for name, what in left.items())}: not a tensor"
            f"{' (a cache for generation)' if cache else ''}, so not served; serving {', '.join(served)}")


def _what(some: list[Leaf]) -> str:
    return ", ".join(f"{leaf.name} (a {describe(leaf.value)})" for leaf in some[:3]) + \
        (f" and {len(some) - 3} more" if len(some) > 3 else "")


def _has_cache(some: list[Leaf]) -> bool:
    return any("cache" in describe(leaf.value).lower() or "past_key" in leaf.name or "cache" in leaf.name
               for leaf in some)


def pick(out: Any, path: OutputPath) -> Any:
    """The value at `path` in `out` (keys index mappings and namedtuples, ints index sequences)."""
    for part in path:
        if isinstance(part, str) and not isinstance(out, Mapping) and _is_namedtuple(out):
            out = getattr(out, part)
        else:
            out = out[part]
    return out


def flatten(out: Any, names: Sequence[str], paths: dict[str, list] | None = None) -> list[Any]:
    """`out` as a list of tensors in the order of `names`: by the recorded paths when given, else by leaf name
    when every name is one (a dict-returning model whose get_signature names its keys), else by position (a
    tensor or tuple model, whose outputs are output__0, output__1, ...)."""
    if paths:
        return [pick(out, tuple(paths[n])) for n in names]
    found = leaves(out)
    by_name = {leaf.name: leaf.value for leaf in found}
    if all(n in by_name for n in names):
        return [by_name[n] for n in names]
    found = [leaf for leaf in found if leaf.is_tensor]  # by position: a cache is no output
    if len(found) < len(names):
        raise SourceError(f"the model returned {len(found)} output(s) ({', '.join(lf.name for lf in found)}), "
                          f"the signature names {len(names)}: {', '.join(names)}")
    return [leaf.value for leaf in found[:len(names)]]


def paths_of(out: Any, names: Sequence[str], paths: dict[str, list] | None = None) -> dict[str, list]:
    """The path of each of `names` in `out` (what the manifest records), resolved as `flatten` does."""
    if paths:
        return {n: list(paths[n]) for n in names}
    found = leaves(out)
    by_name = {leaf.name: leaf.path for leaf in found}
    if all(n in by_name for n in names):
        return {n: list(by_name[n]) for n in names}
    return {n: list(leaf.path) for n, leaf in zip(names, [leaf for leaf in found if leaf.is_tensor])}


def call(model, args: Sequence[Any], input_names: Sequence[str]) -> Any:
    """Call `model` on inputs in signature order: by keyword when every input name is a parameter of its forward
    (a Hugging Face model's input_ids, attention_mask, ... in whatever order the data gave them), else by position."""
    if _takes_keywords(model, input_names):
        return model(**dict(zip(input_names, args)))
    return model(*args)


def torch_callable(model, input_names: list[str], output_names: list[str], device: str = "cpu",
                   output_paths: dict[str, list] | None = None) -> Callable[[dict], dict]:
    """Wrap an nn.Module as numpy-in / numpy-out, like the converted runtimes. The model runs as the user runs
    it (keyword inputs where its forward names them, attention fast path as configured); its structured output
    is flattened by `output_paths` (the manifest's), else by name or position (flatten)."""
    import numpy as np
    import torch

    model = model.to(device)

    def run(inputs: dict) -> dict:
        with torch.inference_mode():
            args = [torch.from_numpy(np.ascontiguousarray(inputs[n])).to(device) for n in input_names]
            out = flatten(call(model, args, input_names), output_names, output_paths)
        return {n: (o.detach().float() if o.is_floating_point() else o.detach()).cpu().numpy()
                for n, o in zip(output_names, out)}

    return run


def _takes_keywords(model, input_names: Sequence[str]) -> bool:
    forward = getattr(model, "forward", None)
    if forward is None:
        return False
    try:
        params = inspect.signature(forward).parameters
    except (TypeError, ValueError):  # a ScriptModule's compiled forward
        return False
    named = [p for p in params.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return all(n in {p.name for p in named} for n in input_names)


def flat_module(model, input_names: Sequence[str], output_names: Sequence[str], paths: dict[str, list]):
    """`model` wrapped so that forward(*inputs in signature order) returns a tuple of the served outputs: what
    the ONNX exporters and the TorchScript tracer need (neither takes dicts, ModelOutputs or keyword inputs)."""
    import torch

    class FlatOutputs(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *args):
            out = call(self.model, args, input_names)
            return tuple(pick(out, tuple(paths[n])) for n in output_names)

    return FlatOutputs().eval()
