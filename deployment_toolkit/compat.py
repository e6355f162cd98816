"""Import shims for the pinned CPU environment.

The only torchvision wheels on the registry are CUDA builds; beside the CPU torch their C++ ops fail to
register ("operator torchvision::nms does not exist"). timm and diffusers import torchvision but never
need those ops for the models we build, so we import it without its op registrations.
"""
from __future__ import annotations

import importlib.abc
import sys
import types


def _stub_op_registrations() -> None:
    """Drop torchvision's half-imported submodules and put empty modules where its op registrations were."""
    for name in [m for m in sys.modules if m.startswith("torchvision.")]:
        del sys.modules[name]
    for stub in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
        sys.modules[stub] = types.ModuleType(stub)


class _TorchvisionLoader(importlib.abc.Loader):
    """torchvision's own loader, run again without the op registrations when they fail to register."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module) -> None:
        try:
            self.real.exec_module(module)
        except RuntimeError as err:
            if "torchvision::" not in str(err):
                raise
            _stub_op_registrations()
            self.real.exec_module(module)

    def __getattr__(self, name: str):
        return getattr(self.real, name)


class _TorchvisionFinder(importlib.abc.MetaPathFinder):
    """Finds torchvision as the other finders do and hands back its spec with the loader above."""

    def find_spec(self, name, path, target=None):
        if name != "torchvision":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _TorchvisionLoader(spec.loader)
                return spec
        return None


def install_import_shims() -> None:
    """Make every later `import torchvision` in this process work beside the CPU torch, whoever imports it (timm,
    transformers, a user's model.py, a notebook cell). Costs nothing until torchvision is imported; `import
    deployment_toolkit` installs it."""
    if not any(isinstance(f, _TorchvisionFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchvisionFinder())


def import_torchvision():
    install_import_shims()
    if "torchvision" in sys.modules and sys.modules["torchvision"] is not None:
        return sys.modules["torchvision"]
    try:
        import torchvision  # noqa: F401
        return torchvision
    except RuntimeError as err:  # pragma: no cover - imported before the shim was installed
        if "torchvision::" not in str(err):
            raise
    _stub_op_registrations()
    sys.modules.pop("torchvision", None)
    import torchvision

    return torchvision


def missing_op_hint(err: BaseException) -> str:
    """One sentence for an error raised because the host lacks an op the model calls, else ''."""
    text = str(err)
    if "Couldn't load custom C++ ops" in text or "torchvision::" in text:
        return ("the model calls torchvision's C++ ops (nms, roi_align, deform_conv2d, ...), which this host's "
                "torchvision wheel lacks (a CUDA build beside the CPU torch); run it where torchvision's ops load, "
                "or replace that call")
    return ""


def prepare_user_imports() -> None:
    """Before a user's file is imported: a model.py importing torchvision (or transformers, timm, diffusers, which
    import it) must work on the toolkit's own install."""
    install_import_shims()


def register_torchvision_box_ops() -> None:
    """torchvision detection needs its C++ ops, absent beside the CPU torch (see the module doc). Register torchvision::nms
    as a pure-torch op of the same schema, so eager runs and TorchScript records the op that a real torchvision
    (and its ONNX symbolic) provides, and declare torchvision::box_iou_rotated, never run by these detectors, so that
    scripting box_iou compiles. A no-op where the C++ ops loaded."""
    import torch
    import torchvision.ops.boxes as boxes
    from torchvision.extension import _has_ops

    if _has_ops() or hasattr(torch.ops.torchvision, "nms"):
        return

    @torch.library.custom_op(
        "torchvision::nms", mutates_args=(), schema="(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"
    )
    def nms(dets: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
        order = scores.argsort(descending=True)
        overlaps = boxes.box_iou(dets[order], dets[order]).triu(1) > iou_threshold
        keep = torch.ones(order.numel(), dtype=torch.bool, device=dets.device)
        while True:
            survivors = ~(overlaps & keep[:, None]).any(0)
            if torch.equal(survivors, keep):
                return order[keep]
            keep = survivors

    @nms.register_fake
    def _(dets: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
        return dets.new_empty((torch.library.get_ctx().new_dynamic_size(),), dtype=torch.int64)

    @torch.library.custom_op(
        "torchvision::box_iou_rotated", mutates_args=(), schema="(Tensor boxes1, Tensor boxes2) -> Tensor"
    )
    def box_iou_rotated(boxes1: torch.Tensor, boxes2: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("rotated boxes need torchvision's C++ ops")

    def ops_present() -> None:
        return None

    boxes._assert_has_ops = ops_present


def import_timm():
    import_torchvision()
    import timm

    return timm
