"""A failed step's one-line reason keeps the cause (issue 46 item 7): a message whose first line only announces
what follows ('... (exit 99):') keeps the next line, perf_analyzer's own words."""
from deployment_toolkit.errors import UserError, reason_line
from deployment_toolkit.steps import StepRunner


def test_a_header_line_keeps_the_line_that_says_why():
    err = UserError("perf_analyzer failed at batch 1, request rate 8068/s (exit 99):\n"
                    "Failed to retrieve results from inference request.\ncommand: perf_analyzer -m x\nfull output: log")
    assert reason_line(err) == ("perf_analyzer failed at batch 1, request rate 8068/s (exit 99): "
                                "Failed to retrieve results from inference request.")
    assert reason_line(UserError("model x is missing\nsecond line")) == "model x is missing"
    assert reason_line(UserError("")) == "UserError"
    assert len(reason_line("a" * 5000)) == 600


def test_a_failed_step_records_the_reason_not_the_header(tmp_path):
    steps = StepRunner(tmp_path, stop_on_failure=False)

    def fails():
        raise UserError("perf_analyzer failed at rate 10/s (exit 99):\nThread [0] had error: server hung")

    steps.call("capacity", fails)
    assert steps.results[-1].reason.endswith("(exit 99): Thread [0] had error: server hung")
