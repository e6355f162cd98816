"""Triton deployment toolkit: convert, configure, serve, check and measure models on Triton Inference Server.

From Python: `import deployment_toolkit as dt`, then dt.convert, dt.deploy, dt.serve, dt.connect,
dt.measure_online, dt.measure_offline, dt.search_config, dt.plan, dt.model_source and the typed settings they take,
the results they return and the errors they raise (deployment_toolkit/api.py, imported on first use so that
importing the package stays cheap)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from .compat import install_import_shims as _install_import_shims

__version__ = "0.1.0"


def _hide_scripts_folder_named_triton() -> None:
    """The repo's `triton/` scripts folder is importable as a namespace package when the repo root is on
    sys.path; torch then mistakes it for OpenAI Triton and fails inside torch._dynamo. Hide it.

    Still needed with the `deployment-toolkit` command (issue 19), although the editable install maps only the
    package: the repo root is on sys.path whenever a checkout is used - `python -m deployment_toolkit` run from
    it (the cwd), pytest (tests/conftest.py), and the triton/*.py shims, which keep the seed's promise of running
    from a checkout without an install. Renaming the folder would break the seed's script paths. Only the
    scripts folder (recognised by its convert_model.py) is hidden: a real OpenAI Triton package is left alone
    (tests/unit/project/test_offline_install.py).
    """
    if "triton" in sys.modules:
        return
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return
    if spec is None or spec.origin not in (None, "namespace"):
        return
    locations = list(spec.submodule_search_locations or [])
    if locations and all((Path(p) / "convert_model.py").exists() for p in locations):
        sys.modules["triton"] = None  # type: ignore[assignment]  # `import triton` now raises ImportError


_hide_scripts_folder_named_triton()
_install_import_shims()

# api.__all__, written here too so that `import deployment_toolkit` does not import the API (a test keeps them equal)
__all__ = ["convert", "deploy", "serve", "connect", "measure_online", "measure_offline", "search_config", "plan",
           "plan_deployment", "load_deployment", "deploy_pipeline", "model_source",
           "DataSpec", "Manifest", "ModelSignature", "TensorSpec", "ModelSource", "ConvertOptions", "ConfigOptions",
           "PerfOptions", "OutputRequest", "SweepOutcome", "SearchSettings", "SearchJob", "SearchServer", "SearchRun",
           "Demand", "Checks", "Deploy", "PlanResult", "SearchError", "PlanError", "Deployment", "DeploymentSettings",
           "DeploymentPlan", "DeploymentPlanError", "PipelineRequest", "PipelineRun", "PipelineLayout", "Format",
           "Objective", "Reuse", "LocalTritonServer", "TritonClient"]


def __getattr__(name: str):
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
