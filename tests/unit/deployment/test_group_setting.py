"""A shared group's serving setting (deployment.groupconfig): the threads split between the group's models where a
member runs more than its share, written into the one repository and the model reloaded; the solo winners put back
for a group without a setting; the split kept only where it held more than the search's resolution."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from deployment_toolkit.deployment.groupconfig import (SOLO, SPLIT, GroupSetting, SettingTried, apply, kept,
                                                       split_setting)
from deployment_toolkit.repository.config import read_config


def _model(name: str, threads: int):
    candidate = SimpleNamespace(threads=threads)
    search = SimpleNamespace(model_name=name, outcome=SimpleNamespace(decision=SimpleNamespace(
        winner=SimpleNamespace(candidate=candidate))))
    return SimpleNamespace(search=search)


def _plan(tmp_path: Path, threads: dict[str, int], backend: dict[str, str]):
    for name, own in threads.items():
        folder = tmp_path / name
        folder.mkdir()
        param = f'parameters {{ key: "intra_op_thread_count" value {{ string_value: "{own}" }} }}\n' if own else ""
        (folder / "config.pbtxt").write_text(f'name: "{name}"\nbackend: "{backend[name]}"\nmax_batch_size: 8\n{param}')
    return SimpleNamespace(repository=tmp_path, models={n: _model(n, t) for n, t in threads.items()})


class Server:
    def __init__(self):
        self.loaded: list[str] = []

    def load_model(self, name: str) -> None:
        self.loaded.append(name)


def test_threads_are_split_for_members_over_their_share_and_put_back_after(tmp_path):
    plan = _plan(tmp_path, {"a": 0, "b": 2, "c": 1, "py": 0}, {"a": "onnxruntime", "b": "onnxruntime",
                                                                "c": "onnxruntime", "py": "identity"})
    setting = split_setting(plan, ("a", "b", "c", "py"), cores=2)
    assert setting is not None and setting.name == SPLIT and dict(setting.threads) == {"a": 1, "b": 1}  # c has 1
    server = Server()
    apply(plan, server, ("a", "b", "c", "py"), setting)
    assert server.loaded == ["a", "b"]
    assert read_config(tmp_path / "a" / "config.pbtxt").parameters["intra_op_thread_count"].string_value == "1"
    apply(plan, server, ("a", "b", "c"), None)  # each model's own winner again
    assert server.loaded == ["a", "b", "a", "b"]
    assert "intra_op_thread_count" not in read_config(tmp_path / "a" / "config.pbtxt").parameters
    assert read_config(tmp_path / "b" / "config.pbtxt").parameters["intra_op_thread_count"].string_value == "2"
    apply(plan, server, ("a", "b"), None)
    assert server.loaded == ["a", "b", "a", "b"]  # nothing changed: nothing reloaded


def test_a_group_whose_members_already_run_their_share_has_no_split(tmp_path):
    plan = _plan(tmp_path, {"a": 1, "b": 1}, {"a": "onnxruntime", "b": "onnxruntime"})
    assert split_setting(plan, ("a", "b"), cores=2) is None
    (tmp_path / "eight").mkdir()
    four = _plan(tmp_path / "eight", {"a": 0, "b": 4}, {"a": "onnxruntime", "b": "onnxruntime"})
    assert dict(split_setting(four, ("a", "b"), cores=8).threads) == {"a": 4}  # b runs 4, its share


def test_the_split_is_kept_only_where_it_holds_more_than_the_resolution():
    solo, split = GroupSetting(SOLO), GroupSetting(SPLIT, {"a": 1})
    close = [SettingTried(solo, 300, 100.0), SettingTried(split, 300, 105.0)]
    assert kept(close, 0.1).setting is solo
    better = [SettingTried(solo, 300, 100.0), SettingTried(split, 300, 180.0)]
    assert kept(better, 0.1).setting is split and abs(better[1].factor - 0.6) < 1e-9
    nothing = [SettingTried(solo, 300, None, "no rate"), SettingTried(split, 300, 50.0)]
    assert kept(nothing, 0.1).setting is split
    assert "held no rate (no rate)" in nothing[0].text() and "sharing factor x 0.17" in nothing[1].text()
