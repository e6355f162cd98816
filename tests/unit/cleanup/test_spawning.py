"""Children are started without a preexec_fn, and still die with the process that started them.

A preexec_fn makes Popen fork() instead of vfork(), which runs every fork handler of the process; in a process
that has tritonclient's gRPC loaded (the tools, and pytest itself) that fork once deadlocked in the parent, inside
`_fork_exec`, where no timeout can reach: a full test run sat there until it was killed.
`cleanup.dying_with_parent` does the same job from a launcher that execs the program."""
from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import wait_until

from deployment_toolkit.cleanup import dying_with_parent

ROOT = Path(__file__).resolve().parents[3]


def test_nothing_spawns_with_a_preexec_fn():
    offenders = []
    for folder in ("deployment_toolkit", "triton", "tests", "examples", "scripts", "deployment_toolkit_lab",
                   "tests_lab"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.keyword) and node.arg == "preexec_fn":
                    offenders.append(f"{path.relative_to(ROOT)}:{node.value.lineno}")
    assert offenders == [], f"preexec_fn makes Popen fork with every fork handler (use dying_with_parent): {offenders}"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_launched_program_is_the_child_and_dies_with_its_parent(tmp_path):
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time\n"
                               "from deployment_toolkit.cleanup import dying_with_parent\n"
                               "child = subprocess.Popen(dying_with_parent(['sleep', '60']))\n"
                               "print(child.pid, flush=True)\n"
                               "time.sleep(60)\n"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        wait_until(lambda: os.path.basename(Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0]) == b"sleep",
                   10, "the launcher never exec'd the program")
        parent.send_signal(signal.SIGKILL)  # no handler runs: only the kernel can take the child along
        parent.wait(timeout=10)
        wait_until(lambda: not _alive(child), 10, "the child outlived its SIGKILLed parent")
    finally:
        parent.kill()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # reaped by init soon; a zombie is dead


def test_a_missing_program_is_still_file_not_found():
    with pytest.raises(FileNotFoundError):
        dying_with_parent(["no-such-program-here"])
    assert dying_with_parent([]) == []


def test_signals_blocked_in_the_parent_are_unblocked_in_the_child():
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        out = subprocess.run(dying_with_parent(["grep", "SigBlk", "/proc/self/status"]), capture_output=True,
                             text=True, timeout=30).stdout
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    assert int(out.split()[1], 16) == 0, out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_can_be_told_to_stop_its_own_way_when_its_parent_dies(tmp_path):
    """perf_analyzer stops cleanly on SIGINT (its in-flight requests finish, its regions are unregistered): it is
    given that signal, not SIGKILL, when the sweep that started it is killed."""
    said = tmp_path / "said"
    child_code = (f"import signal, sys, time\n"
                  f"signal.signal(signal.SIGINT, lambda *a: (open({str(said)!r}, 'w').write('SIGINT'), sys.exit(0)))\n"
                  f"print('ready', flush=True)\n"
                  f"time.sleep(60)\n")
    parent = subprocess.Popen(
        [sys.executable, "-c", "import signal, subprocess, sys, time\n"
                               "from deployment_toolkit.cleanup import dying_with_parent\n"
                               f"child = subprocess.Popen(dying_with_parent([sys.executable, '-c', {child_code!r}],\n"
                               "                          death_signal=signal.SIGINT))\n"
                               "time.sleep(60)\n"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        wait_until(lambda: said.exists() and said.read_text() == "SIGINT", 10, "the child never got SIGINT")
    finally:
        parent.kill()
