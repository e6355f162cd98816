"""Issue 54 (item 5): `plan --write-job DIR` writes what a cluster runs as written: the inputs staged (the deployment
file and every file it names, above its folder too, with the paths rewritten; staged.json with sizes and sha256),
every claim the pods mount, names of the deployment's own, the pods' shape from --job-cpu/--job-memory/--job-gpus/
--parallelism, and the pods' flags built from the parsed settings, with no path of this machine anywhere."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import pytest
import yaml

from deployment_toolkit import cli
from deployment_toolkit.commands import plan_fleet
from deployment_toolkit.deployment import jobinputs
from deployment_toolkit.deployment.fanout import GATHER_FILE, GPU_TOLERATION, JOB_FILE, MAX_JOB_NAME
from deployment_toolkit.deployment.file import load
from deployment_toolkit.deployment.jobinputs import plan_inputs
from deployment_toolkit.deployment.joboutput import (FILES_POD_FILE, INPUTS_CLAIM_FILE, README_FILE,
                                                     RESULTS_CLAIM_FILE, JobNames)
from deployment_toolkit.deployment.owner import model_definition
from deployment_toolkit.errors import UserInputError
from deployment_toolkit.kube.manifests import unique_dns_name

ROOT = Path(__file__).resolve().parents[3]
IMAGE = "registry.example/deployment-toolkit:1"
NODES = "kubernetes.io/hostname=ci"


def _onnx(path: Path) -> None:
    from onnx import TensorProto, helper, save

    path.parent.mkdir(parents=True, exist_ok=True)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])])
    save(helper.make_model(graph), str(path))


def _shop(base: Path, name: str = "shop") -> Path:
    """A deployment whose files lie above its folder (`../models/x.onnx`, `../code/text/model.py` with neighbours,
    `../traffic/x.csv`), beside it (`samples/`) and behind a link."""
    _onnx(base / "models" / "scorer.onnx")
    text = base / "code" / "text"
    text.mkdir(parents=True)
    (text / "model.py").write_text("from helper import make\n\ndef get_model(vocab_size=100):\n    return make()\n")
    (text / "helper.py").write_text("def make():\n    return None\n")
    (text / "vocab.txt").write_text("[PAD]\n[UNK]\nhello\n")
    (text / "__pycache__").mkdir()
    (text / "__pycache__" / "helper.cpython-312.pyc").write_bytes(b"\0" * 10)
    (text / ".secret").write_text("not for pods")
    with open(text / "weights.bin", "wb") as fh:  # sparse: over the size a neighbour travels with, no disk used
        fh.truncate(jobinputs.SMALL_FILE + 1)
    (base / "traffic").mkdir()
    (base / "traffic" / "scorer.csv").write_text("time,rate\n00:00,5\n12:00,10\n")
    folder = base / name
    (folder / "samples").mkdir(parents=True)
    (folder / "samples" / "x.npy").write_bytes(b"\x93NUMPY" + b"\0" * 64)
    (folder / "linked.onnx").symlink_to(base / "models" / "scorer.onnx")
    (folder / "deployment.yaml").write_text(
        f"name: {name}\n"
        "models:\n"
        "  - {name: scorer, model: ../models/scorer.onnx, p99_ms: 50, traffic: ../traffic/scorer.csv}\n"
        "  - name: tagger\n    model: ../code/text/model.py:get_model\n    model_args: {vocab_size: 100}\n"
        "    data: samples\n    peak_rps: 5\n    p99_ms: 100\n"
        "  - {name: linked, model: linked.onnx, peak_rps: 3, p99_ms: 80}\n"
        "costs: {host_hour: 0.4}\nlimits: {max_replicas: 4, headroom: 0.2}\n")
    return folder / "deployment.yaml"


def _write(deployment: Path, jobs: Path, *flags: str) -> int:
    with pytest.raises(SystemExit) as exit_:
        cli.run(lambda: plan_fleet.main(["--deployment", str(deployment), "--write-job", str(jobs), "--job-image",
                                         IMAGE, "--node-selector", NODES, *flags]))
    return exit_.value.code


def _docs(jobs: Path) -> dict[str, dict]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted(jobs.glob("*.yaml"))}


def _container(doc: dict) -> dict:
    return doc["spec"]["template"]["spec"]["containers"][0]


@pytest.fixture
def two(tmp_path):
    """Two deployments written side by side: `shop` with a GPU and its own shape, `shop_eu` on a claim of the
    user's."""
    first, second = _shop(tmp_path / "a"), _shop(tmp_path / "b", "shop_eu")
    assert _write(first, tmp_path / "jobs-a", "--job-gpus", "1", "--job-cpu", "8", "--job-memory", "32Gi",
                  "--parallelism", "1", "--max-minutes=2", "--formats", "onnx", "--no-progress",
                  "--perf-analyzer-arg=--verbose", "--retests", "1", "--force") == 0
    assert _write(second, tmp_path / "jobs-b", "--results-claim", "shared-results", "--storage-class",
                  "fast-rwx") == 0
    return tmp_path, (first, tmp_path / "jobs-a"), (second, tmp_path / "jobs-b")


def test_the_inputs_are_staged_with_their_sizes_and_digests_and_the_paths_rewritten(two):
    tmp_path, (deployment, jobs), _ = two
    inputs = jobs / "inputs"
    record = json.loads((inputs / "staged.json").read_text())
    for f in record["files"]:
        data = (inputs / f["staged"]).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (f["size"], f["sha256"]), f
    staged = {f["staged"] for f in record["files"]}
    assert {"files/01-scorer.onnx", "files/02-scorer.csv", "files/03-text/model.py", "files/03-text/helper.py",
            "files/03-text/vocab.txt", "files/04-samples/x.npy", "deployment.yaml"} <= staged
    assert not any("__pycache__" in s or ".secret" in s or "weights.bin" in s for s in staged)
    assert [Path(x["source"]).name for x in record["left_out"]] == ["weights.bin"]
    assert not (inputs / "files" / "05-linked.onnx").is_symlink()  # the link's file, not the link
    sums = (inputs / "SHA256SUMS").read_text().splitlines()
    assert sorted(sums) == sorted(f"{f['sha256']}  {f['staged']}" for f in record["files"])
    # the staged file keeps every other key, and read where the pods read it, every path resolves under inputs/
    original, copied = yaml.safe_load(deployment.read_text()), yaml.safe_load((inputs / "deployment.yaml").read_text())
    assert copied["costs"] == original["costs"] and copied["limits"] == original["limits"]
    assert copied["models"][1]["model"] == "files/03-text/model.py:get_model"
    assert copied["models"][1]["model_args"] == {"vocab_size": 100} and "peak_rps" not in copied["models"][0]
    shutil.move(str(tmp_path / "a"), str(tmp_path / "a-moved"))  # the writing machine's folder is gone
    pods = load(inputs / "deployment.yaml")
    assert pods.name == "shop"
    for entry in pods.models:
        for value in (entry.model.partition(":get_model")[0], entry.data, entry.traffic):
            assert value is None or Path(value).resolve().is_relative_to(inputs.resolve()), value
    shutil.move(str(tmp_path / "a-moved"), str(tmp_path / "a"))
    # the pods and a local gathering see one definition of each model (owner.py: by content, not by path)
    assert [model_definition(e) for e in pods.models] == [model_definition(e) for e in load(deployment).models]


def test_every_claim_the_pods_mount_is_written_or_named_by_results_claim(two):
    _, (_, jobs_a), (_, jobs_b) = two
    for jobs, written in ((jobs_a, {INPUTS_CLAIM_FILE, RESULTS_CLAIM_FILE}), (jobs_b, {INPUTS_CLAIM_FILE})):
        docs = _docs(jobs)
        claims = {d["metadata"]["name"]: d for d in docs.values() if d["kind"] == "PersistentVolumeClaim"}
        assert {n for n, d in docs.items() if d["kind"] == "PersistentVolumeClaim"} == written
        for file in (JOB_FILE, GATHER_FILE, FILES_POD_FILE):
            spec = docs[file]["spec"].get("template", docs[file])["spec"]
            for volume in spec["volumes"]:
                if "persistentVolumeClaim" in volume:
                    name = volume["persistentVolumeClaim"]["claimName"]
                    assert name in claims or (jobs == jobs_b and name == "shared-results"), (file, name)
        assert all(d["spec"]["accessModes"] == ["ReadWriteMany"] for d in claims.values())
    inputs_b = _docs(jobs_b)[INPUTS_CLAIM_FILE]["spec"]
    assert inputs_b["storageClassName"] == "fast-rwx" and inputs_b["resources"]["requests"]["storage"] == "1Gi"


def test_the_pods_shape_gpus_and_toleration_come_from_the_flags(two):
    _, (_, jobs_a), (_, jobs_b) = two
    for file in (JOB_FILE, GATHER_FILE):
        doc = _docs(jobs_a)[file]
        resources = _container(doc)["resources"]
        assert resources["limits"] == resources["requests"] == {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": 1}
        assert doc["spec"]["template"]["spec"]["tolerations"] == [GPU_TOLERATION]
    assert _docs(jobs_a)[JOB_FILE]["spec"]["parallelism"] == 1
    plain = _docs(jobs_b)[JOB_FILE]
    assert _container(plain)["resources"]["limits"] == {"cpu": "4", "memory": "16Gi"}
    assert "tolerations" not in plain["spec"]["template"]["spec"] and plain["spec"]["parallelism"] == 3


def test_the_pods_flags_are_built_from_the_parsed_settings(two):
    _, (_, jobs_a), (_, jobs_b) = two
    command = _container(_docs(jobs_a)[JOB_FILE])["command"]
    assert command[:11] == ["deployment-toolkit", "plan", "--deployment", "/inputs/deployment.yaml", "--search-only",
                            "--index", "$(JOB_COMPLETION_INDEX)", "--result-path", "/results/plan-shop",
                            "--workspace", "/results/workspace/plan-shop"]
    rest = command[11:]
    assert {"--max-minutes", "2", "--no-progress", "--perf-analyzer-arg=--verbose", "--retests", "1"} <= set(rest)
    assert "--max-minutes=2" not in rest and "--formats" not in rest  # canonical form; onnx is the default
    for own in ("--write-job", "--job-image", "--node-selector", "--force", "--job-gpus", "--job-cpu", "--parallelism"):
        assert own not in " ".join(rest)
    assert _container(_docs(jobs_a)[JOB_FILE])["workingDir"] == "/results"
    assert _container(_docs(jobs_b)[JOB_FILE])["command"][11:] == []  # nothing given, nothing passed on


def test_no_path_of_the_writing_machine_is_written_and_no_two_deployments_share_a_name(two):
    tmp_path, (_, jobs_a), (_, jobs_b) = two
    for jobs in (jobs_a, jobs_b):
        written = [*jobs.glob("*.yaml"), jobs / README_FILE, jobs / "inputs" / "deployment.yaml"]
        texts = {p: p.read_text() for p in written}
        for path, text in texts.items():
            for host in (str(tmp_path), str(ROOT), "/tmp/", "/work/", os.path.expanduser("~") + "/"):
                assert host not in text, (path, host)
    names = [{d["metadata"]["name"] for d in _docs(jobs).values()} for jobs in (jobs_a, jobs_b)]
    assert len(names[0]) == len(names[1]) + 1 == 5 and not names[0] & names[1], names
    assert {_docs(jobs_b)[JOB_FILE]["metadata"]["name"], _docs(jobs_b)[GATHER_FILE]["metadata"]["name"]} == \
        {f"{JobNames.of('shop_eu').base}-search", f"{JobNames.of('shop_eu').base}-gather"}


def test_names_are_dns_labels_that_tell_every_deployment_apart():
    names = ["shop", "Shop", "shop_a", "shop-a", "x" * 80, "x" * 79 + "y", "9lives", "a.b"]
    bases = [JobNames.of(n).base for n in names]
    assert len(set(bases)) == len(bases) and JobNames.of("shop").base == "shop"
    assert all(len(b) <= 40 and b == unique_dns_name(n, 40) for b, n in zip(bases, names))
    assert all(len(JobNames.of(n).search) <= MAX_JOB_NAME for n in names)


def _refused(capsys, deployment: Path, jobs: Path, *flags: str) -> str:
    start = time.monotonic()
    code = _write(deployment, jobs, *flags)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert time.monotonic() - start < 20
    return err.strip()


@pytest.mark.parametrize(("flags", "words"), [
    (("--model-repository", "mr"), "--model-repository 'mr': is a path of this machine"),
    (("--perf-analyzer-arg=--input-data=/data/x.json",), "--perf-analyzer-arg '--input-data=/data/x.json': names a"),
    (("--job-memory", "16gb"), "--job-memory '16gb' is not a Kubernetes quantity"),
    (("--job-memory", "16"), "--job-memory '16' is 0 MiB: give at least 1Gi"),
    (("--results-size", "10 Gi"), "--results-size '10 Gi' is not a Kubernetes quantity"),
    (("--results-claim", "Shared_Results"), "--results-claim 'Shared_Results': it must be lowercase"),
    (("--storage-class", "fast_rwx"), "--storage-class 'fast_rwx': it must be lowercase"),
    (("--job-cpu", "0"), "--job-cpu must be >= 1"),
    (("--job-gpus", "-1"), "--job-gpus must be >= 0"),
    (("--parallelism", "0"), "--parallelism must be >= 1"),
])
def test_bad_job_flags_are_one_line_and_nothing_is_written(tmp_path, capsys, flags, words):
    jobs = tmp_path / "jobs"
    assert words in _refused(capsys, _shop(tmp_path), jobs, *flags)
    assert not jobs.exists()


def test_job_flags_without_write_job_are_refused(tmp_path, capsys):
    deployment = _shop(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        cli.run(lambda: plan_fleet.main(["--deployment", str(deployment), "--job-gpus", "1", "--results-claim",
                                         "r"]))
    assert exit_.value.code == 2
    assert "--job-gpus, --results-claim: only the jobs --write-job DIR writes take it" in capsys.readouterr().err


def test_an_inputs_folder_not_staged_by_write_job_is_kept_unless_force(tmp_path, capsys):
    deployment, jobs = _shop(tmp_path), tmp_path / "jobs"
    (jobs / "inputs").mkdir(parents=True)
    (jobs / "inputs" / "mine.txt").write_text("the user's")
    assert "jobs/inputs is there and was not staged by --write-job: move it away, or pass --force" in \
        _refused(capsys, deployment, jobs)
    assert (jobs / "inputs" / "mine.txt").exists() and not (jobs / JOB_FILE).exists()
    assert _write(deployment, jobs, "--force") == 0 and not (jobs / "inputs" / "mine.txt").exists()
    capsys.readouterr()
    assert _write(deployment, jobs) == 0  # its own staging again: replaced, and the same files say nothing
    assert "inputs/: replaced" not in capsys.readouterr().out


def test_a_python_files_folder_too_big_to_be_its_own_is_refused(tmp_path, monkeypatch):
    deployment = _shop(tmp_path)
    monkeypatch.setattr(jobinputs, "FOLDER_CAP", 10)
    with pytest.raises(UserInputError, match=r"models\[1\]\.model: the folder of a Python file travels with it"):
        plan_inputs(load(deployment))


def test_a_job_name_without_room_for_the_index_is_refused():
    from deployment_toolkit.deployment.fanout import JobSpec

    with pytest.raises(UserInputError, match="is 57 characters long, at most 56"):
        JobSpec(image="img:1", node_selector={"kubernetes.io/arch": "amd64"}, name="x" * 57)
