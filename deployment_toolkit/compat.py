"""Import shims for the pinned CPU environment.

The only torchvision wheels on the registry are CUDA builds; beside the CPU torch their C++ ops fail to
register ("operator torchvision::nms does not exist"). timm and diffusers import torchvision but never
need those ops for the models we build, so we import it without its op registrations.
"""
from __future__ import annotations

import sys
import types


def import_torchvision():
    try:
        import torchvision  # noqa: F401
        return torchvision
    except RuntimeError as err:  # pragma: no cover - depends on the wheel at hand
        if "torchvision::" not in str(err):
            raise
    for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[name]
    for stub in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
        sys.modules[stub] = types.ModuleType(stub)
    import torchvision

    return torchvision


def prepare_user_imports() -> None:
    """Apply the shims before a user's file is imported: a model.py importing torchvision (or transformers,
    timm, diffusers, which import it) must work on the toolkit's own install. Costs one torchvision import
    (about 2 s), once per process, and only where torchvision is installed."""
    import importlib.util

    if "torchvision" in sys.modules or importlib.util.find_spec("torchvision") is None:
        return
    try:
        import_torchvision()
    except Exception:  # noqa: BLE001 - a torchvision that fails otherwise fails again, in the user's own import
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]


def import_timm():
    import_torchvision()
    import timm

    return timm
