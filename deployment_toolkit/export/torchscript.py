"""PyTorch -> TorchScript by tracing or scripting."""
from __future__ import annotations

import io
import warnings
from pathlib import Path

from ..spec import atomic_write, check_free_space
from .errors import ConversionError


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
    save(module, path)
    return {"mode": mode, **({"flattened_by": "a traced wrapper"} if wrap is not None and mode == "script" else {})}


def weight_bytes(module) -> int:
    """The bytes of a module's parameters and buffers (each shared tensor once): what its saved file needs at least."""
    tensors = {t.data_ptr(): t.numel() * t.element_size() for t in module.state_dict().values()}
    return sum(tensors.values())


def save(module, path: Path) -> None:
    """A TorchScript module saved at `path` through the atomic writer. Not torch's own save to a path: its C++
    writer meeting a full disk aborts the process (rc 134, nothing on the console) and leaves its temporary file.
    The free space is checked against the weights before serialising, the archive is built in memory and written
    with its exact size checked again, so a full disk is one line naming the path and the space."""
    import torch

    check_free_space(path, weight_bytes(module))
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit.save's deprecation notice
        torch.jit.save(module, buffer)
    data = buffer.getbuffer()
    atomic_write(path, lambda fh: fh.write(data), size=data.nbytes)
