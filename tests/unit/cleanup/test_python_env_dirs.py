"""The Python backend's /tmp/python_env_* folders that killed servers leave: removed only when no tritonserver is alive,
only when empty, only when older than the scan, and never another program's folders."""
import os
import time
from pathlib import Path

from deployment_toolkit.cleanup import RECENT_S, sweep_python_env_dirs, tritonserver_running


def _proc(root: Path, processes: dict[int, tuple[str, str]]) -> Path:
    """A /proc with `pid -> (comm, state)` entries, as the kernel writes their stat lines."""
    for pid, (comm, state) in processes.items():
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "stat").write_text(f"{pid} ({comm}) {state} 1 {pid} {pid} 0 -1 4194560\n")
    (root / "self").mkdir(parents=True, exist_ok=True)
    return root


def _aged(path: Path, seconds: float) -> Path:
    t = time.time() - seconds
    os.utime(path, (t, t))
    return path


def _tmp(root: Path) -> dict[str, Path]:
    root.mkdir()
    old_empty = _aged(_mk(root / "python_env_Ab12Cd"), 60)
    full = root / "python_env_Ef34Gh"
    full.mkdir()
    (full / "lib").write_text("an environment a server extracted")
    _aged(full, 60)
    young = _mk(root / "python_env_Ij56Kl")  # made just now: maybe a server that is starting as we look
    other = _aged(_mk(root / "pyenv_cache"), 60)
    return {"old_empty": old_empty, "full": full, "young": young, "other": other}


def _mk(path: Path) -> Path:
    path.mkdir()
    return path


def test_with_no_server_alive_only_old_empty_folders_go(tmp_path):
    folders = _tmp(tmp_path / "tmp")
    proc = _proc(tmp_path / "proc", {10: ("python3", "S"), 11: ("perf_analyzer", "S"), 12: ("tritonserver", "Z")})
    assert tritonserver_running(proc) is False  # a zombie tritonserver holds nothing
    assert sweep_python_env_dirs(tmp_path / "tmp", proc) == ["python_env_Ab12Cd"]
    assert not folders["old_empty"].exists()
    assert folders["full"].is_dir() and folders["young"].is_dir() and folders["other"].is_dir()


def test_a_live_tritonserver_keeps_every_folder(tmp_path):
    folders = _tmp(tmp_path / "tmp")
    proc = _proc(tmp_path / "proc", {10: ("python3", "S"), 20: ("tritonserver", "S")})
    assert tritonserver_running(proc) is True
    assert sweep_python_env_dirs(tmp_path / "tmp", proc) == []
    assert all(p.exists() for p in folders.values())


def test_without_proc_nothing_is_touched(tmp_path):
    folders = _tmp(tmp_path / "tmp")
    assert tritonserver_running(tmp_path / "no-proc") is None
    assert sweep_python_env_dirs(tmp_path / "tmp", tmp_path / "no-proc") == []
    assert all(p.exists() for p in folders.values())


def test_a_folder_just_under_the_recent_limit_stays(tmp_path):
    root = tmp_path / "tmp"
    root.mkdir()
    near = _aged(_mk(root / "python_env_Mn78Op"), RECENT_S / 2)
    assert sweep_python_env_dirs(root, _proc(tmp_path / "proc", {})) == [] and near.is_dir()
