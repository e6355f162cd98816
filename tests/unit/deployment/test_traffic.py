"""Traffic that varies over time (issue 44, item 4): rate files read with every bad row named by file and line,
series sampled differently aligned on one grid, and peaks that do not coincide needing fewer replicas together."""
from __future__ import annotations

import pytest

from deployment_toolkit.deployment.packing import PackLimits, models_from_traffic, pack
from deployment_toolkit.deployment.traffic import (TimeKind, align, constant, peak, peak_of_sum, read_csv,
                                                   sum_of_peaks, worst_slice)
from deployment_toolkit.errors import UserFileNotFoundError, UserInputError


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def day_and_night(tmp_path):
    """A day model busy 08:00-20:00, a night model busy the other half; 80 inf/s at their peaks, 10 off it."""
    day = write(tmp_path, "day.csv", "time,rate\n00:00,10\n08:00,80\n20:00,10\n")
    night = write(tmp_path, "night.csv", "time,rps\n00:00,80\n08:00,10\n20:00,80\n")
    return align({"day": read_csv(day), "night": read_csv(night)})


def test_opposite_peaks_need_fewer_replicas_together_than_alone(tmp_path):
    traffic = day_and_night(tmp_path)
    assert peak_of_sum(traffic, ["day", "night"]) == 90 and sum_of_peaks(traffic, ["day", "night"]) == 160
    models = models_from_traffic(traffic, {"day": 100.0, "night": 100.0})
    limits = PackLimits(headroom=0.0)
    alone = sum(pack([m], limits).replicas for m in models)
    both = pack(models, limits)
    assert alone == 2 and both.replicas == 1 < alone
    group = both.groups[0]
    assert group.shared and group.replicas_by_peaks == 2  # had the peaks coincided, they would need 2
    assert group.peak_of_sum_rps == 90 and group.sum_of_peaks_rps == 160
    assert traffic.label(group.worst_slice) == "00:00"  # first of the tied slices: night 80 + day 10
    assert group.rates == pytest.approx({"day": 10.0, "night": 80.0})


def test_the_same_peaks_at_one_time_do_not_share(tmp_path):
    a = write(tmp_path, "a.csv", "time,rate\n00:00,10\n08:00,80\n20:00,10\n")
    traffic = align({"a": read_csv(a), "b": read_csv(a)})
    assert pack(models_from_traffic(traffic, {"a": 100.0, "b": 100.0}), PackLimits(headroom=0.0)).replicas == 2


def test_mixed_sampling_grids_align_on_the_union_of_change_points(tmp_path):
    hourly = write(tmp_path, "hourly.csv", "00:00,1\n01:00,2\n02:00,3\n")
    half = write(tmp_path, "half.csv", "time,rate\n00:30,10\n01:30,20\n")
    traffic = align({"hourly": read_csv(hourly), "half": read_csv(half), "flat": constant(5.0)})
    assert traffic.kind is TimeKind.CLOCK
    assert [traffic.label(k) for k in range(traffic.slices)] == ["00:00", "00:30", "01:00", "01:30", "02:00"]
    assert traffic.rates["hourly"] == (1, 1, 2, 2, 3)  # step-hold: a rate holds until the next row
    assert traffic.rates["half"] == (20, 10, 10, 20, 20)  # before 00:30 the last row's rate holds (a daily profile)
    assert traffic.rates["flat"] == (5,) * 5
    w = worst_slice(traffic, {"hourly": 1.0, "half": 1.0})
    assert (w.index, w.load, dict(w.rates)) == (4, 23.0, {"hourly": 3.0, "half": 20.0})


def test_seconds_and_timestamps_hold_their_ends(tmp_path):
    a = write(tmp_path, "a.csv", "0,1\n60,2\n")
    b = write(tmp_path, "b.csv", "30,5\n90,7\n")
    traffic = align({"a": read_csv(a), "b": read_csv(b)})
    assert traffic.starts == (0, 30, 60, 90)
    assert traffic.rates["a"] == (1, 1, 2, 2) and traffic.rates["b"] == (5, 5, 5, 7)  # first rate before, last after
    iso = write(tmp_path, "iso.csv", "time,rate\n2026-01-01T00:00:00Z,3\n2026-01-01T01:30:00+01:00,4\n"
                                     "2026-01-01T01:00:00,5\n")
    series = read_csv(iso)
    assert series.kind is TimeKind.TIMESTAMP and peak(series) == 5
    assert [t - series.times[0] for t in series.times] == [0, 1800, 3600]  # offsets honoured, naive is UTC
    same = write(tmp_path, "same.csv", "2026-01-01T00:00:00Z,3\n2026-01-01T01:00:00+01:00,4\n")
    with pytest.raises(UserInputError, match="same.csv line 2: .*not after the row above"):
        read_csv(same)  # 01:00+01:00 is 00:00Z


def test_a_peak_alone_is_a_constant_series():
    traffic = align({"a": constant(12.5)})
    assert traffic.slices == 1 and traffic.rates["a"] == (12.5,) and traffic.kind is None
    with pytest.raises(UserInputError, match="peak_rps must be a finite rate"):
        constant(float("nan"))


@pytest.mark.parametrize("text, line, says", [
    ("time,rate\n0,1\n60,abc\n", 3, "rate 'abc' is not a number"),
    ("0,1\n60,-2\n", 2, "is negative"),
    ("0,1\n60,inf\n", 2, "is not finite"),
    ("0,1\n60,nan\n", 2, "is not finite"),
    ("time,rate\n0,1\n0,2\n", 3, "is not after the row above"),
    ("0,1\n30,2\n20,2\n", 3, "is not after the row above"),
    ("0,1\n60,2,3\n", 2, "3 columns"),
    ("0,1\n01:00,2\n", 2, "is HH:MM but the rows above are seconds"),
    ("# comment\n\nmonday,1\n", 3, "is not seconds, an ISO-8601 timestamp or HH:MM"),
    ("25:00,1\n", 1, "is not seconds"),
])
def test_each_bad_row_is_one_line_naming_the_file_and_line(tmp_path, text, line, says):
    path = write(tmp_path, "traffic.csv", text)
    with pytest.raises(UserInputError) as err:
        read_csv(path)
    message = str(err.value)
    assert f"{path} line {line}: " in message and says in message and "\n" not in message


def test_an_empty_or_missing_file_is_named(tmp_path):
    with pytest.raises(UserInputError, match="empty.csv: no rows"):
        read_csv(write(tmp_path, "empty.csv", "time,rate\n\n"))
    with pytest.raises(UserFileNotFoundError, match="missing.csv does not exist"):
        read_csv(tmp_path / "missing.csv")


def test_files_that_write_time_differently_are_refused_together(tmp_path):
    clock = read_csv(write(tmp_path, "clock.csv", "00:00,1\n"))
    seconds = read_csv(write(tmp_path, "seconds.csv", "0,1\n"))
    with pytest.raises(UserInputError, match="mix kinds of time: .*clock.csv \\(HH:MM\\).*seconds.csv \\(seconds\\)"):
        align({"a": clock, "b": seconds})
