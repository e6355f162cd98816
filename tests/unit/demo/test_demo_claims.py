"""Two `make demo` at once in one clone (issue 38 item 4): each claims its own run folder, and the second works in a
workspace and model repository of its own instead of overwriting the first's while it measures them."""
from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from deployment_toolkit.demo import Workplace, claim_new_run_dir

ROOT = Path(__file__).resolve().parents[3]


def test_run_folders_started_in_the_same_second_are_distinct(tmp_path):
    base = tmp_path / "local" / "demo-resnet18-onnx-20261127T000000Z"
    got: list[Path] = []
    start = threading.Barrier(8)

    def claim() -> None:
        start.wait()
        got.append(claim_new_run_dir(base))

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 8 and base in got and base.with_name(base.name + "-8") in got
    assert all(p.is_dir() and not any(p.iterdir()) for p in got)


def test_a_second_demo_gets_a_workspace_and_repository_of_its_own(tmp_path):
    code = ("import sys, time; from pathlib import Path; from deployment_toolkit.demo import Workplace; "
            "w = Workplace(Path(sys.argv[1]), Path(sys.argv[2]), 'first'); print(w.shared, flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "ws"), str(tmp_path / "repo")],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert holder.stdout.readline().strip() == "False"  # the first takes the shared pair
        second = Workplace(tmp_path / "ws", tmp_path / "repo", "demo-2")
        assert second.shared and second.workspace == tmp_path / "ws" / "demo-2"
        assert second.repository == tmp_path / "ws" / "demo-2" / "model_repository"
        second.release()
    finally:
        holder.kill()
        holder.wait()
    third = Workplace(tmp_path / "ws", tmp_path / "repo", "demo-3")  # the first is gone: the shared pair is free
    assert not third.shared and third.workspace == tmp_path / "ws"
    third.release()
