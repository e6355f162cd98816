"""Importing a user's Python file (model.py, dataloader.py, metrics.py) the one way every tool does it: by path,
under a name derived from the file's content, with its folder importable while it loads (the seed's files import
their neighbours), and any failure turned into one line that names the file, the error and where in it.
Below `sources` (model.py) and `data` (dataloader.py), which both import user files, so neither imports the other
for it."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from .watchdog import user_stage


def first_line(err: BaseException) -> str:
    """`Type: first line of the message (file:line)`, the deepest frame being where in the user's file it broke."""
    text = (str(err).strip().splitlines() or [""])[0][:200]
    tb, where = err.__traceback__, ""
    while tb is not None:
        where = f" ({Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno})"
        tb = tb.tb_next
    return f"{type(err).__name__}: {text}{where}" if text else f"{type(err).__name__}{where}"


def import_file(path: str | Path, what: str, error: type[Exception], hint: str = "") -> ModuleType:
    """Import `path` as a module; a missing file, a non-Python file or an import failure raises `error`."""
    from .compat import prepare_user_imports
    from .results.identity import file_digest

    path = Path(path)
    if not path.is_file():
        raise error(f"{what} {path} does not exist")
    name = f"_dt_user_{what.replace(' ', '_')}_{file_digest(path)[:12]}"
    if name in sys.modules:  # the same content was imported already: one module object per file content
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise error(f"{what} {path} is not a Python file" + (f"; {hint}" if hint else ""))
    prepare_user_imports()
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling in the user's file look their module up here
    folder = str(path.parent.resolve())
    sys.path.insert(0, folder)
    try:
        with user_stage(f"importing {path.name}"):
            spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - a user's file may raise anything while importing
        sys.modules.pop(name, None)
        raise error(f"{what} {path} failed to import: {first_line(err)}") from err
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    return module
