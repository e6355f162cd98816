"""A plan made beside a neighbour (issue 54): `deployment-toolkit plan --deployment FILE` run as a user runs it,
while this command busy-loops one core at the given minutes (a process that is not the plan's: to the plan it is a
neighbour, as another job on a shared CI runner or notebook host is). Prints how the plan ended (exit code, time, the
replicas, the models left out), how many of its measuring windows the neighbour disturbed and how many were measured
again, per step, and writes neighbour.md and run.json to --result-path. A benchmark: it reports; it does not pass or
fail.

The plan's flags after `--` go to `deployment-toolkit plan` as given (the deployment's, the search's, the
confirmation's); --result-path and --workspace are set here."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from deployment_toolkit import cli
from deployment_toolkit.errors import UserInputError
from deployment_toolkit.results.run_folder import add_result_path_argument

BUSY = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"
EXAMPLE = """
    deployment-toolkit-lab bench-neighbour --deployment examples/fleet/three.yaml --neighbour-at 1,4 \\
        --neighbour-s 40 --result-path results/local/neighbour -- --preset small --formats onnx --max-minutes 1
"""


def _neighbours(starts_s: list[float], seconds: float, t0: float, stop: threading.Event, log: list[dict]) -> None:
    """Busy-loop one core for `seconds` at each start (seconds after t0), until `stop`."""
    for start in starts_s:
        if stop.wait(max(0.0, t0 + start - time.monotonic())):
            return
        proc = subprocess.Popen([sys.executable, "-c", BUSY.format(s=seconds)])
        log.append({"start_s": round(time.monotonic() - t0, 1), "seconds": seconds, "pid": proc.pid})
        print(f"neighbour: busy-looping one core for {seconds:g} s (pid {proc.pid}) at {start / 60:g} min",
              flush=True)
        while proc.poll() is None:
            if stop.wait(0.5):
                proc.kill()
                proc.wait()
                return


def _parse(argv: list[str] | None):
    p = cli.parser(__doc__, EXAMPLE)
    p.add_argument("--deployment", required=True, metavar="FILE", help="the deployment file to plan")
    p.add_argument("--neighbour-at", default="4,9", metavar="MIN,MIN",
                   help="minutes after the plan starts at which the neighbour starts (default 4,9)")
    p.add_argument("--neighbour-s", type=float, default=40.0, metavar="S",
                   help="how long each neighbour busy-loops one core (default 40)")
    p.add_argument("--workspace", default=None, help="the plan's workspace (default workspace/neighbour-<name>)")
    add_result_path_argument(p, help="default: results/local/neighbour-<UTC time>")
    args, plan_flags = p.parse_known_args(argv)
    if plan_flags and plan_flags[0] == "--":
        plan_flags = plan_flags[1:]
    try:
        starts = [float(x) * 60 for x in args.neighbour_at.split(",") if x.strip()]
    except ValueError:
        raise UserInputError(f"--neighbour-at {args.neighbour_at!r}: give minutes separated by commas, e.g. 4,9") \
            from None
    if not starts or any(s < 0 for s in starts) or args.neighbour_s <= 0:
        raise UserInputError("--neighbour-at needs minutes >= 0 and --neighbour-s a time > 0 s")
    own = [f for f in plan_flags if f.split("=")[0] in ("--result-path", "--workspace", "--deployment")]
    if own:
        raise UserInputError(f"{', '.join(own)}: set by bench-neighbour itself; drop them after --")
    return args, plan_flags, starts


def _summary(plan_dir: Path) -> dict:
    try:
        config = json.loads((plan_dir / "run.json").read_text()).get("config") or {}
    except (OSError, ValueError):
        return {}
    return {k: config.get(k) for k in ("replicas", "confirmed", "unplanned", "windows", "cost_h")}


def _markdown(record: dict) -> str:
    from deployment_toolkit.tables import markdown_table

    plan = record["plan"]
    windows = plan.get("windows") or {}
    rows = [[step, w["measured"], w["disturbed"], w["measured_again"]] for step, w in windows.items()]
    total = [sum(w[k] for w in windows.values()) for k in ("measured", "disturbed", "measured_again")]
    md = ["# A plan beside a neighbour", "", f"Command: `{record['command']}`", "",
          f"The plan exited **{record['exit_code']}** after **{record['seconds'] / 60:.1f} min**; "
          f"{plan.get('replicas')} replica(s), confirmed: {plan.get('confirmed')}; left out: "
          f"{', '.join(plan.get('unplanned') or {}) or 'none'}.", "",
          "Neighbours (one core busy-looped each): " + ", ".join(
              f"at {n['start_s'] / 60:.1f} min for {n['seconds']:g} s" for n in record["neighbours"]) + ".", "",
          f"Measuring windows: {total[0]} measured, **{total[1]} disturbed**, {total[2]} measured again.", ""]
    if rows:
        md += [markdown_table(["step", "windows", "disturbed", "measured again"], rows, "lrrr"), ""]
    return "\n".join(md)


def main(argv: list[str] | None = None) -> int:
    from deployment_toolkit.committed import refuse_committed
    from deployment_toolkit.results.run_folder import RunFolder
    from deployment_toolkit.spec import atomic_write_text

    args, plan_flags, starts = _parse(argv)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = Path(args.result_path or f"results/local/neighbour-{stamp}")
    refuse_committed(out, "--result-path")
    workspace = Path(args.workspace or f"workspace/neighbour-{Path(args.deployment).stem}")
    command = [sys.executable, "-m", "deployment_toolkit", "plan", "--deployment", args.deployment, *plan_flags,
               "--result-path", str(out / "plan"), "--workspace", str(workspace)]
    env = {**os.environ, "DEPLOYMENT_TOOLKIT_NEIGHBOURS": "remeasure"}  # as users run it
    stop, log = threading.Event(), []
    t0 = time.monotonic()
    thread = threading.Thread(target=_neighbours, args=(starts, args.neighbour_s, t0, stop, log), daemon=True)
    thread.start()
    try:
        code = subprocess.run(command, env=env).returncode
    finally:
        stop.set()
        thread.join()
    record = {"command": " ".join(["deployment-toolkit-lab", "bench-neighbour", *(argv or sys.argv[1:])]),
              "exit_code": code, "seconds": round(time.monotonic() - t0, 1), "neighbours": log,
              "plan": _summary(out / "plan")}
    atomic_write_text(out / "neighbour.md", _markdown(record))
    RunFolder(out).record({"kind": "bench-neighbour", **record})
    print("\n" + _markdown(record))
    return 0


if __name__ == "__main__":
    cli.run(main)
