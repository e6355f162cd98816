"""bench-corpus's flags take their defaults from the settings the corpus run uses (CorpusSettings, fallback_cost's
FALLBACK_REPEATS): each default written once (issue 37). corpus may not import config, so the flags are declared in
the command; a flag that restated another default would fail here."""
from __future__ import annotations

import inspect

import pytest

from deployment_toolkit_lab.commands import benchmark_corpus
from deployment_toolkit_lab.corpus.run import FORMATS, CorpusSettings, run_corpus
from deployment_toolkit_lab.corpus.speed import FALLBACK_REPEATS, fallback_cost


def test_bench_corpus_defaults_are_the_corpus_settings():
    args = benchmark_corpus._parser().parse_args([])
    assert benchmark_corpus.settings_from_args(args, args.formats.split(",")) == CorpusSettings()
    assert CorpusSettings().formats == FORMATS
    assert args.fallback_repeats == FALLBACK_REPEATS == inspect.signature(fallback_cost).parameters["repeats"].default


def test_bench_corpus_flags_keep_their_forms():
    args = benchmark_corpus._parser().parse_args(["--no-serve", "--export-timeout", "0", "--perf-window-ms", "800"])
    settings = benchmark_corpus.settings_from_args(args, ["onnx"])
    assert settings == CorpusSettings(formats=("onnx",), serve=False, perf_window_ms=800, timeout_s=None)


def test_run_corpus_takes_settings_or_changes_to_them(tmp_path):
    assert run_corpus([], tmp_path, formats=("onnx",), perf_window_ms=800) == []
    assert run_corpus([], tmp_path, CorpusSettings(serve=False)) == []
    with pytest.raises(TypeError):
        run_corpus([], tmp_path, window=800)
