"""Files a user names in an input file (a deployment's `traffic:`, `model:`, `data:`, steps), looked at before they
are read: only a regular file (or a folder where a folder is meant), each under a stated size. A named pipe with no
writer blocks the reader forever, `/dev/zero` reads until memory runs out, a symlink loop raises deep in a library:
each is one line naming the key instead. Below every reader (imports only errors)."""
from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from .errors import UserFileNotFoundError, UserInputError

MIB = 1 << 20


class Expect(str, Enum):
    """What a key names: a file, a folder, or either (a data path: one .npz file or a folder of samples)."""

    FILE = "a file"
    FOLDER = "a folder"
    EITHER = "a file or a folder"


@dataclass(frozen=True)
class Limit:
    """The largest file a key takes, in bytes (None: no limit: a checkpoint or a model is as large as it is)."""

    bytes: int | None

    def text(self) -> str:
        return "no limit" if self.bytes is None else f"{self.bytes / MIB:g} MiB"


TEXT_LIMIT = Limit(64 * MIB)  # a deployment file, a traffic CSV, a Python step: text a person or a tool wrote
NO_LIMIT = Limit(None)


def _kind(mode: int) -> str:
    """What a non-regular path is, as a user would call it."""
    for test, name in ((stat.S_ISREG, "a file"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_path(path: str | Path, key: str, expect: Expect = Expect.FILE, limit: Limit = TEXT_LIMIT,
               hint: str = "") -> Path:
    """`path` if it is what `key` names (a regular file under `limit`, or a folder); else one line saying what it is
    instead and what to give (`hint`: where a relative path is read from). Symlinks are followed; a loop is named
    as one."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise UserFileNotFoundError(f"{key}: {path} does not exist{hint}") from None
    except OSError as err:
        why = "is a symlink loop" if err.errno == errno.ELOOP else f"cannot be read ({err.strerror})"
        raise UserInputError(f"{key}: {path} {why}: give {expect.value}") from None
    is_dir, is_file = stat.S_ISDIR(st.st_mode), stat.S_ISREG(st.st_mode)
    if (is_dir and expect is not Expect.FILE) or (is_file and expect is not Expect.FOLDER):
        if is_file and limit.bytes is not None and st.st_size > limit.bytes:
            raise UserInputError(f"{key}: {path} is {st.st_size / MIB:,.1f} MiB, over the {limit.text()} a file "
                                 f"here may be: give {expect.value} of what it names")
        if not os.access(path, os.R_OK | (os.X_OK if is_dir else 0)):
            raise UserInputError(f"{key}: {path} is not readable by this user: fix its permissions")
        return path
    raise UserInputError(f"{key}: {path} is {_kind(st.st_mode)}, not {expect.value}: give {expect.value}")


def read_text(path: str | Path, key: str, limit: Limit = TEXT_LIMIT, what: str = "text") -> str:
    """The text of a regular file under `limit` (UTF-8, a BOM dropped), checked first (check_path)."""
    path = check_path(path, key, Expect.FILE, limit)
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UserInputError(f"{key}: {path} is not UTF-8 text: give {what}") from None


__all__ = ["Expect", "Limit", "NO_LIMIT", "TEXT_LIMIT", "check_path", "read_text"]
