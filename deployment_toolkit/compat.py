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


def import_timm():
    import_torchvision()
    import timm

    return timm
