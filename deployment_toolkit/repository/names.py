"""Model names are names, never paths.

A model name becomes a folder of the repository (`<repository>/<name>/`) and a URL segment
(`/v2/models/<name>`): `--model-name /tmp/x/victim` or `../evil` once made the tool write (and delete)
outside the repository. Every place where a name meets the filesystem checks it here first.
"""
from __future__ import annotations

import re

from .config import ConfigError

_FORBIDDEN = ("/", "\\", "\0")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
# A folder name longer than this (bytes) is refused by Linux filesystems (NAME_MAX); the staging folders the
# repository writes beside the model add a prefix and a suffix, hence the margin.
MAX_NAME_BYTES = 200


class ModelNameError(ConfigError):
    """A model name Triton would not find in a repository folder (exit code 2, like every bad input)."""


def check_model_name(name: str, what: str = "--model-name") -> str:
    """Return `name` if it can be a repository folder; raise ModelNameError saying why not."""
    if not isinstance(name, str) or not name.strip():
        raise ModelNameError(f"{what} is empty: give the model a name, e.g. resnet50")
    bad = [c for c in _FORBIDDEN if c in name]
    if bad or name in (".", "..") or name != name.strip() or any(ord(c) < 32 for c in name):
        why = ("contains a path separator" if bad else
               "is '.' or '..'" if name in (".", "..") else "has surrounding spaces or control characters")
        raise ModelNameError(
            f"{what} {name!r} {why}: a model name is one folder name inside the model repository "
            "(letters, digits, '_', '-', '.'; no '/', no '..'), e.g. resnet50"
            + ("; choose the repository with --model-repository" if what.startswith("--") else ""))
    if not name.isascii():
        raise ModelNameError(
            f"{what} {name!r} has non-ASCII characters: Triton's Python backend, which serves models on this host, "
            "cannot open a model folder with such a name (it encodes the path as ASCII); use ASCII letters, digits, "
            "'_', '-' and '.'")
    if not _NAME.fullmatch(name):
        bad = sorted({c for c in name if not (c.isalnum() or c in "_-.")})
        why = f"has {', '.join(repr(c) for c in bad)}" if bad else f"starts with {name[0]!r}"
        raise ModelNameError(
            f"{what} {name!r} {why}: a model name is letters, digits, '_', '-' and '.', starting with a letter, a "
            "digit or '_' (it becomes a folder, a URL segment and part of Kubernetes names), e.g. resnet50")
    if len(name.encode()) > MAX_NAME_BYTES:
        raise ModelNameError(f"{what} is {len(name.encode())} bytes long; a model name becomes a folder name, and "
                             f"the filesystem allows {MAX_NAME_BYTES} here: shorten it")
    return name
