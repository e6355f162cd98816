"""train's and accuracy-demo's flags take their defaults from the settings they run (TrainConfig, TrainedExport,
DUMP_BATCH_SIZE in deployment_toolkit.train): each default written once (issue 37). train may not import config, so
the flags are declared in the commands; a flag that restated another default would fail here."""
from __future__ import annotations

import inspect

from deployment_toolkit import train
from deployment_toolkit.commands import accuracy_demo, train_segmentation
from deployment_toolkit.train import DUMP_BATCH_SIZE, TrainConfig, TrainedExport


def test_train_defaults_are_the_train_config():
    args = train_segmentation._parser().parse_args(["--train-dir", "t", "--output-dir", "o"])
    assert train_segmentation.settings_from_args(args) == (TrainConfig(), TrainedExport())


def test_train_flags_keep_their_forms():
    args = train_segmentation._parser().parse_args(
        ["--train-dir", "t", "--output-dir", "o", "--no-augment", "--no-progress", "--onnx-opset", "18",
         "--max-batch-size", "4", "--lr", "0.01", "--batch-size", "32"])
    cfg, export = train_segmentation.settings_from_args(args)
    assert (cfg.augment, cfg.progress, cfg.lr, cfg.batch_size) == (False, False, 0.01, 32)
    assert export == TrainedExport(opset=18, max_batch_size=4)


def test_accuracy_demo_defaults_are_the_training_and_dump_defaults():
    args = accuracy_demo._parser().parse_args([])
    cfg = TrainConfig()
    assert (args.seed, args.max_seconds, args.threads, not args.no_progress) == \
        (cfg.seed, cfg.max_seconds, cfg.threads, cfg.progress)
    assert args.batch_size == DUMP_BATCH_SIZE


def test_the_library_functions_take_the_same_defaults():
    dump = inspect.signature(train.framework_dump).parameters
    assert (dump["model_name"].default, dump["preset"].default, dump["batch_size"].default,
            dump["threads"].default) == (TrainConfig.model, TrainConfig.preset, DUMP_BATCH_SIZE, TrainConfig.threads)
    export = inspect.signature(train.export_trained).parameters
    assert (export["opset"].default, export["max_batch_size"].default) == (TrainedExport.opset,
                                                                           TrainedExport.max_batch_size)
