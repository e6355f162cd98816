"""Does an independent client agree with the planner (issue 54)? For each deployment: `deployment-toolkit plan` as a
user runs it, its plan's one model repository served by the embedded tritonserver, then `deployment-toolkit
check-plan` against that server (its own client, not the planner's perf_analyzer), several rounds per group. A
group-round *agrees* when check-plan's verdict in that round is the planner's for the group (its confirmation held,
or did not); a void round (the load generator too busy to say) is neither. Prints each group's rounds and the
agreement over all group-rounds against the target (9 in 10), and writes agreement.md and run.json to --result-path.
A benchmark: it reports; it does not pass or fail.

The plan's flags after `--` go to every `deployment-toolkit plan` as given; --result-path and --workspace are set
here. `--reuse` checks the plans already in --result-path (planned by an earlier run) without planning again."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from deployment_toolkit import cli
from deployment_toolkit.errors import UserInputError
from deployment_toolkit.results.run_folder import add_result_path_argument

TARGET = 0.9  # the share of group-rounds in which check-plan and the planner must agree (issue 54)
EXAMPLE = """
    deployment-toolkit-lab bench-check-plan --deployment examples/deployment/deployment.yaml \\
        --deployment deployment_toolkit_lab/versus/deployments/three-replicas.yaml --rounds 3 \\
        --result-path results/local/check-plan -- --preset small --formats onnx --max-minutes 1
"""


def _parse(argv: list[str] | None):
    p = cli.parser(__doc__, EXAMPLE)
    p.add_argument("--deployment", action="append", required=True, metavar="FILE",
                   help="a deployment file to plan and check; repeatable")
    p.add_argument("--rounds", type=int, default=3, help="check-plan's rounds per group (default 3)")
    p.add_argument("--window-s", type=float, default=5.0, help="check-plan's counted window per round (default 5)")
    p.add_argument("--reuse", action="store_true", help="check the plans already in --result-path; plan nothing")
    add_result_path_argument(p, help="default: results/local/check-plan-<UTC time>")
    args, plan_flags = p.parse_known_args(argv)
    if plan_flags and plan_flags[0] == "--":
        plan_flags = plan_flags[1:]
    own = [f for f in plan_flags if f.split("=")[0] in ("--result-path", "--workspace", "--deployment")]
    if own:
        raise UserInputError(f"{', '.join(own)}: set by bench-check-plan itself; drop them after --")
    if not 1 <= args.rounds <= 20 or not 0.5 <= args.window_s <= 600:
        raise UserInputError("--rounds takes 1..20 and --window-s 0.5..600 s")
    for path in args.deployment:
        if not Path(path).is_file():
            raise UserInputError(f"--deployment {path}: no such file")
    return args, plan_flags


def _samples(deployment: Path, into: Path) -> Path | None:
    """check-plan's --samples folder: each pipeline model's raw samples (its `raw_data:`) linked under its name."""
    from deployment_toolkit.deployment.file import load

    into.mkdir(parents=True, exist_ok=True)
    linked = False
    for entry in load(deployment).models:
        raw = entry.raw_data
        if raw:
            link = into / entry.name
            if not link.exists():
                link.symlink_to(Path(raw).resolve(), target_is_directory=True)
            linked = True
    return into if linked else None


def _plan(deployment: Path, plan_dir: Path, workspace: Path, flags: list[str]) -> dict[str, Any]:
    """`deployment-toolkit plan` as a user runs it; its exit code and time."""
    t0 = time.monotonic()
    command = [sys.executable, "-m", "deployment_toolkit", "plan", "--deployment", str(deployment), *flags,
               "--result-path", str(plan_dir), "--workspace", str(workspace)]
    env = {**os.environ, "DEPLOYMENT_TOOLKIT_NEIGHBOURS": os.environ.get("DEPLOYMENT_TOOLKIT_NEIGHBOURS", "remeasure")}
    code = subprocess.run(command, env=env).returncode
    return {"exit_code": code, "seconds": round(time.monotonic() - t0, 1)}


def _check(plan_dir: Path, repository: Path, samples: Path | None, args, out: Path) -> int:
    """The plan's repository on the embedded server, and check-plan against it from another process."""
    from deployment_toolkit.committed import is_allowed
    from deployment_toolkit.server.local import LocalTritonServer, ServerConfig

    with LocalTritonServer(ServerConfig(repository, log_dir=out / "server-logs")) as server:
        command = [sys.executable, "-m", "deployment_toolkit", "check-plan", str(plan_dir), "--url",
                   server.grpc_url, "--rounds", str(args.rounds), "--window-s", f"{args.window_s:g}",
                   "--result-path", str(out / "check"), *(["--samples", str(samples)] if samples else []),
                   *(["--update-committed"] if is_allowed() else [])]  # the committed check it regenerates
        return subprocess.run(command).returncode


def agreement(plan_dir: Path, check_dir: Path) -> list[dict[str, Any]]:
    """Per group: the planner's verdict (its confirmation passed) and check-plan's counted rounds."""
    config = json.loads((plan_dir / "run.json").read_text()).get("config") or {}
    planner = {tuple(c["models"]): bool(c["passed"]) for c in config.get("confirmations") or []}
    check = json.loads((check_dir / "check.json").read_text())
    rows = []
    for g in check["groups"]:
        last: dict[int, str] = {}
        for r in g["rounds"]:
            last[r["round"]] = r["verdict"]
        says = planner.get(tuple(g["models"]))
        verdicts = [last[i] for i in sorted(last)]
        judged = [v for v in verdicts if v != "void"]
        agree = None if says is None else sum((v == "holds") == says for v in judged)
        rows.append({"group": g["label"], "replicas": g["replicas"], "planner_holds": says, "rounds": verdicts,
                     "judged": len(judged), "agree": agree, "check_verdict": g["verdict"]})
    return rows


def _deployment(path: Path, args, flags: list[str], out: Path) -> dict[str, Any]:
    from deployment_toolkit.deployment.file import load

    name = load(path).name
    folder = out / name
    plan_dir, workspace = folder / "plan", Path("workspace") / f"check-plan-{name}"
    record: dict[str, Any] = {"deployment": str(path), "name": name}
    if not args.reuse:
        record["plan"] = _plan(path, plan_dir, workspace, flags)
    if not (plan_dir / "run.json").is_file():
        return {**record, "groups": [], "why": "no plan was written"}
    repository = workspace / "model_repository"
    record["check_exit_code"] = _check(plan_dir, repository, _samples(path, folder / "samples"), args, folder)
    if not (folder / "check" / "check.json").is_file():
        return {**record, "groups": [], "why": "check-plan wrote no check.json"}
    return {**record, "groups": agreement(plan_dir, folder / "check")}


def _markdown(record: dict[str, Any]) -> str:
    from deployment_toolkit.tables import markdown_table

    rows = [[d["name"], g["group"], g["replicas"], {True: "holds", False: "fails", None: "-"}[g["planner_holds"]],
             ", ".join(g["rounds"]), f"{g['agree']} of {g['judged']}" if g["agree"] is not None else "-"]
            for d in record["deployments"] for g in d["groups"]]
    agree, judged = record["agree"], record["judged"]
    share = agree / judged if judged else 0.0
    md = ["# check-plan against the planner", "", f"Command: `{record['command']}`", "",
          markdown_table(["deployment", "group", "replicas", "planner", "check-plan rounds", "agree"], rows,
                         "llrlll"), "",
          f"**Agreement: {agree} of {judged} group-rounds ({share:.0%}); target {TARGET:.0%}: "
          f"{'met' if judged and share >= TARGET else 'not met'}.**", ""]
    for d in record["deployments"]:
        plan = d.get("plan") or {}
        md.append(f"- {d['name']}: plan exit {plan.get('exit_code', 'reused')}"
                  + (f" in {plan['seconds'] / 60:.1f} min" if "seconds" in plan else "")
                  + f", check-plan exit {d.get('check_exit_code', '-')}" + (f" ({d['why']})" if d.get("why") else ""))
    return "\n".join(md + [""])


def main(argv: list[str] | None = None) -> int:
    from deployment_toolkit.committed import refuse_committed
    from deployment_toolkit.results.run_folder import RunFolder
    from deployment_toolkit.spec import atomic_write_text

    args, flags = _parse(argv)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = Path(args.result_path or f"results/local/check-plan-{stamp}")
    refuse_committed(out, "--result-path")
    t0 = time.monotonic()
    deployments = [_deployment(Path(p), args, flags, out) for p in args.deployment]
    groups = [g for d in deployments for g in d["groups"] if g["agree"] is not None]
    record = {"command": " ".join(["deployment-toolkit-lab", "bench-check-plan", *(argv or sys.argv[1:])]),
              "seconds": round(time.monotonic() - t0, 1), "rounds": args.rounds, "window_s": args.window_s,
              "target": TARGET, "deployments": deployments, "agree": sum(g["agree"] for g in groups),
              "judged": sum(g["judged"] for g in groups)}
    atomic_write_text(out / "agreement.md", _markdown(record))
    RunFolder(out).record({"kind": "bench-check-plan", **record})
    print("\n" + _markdown(record))
    return 0


if __name__ == "__main__":
    cli.run(main)
