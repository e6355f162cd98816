"""What `import deployment_toolkit as dt` offers (issue 37): every name it lists resolves, the package and the API
list the same names, the functions say what they return, and importing the package does not import the API."""
from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import deployment_toolkit as dt
from deployment_toolkit import api


def test_every_listed_name_resolves_and_both_lists_agree():
    assert dt.__all__ == api.__all__
    for name in dt.__all__:
        assert getattr(dt, name) is getattr(api, name), name
    assert set(dt.__all__) <= set(dir(dt))
    assert (Path(dt.__file__).parent / "py.typed").is_file()


def test_every_function_says_what_it_returns():
    functions = [getattr(dt, n) for n in dt.__all__ if inspect.isfunction(getattr(dt, n))]
    assert len(functions) >= 8
    missing = [f.__name__ for f in functions if inspect.signature(f).return_annotation is inspect.Signature.empty]
    assert not missing, f"no return annotation: {missing}"


def test_an_unknown_name_is_an_attribute_error():
    try:
        dt.no_such_thing  # noqa: B018
    except AttributeError as err:
        assert "no_such_thing" in str(err)
    else:
        raise AssertionError("dt.no_such_thing resolved")


def test_importing_the_package_does_not_import_the_api():
    code = "import sys, deployment_toolkit; print('deployment_toolkit.api' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"
