"""Issue 44 (item 5): a deployment's searches fanned out as a Kubernetes Indexed Job, validated against the
Kubernetes schema as the fleet's manifests are, and the gathering's check of which searches a result folder holds."""
from __future__ import annotations

import json

import pytest
import yaml

from deployment_toolkit.deployment.errors import DeploymentPlanError
from deployment_toolkit.deployment.fanout import (INDEX_ENV, JobSpec, gather_job, gpu_node_selector, index_command,
                                                  search_dir, search_job, searches_done, write_jobs)
from deployment_toolkit.errors import UserInputError
from deployment_toolkit.search.store import POINTS_FILE
from deployment_toolkit.kube.manifests import validate_all
from deployment_toolkit.kube.fleet_spec import ManifestError

SPEC = JobSpec(image="registry.example/deployment-toolkit:0.9",
               node_selector=gpu_node_selector("NVIDIA H100 80GB HBM3"), namespace="ml", parallelism=4,
               backoff_limit_per_index=2, gpus=1, cpu=8,
               args=("--max-minutes", "8", "--preset", "small"))


def _pod(job):
    return job["spec"]["template"]["spec"]


def test_the_search_job_is_an_indexed_job_valid_against_the_kubernetes_schema(tmp_path):
    job = search_job("/inputs/deployment.yaml", 12, "/results/plan-shop", SPEC)
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job" and job["metadata"]["namespace"] == "ml"
    body = job["spec"]
    assert (body["completionMode"], body["completions"], body["parallelism"], body["backoffLimitPerIndex"]) == \
        ("Indexed", 12, 4, 2)
    (line,) = validate_all({"search-job.yaml": job})
    assert "valid Job (batch/v1) against the Kubernetes" in line and "(strict)" in line
    paths, lines = write_jobs({"search-job.yaml": job, "gather-job.yaml": gather_job("/inputs/deployment.yaml",
                                                                                        "/results/plan-shop", SPEC)},
                              tmp_path)
    assert len(lines) == 2 and all("valid Job" in x for x in lines)
    assert yaml.safe_load(paths["search-job.yaml"].read_text()) == job  # the YAML is the manifest checked


def test_each_index_runs_its_models_search_only_from_the_completion_index():
    job = search_job("/inputs/deployment.yaml", 3, "/results/plan-shop", SPEC)
    (container,) = _pod(job)["containers"]
    assert container["command"][:9] == ["deployment-toolkit", "plan", "--deployment", "/inputs/deployment.yaml",
                                        "--search-only", "--index", f"$({INDEX_ENV})", "--result-path",
                                        "/results/plan-shop"]
    assert container["command"][-4:] == ["--max-minutes", "8", "--preset", "small"]  # the gathering run's flags
    (env,) = container["env"]
    assert env == {"name": INDEX_ENV, "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}
    assert _pod(job)["restartPolicy"] == "Never"  # required by backoffLimitPerIndex
    assert index_command(job, 2)[6] == "2" and "$(" not in " ".join(index_command(job, 2))


def test_pods_land_on_the_target_device_with_the_results_and_inputs_volumes():
    pod = _pod(search_job("/inputs/deployment.yaml", 2, "/results/plan-shop", SPEC))
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["results"]["persistentVolumeClaim"] == {"claimName": "deployment-search-results"}
    assert volumes["inputs"]["persistentVolumeClaim"] == {"claimName": "deployment-search-inputs", "readOnly": True}
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"
    (container,) = pod["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["results"]["mountPath"] == "/results" and mounts["inputs"]["readOnly"] is True
    assert mounts["dshm"]["mountPath"] == "/dev/shm"
    # the artifacts go on the results volume, where the gathering run finds them
    command = container["command"]
    assert command[command.index("--workspace") + 1] == "/results/workspace"
    resources = container["resources"]
    assert resources["requests"] == resources["limits"] == {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": 1}


def test_the_gathering_job_is_the_same_pod_running_the_whole_plan():
    search = search_job("/inputs/deployment.yaml", 2, "/results/plan-shop", SPEC)
    gather = gather_job("/inputs/deployment.yaml", "/results/plan-shop", SPEC)
    (container,) = _pod(gather)["containers"]
    assert "--search-only" not in container["command"] and "--index" not in container["command"]
    assert "env" not in container and gather["spec"]["completions"] == 1
    assert _pod(gather)["volumes"] == _pod(search)["volumes"]
    assert _pod(gather)["nodeSelector"] == _pod(search)["nodeSelector"]
    assert gather["metadata"]["name"] == "deployment-search-gather"


@pytest.mark.parametrize("change, message", [
    ({"node_selector": {}}, "needs a node selector"),
    ({"image": " "}, "image is empty"),
    ({"parallelism": 0}, "parallelism must be a whole number >= 1"),
    ({"backoff_limit_per_index": -1}, "backoff_limit_per_index must be a whole number >= 0"),
    ({"results_mount": "results"}, "must be absolute"),
])
def test_a_bad_job_spec_is_one_line(change, message):
    fields = {"image": "img:1", "node_selector": {"node.kubernetes.io/instance-type": "c7i.4xlarge"}, **change}
    with pytest.raises(UserInputError, match=message):
        JobSpec(**fields)


def test_an_invalid_manifest_is_refused_and_not_written(tmp_path):
    bad = JobSpec(image="img:1", node_selector={"kubernetes.io/arch": "amd64"})
    job = search_job("/inputs/d.yaml", 2, "/results/r", bad)
    job["spec"]["template"]["spec"]["containers"][0]["unknownField"] = 1  # strict: unknown fields fail
    with pytest.raises(ManifestError, match="search-job.yaml is not a valid Job"):
        write_jobs({"search-job.yaml": job}, tmp_path / "out")
    assert not (tmp_path / "out" / "search-job.yaml").exists()
    with pytest.raises(UserInputError, match="at least one model"):
        search_job("/inputs/d.yaml", 0, "/results/r", bad)


def _finished(folder, complete=True, outputs=True):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / POINTS_FILE).write_text(json.dumps({"points": {}, "clock": {"settings": "{}", "answers": [],
                                                                          "complete": complete}}))
    if outputs:
        (folder / "run.json").write_text(json.dumps({"config": {"kind": "search"}}))


def test_the_gathering_names_the_missing_searches_by_index_in_one_line(tmp_path):
    names = ["classifier", "tagger", "detector", "ocr", "mobile"]
    _finished(search_dir(tmp_path, "classifier"))
    _finished(search_dir(tmp_path, "tagger"), complete=False)  # its pod was killed mid-search
    _finished(search_dir(tmp_path, "detector"))
    _finished(search_dir(tmp_path, "ocr"), outputs=False)  # measured to the end, but died writing its outputs
    gathered = searches_done(tmp_path, names)
    assert [s.index for s in gathered.missing] == [1, 3, 4] and not gathered.complete
    line = gathered.line()
    assert "\n" not in line and line.startswith(f"3 of 5 searches missing in {tmp_path / 'models'}: indexes 1 (tagger: "
                                                "interrupted")
    assert "3 (ocr: measured, but its outputs were not written" in line and "4 (mobile: never started)" in line
    with pytest.raises(DeploymentPlanError, match="3 of 5 searches missing") as err:
        gathered.check()
    assert "\n" not in str(err.value)
    _finished(search_dir(tmp_path, "tagger"))
    _finished(search_dir(tmp_path, "ocr"))
    _finished(search_dir(tmp_path, "mobile"))
    done = searches_done(tmp_path, names)
    assert done.complete and done.line() == f"all 5 searches complete in {tmp_path / 'models'}"
    done.check()
