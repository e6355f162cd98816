"""Steps load on the Python the user runs: the Python backend's stub runs this interpreter's own libpython, so a
model importing `ssl` (as `requests` and `transformers` do) loads, whatever build of Python the venv was made from
(pyenv, conda, uv), not only the system's."""
import sys
import textwrap

import numpy as np
import pytest

from deployment_toolkit.client import TritonClient
from deployment_toolkit.server import LocalTritonServer, ServerConfig
from deployment_toolkit.server.libpython import stub_python

pytestmark = pytest.mark.integration

SSL_MODEL = textwrap.dedent('''
    import ssl  # the extension that needs the interpreter's own libpython (_PyModule_Add on 3.11.7)
    import sys

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            version = ".".join(map(str, sys.version_info[:3]))
            out = np.array([[ord(c) for c in version.ljust(16)]], dtype=np.int32)
            return [pb_utils.InferenceResponse([pb_utils.Tensor("version", out)]) for _ in requests]
''')
SSL_CONFIG = textwrap.dedent('''
    name: "ssl_step"
    backend: "python"
    max_batch_size: 0
    input { name: "x" data_type: TYPE_FP32 dims: [ 1 ] }
    output { name: "version" data_type: TYPE_INT32 dims: [ 1, 16 ] }
    instance_group { kind: KIND_CPU count: 1 }
''')


def test_a_step_importing_ssl_loads_and_runs_this_interpreters_build(tmp_path):
    (tmp_path / "repo" / "ssl_step" / "1").mkdir(parents=True)
    (tmp_path / "repo" / "ssl_step" / "config.pbtxt").write_text(SSL_CONFIG)
    (tmp_path / "repo" / "ssl_step" / "1" / "model.py").write_text(SSL_MODEL)
    with LocalTritonServer(ServerConfig(tmp_path / "repo", log_dir=tmp_path / "logs")) as server:
        with TritonClient(server.grpc_url) as client:
            out = client.infer("ssl_step", {"x": np.zeros(1, np.float32)}, ["version"])["version"]
    served = "".join(chr(c) for c in out.reshape(-1)).strip()
    assert served == ".".join(map(str, sys.version_info[:3]))  # the stub ran this build, not the system's
    assert stub_python().matches
