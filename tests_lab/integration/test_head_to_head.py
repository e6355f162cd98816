"""The comparisons' head-to-head on the real embedded tritonserver and perf_analyzer (moved from
tests/integration/test_search_config.py): two winners re-measured in turns on one server."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_head_to_head_remeasures_both_winners_in_turns(converted, tmp_path):
    """The Model Analyzer comparison's last step, against a stand-in second winner (Model Analyzer itself
    needs its own venv): both configs on one server, measured alternately."""
    from deployment_toolkit.perf.analyzer import PerfOptions
    from deployment_toolkit.search.artifacts import prepare_formats
    from deployment_toolkit_lab.versus.head_to_head import Contender, remeasure, table
    from deployment_toolkit.search.space import Candidate

    formats = {i.format: i for i in prepare_formats("resnet18", "small", ["onnx"], converted["onnx"][0].parent)}
    contenders = [Contender("ours", Candidate("onnx", 1, 0, 8), 4), Contender("other", Candidate("onnx", 1, 1, 4), 2)]
    options = PerfOptions(protocol="grpc", shared_memory="system", measurement_interval_ms=500,
                          stability_percentage=100, max_trials=3, max_attempts=1)
    remeasure(contenders, formats, tmp_path / "h2h", options, rounds=2)
    for c in contenders:
        assert not c.error and len(c.throughputs) == 2 and min(c.throughputs) > 0 and min(c.p99s) > 0
    lines = table(contenders, budget_ms=5000)
    assert len(lines) == 4 and all("2 of 2" in line for line in lines[2:])
    assert not (tmp_path / "h2h" / "scratch_repository").exists()  # the model copies are gone
