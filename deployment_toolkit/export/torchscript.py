"""PyTorch -> TorchScript by tracing or scripting."""
from __future__ import annotations

import warnings
from pathlib import Path

from .errors import ConversionError
from .files import write_replacing


def export_torchscript(model, example_args: tuple, path: Path, *, mode: str, wrap=None) -> dict:
    """Trace or script `model` and save it at `path`. `wrap` (script mode): a function putting the scripted
    module inside a flattener of its structured output; the wrapper is traced, which keeps the scripted module's
    control flow as it is."""
    import torch

    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            if mode == "trace":
                module = torch.jit.trace(model, example_args, check_trace=False)
            elif mode == "script":
                module = torch.jit.script(model)
                if wrap is not None:
                    module = torch.jit.trace(wrap(module), example_args, check_trace=False)
            else:
                raise ValueError(f"unknown TorchScript mode {mode!r}")
            module = module.eval()
    except Exception as err:
        first = str(err).strip().splitlines()
        cause = "\n".join(first[:12])
        raise ConversionError(
            f"torch.jit.{mode} failed for this model: {type(err).__name__}: {cause}"
            + ("\nScripting needs TorchScript-compatible Python; use --output-type ts-trace instead." if mode == "script" else "")
        ) from err
    write_replacing(path, lambda tmp: module.save(str(tmp)))
    return {"mode": mode, **({"flattened_by": "a traced wrapper"} if wrap is not None and mode == "script" else {})}
