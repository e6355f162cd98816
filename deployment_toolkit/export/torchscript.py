"""PyTorch -> TorchScript by tracing or scripting."""
from __future__ import annotations

import warnings
from pathlib import Path

from .errors import ConversionError
from .files import write_replacing


def export_torchscript(model, example_args: tuple, path: Path, *, mode: str) -> dict:
    import torch

    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            if mode == "trace":
                module = torch.jit.trace(model, example_args, check_trace=False)
            elif mode == "script":
                module = torch.jit.script(model)
            else:
                raise ValueError(f"unknown TorchScript mode {mode!r}")
            module = module.eval()
    except Exception as err:
        first = str(err).strip().splitlines()
        cause = "\n".join(first[:12])
        raise ConversionError(
            f"torch.jit.{mode} failed for this model: {type(err).__name__}: {cause}"
            + ("\nScripting needs TorchScript-compatible Python; use --format ts-trace instead." if mode == "script" else "")
        ) from err
    write_replacing(path, lambda tmp: module.save(str(tmp)))
    return {"mode": mode}
