"""What this host can run, asked without importing anything of the toolkit."""
from __future__ import annotations


def tensorrt_available() -> tuple[bool, str]:
    """(True, '') where TensorRT imports and a GPU is visible, else (False, why)."""
    try:
        import tensorrt  # noqa: F401
    except Exception as err:  # ImportError, or OSError when libnvinfer is missing
        return False, f"TensorRT is not installed here ({type(err).__name__}: {err}); install the `gpu` extra on a GPU host"
    try:
        import torch

        if not torch.cuda.is_available():
            return False, "TensorRT needs an NVIDIA GPU and none is visible (torch.cuda.is_available() is False)"
    except ImportError:
        pass
    return True, ""
