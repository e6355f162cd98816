"""`deployment-toolkit size` restates no default (issue 37): its flags are built from the request's specs
(sizing.request, config.setting), so the command without optional flags asks for what a Python caller gets from
the specs' own defaults, and numbers are refused as they always were."""
from __future__ import annotations

import dataclasses

import pytest

from deployment_toolkit.commands.size_fleet import _build_parser, request_from_args
from deployment_toolkit.config import flag_of
from deployment_toolkit.errors import UserInputError
from deployment_toolkit.sizing.plan import Demand
from deployment_toolkit.sizing.request import CapacitySpec, ConfirmSpec, CostSpec, CoverageSpec, DemandSpec, \
    FleetCheckSpec, K8sSpec, MemorySpec, SizeRequest

SPECS = (DemandSpec, CostSpec, CoverageSpec, MemorySpec, CapacitySpec, ConfirmSpec, FleetCheckSpec, K8sSpec,
         SizeRequest)
REQUIRED = ("run_a", "--peak-rps", "400", "--p99-ms", "50")


def parse(*flags: str) -> SizeRequest:
    return request_from_args(_build_parser().parse_args([*REQUIRED, *flags]))


def test_only_the_required_flags_give_the_specs_defaults():
    """A flag that restated a default (or a type: "3000" for 3000) of its own would make these differ."""
    expected = SizeRequest(runs=("run_a",), demand=DemandSpec(peak_rps=400.0, p99_ms=50.0), costs=CostSpec(),
                           coverage=CoverageSpec(), memory=MemorySpec(), capacity=CapacitySpec(),
                           confirm=ConfirmSpec(), fleet=FleetCheckSpec(), k8s=K8sSpec())
    got = parse()
    assert got == expected
    for name in ("capacity", "confirm", "fleet", "k8s"):  # == on floats hides 3000 vs 3000.0: the types too
        for field in dataclasses.fields(getattr(got, name)):
            assert type(getattr(getattr(got, name), field.name)) is type(getattr(getattr(expected, name), field.name))


def test_every_spec_field_with_a_flag_is_on_the_command():
    options = {o for action in _build_parser()._actions for o in action.option_strings}
    flags = {flag_of(f).name for spec in SPECS for f in dataclasses.fields(spec) if flag_of(f) is not None}
    assert flags <= options and "--distribution" in flags and "--gsd-m" in flags


def test_fields_of_one_name_in_several_specs_keep_their_own_flags():
    r = parse("--confirm-run", "b", "--fleet-run", "c", "--k8s-run", "d", "--capacity-trials", "2",
              "--confirm-trials", "5", "--capacity-window-ms", "100", "--fleet-window-ms", "200", "--memory", "4Gi")
    assert (r.confirm.run, r.fleet.run, r.k8s.run) == ("b", "c", "d")
    assert (r.capacity.trials, r.confirm.trials, r.capacity.window_ms, r.fleet.window_ms) == (2, 5, 100, 200)
    assert r.k8s.memory == "4Gi" and r.memory == MemorySpec()


def test_the_demand_flags_have_the_range_the_step_checks():
    """Written once, in sizing.plan.Demand: the command refuses what the step's Demand refuses, in its words."""
    ranges = {f.name: flag_of(f) for f in dataclasses.fields(Demand)}
    spec = {f.name: flag_of(f) for f in dataclasses.fields(DemandSpec)}
    for mine, theirs in (("peak_rps", "peak_rps"), ("p99_ms", "slo_ms"), ("headroom", "headroom"),
                         ("gpus_per_node", "gpus_per_node")):
        a, b = spec[mine], ranges[theirs]
        assert (a.name, a.unit, a.low, a.high, a.low_open) == (b.name, b.unit, b.low, b.high, b.low_open)


def test_a_bad_number_is_refused_as_before(capsys):
    with pytest.raises(SystemExit) as exit_info:  # an int flag: argparse refuses it, exit 2
        parse("--capacity-trials", "nan")
    assert exit_info.value.code == 2 and "argument --capacity-trials: invalid int value: 'nan'" in capsys.readouterr().err
    assert parse("--capacity-trials", "0").capacity.trials == 0  # no range: accepted, as it always was
    with pytest.raises(UserInputError, match=r"^--peak-rps must be > 0 and <= 1e\+09 inferences/s, got nan$"):
        request_from_args(_build_parser().parse_args(["run_a", "--peak-rps", "nan", "--p99-ms", "50"]))
    with pytest.raises(UserInputError, match=r"^--capacity-resolution must be a finite number, got inf$"):
        parse("--capacity-resolution", "inf")
    assert parse("--confirm-trials", "0").confirm.trials == 0  # the step refuses it, in its own words
