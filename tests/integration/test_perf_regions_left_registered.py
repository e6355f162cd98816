"""A perf_analyzer killed past its stop grace never unregisters its system shared-memory regions, and the next run's
registration of the same names fails on the server ("already in manager"). After every run with shared memory the
regions of perf_analyzer's names still registered are unregistered (perf.analyzer.shm_lock); other regions stay.
Against the real embedded tritonserver and tritonclient."""
from __future__ import annotations

import pytest

from tests.conftest import require_triton_tools

pytestmark = pytest.mark.integration


def test_regions_a_killed_run_left_are_unregistered_and_others_stay(tmp_path):
    import tritonclient.grpc as grpcclient
    import tritonclient.utils.shared_memory as shm

    from deployment_toolkit.cleanup import perf_region_pattern
    from deployment_toolkit.perf.analyzer.shm_lock import _unregister_left
    from deployment_toolkit.server.local import LocalTritonServer, ServerConfig

    require_triton_tools()
    (tmp_path / "repo").mkdir()
    with LocalTritonServer(ServerConfig(tmp_path / "repo", log_dir=tmp_path / "log")) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        handles = []
        try:
            for name in ("INPUT__0_0_0", "OUTPUT__0", "mine"):  # as a killed perf_analyzer left them, and another's
                key = f"/dtk_test_{name}_{tmp_path.name}"
                handles.append(shm.create_shared_memory_region(name, key, 64))
                client.register_system_shared_memory(name, key, 64)
            with pytest.raises(Exception, match="already in manager"):  # what the next run hit
                client.register_system_shared_memory("INPUT__0_0_0", f"/dtk_test_again_{tmp_path.name}", 64)
            _unregister_left(server.grpc_url, "grpc", perf_region_pattern(["INPUT__0"], ["OUTPUT__0"]))
            left = client.get_system_shared_memory_status(as_json=True).get("regions", {})
            assert sorted(left) == ["mine"]
        finally:
            client.unregister_system_shared_memory()
            for h in handles:
                shm.destroy_shared_memory_region(h)
            client.close()
