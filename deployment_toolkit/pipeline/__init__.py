"""Pre- and post-processing around the model, served as a Triton ensemble (issue 36): the user's functions as
Python-backend models (`<name>_preprocess`, `<name>_postprocess`), the network as the toolkit writes it (`<name>`)
and the ensemble (`<name>_pipeline`, TYPE_STRING raw inputs); checked in-process on the user's raw samples before
anything is written, verified served against in-process, measured with perf_analyzer on the raw samples.

    run = deploy_pipeline(PipelineRequest(model="timm:resnet18", raw_data=Path("images"), result_path=Path("run"),
                                           preprocess=Path("preprocess.py"), postprocess=Path("postprocess.py")))

stepfile: the user's file and its declarations; ports: the tensors; raw: the raw samples; plan: the in-process run
and its checks; wiring: which tensor feeds which (by position where that is unambiguous); configs/write: the
repository; verify, measure, speed, output: the served checks and the run folder; run: the whole run. A caller that
serves the pipeline itself (a deployment of several models) takes the pieces: check_pipeline before anything is
converted (precheck: one raw sample through the steps and the framework model), plan_request -> write_pipeline ->
verify_served, write_input_json for perf, and network_inputs for the network's own search (its inputs as the
preprocess gives them: no get_signature needed)."""
from ..config import PipelineLayout
from .configs import StepServing
from .measure import write_input_json
from .network_inputs import NetworkInputs, network_inputs
from .plan import PipelinePlan
from .precheck import PipelineCheck, check_pipeline
from .ports import Port
from .run import PipelineRequest, PipelineRun, deploy_pipeline, plan_request
from .stepfile import StepFile, StepKind, load_step
from .verify import Verification, verify_served
from .write import WrittenPipeline, write_pipeline

__all__ = ["NetworkInputs", "PipelineCheck", "PipelineLayout", "PipelinePlan", "PipelineRequest", "PipelineRun", "Port",
           "StepFile", "StepKind", "StepServing", "Verification", "WrittenPipeline", "check_pipeline", "deploy_pipeline",
           "load_step", "network_inputs", "plan_request", "verify_served", "write_input_json", "write_pipeline"]
