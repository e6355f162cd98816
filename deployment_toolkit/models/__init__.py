"""The model zoo. `get_model(name)` returns a registry entry; families register on import."""
from .registry import ModelEntry, Preset, UnknownModelError, get_model, list_models, register_model

__all__ = ["ModelEntry", "Preset", "UnknownModelError", "get_model", "list_models", "register_model"]
