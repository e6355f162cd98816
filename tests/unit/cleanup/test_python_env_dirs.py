"""The Python backend's /tmp/python_env_* folders that killed servers leave: removed only when no live tritonserver
can own them (older than every live one, or none alive), only when empty, only when older than the scan, and never
another program's folders."""
import os
import time
from pathlib import Path

from deployment_toolkit.cleanup import RECENT_S, sweep_python_env_dirs, tritonserver_start_times

TICKS = os.sysconf("SC_CLK_TCK")
BOOT = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)  # what the kernel counts start times from


def _proc(root: Path, processes: dict[int, tuple[str, str, float]]) -> Path:
    """A /proc with `pid -> (comm, state, started seconds ago)` entries, as the kernel writes their stat lines."""
    root.mkdir(parents=True)
    for pid, (comm, state, ago) in processes.items():
        start = round((time.time() - ago - BOOT) * TICKS)
        fields = [state, "1", str(pid), str(pid), "0", "-1", "4194560"] + ["0"] * 12 + [str(start), "1000", "10"]
        (root / str(pid)).mkdir()
        (root / str(pid) / "stat").write_text(f"{pid} ({comm}) {' '.join(fields)}\n")
    return root


def _aged(path: Path, seconds: float) -> Path:
    path.mkdir()
    t = time.time() - seconds
    os.utime(path, (t, t))
    return path


def _tmp(root: Path) -> dict[str, Path]:
    root.mkdir()
    full = root / "python_env_Ef34Gh"
    full.mkdir()
    (full / "lib").write_text("an environment a server extracted")
    t = time.time() - 600
    os.utime(full, (t, t))
    return {"before_all": _aged(root / "python_env_Ab12Cd", 600),  # older than any server alive below
            "during": _aged(root / "python_env_Qr90St", 60),  # made while the 300-s-old server below ran
            "full": full,
            "young": _aged(root / "python_env_Ij56Kl", 0),  # made just now: maybe a server starting as we look
            "other": _aged(root / "pyenv_cache", 600)}


def test_with_no_server_alive_every_old_empty_folder_goes(tmp_path):
    folders = _tmp(tmp_path / "tmp")
    proc = _proc(tmp_path / "proc", {10: ("python3", "S", 50), 11: ("perf_analyzer", "S", 5),
                                     12: ("tritonserver", "Z", 5)})
    assert tritonserver_start_times(proc) == []  # a zombie tritonserver holds nothing
    assert sorted(sweep_python_env_dirs(tmp_path / "tmp", proc)) == ["python_env_Ab12Cd", "python_env_Qr90St"]
    assert folders["full"].is_dir() and folders["young"].is_dir() and folders["other"].is_dir()


def test_a_live_server_keeps_the_folders_made_since_it_started(tmp_path):
    """A live server's folder is made after it started: only folders older than every live server are orphans."""
    folders = _tmp(tmp_path / "tmp")
    proc = _proc(tmp_path / "proc", {10: ("python3", "S", 50), 20: ("tritonserver", "S", 300)})
    (start,) = tritonserver_start_times(proc)
    assert abs(start - (time.time() - 300)) < 2
    assert sweep_python_env_dirs(tmp_path / "tmp", proc) == ["python_env_Ab12Cd"]
    assert folders["during"].is_dir() and folders["full"].is_dir() and folders["young"].is_dir()


def test_without_proc_nothing_is_touched(tmp_path):
    folders = _tmp(tmp_path / "tmp")
    assert tritonserver_start_times(tmp_path / "no-proc") is None
    assert sweep_python_env_dirs(tmp_path / "tmp", tmp_path / "no-proc") == []
    assert all(p.exists() for p in folders.values())


def test_a_folder_just_under_the_recent_limit_stays(tmp_path):
    root = tmp_path / "tmp"
    root.mkdir()
    near = _aged(root / "python_env_Mn78Op", RECENT_S / 2)
    assert sweep_python_env_dirs(root, _proc(tmp_path / "proc", {})) == [] and near.is_dir()


def test_the_start_times_of_this_hosts_processes_are_read():
    """On the real /proc: the parser reads field 22 as the kernel writes it (this process is no tritonserver)."""
    starts = tritonserver_start_times()
    assert starts is not None and all(t <= time.time() for t in starts)
