"""Load user weights safely: safetensors, or a torch checkpoint with `weights_only=True` (no arbitrary unpickling).

Training code wraps the weights in many ways: Lightning's `{"state_dict": {"model.<name>": ...}, "epoch": ...}`,
`{"model": sd}`, `{"model_state_dict": sd}`, timm's `{"state_dict": sd, "state_dict_ema": ema}`, with the
`module.` of DistributedDataParallel or the `_orig_mod.` of torch.compile in front of every name. Rather than try a
fixed list of wrapper keys and prefixes, every mapping of tensors in the file is matched against the model's own
keys: the one that matches most (after the prefix that matches most) is taken, and what was done is said in one line.
The state dict's `_metadata` (module versions, which e.g. torchvision's MNASNet checks) follows the stripped prefix;
a file without it (safetensors) gets the model's own versions, after its keys and shapes were checked to fit.
"""
from __future__ import annotations

import pickle
import re
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..watchdog import user_stage
from .base import SourceError
from ..userfile import first_line

_SHOWN = 10
_DEPTH = 4  # wrappers nest: {"model": {"state_dict": {...}}}
_EMA = re.compile(r"(^|[_.-])ema($|[_.-])", re.IGNORECASE)  # state_dict_ema, model_ema, ema; not 'schema'
_said: set[tuple[str, str, str]] = set()  # (checkpoint, model, line) already announced: builds repeat


def _to_safetensors_hint(path: Path) -> str:
    out = path.with_suffix(".safetensors")
    return (f"if you trust the file, convert it once: python -c \"import torch; from safetensors.torch import "
            f"save_file; sd = torch.load('{path}', weights_only=False); sd = sd.get('state_dict', sd); "
            f"save_file({{k: v.contiguous() for k, v in sd.items()}}, '{out}')\" and pass --checkpoint {out}")


def _first_sentence(err: BaseException, limit: int = 200) -> str:
    """The error's first sentence, whole, or cut at a word with an ellipsis (never mid-word, never mid-quote)."""
    text = " ".join(str(err).split())
    sentence = text.split(". ", 1)[0].rstrip(".")
    if len(sentence) <= limit:
        return sentence
    return sentence[:limit].rsplit(" ", 1)[0].rstrip("`'\"(") + " ..."


def _refused(err: BaseException) -> str:
    """What weights_only refused: the class torch names ('it holds a pathlib.PosixPath'), else its first sentence."""
    found = re.search(r"GLOBAL ([\w.]+)", str(err))
    return f"it holds a {found.group(1)} object" if found else _first_sentence(err)


def read_checkpoint(path: str | Path) -> Any:
    """What the file holds (a tensor mapping from safetensors; any weights_only-safe object from torch.load)."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise SourceError(f"checkpoint {path} does not exist")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        try:
            return load_file(str(path))
        except Exception as err:  # safetensors raises its own error types
            raise SourceError(f"checkpoint {path} is not a readable safetensors file: {err}") from err
    try:
        return torch.load(str(path), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise SourceError(f"checkpoint {path} holds pickled objects that torch.load with weights_only=True refuses "
                          f"to load ({_refused(err)}); {_to_safetensors_hint(path)}") from err
    except Exception as err:
        raise SourceError(f"checkpoint {path} cannot be read by torch.load: {type(err).__name__}: "
                          f"{str(err).splitlines()[0][:200]}") from err


@dataclass
class FoundState:
    """The model's weights as found in a checkpoint: the wrapper keys walked from the top, the prefix stripped."""

    tensors: "OrderedDict[str, Any]"  # named as the model names them; `_metadata` as torch keeps it
    where: tuple[str, ...] = ()
    prefix: str = ""
    left_out: list[str] = field(default_factory=list)  # tensors outside the prefix (a Lightning module's loss)
    also_fits: list[tuple[str, ...]] = field(default_factory=list)  # other mappings matching as well

    def describe(self) -> str:
        parts = [f"took {_where(self.where)}"] if self.where else []
        if self.prefix:
            parts.append(f"stripped prefix {self.prefix!r}")
        if self.left_out:
            parts.append(f"left out {len(self.left_out)} tensor(s) outside it ({_listed(self.left_out)})")
        if self.also_fits:
            parts.append(f"{', '.join(_where(w) for w in self.also_fits)} would fit too")
        count = f"{len(self.tensors)} tensors"
        return f"checkpoint: {', '.join(parts)} ({count})" if parts else f"checkpoint: {count}"


def _where(keys: tuple[str, ...]) -> str:
    return " > ".join(repr(k) for k in keys) if keys else "the top level"


def _tensor_maps(obj: Any, where: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Mapping]]:
    """Every mapping in `obj` (depth-first, up to _DEPTH wrappers) holding at least one tensor under a str key."""
    import torch

    if not isinstance(obj, Mapping):
        return
    if any(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()):
        yield where, obj
    if len(where) < _DEPTH:
        for k, v in obj.items():
            if isinstance(k, str) and isinstance(v, Mapping):
                yield from _tensor_maps(v, (*where, k))


def _best_prefix(keys: list[str], own: set[str]) -> tuple[str, int]:
    """The prefix (ending in '.', or '') whose removal names the most of the model's keys, and how many."""
    counts: Counter[str] = Counter()
    for key in keys:
        if key in own:
            counts[""] += 1
        dot = key.find(".")
        while dot != -1:
            if key[dot + 1:] in own:
                counts[key[:dot + 1]] += 1
            dot = key.find(".", dot + 1)
    if not counts:
        return "", 0
    return max(counts.items(), key=lambda kv: (kv[1], -len(kv[0])))


def _stripped_metadata(meta: Mapping[str, Any] | None, prefix: str) -> dict[str, Any]:
    """`_metadata` keyed by module path ('' the root, 'module.layers' ...), re-rooted below `prefix`."""
    if not meta:
        return {}
    if not prefix:
        return dict(meta)
    root = prefix[:-1]
    out = {}
    for key, value in meta.items():
        if key == root:
            out[""] = value
        elif key.startswith(prefix):
            out[key[len(prefix):]] = value
    return out


def find_state_dict(raw: Any, own_keys: list[str] | None, path: str | Path) -> FoundState:
    """The mapping of tensors in `raw` that fits the model's keys best, with its prefix stripped. Without
    `own_keys` (no model at hand): the mapping with the most tensors, as stored."""
    import torch

    found = list(_tensor_maps(raw))
    if not found:
        top = f"; its top-level keys: {_listed([str(k) for k in raw])}" if isinstance(raw, Mapping) and raw else ""
        raise SourceError(f"checkpoint {path} holds no state dict (a mapping of parameter names to tensors){top}")
    own = set(own_keys or ())
    scored = []
    for where, mapping in found:
        keys = [k for k, v in mapping.items() if isinstance(k, str) and isinstance(v, torch.Tensor)]
        prefix, matched = _best_prefix(keys, own) if own else ("", 0)
        unexpected = sum(k.startswith(prefix) for k in keys) - matched if own else 0
        ema = any(_EMA.search(k) for k in where)  # timm's rule: the EMA weights are the ones evaluated
        scored.append(((matched, -unexpected, ema, len(keys), -len(where)), where, mapping, keys, prefix))
    scored.sort(key=lambda s: s[0], reverse=True)
    best, where, mapping, keys, prefix = scored[0]
    also = [s[1] for s in scored[1:] if s[0][:2] == best[:2] and best[0] > 0]
    tensors: OrderedDict[str, Any] = OrderedDict(
        (k[len(prefix):], mapping[k]) for k in keys if k.startswith(prefix))
    tensors._metadata = _stripped_metadata(getattr(mapping, "_metadata", None), prefix)  # type: ignore[attr-defined]
    return FoundState(tensors, where, prefix, [k for k in keys if not k.startswith(prefix)], also)


def read_state_dict(path: str | Path, own_keys: list[str] | None = None) -> dict[str, Any]:
    """The tensors of a checkpoint file, unwrapped, with the prefix that best matches `own_keys` removed."""
    return find_state_dict(read_checkpoint(path), own_keys, path).tensors


def _listed(keys: list[str]) -> str:
    more = f" and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else ""
    return ", ".join(keys[:_SHOWN]) + more


def load_checkpoint(model, path: str | Path, name: str = "the model") -> FoundState:
    """Load `path` into `model` strictly; a mismatch names the missing and unexpected keys, and anything the
    model's own loading code raises (a version check) is one line naming the checkpoint."""
    import torch

    own = model.state_dict()
    found = find_state_dict(read_checkpoint(path), list(own), path)
    sd = found.tensors
    missing = [k for k in own if k not in sd]
    unexpected = [k for k in sd if k not in own]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing keys ({len(missing)}): {_listed(missing)}")
        if unexpected:
            parts.append(f"unexpected keys ({len(unexpected)}): {_listed(unexpected)}")
        read = f" (read {_where(found.where)}" + (f", prefix {found.prefix!r} stripped)" if found.prefix else ")")
        raise SourceError(f"checkpoint {path} does not fit {name}{read}: " + "; ".join(parts))
    wrong = [f"{k} {tuple(sd[k].shape)} vs {tuple(v.shape)}" for k, v in own.items()
             if isinstance(v, torch.Tensor) and tuple(sd[k].shape) != tuple(v.shape)]
    if wrong:
        raise SourceError(f"checkpoint {path} does not fit {name}: shapes differ (checkpoint vs model): "
                          f"{_listed(wrong)}")
    sd._metadata = {**getattr(own, "_metadata", {}), **sd._metadata}  # type: ignore[attr-defined]
    line = found.describe()
    said = (str(path), name, line)
    try:
        with user_stage(f"{line}; loading it into {name}", announce=said not in _said):
            _said.add(said)
            model.load_state_dict(sd, strict=True)
    except Exception as err:  # the model's own _load_from_state_dict may raise anything
        raise SourceError(f"checkpoint {path}: loading it into {name} raised {first_line(err)}") from err
    return found
