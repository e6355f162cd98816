"""Load user weights safely: safetensors, or a torch state dict with `weights_only=True` (no arbitrary unpickling).

Training scripts save checkpoints in a few common wrappings; we undo the usual ones (a `state_dict` or `model`
key, DataParallel's `module.` prefix) and refuse anything else with the exact keys that do not fit.
"""
from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from .base import SourceError

WRAPPER_KEYS = ("state_dict", "model")
_SHOWN = 10


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


def read_state_dict(path: str | Path) -> dict[str, Any]:
    """The tensors of a checkpoint file, unwrapped and with a `module.` prefix removed."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise SourceError(f"checkpoint {path} does not exist")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        try:
            sd: Any = load_file(str(path))
        except Exception as err:  # safetensors raises its own error types
            raise SourceError(f"checkpoint {path} is not a readable safetensors file: {err}") from err
    else:
        try:
            sd = torch.load(str(path), map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as err:
            raise SourceError(f"checkpoint {path} holds pickled objects that torch.load with weights_only=True refuses "
                              f"to load ({_first_sentence(err)}); {_to_safetensors_hint(path)}") from err
        except Exception as err:
            raise SourceError(f"checkpoint {path} cannot be read by torch.load: {type(err).__name__}: "
                              f"{str(err).splitlines()[0][:200]}") from err
    for _ in range(3):  # e.g. {"model": {"state_dict": {...}}}
        if isinstance(sd, dict):
            inner = next((sd[k] for k in WRAPPER_KEYS if isinstance(sd.get(k), dict)), None)
            if inner is not None:
                sd = inner
    if not isinstance(sd, dict) or not sd:
        raise SourceError(f"checkpoint {path} holds no state dict (a mapping of parameter names to tensors)")
    not_tensors = [k for k, v in sd.items() if not isinstance(v, torch.Tensor)]
    if not_tensors:
        raise SourceError(f"checkpoint {path}: entries that are not tensors: {not_tensors[:_SHOWN]}; save "
                          "model.state_dict() (optionally under a 'state_dict' or 'model' key)")
    if all(k.startswith("module.") for k in sd):
        sd = {k[len("module."):]: v for k, v in sd.items()}
    return sd


def _listed(keys: list[str]) -> str:
    more = f" and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else ""
    return ", ".join(keys[:_SHOWN]) + more


def load_checkpoint(model, path: str | Path, name: str = "the model") -> None:
    """Load `path` into `model` strictly; a mismatch names the missing and unexpected keys."""
    sd = read_state_dict(path)
    own = model.state_dict()
    missing = [k for k in own if k not in sd]
    unexpected = [k for k in sd if k not in own]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing keys ({len(missing)}): {_listed(missing)}")
        if unexpected:
            parts.append(f"unexpected keys ({len(unexpected)}): {_listed(unexpected)}")
        raise SourceError(f"checkpoint {path} does not fit {name}: " + "; ".join(parts))
    wrong = [f"{k} {tuple(sd[k].shape)} vs {tuple(v.shape)}" for k, v in own.items() if tuple(sd[k].shape) != tuple(v.shape)]
    if wrong:
        raise SourceError(f"checkpoint {path} does not fit {name}: shapes differ (checkpoint vs model): "
                          f"{_listed(wrong)}")
    model.load_state_dict(sd, strict=True)
