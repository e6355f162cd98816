"""A user's pre- or post-processing file: imported through the toolkit's one importer of user files
(sources.userfile), its function, the tensors it declares (pipeline.ports) and the side files it names.

    # preprocess.py
    import io
    import numpy as np
    from PIL import Image

    INPUTS = {"image": "bytes"}                          # optional: else read from the raw samples
    OUTPUTS = {"input__0": ("float32", [3, 64, 64])}     # optional: else read by running preprocess on them
    FILES = ["labels.txt"]                               # optional: files beside it that it reads or imports

    def preprocess(image: np.ndarray) -> dict[str, np.ndarray]:
        ...

One file may hold both functions; `PREPROCESS_INPUTS` / `POSTPROCESS_OUTPUTS` (etc.) then tell them apart.
"""
from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ..config import Choice
from ..errors import UserInputError
from ..userfile import import_file
from .ports import Port, parse_ports
from .step_runtime import StepError, call_batch


class StepKind(Choice):
    """Which side of the model a step runs on; also the function's name in the user's file."""
    PREPROCESS = "preprocess"
    POSTPROCESS = "postprocess"


@dataclass(frozen=True)
class StepFile:
    kind: StepKind
    path: Path
    function: Callable[..., Any]
    parameters: tuple[str, ...]  # the parameters without a default: the inputs it needs
    takes_any: bool  # it has **kwargs
    declared_inputs: tuple[Port, ...] | None
    declared_outputs: tuple[Port, ...] | None
    files: tuple[str, ...] = ()  # side files, relative to the file's folder

    @property
    def name(self) -> str:
        return self.kind.value

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.declared_inputs) if self.declared_inputs else self.parameters

    def call(self, inputs: Mapping[str, np.ndarray], where: str = "") -> dict[str, np.ndarray]:
        """Run the function on one batch (the same call the server makes); a failure is one UserInputError line."""
        what = f"{self.name} ({self.path.name})" + (f" on {where}" if where else "")
        try:
            return call_batch(self.function, dict(inputs), what)
        except StepError as err:
            raise UserInputError(str(err)) from None


def _declared(module: Any, kind: StepKind, what: str) -> tuple[Port, ...] | None:
    for attr in (f"{kind.value.upper()}_{what}", what):
        if getattr(module, attr, None) is not None:
            return parse_ports(f"{Path(module.__file__).name}: {attr}", getattr(module, attr))
    return None


def _side_files(module: Any, path: Path) -> tuple[str, ...]:
    files = getattr(module, "FILES", None) or ()
    if isinstance(files, str) or not all(isinstance(f, str) for f in files):
        raise UserInputError(f"{path.name}: FILES must be a list of file names beside it, got {files!r}")
    for name in files:
        target = (path.parent / name).resolve()
        if Path(name).is_absolute() or ".." in Path(name).parts or not target.is_file():
            raise UserInputError(f"{path.name}: FILES names {name!r}, which is not a file beside it in "
                                 f"{path.parent}: list files relative to the step file's folder (no '..')")
        if name in ("model.py", "step_runtime.py", "user_step.py"):
            raise UserInputError(f"{path.name}: FILES names {name!r}, a name the generated model uses: rename it")
    return tuple(files)


def _check_neighbours(path: Path, files: tuple[str, ...], new_modules: dict[str, Any]) -> None:
    """Modules the file imported from its own folder must travel with it (FILES): in-process they import because
    the folder is importable while the file loads; beside the served step only the files copied there exist."""
    folder = path.parent.resolve()
    for name, module in new_modules.items():
        where = getattr(module, "__file__", None)
        if name.startswith("_dt_user_") or not where:
            continue
        file = Path(where).resolve()
        if file != path.resolve() and file.is_relative_to(folder):
            relative = str(file.relative_to(folder))
            if relative not in files:
                raise UserInputError(f"{path.name} imports {relative} from its folder, which FILES does not list: add "
                                     f"FILES = [{', '.join(repr(f) for f in (*files, relative))}] so it is copied "
                                     "beside the served step")


def _parameters(function: Callable[..., Any], path: Path, kind: StepKind) -> tuple[tuple[str, ...], bool]:
    params = inspect.signature(function).parameters.values()
    if any(p.kind == p.POSITIONAL_ONLY for p in params):
        raise UserInputError(f"{path.name}: {kind.value}() has positional-only parameters; it is called with one "
                             "keyword argument per input name: drop the '/'")
    names = tuple(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                  and p.default is p.empty)
    return names, any(p.kind == p.VAR_KEYWORD for p in params)


def load_step(path: str | Path, kind: StepKind | str) -> StepFile:
    """Import the file and read its function and declarations; anything missing or malformed is one line."""
    kind = StepKind(kind)
    path = Path(path)
    flag = f"--{kind.value}"
    before = set(sys.modules)
    module = import_file(path, f"{kind.value} file", UserInputError,
                         hint=f"{flag} takes a Python file defining {kind.value}(...)")
    new_modules = {n: sys.modules[n] for n in set(sys.modules) - before if n in sys.modules}
    try:
        files = _side_files(module, path)
        _check_neighbours(path, files, new_modules)
    except UserInputError:
        for name in new_modules:  # imported again, and checked again, once the file is fixed
            sys.modules.pop(name, None)
        raise
    function = getattr(module, kind.value, None)
    if not callable(function):
        raise UserInputError(f"{flag} {path} defines no function {kind.value}(...): add `def {kind.value}(name: "
                             "np.ndarray, ...) -> dict[str, np.ndarray]` (one argument per input, batch axis first)")
    parameters, takes_any = _parameters(function, path, kind)
    inputs, outputs = _declared(module, kind, "INPUTS"), _declared(module, kind, "OUTPUTS")
    if inputs is not None:
        names = {p.name for p in inputs}
        unknown = [n for n in names if n not in parameters and not takes_any and n not in _all_params(function)]
        if unknown:
            raise UserInputError(f"{path.name}: INPUTS declares {', '.join(map(repr, unknown))}, which "
                                 f"{kind.value}() does not take: its parameters are {', '.join(parameters) or 'none'}")
        undeclared = [n for n in parameters if n not in names]
        if undeclared:
            raise UserInputError(f"{path.name}: {kind.value}() takes {', '.join(map(repr, undeclared))}, which INPUTS "
                                 "does not declare: declare every input it takes")
    elif not parameters:
        raise UserInputError(f"{path.name}: {kind.value}() names no inputs (no parameters without a default): take "
                             "one parameter per input, or declare INPUTS")
    return StepFile(kind, path.resolve(), function, parameters, takes_any, inputs, outputs, files)


def _all_params(function: Callable[..., Any]) -> set[str]:
    return set(inspect.signature(function).parameters)


__all__ = ["StepFile", "StepKind", "load_step"]
