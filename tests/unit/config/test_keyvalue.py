"""The one KEY=VALUE reader (issue 56): one value rule for --model-arg, --dataloader-arg, --sampler-option (and text
for --node-selector), stated in each flag's --help, and bad input as one line naming the flag."""
from __future__ import annotations

import argparse

import pytest

from deployment_toolkit.config.keyvalue import MAX_LITERAL, VALUE_RULE, parse_pairs
from deployment_toolkit.errors import UserInputError


def test_values_are_python_literals_else_text():
    got = parse_pairs(["n=3", "x=0.5", "on=True", "off=false", "yes=TRUE", "none=None", "s='quoted'", "l=[1, 2]",
                       "d={'a': 1}", "name=resnet", "spaced=eu west", "empty=", "eq=a=b", " k =7", "neg=-1e3",
                       "call=print(1)", "bad={[1]: 2}"], "--model-arg")
    assert got == {"n": 3, "x": 0.5, "on": True, "off": False, "yes": True, "none": None, "s": "quoted",
                   "l": [1, 2], "d": {"a": 1}, "name": "resnet", "spaced": "eu west", "empty": "", "eq": "a=b",
                   "k": 7, "neg": -1000.0, "call": "print(1)", "bad": "{[1]: 2}"}
    assert list(got) == ["n", "x", "on", "off", "yes", "none", "s", "l", "d", "name", "spaced", "empty", "eq", "k",
                         "neg", "call", "bad"]


def test_text_keeps_every_value_as_given():
    assert parse_pairs(["zone=1", "gpu=true", "label=NVIDIA-H100", "empty="], "--node-selector", text=True) == \
        {"zone": "1", "gpu": "true", "label": "NVIDIA-H100", "empty": ""}


@pytest.mark.parametrize("items, words", [
    (["width"], "--model-arg 'width': give KEY=VALUE (no '='), e.g. --model-arg name=value"),
    (["=3"], "--model-arg '=3': give KEY=VALUE (an empty key)"),
    ([""], "--model-arg '': give KEY=VALUE (no '=')"),
    (["a=1", "a=2"], "--model-arg: a is given twice (1 and 2): give it once"),
    (["a=1", " a =1"], "--model-arg: a is given twice (1 and 1): give it once"),
    (["w=" + "9" * (MAX_LITERAL + 1)], "a --model-arg value of 10,001 characters is past the 10,000 taken"),
    (["w=" + "-" * 5000 + "1"], "a --model-arg value nests too deeply to read"),
])
def test_bad_input_is_one_line_naming_the_flag(items, words):
    with pytest.raises(UserInputError) as err:
        parse_pairs(items, "--model-arg")
    assert words in str(err.value) and "\n" not in str(err.value)


def test_nothing_given_is_an_empty_dict():
    assert parse_pairs([], "--dataloader-arg") == {}


def test_each_flag_states_the_rule_in_its_help():
    from deployment_toolkit.commands.deploy_diffusion import _parser as diffusion_parser
    from deployment_toolkit.data.user import add_data_arguments
    from deployment_toolkit.perf.analyzer import add_perf_arguments
    from deployment_toolkit.sources.cli import add_source_arguments

    parsers = []
    for add in (add_source_arguments, add_data_arguments, add_perf_arguments):
        parsers.append(argparse.ArgumentParser())
        add(parsers[-1])
    parsers.append(diffusion_parser())
    flags = ("--model-arg", "--dataloader-arg", "--dataloader-arg", "--sampler-option")
    for parser, flag in zip(parsers, flags):
        action = next(a for a in parser._actions if flag in a.option_strings)
        assert VALUE_RULE in action.help, (flag, action.help)
