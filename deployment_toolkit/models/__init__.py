"""The model zoo. `get_model(name)` returns a registry entry; families register on import.

The lookups live here, not in registry.py: they import the family modules, which import the registry, so the
registry imports no family (no import cycle)."""
from __future__ import annotations

import difflib

from .registry import _REGISTRY, ModelEntry, Preset, UnknownModelError, register_model


def _load_families() -> None:
    # Importing a family module runs its register_model calls.
    from . import classification  # noqa: F401

    for optional in ("geospatial", "segmentation", "diffusion"):
        try:
            __import__(f"{__package__}.{optional}")
        except ModuleNotFoundError as err:
            if err.name != f"{__package__}.{optional}":
                raise


# The names the families that import torch at import register (geospatial, diffusion): a name is checked against
# them without importing torch (a deployment file is checked on read, in seconds); tests/unit/export/test_zoo.py
# holds them equal to what those modules register.
HEAVY_FAMILY_NAMES = {"geospatial": ("dofa_vit", "s2_resnet50", "s2_vit_small"), "diffusion": ("sd_unet",)}


def zoo_names() -> tuple[str, ...]:
    """Every zoo name, importing only the families that do not import torch (the others' names are declared)."""
    from . import classification, segmentation  # noqa: F401  (cheap: their builders import torch when called)

    return tuple(sorted(set(_REGISTRY) | {n for names in HEAVY_FAMILY_NAMES.values() for n in names}))


def check_zoo_name(name: str) -> None:
    """UnknownModelError (with the closest names) unless `name` is a zoo name; no torch import."""
    names = zoo_names()
    if name not in names:
        raise _unknown(name, names)


def _unknown(name: str, names: "list[str] | tuple[str, ...]") -> UnknownModelError:
    """The one message for a name the zoo does not have: the closest names, then every name."""
    close = difflib.get_close_matches(name, names, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    return UnknownModelError(f"unknown model {name!r}.{hint} Registered models: {', '.join(sorted(names))}")


def get_model(name: str) -> ModelEntry:
    _load_families()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise _unknown(name, list(_REGISTRY)) from None


def list_models(family: str | None = None) -> list[ModelEntry]:
    _load_families()
    return [e for e in sorted(_REGISTRY.values(), key=lambda e: (e.family, e.name)) if family in (None, e.family)]


__all__ = ["HEAVY_FAMILY_NAMES", "ModelEntry", "Preset", "UnknownModelError", "check_zoo_name", "get_model",
           "list_models", "register_model", "zoo_names"]
