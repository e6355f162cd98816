"""Issue 54 (item 5): the jobs `plan --write-job` writes, run as a kubelet would run them, without a cluster (none
can be installed here: no kube-apiserver, kind or k3s from the registries; DESIGN.md, turn 7).

For each completion index of the search job, then for the gathering job: a private mount namespace (`unshare
--mount --propagation private`, root) in which every volumeMount of the container is realised at its mountPath as
the manifest says (a persistentVolumeClaim: the folder that claim holds, bind-mounted, read-only where the mount or
the claim says so; the memory emptyDir: a tmpfs of its sizeLimit), the container's env (JOB_COMPLETION_INDEX from
the completion-index annotation; the image's env is this machine's, with this virtualenv's bin first on PATH, where
the image's `deployment-toolkit` would be), its workingDir, and its command and args with `$(VAR)` expanded from
that env as the kubelet expands them. The inputs claim holds what the written README copies onto it (DIR/inputs);
the results claim is a folder of its own. Before any pod runs, the folder the deployment was written from is moved
away, so a path of the writing machine in a pod fails. The deployment names its models above its own folder
(`../models/edges.onnx`). Every index and the gathering exit 0, and the gathered plan names every model.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from deployment_toolkit.kube.manifests import quantity_value

pytestmark = [pytest.mark.integration, pytest.mark.long]  # --retests 0 --no-confirm: it judges no capacity, so it runs
# beside the other worker (make test's first phase; the e2e plans judge them)
BIN = Path(sys.executable).parent  # this virtualenv's bin: the image's deployment-toolkit
FAST = ["--preset", "small", "--formats", "onnx", "--max-minutes", "1", "--measurement-mode", "time_windows",
        "--measurement-interval", "500", "--stability-percentage", "100", "--max-trials", "3", "--max-attempts", "1",
        "--noise-repeats", "1", "--refine-steps", "0", "--max-concurrency", "4", "--max-configs", "1",
        "--capacity-trials", "1", "--capacity-resolution", "0.2", "--open-loop-window-ms", "500", "--retests", "0",
        "--no-confirm", "--no-progress"]  # the holds and the confirmation judge capacities: the e2e tests' part
_ENV_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
# what runs inside the namespace: mount each volume at its mountPath, then exec the container's command there
KUBELET = """
import json, os, subprocess, sys
pod = json.load(open(sys.argv[1]))
for m in pod["mounts"]:
    os.makedirs(m["target"], exist_ok=True)
    if m["tmpfs"]:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + m["tmpfs"], "tmpfs", m["target"]], check=True)
        continue
    subprocess.run(["mount", "--bind", m["source"], m["target"]], check=True)
    if m["read_only"]:
        subprocess.run(["mount", "-o", "remount,bind,ro", m["target"]], check=True)
os.chdir(pod["working_dir"])
os.execvpe(pod["argv"][0], pod["argv"], pod["env"])
"""


def _cannot_unshare() -> str | None:
    """Why the jobs cannot be run here as a kubelet would (None: they can)."""
    if os.geteuid() != 0:
        return "needs root: a private mount namespace (unshare --mount) and bind mounts at the pods' mount paths"
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "needs util-linux's unshare and mount"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"unshare --mount is not allowed here: {probe.stderr.strip()}"
    return None


def _onnx(path: Path, channels: int) -> None:
    """A small convolutional net (two 3x3 convolutions over a 64x64 image, about 2-4 ms an inference on one core):
    slow enough that its capacity is hundreds of inferences/s, not the thousands an element-wise op reaches, where
    perf_analyzer itself is what a loaded 2-core host runs out of."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    rng = np.random.default_rng(channels)
    weights = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.1, name)
               for name, shape in (("w1", (channels, 3, 3, 3)), ("w2", (channels, channels, 3, 3)))]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["g"]), helper.make_node("Flatten", ["g"], ["y"])]
    graph = helper.make_graph(nodes, path.stem, [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                 ["batch", 3, 64, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", channels])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    save(model, str(path))


def _deployment(src: Path) -> Path:
    """Two small ONNX models above the deployment file's folder."""
    _onnx(src / "models" / "edges.onnx", 16)
    _onnx(src / "models" / "texture.onnx", 32)
    (src / "dep").mkdir(parents=True)
    path = src / "dep" / "deployment.yaml"
    path.write_text("name: tinypair\nmodels:\n"
                    "  - {name: edges, model: ../models/edges.onnx, peak_rps: 20, p99_ms: 200}\n"
                    "  - {name: texture, model: ../models/texture.onnx, peak_rps: 20, p99_ms: 200}\n"
                    "costs: {host_hour: 0.4}\nlimits: {max_models: 1}\n")  # no shared group to measure
    return path


def _pod_run(job: dict, index: int | None, claims: dict[str, Path], work: Path) -> list[str]:
    """The unshare command that runs the job's container for `index` as a kubelet would."""
    spec = job["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = []
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "persistentVolumeClaim" in volume:
            claim = volume["persistentVolumeClaim"]
            mounts.append({"source": str(claims[claim["claimName"]]), "target": mount["mountPath"], "tmpfs": None,
                           "read_only": bool(mount.get("readOnly") or claim.get("readOnly"))})
        else:
            assert volume["emptyDir"]["medium"] == "Memory", volume
            mounts.append({"source": None, "target": mount["mountPath"], "read_only": False,
                           "tmpfs": str(int(quantity_value(volume["emptyDir"]["sizeLimit"])))})  # bytes
    declared = {}
    for item in container.get("env", []):
        ref = item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath", "")
        declared[item["name"]] = str(index) if "job-completion-index" in ref else item.get("value", "")
    if index is not None:
        declared.setdefault("JOB_COMPLETION_INDEX", str(index))  # the Job controller's, for an Indexed Job
    image_env = {k: v for k, v in os.environ.items() if k not in ("PWD", "OLDPWD")}
    image_env["PATH"] = f"{BIN}{os.pathsep}{image_env.get('PATH', '/usr/bin:/bin')}"
    argv = [_ENV_REF.sub(lambda m: declared.get(m.group(1), m.group(0)), a)
            for a in [*container["command"], *container.get("args", [])]]
    pod = {"mounts": mounts, "working_dir": container["workingDir"], "argv": argv, "env": {**image_env, **declared}}
    name = f"pod-{job['metadata']['name']}-{index if index is not None else 0}"
    (work / f"{name}.json").write_text(json.dumps(pod, indent=1))
    (work / "kubelet.py").write_text(KUBELET)
    return ["unshare", "--mount", "--propagation", "private", "--", sys.executable, str(work / "kubelet.py"),
            str(work / f"{name}.json")]


@pytest.fixture(scope="module")
def mount_points():
    """The pods' mount paths made where missing (a mount needs its folder), removed afterwards if still empty;
    skipped, with the reason, where no private mount namespace can be made."""
    if reason := _cannot_unshare():
        pytest.skip(reason)
    made = [p for p in (Path("/inputs"), Path("/results")) if not p.exists()]
    for path in made:
        path.mkdir()
    yield
    for path in made:
        try:
            path.rmdir()
        except OSError:
            pass


def test_the_written_jobs_run_as_a_kubelet_runs_them(tmp_path, mount_points):
    src, jobs, results, work = tmp_path / "src", tmp_path / "jobs", tmp_path / "results-claim", tmp_path / "kubelet"
    deployment = _deployment(src)
    results.mkdir()
    work.mkdir()
    wrote = subprocess.run([str(BIN / "deployment-toolkit"), "plan", "--deployment", str(deployment), "--write-job",
                            str(jobs), "--job-image", "registry.local/deployment-toolkit:1", "--node-selector",
                            "kubernetes.io/hostname=ci", "--job-cpu", "2", "--job-memory", "4Gi", *FAST],
                           capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert wrote.returncode == 0, wrote.stdout + wrote.stderr
    search, gather = (yaml.safe_load((jobs / f).read_text()) for f in ("search-job.yaml", "gather-job.yaml"))
    claims = {yaml.safe_load((jobs / f).read_text())["metadata"]["name"]: path
              for f, path in (("inputs-claim.yaml", jobs / "inputs"), ("results-claim.yaml", results))}
    src.rename(tmp_path / "moved-away")  # a path of the writing machine in a pod fails from here on
    for index in range(search["spec"]["completions"]):
        pod = subprocess.run(_pod_run(search, index, claims, work), capture_output=True, text=True, timeout=600)
        assert pod.returncode == 0, f"index {index}:\n{pod.stdout[-3000:]}\n{pod.stderr[-3000:]}"
        assert f"(index {index})" in pod.stdout, pod.stdout[-2000:]
    gathered = subprocess.run(_pod_run(gather, None, claims, work), capture_output=True, text=True, timeout=600)
    assert gathered.returncode == 0, gathered.stdout[-4000:] + gathered.stderr[-4000:]
    assert "measured 0 new ones" in gathered.stdout + gathered.stderr, "the gathering searched again"
    plan = results / "plan-tinypair"
    text = (plan / "plan.md").read_text()
    run = json.loads((plan / "run.json").read_text())["config"]
    assert set(run["models"]) == {"edges", "texture"} and "edges" in text and "texture" in text
    assert (results / "workspace" / "plan-tinypair").is_dir()  # the artifacts on the results claim, as written
    assert str(tmp_path) not in json.dumps(run["models"]), "a path of the writing machine reached the plan"
