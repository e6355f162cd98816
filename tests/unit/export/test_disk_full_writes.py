"""Issue 38: writes that fail, fail in one line. A full disk during a TorchScript save aborted the process (rc 134,
nothing on the console, torch's C++ error only in export.log) and left a 1 MB `.model.pt.<pid>.tmp`. Every artifact
write goes through the atomic writer with the free space checked first (the weights' bytes, then the archive's exact
size) and a full disk met while writing caught: one line (exit 2) naming the path and the space needed and free, no
temporary file left. Cheaply with the free-space probe monkeypatched; for real on a 1 MiB tmpfs (root only)."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deployment_toolkit import cli, spec
from deployment_toolkit.errors import UserError
from deployment_toolkit.export.files import write_replacing
from deployment_toolkit.export.torchscript import export_torchscript, weight_bytes
from deployment_toolkit.spec import NoSpaceError, atomic_write, atomic_write_text

pytestmark = pytest.mark.slow  # real exports or subprocesses: `make test` runs it, `make test-unit` does not

ROOT = Path(__file__).resolve().parents[3]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def linear(width: int):
    import torch

    return torch.nn.Linear(width, width).eval(), (torch.zeros(1, width),)


def test_a_write_the_free_space_cannot_hold_is_refused_before_it_starts(tmp_path, monkeypatch):
    monkeypatch.setattr(spec, "free_bytes", lambda folder: 1000)
    target = tmp_path / "data.bin"
    target.write_bytes(b"old")
    written = []
    with pytest.raises(NoSpaceError) as err:
        atomic_write(target, written.append, size=5000)
    assert str(err.value) == (f"no space left to write {target}: it needs 5 KiB, 1000 bytes free there; nothing was "
                              "left half-written: make room or write to another folder, then run the same command "
                              "again")
    assert not written and target.read_bytes() == b"old" and leftovers(tmp_path) == []
    assert isinstance(err.value, UserError) and err.value.errno == errno.ENOSPC  # still an OSError to its callers


def test_a_disk_that_fills_while_writing_is_one_line_and_leaves_no_temp_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(spec, "free_bytes", lambda folder: 0)

    def fills(fh):
        fh.write(b"x" * 3000)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(SystemExit) as code:
        cli.run(lambda: atomic_write(tmp_path / "shard.npz", fills))
    assert code.value.code == 2
    said = capsys.readouterr().err
    assert said == (f"error: no space left to write {tmp_path / 'shard.npz'}: the disk filled after 3 KiB of it, "
                    "0 bytes free there; nothing was left half-written: make room or write to another folder, "
                    "then run the same command again\n")
    assert list(tmp_path.iterdir()) == []


def test_other_write_errors_are_not_taken_for_a_full_disk(tmp_path):
    def fails(fh):
        raise OSError(errno.EIO, "I/O error")

    with pytest.raises(OSError) as err:
        atomic_write(tmp_path / "f", fails)
    assert not isinstance(err.value, NoSpaceError) and list(tmp_path.iterdir()) == []


def test_a_torchscript_save_checks_the_weights_against_the_free_space(tmp_path, monkeypatch):
    model, args = linear(64)
    monkeypatch.setattr(spec, "free_bytes", lambda folder: 4096)
    with pytest.raises(NoSpaceError, match=f"no space left to write {tmp_path / 'model.pt'}: it needs 16 KiB, "
                                           "4 KiB free there"):
        export_torchscript(model, args, tmp_path / "model.pt", mode="trace")
    assert list(tmp_path.iterdir()) == []
    assert weight_bytes(model) == (64 * 64 + 64) * 4


def test_a_torchscript_save_with_room_writes_a_loadable_module(tmp_path):
    import torch

    model, args = linear(8)
    export_torchscript(model, args, tmp_path / "model.pt", mode="trace")
    loaded = torch.jit.load(str(tmp_path / "model.pt"))
    assert torch.equal(loaded(*args), model(*args)) and leftovers(tmp_path) == []


def test_a_copy_through_write_replacing_that_fills_the_disk_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(spec, "free_bytes", lambda folder: 10)
    (tmp_path / "model.plan").write_bytes(b"old engine")

    def fills(tmp: Path) -> None:
        tmp.write_bytes(b"y" * 2048)
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))

    with pytest.raises(NoSpaceError, match="the disk filled after 2 KiB of it, 10 bytes free there"):
        write_replacing(tmp_path / "model.plan", fills)
    assert (tmp_path / "model.plan").read_bytes() == b"old engine" and leftovers(tmp_path) == []
    with pytest.raises(NoSpaceError, match="it needs 2 KiB, 10 bytes free"):
        write_replacing(tmp_path / "model.plan", fills, size=2048)


# ---- for real: a filesystem of 1 MiB ------------------------------------------------------------------------------

@pytest.fixture()
def tiny_fs(tmp_path):
    """A 1 MiB tmpfs; skipped with the reason where mounting is not permitted (not root, no CAP_SYS_ADMIN)."""
    mount = tmp_path / "fs"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a 1 MiB tmpfs for a real full disk needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if done.returncode:
        pytest.skip(f"mounting a tmpfs is not permitted here: {done.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_convert_to_torchscript_on_a_full_disk_says_one_line(tiny_fs):
    """The issue's case: before, rc 134 with nothing on the console and `.model.pt.<pid>.tmp` left behind."""
    out = tiny_fs / "ts"
    done = subprocess.run([sys.executable, "triton/convert_model.py", "--model", "resnet18", "--preset", "small",
                           "--output-type", "ts-trace", "--output-path", str(out), "--no-verify"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert errors[0].startswith(f"error: no space left to write {out / 'model.pt'}: it needs 44.")
    assert " MiB, " in errors[0] and "KiB free there" in errors[0]
    assert leftovers(out) == [] and not (out / "model.pt").exists()


def test_a_save_that_passes_the_check_and_meets_the_full_disk_is_caught(tiny_fs, monkeypatch):
    """The probe says there is room (another writer may fill the disk meanwhile): the real ENOSPC is caught."""
    monkeypatch.setattr(spec, "free_bytes", lambda folder: 2**40)
    model, args = linear(1024)  # 4 MiB of weights on a 1 MiB filesystem
    with pytest.raises(NoSpaceError, match=f"no space left to write {tiny_fs / 'model.pt'}: it needs 4.0 MiB"):
        export_torchscript(model, args, tiny_fs / "model.pt", mode="trace")
    assert list(tiny_fs.iterdir()) == []
    atomic_write_text(tiny_fs / "config.pbtxt", "name: 'm'\n")  # the space came back: nothing was kept
    assert (tiny_fs / "config.pbtxt").read_text() == "name: 'm'\n"


def test_convert_to_onnx_on_a_full_disk_says_one_line(tiny_fs):
    """torch.onnx's own write meets the full disk inside the exporter (an OSError wrapped in its errors): one line,
    not one per exporter each filling the disk again, and nothing left."""
    out = tiny_fs / "onnx"
    done = subprocess.run([sys.executable, "triton/convert_model.py", "--model", "resnet18", "--preset", "small",
                           "--output-type", "onnx", "--output-path", str(out), "--no-verify"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(f"error: no space left to write {out}: the disk filled"), errors
    assert not (out / "model.onnx").exists() and leftovers(out) == []


def test_a_full_disk_anywhere_in_an_exporters_error_chain_is_found(tmp_path):
    from deployment_toolkit.export.attempts import disk_full
    from deployment_toolkit.export.errors import ConversionError

    try:
        try:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError as inner:
            raise ConversionError("ONNX export failed: OSError: [Errno 28]") from inner
    except ConversionError as err:
        found = disk_full(err, tmp_path)
    assert isinstance(found, NoSpaceError) and str(tmp_path) in str(found) and "filled while it was written" in str(found)
    assert disk_full(ConversionError("unsupported operator"), tmp_path) is None
