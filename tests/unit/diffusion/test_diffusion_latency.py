"""Diffusion latency / speedup tables (seed layouts), the measuring loop, the /v1/infer form, and the pipeline's
sampler config — all without a server."""
from __future__ import annotations

import numpy as np
import pytest

from deployment_toolkit.diffusion import latency as L
from deployment_toolkit.diffusion.targets import npy_bytes, parse_form


def point(target="triton", device="H100", steps=8, runs=((1.0, 2.0), (3.0, 4.0)), evaluations=8, **kw):
    return L.LatencyPoint(target, device, steps, 1, [list(r) for r in runs], sampler="ddim",
                          evaluations=evaluations, **kw)


def test_percentile_matches_numpy():
    values = [0.3, 0.1, 0.9, 0.5, 0.7, 0.2]
    for q in (0, 50, 95, 100):
        assert L.percentile(values, q) == pytest.approx(np.percentile(values, q))
    with pytest.raises(ValueError):
        L.percentile([], 50)


def test_point_statistics_average_run_means():
    p = point(runs=((1.0, 1.0, 1.0, 1.0), (3.0, 3.0)))  # unequal runs: mean of run means, not of all requests
    assert p.mean == pytest.approx(2.0)
    assert p.per_step == pytest.approx(2.0 / 8)
    assert p.per_evaluation == pytest.approx(2.0 / 8)
    assert point(evaluations=15).per_evaluation == pytest.approx(2.5 / 15)  # EDM Heun: 2 * 8 - 1
    assert p.run_std == pytest.approx(np.std([1.0, 3.0], ddof=1))
    row = p.row()
    assert tuple(row) == L.LATENCY_CSV_COLUMNS
    assert row["runs"] == 2 and row["trials_per_run"] == 4 and row["denoiser_s_per_evaluation"] == ""


def test_csv_has_one_header_and_a_row_per_point():
    text = L.csv_text([point().row(), point(steps=18).row()], L.LATENCY_CSV_COLUMNS)
    lines = text.splitlines()
    # written out, not csv_text's `columns` argument compared with itself: a column dropped or renamed fails here
    assert lines[0] == ("target,device,sampler,steps,evaluations,samples,runs,trials_per_run,burn_in,mean_s,p50_s,"
                        "p95_s,run_std_s,s_per_step,s_per_evaluation,denoiser_s_per_evaluation,"
                        "denoiser_compute_s_per_evaluation,sampler_overhead_s,client_overhead_s")
    assert len(lines) == 3 and lines[2].startswith("triton,H100,ddim,18,")


def test_latency_table_is_laid_out_like_the_seed():
    points = [point(device="A100", steps=18, runs=((51.43,),)), point(device="H100", steps=8, runs=((17.66,),)),
              point(device="A100", steps=8, runs=((25.10,),)), point(device="H100", steps=18, runs=((32.04,),))]
    lines = L.latency_table(points).splitlines()
    assert lines[0] == "| Diffusion Steps   |   A100 |   H100 |"
    assert lines[1] == "|:------------------|-------:|-------:|"
    assert lines[2] == "| 8 Steps           | 25.10s | 17.66s |"
    assert lines[3] == "| 18 Steps          | 51.43s | 32.04s |"


def test_several_targets_get_their_own_columns_and_missing_cells_a_dash():
    points = [point("triton", "CPU", 2, ((0.5,),)), point("in-process", "CPU", 2, ((0.4,),)),
              point("triton", "CPU", 4, ((1.0,),))]
    lines = L.latency_table(points, "per_step").splitlines()
    assert lines[0] == "| Diffusion Steps   |   CPU (triton) |   CPU (in-process) |"
    assert lines[2] == "| 2 Steps           |         0.250s |             0.200s |"
    assert lines[3] == "| 4 Steps           |         0.250s |                  - |"
    ratios = L.served_vs_in_process(points)
    assert [r["steps"] for r in ratios] == [2] and ratios[0]["ratio"] == pytest.approx(1.25)


def test_seconds_formatting():
    assert L.seconds(17.664) == "17.66s"
    assert L.seconds(0.5) == "0.500s"
    assert L.seconds(0.0123) == "12.30ms"


def test_report_has_every_section(table_rows):
    points = [point("triton", "CPU", 2, breakdown={"denoiser_s_per_evaluation": 0.1, "sampler_overhead_s": 0.01,
                                                   "client_overhead_s": 0.002}),
              point("in-process", "CPU", 2)]
    text = L.latency_report(points, "T", ["a note"])
    for heading in ("Mean latency", "p50 latency", "p95 latency", "Seconds per step", "Triton / in-process",
                    "Where the time goes"):
        assert heading in text
    assert ["triton", "2", "2.500s", "0.100s", "-", "10.00ms", "2.00ms"] in table_rows(text)
    assert "a note" in text


def test_speedup_table_like_seed_003():
    rows = [L.SpeedupRow("Stable Diffusion (Res=512)", b, "PLMS", 50, "TensorRT FP16", [t], "FW FP16 (AMP)", [f])
            for b, t, f in ((1, 0.9, 3.3), (2, 1.7, 5.2), (4, 2.9, 9.2))]
    lines = L.speedup_table(rows).splitlines()
    assert lines[0] == ("| Model                      |   Batch Size | Sampler   |   Inference Steps |   TensorRT FP16 "
                        "Latency (s) |   FW FP16 (AMP) Latency (s) |   TensorRT vs FW Speedup (x) |")
    assert lines[2] == ("| Stable Diffusion (Res=512) |            1 | PLMS      |                50 |                   "
                        "      0.9 |                         3.3 |                         3.67 |")
    assert len(lines) == 5
    assert tuple(rows[0].row()) == L.SPEEDUP_CSV_COLUMNS == (
        "model", "batch_size", "sampler", "steps", "converted", "converted_latency_s", "framework",
        "framework_latency_s", "speedup_x", "converted_p50_s", "framework_p50_s", "speedup_p50_x", "trials",
        "max_abs_diff")
    assert rows[0].row()["speedup_x"] == pytest.approx(3.667)
    row = L.SpeedupRow("m", 1, "DDIM", 8, "ONNX Runtime FP32", [1.0, 1.0, 4.0], "FW FP32", [2.0, 2.0, 2.0])
    assert "ONNX Runtime vs FW" in L.speedup_table([row])
    assert row.speedup == pytest.approx(1.0) and row.row()["speedup_p50_x"] == pytest.approx(2.0)


def test_time_requests_burns_in_first():
    calls = []
    times = L.time_requests(lambda: calls.append("req"), 2, 3, after_burn_in=lambda: calls.append("reset"))
    assert calls == ["req", "req", "reset", "req", "req", "req"] and len(times) == 3
    with pytest.raises(ValueError):
        L.time_requests(lambda: None, 0, 0)


class FakeTarget:
    def __init__(self, name, log):
        self.name, self.log = name, log

    def __call__(self, steps, seed, samples):
        self.log.append((self.name, steps))

    def reset(self):
        pass

    def breakdown(self, evaluations):
        return {"sampler_overhead_s": 0.5} if self.name == "a" else {}


def test_measure_burns_in_then_takes_turns_request_by_request():
    log = []
    plan = L.LatencyPlan((2, 4), samples=1, seed=0, burn_in=1, trials=2, runs=2)
    points = L.measure([FakeTarget("a", log), FakeTarget("b", log)], plan, devices=["cpu", "cpu"],
                       samplers=["edm_heun", ""], progress=False)
    one_run = [("a", 2), ("b", 2)] + [("a", 2), ("b", 2)] * 2  # burn-in a, b; then trials alternate
    assert log[:12] == one_run * 2 and len(log) == 24
    assert len(points[0].runs) == 2 and all(len(r) == 2 for r in points[0].runs)
    assert [(p.target, p.steps) for p in points] == [("a", 2), ("b", 2), ("a", 4), ("b", 4)]
    assert points[0].evaluations == 3 and points[1].evaluations is None  # EDM Heun: 2 * 2 - 1
    assert points[0].breakdown == {"sampler_overhead_s": 0.5} and points[1].breakdown == {}


def test_form_round_trip_like_the_nim_client():
    requests = pytest.importorskip("requests")
    array = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    prepared = requests.Request("POST", "http://host/v1/infer", data={"samples": 1, "steps": 8, "seed": 0},
                                files={"input_array": ("input_array", npy_bytes(array))}).prepare()
    fields, files = parse_form(prepared.headers["Content-Type"], prepared.body)
    assert fields == {"samples": "1", "steps": "8", "seed": "0"}
    import io

    assert np.array_equal(np.load(io.BytesIO(files["input_array"])), array)
    with pytest.raises(ValueError, match="multipart"):
        parse_form("application/json", b"{}")


# ---- the pipeline's sampler config (no server) ---------------------------------------------------------------

def _manifest(max_batch=8):
    from deployment_toolkit.models import get_model
    from deployment_toolkit.spec import Manifest

    entry = get_model("sd_unet")
    return Manifest(model="sd_unet", preset="small", family="diffusion", task="denoising", metric="psnr",
                    format="onnx", artifact="model.onnx", signature=entry.signature("small"),
                    max_batch_size=max_batch)


def test_sampler_config_and_settings_round_trip():
    from deployment_toolkit.repository.config import parse_text, to_text
    from deployment_toolkit.diffusion.pipeline import (
        PipelineSettings, build_sampler_config, settings_from_manifest,
    )

    settings = settings_from_manifest(_manifest(), "den", "edm_heun", 4, sampler_options={"rho": 5.0})
    cfg = parse_text(to_text(build_sampler_config("pipe", settings)))
    assert cfg.max_batch_size == 0 and cfg.backend == "python"
    assert [(i.name, list(i.dims), i.optional) for i in cfg.input] == [
        ("encoder_hidden_states", [-1, 8, 32], True), ("steps", [1], True), ("seed", [1], True),
        ("samples", [1], True)]
    assert [(o.name, list(o.dims)) for o in cfg.output] == [("latents", [-1, 4, 16, 16])]
    assert cfg.instance_group[0].kind == cfg.instance_group[0].KIND_CPU
    params = {k: v.string_value for k, v in cfg.parameters.items()}
    assert params["denoiser_inputs"] == "sample__0,timestep__1,encoder_hidden_states__2"
    assert PipelineSettings.from_parameters(params) == settings


def test_settings_reject_an_unbatched_denoiser_and_unknown_samplers():
    from deployment_toolkit.repository.config import ConfigError
    from deployment_toolkit.diffusion.pipeline import settings_from_manifest

    with pytest.raises(ConfigError, match="max_batch_size > 0"):
        settings_from_manifest(_manifest(max_batch=0), "den", "ddim", 4)
    with pytest.raises(ConfigError, match="unknown sampler 'plms'"):
        settings_from_manifest(_manifest(), "den", "plms", 4)
    with pytest.raises(ConfigError, match="max_samples"):
        settings_from_manifest(_manifest(), "den", "ddim", 0)
