"""Issue 53: the fan-out's flags and records refused in one line (exit 2, no traceback, before any work starts):
--write-job's folder, a hand-edited job file (--force), --job-image by the distribution reference grammar,
--node-selector by Kubernetes' label rules, --write-job with --gather, and --gather over a record of the wrong shape
or over the searches another deployment (or another definition of a model) left."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deployment_toolkit.deployment.errors import DeploymentPlanError
from deployment_toolkit.deployment.fanout import (JOB_FILE, OWNER_FILE, JobSpec, job_folder, node_selector_of,
                                                  search_dir, searches_done, write_owner)
from deployment_toolkit.deployment.file import load as load_deployment
from deployment_toolkit.deployment.owner import model_definition
from deployment_toolkit.deployment.settings import FanOut
from deployment_toolkit.errors import UserError, UserInputError
from deployment_toolkit.search.store import POINTS_FILE, search_complete
from deployment_toolkit.kube.manifests import image_problem, label_key_problem, label_value_problem

ROOT = Path(__file__).resolve().parents[3]
IMAGE = "registry.example/deployment-toolkit:1"
NODES = "kubernetes.io/hostname=ci"


def _deployment(folder: Path, name: str = "shop", p99_ms: float = 50) -> Path:
    """A deployment of two models: a zoo name and an ONNX file (nothing is converted to write or check a job)."""
    import onnx
    from onnx import TensorProto, helper

    folder.mkdir(parents=True, exist_ok=True)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "scorer",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph), str(folder / "scorer.onnx"))
    file = folder / f"{name}.yaml"
    file.write_text(f"name: {name}\nmodels:\n"
                    f"  - {{name: classifier, model: resnet18, peak_rps: 10, p99_ms: {p99_ms}}}\n"
                    f"  - {{name: scorer, model: scorer.onnx, peak_rps: 10, p99_ms: {p99_ms}}}\n")
    return file


def _plan(deployment: Path, *flags: str) -> subprocess.CompletedProcess:
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "deployment_toolkit", "plan", "--deployment", str(deployment), *flags],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert time.monotonic() - started < 20, "a refusal must come within seconds"
    return out


def _refused(out: subprocess.CompletedProcess, *words: str) -> str:
    assert out.returncode == 2, out.stdout + out.stderr
    (line,) = out.stderr.strip().splitlines()  # one line, no traceback
    assert line.startswith("error: ") and "Traceback" not in out.stderr
    for word in words:
        assert word in line, line
    return line


# ---- --write-job's folder ------------------------------------------------------------------------------------

@pytest.mark.parametrize("where, words", [
    ("file", ["it is a file, not a folder: give a folder"]),
    ("under-a-file", ["is a file, so no folder can be made under it"]),
    ("dev-null", ["--write-job /dev/null/x: /dev/null is a file, so no folder can be made under it"]),
    ("empty", ["--write-job is empty (an unset shell variable?): give the folder to write the jobs to"]),
    ("blank", ["--write-job is empty (an unset shell variable?)"]),
])
def test_a_write_job_path_that_cannot_be_a_folder_is_one_line(tmp_path, where, words):
    deployment = _deployment(tmp_path / "inputs")
    (tmp_path / "a-file").write_text("x")
    path = {"file": str(tmp_path / "a-file"), "under-a-file": str(tmp_path / "a-file" / "jobs"),
            "dev-null": "/dev/null/x", "empty": "", "blank": "  "}[where]
    line = _refused(_plan(deployment, "--write-job", path, "--job-image", IMAGE, "--node-selector", NODES), *words)
    if where in ("file", "under-a-file"):
        assert str(tmp_path / "a-file") in line
    assert (tmp_path / "a-file").read_text() == "x"


def test_a_write_job_folder_that_cannot_be_written_is_one_line(tmp_path, monkeypatch):
    parent = tmp_path / "locked"
    parent.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == parent else real(p, mode, **kw))
    with pytest.raises(UserInputError, match=f"--write-job {parent / 'jobs'}: {parent} is not writable by this user: "
                                             "give a folder you can write"):
        job_folder(str(parent / "jobs"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in a read-only-mode folder")
def test_an_unwritable_write_job_folder_is_refused_by_the_command(tmp_path):
    deployment = _deployment(tmp_path / "inputs")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        _refused(_plan(deployment, "--write-job", str(locked / "jobs"), "--job-image", IMAGE, "--node-selector",
                       NODES), f"{locked} is not writable by this user")
    finally:
        locked.chmod(0o700)


def test_a_hand_edited_job_file_is_replaced_only_with_force(tmp_path):
    deployment, jobs = _deployment(tmp_path / "inputs"), tmp_path / "jobs"
    flags = ("--write-job", str(jobs), "--job-image", IMAGE, "--node-selector", NODES)
    first = _plan(deployment, *flags)
    assert first.returncode == 0, first.stderr
    again = _plan(deployment, *flags[:3], "registry.example/deployment-toolkit:2", *flags[4:])
    assert again.returncode == 0, again.stderr  # its own earlier output, other flags: replaced, and said
    assert "search-job.yaml: replaced the job an earlier --write-job wrote there" in again.stdout
    edited = (jobs / JOB_FILE).read_text().replace("backoffLimitPerIndex: 1", "backoffLimitPerIndex: 5")
    (jobs / JOB_FILE).write_text(edited)
    _refused(_plan(deployment, *flags), f"--write-job {jobs}: {jobs / JOB_FILE} differs from the job written now",
             "(edited by hand?): move it away, or pass --force to replace it")
    assert (jobs / JOB_FILE).read_text() == edited  # nothing written
    forced = _plan(deployment, *flags, "--force")
    assert forced.returncode == 0, forced.stderr
    assert f"search-job.yaml: replaced {jobs / JOB_FILE}, which had been edited by hand (--force)" in forced.stdout
    assert "backoffLimitPerIndex: 5" not in (jobs / JOB_FILE).read_text()
    assert "--force" not in (jobs / JOB_FILE).read_text()  # the fan-out's own flag is not passed on to the pods
    same = _plan(deployment, *flags)
    assert same.returncode == 0 and "replaced" not in same.stdout  # the same job again: nothing to say


# ---- --job-image and --node-selector -------------------------------------------------------------------------

@pytest.mark.parametrize("image, words", [
    ("reg.example/dt 1", "--job-image 'reg.example/dt 1': it has a space (an image reference has none): give "
                         "[REGISTRY[:PORT]/]PATH[:TAG][@sha256:DIGEST]"),
    ("reg.example/MyOrg/dt:1", "its repository path 'MyOrg/dt' has upper case: repository names are lowercase "
                               "('myorg/dt')"),
    ("reg.example/dt:-1", "its tag '-1' must be 1-128 letters"),
    ("reg.example/dt@sha256:abc", "its digest 'sha256:abc' is not sha256: and 64 lowercase hex digits"),
])
def test_a_bad_job_image_is_one_line(tmp_path, image, words):
    deployment = _deployment(tmp_path / "inputs")
    _refused(_plan(deployment, "--write-job", str(tmp_path / "jobs"), "--job-image", image, "--node-selector", NODES),
             words)
    assert not (tmp_path / "jobs").exists()


@pytest.mark.parametrize("item, words", [
    ("nvidia.com/gpu.product=NVIDIA H100 80GB HBM3",
     "--node-selector 'nvidia.com/gpu.product=NVIDIA H100 80GB HBM3': the value 'NVIDIA H100 80GB HBM3' has spaces: "
     "GPU feature discovery labels the node nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"),
    ("Nvidia.com/gpu.product=x", "the key's prefix 'Nvidia.com' is not a DNS subdomain"),
    ("a/b/c=x", "the key 'a/b/c' has more than one '/'"),
    ("zone=eu west", "the value 'eu west' has spaces (e.g. eu-west)"),
    ("zone", "--node-selector 'zone': give KEY=VALUE"),
    ("", "--node-selector '': give KEY=VALUE"),
])
def test_a_bad_node_selector_is_one_line(tmp_path, item, words):
    deployment = _deployment(tmp_path / "inputs")
    _refused(_plan(deployment, "--write-job", str(tmp_path / "jobs"), "--job-image", IMAGE, "--node-selector", item),
             words)
    assert not (tmp_path / "jobs").exists()


def test_write_job_with_gather_is_refused(tmp_path):
    _refused(_plan(_deployment(tmp_path / "inputs"), "--write-job", str(tmp_path / "jobs"), "--job-image", IMAGE,
                   "--node-selector", NODES, "--gather"),
             "--write-job writes the jobs and --gather runs the gathering: give one of them")


@pytest.mark.parametrize("fields, message", [
    ({"write_job": ""}, "--write-job is empty"),
    ({"write_job": "jobs", "job_image": IMAGE, "gather": True}, "--write-job writes the jobs and --gather"),
    ({"force": True}, "--force: only the jobs --write-job DIR writes take it"),
    ({"job_image": IMAGE, "node_selector": (NODES,)}, "--job-image, --node-selector: only the jobs --write-job"),
    ({"write_job": "jobs", "job_image": "dt", "node_selector": ("a=1", "a=2")}, "--node-selector: a is given twice"),
])
def test_the_fan_out_settings_refuse_what_they_would_ignore(fields, message):
    with pytest.raises(UserInputError, match=message.replace("(", r"\(")):
        FanOut(**fields)


def test_node_selectors_are_parsed_as_kubernetes_reads_them():
    assert node_selector_of(["nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3", "zone="]) == \
        {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "zone": ""}
    with pytest.raises(UserInputError, match="--node-selector 'a=b=c': the value 'b=c' must be letters"):
        node_selector_of(["a=b=c"])  # '=' is no label value character


@pytest.mark.parametrize("image", ["nvcr.io/nvidia/tritonserver:24.10-py3", "dt", "localhost:5000/dt",
                                   "registry.example:5000/team/dt_x__y-z.w:v1.2_rc", "[::1]:5000/dt:1",
                                   "Registry.Example/dt", "dt@sha256:" + "a" * 64,
                                   "reg.example/dt:1@sha256:" + "0" * 64])
def test_valid_image_references_pass(image):
    assert image_problem(image) is None


@pytest.mark.parametrize("image, words", [
    ("", "empty"), ("dt 1", "space"), ("DT", "upper case"), ("reg.example//dt", "empty component"),
    ("reg.example/dt:" + "a" * 129, "tag"), ("reg.example/-dt", "path component '-dt'"),
    ("reg_example:x/dt", "not a host name"), ("dt@md5:abc", "digest"),
])
def test_invalid_image_references_are_named(image, words):
    assert words in (image_problem(image) or "")


def test_label_rules_are_kubernetes_own():
    for key in ("app", "nvidia.com/gpu.product", "kubernetes.io/hostname", "a" * 63, "x.y/" + "A-b_c.d"):
        assert label_key_problem(key) is None, key
    for key, words in (("", "empty"), ("/a", "prefix ''"), ("a/", "no name"), ("a" * 64, "at most 63"),
                       ("-a", "starting and ending"), ("a" * 254 + "/b", "at most 253")):
        assert words in (label_key_problem(key) or ""), key
    assert label_value_problem("") is None and label_value_problem("NVIDIA-H100-80GB-HBM3") is None
    assert "at most 63" in label_value_problem("a" * 64)


@pytest.mark.parametrize("change, message", [
    ({"image": "reg.example/dt 1"}, "the search job's image 'reg.example/dt 1': it has a space"),
    ({"node_selector": {"nvidia.com/gpu.product": "NVIDIA H100"}},
     "search job node selector nvidia.com/gpu.product=NVIDIA H100: the value 'NVIDIA H100' has spaces"),
    ({"labels": {"team": "ml ops"}}, "search job label team=ml ops: the value 'ml ops' has spaces"),
    ({"labels": {"Team/x": "a"}}, "search job label Team/x=a: the key's prefix 'Team'"),
])
def test_the_job_spec_checks_its_image_and_labels(change, message):
    fields = {"image": IMAGE, "node_selector": {"kubernetes.io/hostname": "ci"}, **change}
    with pytest.raises(UserInputError, match=message.replace("(", r"\(")):
        JobSpec(**fields)


# ---- --gather: the records' shape and owner ------------------------------------------------------------------

def _finished(folder: Path, points: object = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    doc = points if points is not None else {"points": {}, "clock": {"settings": "{}", "answers": [],
                                                                     "complete": True}}
    (folder / POINTS_FILE).write_text(json.dumps(doc))
    (folder / "run.json").write_text(json.dumps({"config": {"kind": "search"}}))


@pytest.mark.parametrize("text, words", [
    ("[]", "a JSON object expected, got list"),
    ("null", "a JSON object expected, got null"),
    ('{"clock": [true]}', "its 'clock' must be an object, got [true]"),
])
def test_gather_over_a_record_of_the_wrong_shape_is_one_line(tmp_path, text, words):
    deployment, result = _deployment(tmp_path / "inputs"), tmp_path / "result"
    for i, name in enumerate(("classifier", "scorer")):
        _finished(search_dir(result, name))
        write_owner(result, "shop", load_deployment(deployment).models[i])
    bad = search_dir(result, "scorer") / POINTS_FILE
    bad.write_text(text)
    _refused(_plan(deployment, "--gather", "--result-path", str(result), "--workspace", str(tmp_path / "ws")),
             f"indexes 1 (scorer: {bad} is not a search checkpoint ({words}; edited by hand?): delete it, then "
             "rerun its index)")


@pytest.mark.parametrize("doc, words", [
    ({"points": []}, "its 'points' must be an object of objects"),
    ({"points": {"a": 1}}, "its 'points' must be an object of objects"),
    ({"failures": "x"}, "its 'failures' must be an object of objects"),
    ({"clock": {"complete": "yes"}}, "its 'clock' must hold settings (text), answers (a list) and complete"),
])
def test_search_complete_names_a_record_of_the_wrong_shape(tmp_path, doc, words):
    _finished(tmp_path, doc)
    done, why = search_complete(tmp_path)
    assert not done and f"{tmp_path / POINTS_FILE} is not a search checkpoint ({words}" in why
    (tmp_path / "run.json").write_text("[]")
    (tmp_path / POINTS_FILE).write_text(json.dumps({"points": {}, "clock": {"settings": "{}", "answers": [],
                                                                            "complete": True}}))
    assert f"{tmp_path / 'run.json'} is not a run record" in search_complete(tmp_path)[1]


def test_gather_refuses_the_searches_another_deployment_left(tmp_path):
    """Two deployments with a model of the same name share a --result-path: the gathering of the second refuses
    the first's searches, naming the folder, the index and whose they are; its own are accepted."""
    shop = load_deployment(_deployment(tmp_path / "shop"))
    cafe = load_deployment(_deployment(tmp_path / "cafe", name="cafe"))
    result = tmp_path / "result"
    for entry in shop.models:  # the first deployment's search job ran here
        _finished(search_dir(result, entry.name))
        write_owner(result, shop.name, entry)
    names = [e.name for e in cafe.models]
    searches_done(result, names, shop).check()  # its own: fine
    with pytest.raises(DeploymentPlanError) as err:
        searches_done(result, names, cafe).check()
    line = str(err.value)
    assert isinstance(err.value, UserError) and "\n" not in line
    assert line == ("models/classifier/search was searched for deployment 'shop', not this one ('cafe'): use another "
                    "--result-path or rerun index 0 (classifier) (and 1 more index(es) like it)")
    write_owner(result, cafe.name, cafe.models[0])  # index 0 rerun for cafe: only index 1 is the other's now
    with pytest.raises(DeploymentPlanError, match=r"models/scorer/search was searched for deployment 'shop', not "
                                                  r"this one \('cafe'\): use another --result-path or rerun index 1"):
        searches_done(result, names, cafe).check()


def test_gather_refuses_the_searches_of_another_definition_of_a_model(tmp_path):
    shop = load_deployment(_deployment(tmp_path / "v1"))
    result = tmp_path / "result"
    for entry in shop.models:
        _finished(search_dir(result, entry.name))
        write_owner(result, shop.name, entry)
    stricter = load_deployment(_deployment(tmp_path / "v2", p99_ms=20))  # the same names, another SLO
    with pytest.raises(DeploymentPlanError, match=r"models/classifier/search was searched for another definition of "
                                                  r"classifier in deployment 'shop' \(its p99_ms differ\)"):
        searches_done(result, [e.name for e in stricter.models], stricter).check()
    moved = tmp_path / "elsewhere"  # the pods see the inputs under /inputs, a local gathering elsewhere
    shutil.copytree(tmp_path / "v1", moved)
    same = load_deployment(moved / "shop.yaml")
    assert model_definition(same.models[1]) == model_definition(shop.models[1])
    searches_done(result, [e.name for e in same.models], same).check()
    (moved / "scorer.onnx").write_bytes(b"another model")
    other = load_deployment(moved / "shop.yaml")
    with pytest.raises(DeploymentPlanError, match=r"another definition of scorer .*its model differ"):
        searches_done(result, [e.name for e in other.models], other).check()


def test_gather_refuses_a_search_without_an_owner_record(tmp_path):
    shop = load_deployment(_deployment(tmp_path / "inputs"))
    result = tmp_path / "result"
    for entry in shop.models:
        _finished(search_dir(result, entry.name))
    write_owner(result, shop.name, shop.models[0])
    with pytest.raises(DeploymentPlanError, match=rf"models/scorer/search has no owner record \({OWNER_FILE}; "
                                                  r"searched by an older deployment-toolkit\?\), so whose search it "
                                                  r"holds cannot be told: use another --result-path or rerun index 1"):
        searches_done(result, [e.name for e in shop.models], shop).check()


def test_the_gathering_command_refuses_another_deployments_searches(tmp_path):
    shop = load_deployment(_deployment(tmp_path / "shop"))
    cafe = _deployment(tmp_path / "cafe", name="cafe")
    result = tmp_path / "result"
    for entry in shop.models:
        _finished(search_dir(result, entry.name))
        write_owner(result, shop.name, entry)
    _refused(_plan(cafe, "--gather", "--result-path", str(result), "--workspace", str(tmp_path / "ws")),
             "models/classifier/search was searched for deployment 'shop', not this one ('cafe'): use another "
             "--result-path or rerun index 0 (classifier)")
