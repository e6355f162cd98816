"""What a slow start says (server/startup.py): which models load and for how long, the time limit's message in
each case (still loading, failed, neither), and the check of --server-timeout. No server: log lines and a clock."""
from __future__ import annotations

import argparse
import math

import pytest

from deployment_toolkit.errors import UserInputError
from deployment_toolkit.server.startup import (DEFAULT_START_TIMEOUT_S, LogFollower, ModelLoads, StartWatch,
                                               add_server_timeout, check_start_timeout, timeout_message)

LOADING = 'I1126 23:08:51.098482 12954 model_lifecycle.cc:472] "loading: {name}:1"'
LOADED = 'I1126 23:08:52.578196 12954 model_lifecycle.cc:839] "successfully loaded \'{name}\'"'
FAILED = ('E1126 23:08:52.1 12954 model_lifecycle.cc:641] "failed to load \'{name}\' version 1: Internal: '
          'RuntimeError: weights file is corrupt"')


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_log_says_what_loads_what_loaded_and_what_failed():
    loads = ModelLoads()
    loads.read([LOADING.format(name="slow"), LOADING.format(name="fast"), LOADING.format(name="bad")], now=10.0)
    loads.read([LOADED.format(name="fast"), FAILED.format(name="bad"), 'I1 x] "unloading: other:1"'], now=12.0)
    assert loads.loading(now=40.0) == {"slow": 30.0}
    assert loads.describe(now=40.0) == "loading slow for 30 s; loaded fast; failed bad"
    assert "weights file is corrupt" in loads.failed["bad"]


def test_the_repository_index_adds_what_the_log_does_not_say():
    loads = ModelLoads()
    loads.read([LOADING.format(name="a"), LOADING.format(name="b")], now=0.0)
    loads.read_index([{"name": "a", "state": "READY"}, {"name": "b", "state": "UNAVAILABLE", "reason": "stub died"},
                      {"name": "c", "state": "UNAVAILABLE", "reason": "unloaded"}])
    assert loads.loading(now=5.0) == {}
    assert loads.loaded == {"a"} and loads.failed == {"b": "b: stub died"}  # explicit mode's 'unloaded' is no failure


def test_past_the_limit_a_model_still_loading_is_named_with_its_time_and_the_flag():
    loads = ModelLoads()
    loads.read([LOADING.format(name="levit")], now=2.0)
    text = timeout_message(120.0, loads, now=121.0, log_path="/tmp/log", why=[], tail="last")
    assert text.startswith("tritonserver did not become ready within 120 s: still loading levit (for 119 s)")
    assert "nothing failed" in text and "--server-timeout 240" in text and "\n" not in text


def test_past_the_limit_a_failed_model_says_why_and_that_waiting_does_not_help():
    loads = ModelLoads()
    loads.read([LOADING.format(name="bad"), FAILED.format(name="bad")], now=1.0)
    text = timeout_message(30.0, loads, now=31.0, log_path="/tmp/log", why=[FAILED.format(name="bad")], tail="")
    assert "model(s) bad failed to load, so waiting longer will not help" in text
    assert "weights file is corrupt" in text and "--server-timeout" in text


def test_past_the_limit_with_nothing_loading_the_last_log_lines_are_shown():
    text = timeout_message(30.0, ModelLoads(), now=31.0, log_path="/tmp/log", why=[], tail="E0 something odd")
    assert "(no model was loading)" in text and "--server-timeout SECONDS" in text and text.endswith("something odd")


def test_progress_every_few_seconds_reads_only_this_starts_part_of_the_log(tmp_path):
    log = tmp_path / "tritonserver.log"
    log.write_text(LOADING.format(name="earlier_run") + "\n")
    said: list[str] = []
    clock = Clock()
    watch = StartWatch(log, 60.0, said.append, offset=log.stat().st_size, every_s=5.0, clock=clock)
    with open(log, "a") as fh:
        fh.write(LOADING.format(name="levit") + "\n" + LOADING.format(name="half")[:20])  # a line still being written
    watch.poll()
    assert said == [] and set(watch.models.since) == {"levit"}
    clock.now += 5.0
    watch.poll(index=lambda: None)  # the server does not answer yet
    assert said == ["tritonserver starting: 5 s of 60 s (--server-timeout); loading levit for 5 s"]
    clock.now += 1.0
    watch.poll()
    assert len(said) == 1 and not watch.expired()
    clock.now += 60.0
    assert watch.expired()


def test_a_partial_line_is_read_once_it_is_complete(tmp_path):
    log = tmp_path / "log"
    log.write_text("first line\nsecond ha")
    follower = LogFollower(log)
    assert follower.new_lines() == ["first line"]
    with open(log, "a") as fh:
        fh.write("lf\n")
    assert follower.new_lines() == ["second half"]
    assert LogFollower(tmp_path / "missing").new_lines() == []


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "-inf", "ten", ""])
def test_the_flag_refuses_what_is_not_a_finite_positive_number_of_seconds(value, capsys):
    parser = argparse.ArgumentParser(prog="serve")
    add_server_timeout(parser)
    with pytest.raises(SystemExit) as info:
        parser.parse_args([f"--server-timeout={value}"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--server-timeout" in err and "seconds" in err and "> 0" in err


def test_the_flag_takes_seconds_and_defaults_to_the_one_default():
    parser = argparse.ArgumentParser()
    add_server_timeout(parser)
    assert parser.parse_args([]).server_timeout == DEFAULT_START_TIMEOUT_S
    assert parser.parse_args(["--server-timeout", "600"]).server_timeout == 600.0
    assert check_start_timeout(0.5) == 0.5
    for bad in (0, -1.0, math.nan, math.inf, None):
        with pytest.raises(UserInputError, match="start_timeout_s .*seconds"):
            check_start_timeout(bad, "start_timeout_s")
