"""Errors the user's environment causes are one line and exit 2 (issue 30): a full or read-only disk anywhere a
command writes, an ONNX file whose external weights are missing or truncated."""
import errno
import os
import subprocess
import sys

import pytest
import torch

from deployment_toolkit import cli
from deployment_toolkit.sources import SourceError, parse_reference, resolve


@pytest.mark.parametrize("code, text", [(errno.ENOSPC, "No space left on device"),
                                        (errno.EROFS, "Read-only file system")])
def test_a_full_or_read_only_disk_is_one_line_and_exit_2(capsys, code, text):
    def main():
        raise OSError(code, os.strerror(code), "/results/run/online.csv")

    with pytest.raises(SystemExit) as exited:
        cli.run(main)
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {text}: /results/run/online.csv; completed measurements and files are kept")
    assert "\n" not in err


def test_other_os_errors_stay_bugs_with_their_traceback():
    def main():
        raise OSError(errno.EBADF, "Bad file descriptor")

    with pytest.raises(OSError):
        cli.run(main)


@pytest.fixture()
def onnx_with_external_data(tmp_path):
    import onnx

    model = torch.nn.Linear(64, 32).eval()
    path = tmp_path / "model.onnx"
    torch.onnx.export(model, (torch.randn(1, 64),), str(path), input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "b"}, "y": {0: "b"}}, dynamo=False)
    proto = onnx.load(str(path))
    onnx.save(proto, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin",
              size_threshold=0)
    return path


def test_missing_external_weights_are_named(onnx_with_external_data):
    (onnx_with_external_data.parent / "w.bin").unlink()
    with pytest.raises(SourceError, match=r"keeps its weights in w.bin, which is not next to it .*at least \d+ bytes"):
        resolve(parse_reference(str(onnx_with_external_data)))


def test_truncated_external_weights_are_named_with_their_sizes(onnx_with_external_data):
    data = onnx_with_external_data.parent / "w.bin"
    data.write_bytes(data.read_bytes()[:100])
    with pytest.raises(SourceError, match=r"w.bin is truncated: 100 bytes, model.onnx needs at least \d+"):
        resolve(parse_reference(str(onnx_with_external_data)))


def test_a_reader_that_goes_away_is_not_an_error():
    """`deployment-toolkit-lab bench-corpus --list | head -1` once ended in a BrokenPipeError traceback: the same
    through a toolkit command (cli.run), whose output is never read (tests_lab checks bench-corpus itself)."""
    proc = subprocess.Popen([sys.executable, "-m", "deployment_toolkit", "models"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader is gone before the command writes (stdout to a pipe is flushed at exit)
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0 and "Traceback" not in err, err
