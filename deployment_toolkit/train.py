"""Train a registered segmentation model on npz data, and carry the trained weights into export and dumps.

Why this exists: the converters build zoo models with random weights, which is right for checking
that a format reproduces the framework but says nothing about accuracy. Here a model trained on the
synthetic shapes data goes through the same export functions (`export_onnx`, `verify`) and the same
dump writer as the converter and `run_inference_on_fw.py`, so Triton's Dice against labels can be
compared with the framework's. Weights are stored as safetensors (loading never unpickles objects),
and the export directory keeps a copy recorded in the manifest's `export_options`.
"""
from __future__ import annotations

import json
import logging
import math
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .results.identity import file_digest
from .sources.trained import TrainingError, build_trained, segmentation_entry  # noqa: F401  (re-exported)
from .spec import ARTIFACT_NAMES, Manifest, ModelSignature, atomic_write_text

log = logging.getLogger(__name__)

if TYPE_CHECKING:  # pragma: no cover
    from torch import nn

WEIGHTS_NAME = "weights.safetensors"
TRAINING_JSON = "training.json"


@dataclass
class TrainConfig:
    """One training run; each default written once (the train command's flags and accuracy-demo's take theirs from
    these fields: train may not import config, so the flags are declared in the commands)."""

    model: str = "unet2d"
    preset: str = "small"
    batch_size: int = 16
    lr: float = 5e-3  # Adam; cosine-annealed to 0 over the step or time budget, whichever runs out first
    max_seconds: float = 150.0
    max_steps: int = 5000
    seed: int = 0
    threads: int = 2
    augment: bool = True  # random flips and transposes: they keep discs discs and distractors distractors
    progress: bool = True


@dataclass(frozen=True)
class TrainedExport:
    """How train_segmentation exports the trained model (the train command's --onnx-opset, --max-batch-size)."""

    opset: int = 17
    max_batch_size: int | None = None  # None: the preset's


# dumps of the trained model go in batches of this many (the small U-Net's max batch; accuracy-demo's --batch-size)
DUMP_BATCH_SIZE = 8


@dataclass
class TrainResult:
    steps: int
    seconds: float
    stopped_by: str  # "time" | "steps"
    final_loss: float
    loss_history: list[tuple[int, float]] = field(default_factory=list)  # (step, mean loss over the last 25)


def load_folder(folder: str | Path, signature: ModelSignature, label: str = "labels") -> tuple[np.ndarray, ...]:
    """(ids, images, masks) of an npz folder, read and shape-checked by the client's FolderSource."""
    from .data.batches import FolderSource

    if not Path(folder).is_dir():
        raise TrainingError(f"data folder {folder} does not exist: write one with "
                            f"`python -m deployment_toolkit.data.shapes --output-dir {folder}`")
    ids, inputs, labels = next(FolderSource(Path(folder), signature).batches(1 << 62))
    if label not in labels:
        raise TrainingError(f"{folder} has no {label!r} arrays (it has {sorted(labels) or 'no labels'}); "
                            "write it with deployment_toolkit.data.shapes.write_npz_folder")
    return ids, inputs[signature.inputs[0].name], labels[label]


def _lr_factor(step: int, elapsed: float, cfg: TrainConfig) -> float:
    progress = min(1.0, max(step / cfg.max_steps, elapsed / cfg.max_seconds))
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def _augment(x, y, rng: np.random.Generator):
    """One random flip/transpose for the whole batch (cheap; 8 variants of each image)."""
    if rng.random() < 0.5:
        x, y = x.flip(-1), y.flip(-1)
    if rng.random() < 0.5:
        x, y = x.flip(-2), y.flip(-2)
    if rng.random() < 0.5:
        x, y = x.transpose(-1, -2), y.transpose(-1, -2)
    return x, y


def train(model: "nn.Module", images: np.ndarray, masks: np.ndarray, cfg: TrainConfig) -> TrainResult:
    """Adam on cross-entropy + Dice (MONAI DiceCELoss) until the step or time budget runs out."""
    import torch
    from monai.losses import DiceCELoss
    from tqdm import tqdm

    if len(images) != len(masks) or len(images) < cfg.batch_size:
        raise TrainingError(f"need at least batch_size={cfg.batch_size} image/mask pairs, got {len(images)} images "
                            f"and {len(masks)} masks")
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    x_all = torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32))
    y_all = torch.from_numpy(np.ascontiguousarray(masks, dtype=np.int64))
    loss_fn = DiceCELoss(to_onehot_y=True, softmax=True)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    model.train()
    bar = tqdm(total=cfg.max_steps, unit="step", desc="training", disable=not cfg.progress)
    history: list[tuple[int, float]] = []
    recent: list[float] = []
    step, t0 = 0, time.perf_counter()
    elapsed = 0.0
    while step < cfg.max_steps and elapsed < cfg.max_seconds:
        for group in opt.param_groups:
            group["lr"] = cfg.lr * _lr_factor(step, elapsed, cfg)
        idx = torch.randint(0, len(x_all), (cfg.batch_size,), generator=gen)
        x, y = x_all[idx], y_all[idx].unsqueeze(1)
        if cfg.augment:
            x, y = _augment(x, y, rng)
        loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        elapsed = time.perf_counter() - t0
        recent.append(loss.item())
        if step % 25 == 0:
            history.append((step, float(np.mean(recent[-25:]))))
            # the budget, not max_steps, usually ends training: size the bar so its ETA is the real one
            reachable = step + int((cfg.max_seconds - elapsed) / (elapsed / step))
            bar.total = max(step, min(cfg.max_steps, reachable))
            bar.set_postfix(loss=f"{history[-1][1]:.4f}", refresh=False)
        bar.update(1)
    bar.total = step
    bar.refresh()
    bar.close()
    model.eval()
    return TrainResult(steps=step, seconds=round(elapsed, 2), stopped_by="steps" if step >= cfg.max_steps else "time",
                       final_loss=float(np.mean(recent[-25:])) if recent else float("nan"), loss_history=history)


def predict(model: "nn.Module", images: np.ndarray, batch_size: int = 32) -> np.ndarray:
    """Logits (N, C, H, W) of the model in eval mode."""
    import torch

    model.eval()
    outs = []
    with torch.inference_mode():
        for start in range(0, len(images), batch_size):
            outs.append(model(torch.from_numpy(np.ascontiguousarray(images[start:start + batch_size]))).numpy())
    return np.concatenate(outs)


def evaluate(model: "nn.Module", images: np.ndarray, masks: np.ndarray, batch_size: int = 32) -> dict[str, float]:
    """dice_mean / dice_class_<c> with the same function calculate_metrics.py uses."""
    from .scores.segmentation import dice_scores

    return dice_scores(predict(model, images, batch_size), masks).as_metrics("dice")


# ---------------------------------------------------------------------------------------- weights

def save_weights(model: "nn.Module", path: str | Path, model_name: str, preset: str) -> str:
    """safetensors file tagged with the registry entry it fits; returns its sha256."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(path), metadata={"model": model_name, "preset": preset})
    return file_digest(path)


def write_training_json(directory: str | Path, info: dict[str, Any]) -> Path:
    path = Path(directory) / TRAINING_JSON
    atomic_write_text(path, json.dumps(info, indent=2, default=str) + "\n")
    return path


def train_config_dict(cfg: TrainConfig) -> dict[str, Any]:
    return asdict(cfg)


# ---------------------------------------------------------------------------------------- export

def _versions() -> dict[str, str]:
    import onnx
    import onnxruntime
    import torch

    return {"torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}


def export_trained(weights: str | Path, output_dir: str | Path, model_name: str = TrainConfig.model,
                   preset: str = TrainConfig.preset, *, opset: int = TrainedExport.opset,
                   max_batch_size: int | None = TrainedExport.max_batch_size,
                   verify_batch_sizes: tuple[int, ...] = (1, 2), seed: int = 0) -> Manifest:
    """ONNX artifact + manifest.json of the trained model, verified against it like convert() does.

    The weights file is copied next to the artifact and named (with its sha256) in
    `export_options`, so the directory says which training produced it. Raises VerificationError
    (manifest still written) when ONNX Runtime disagrees with PyTorch beyond the fp32 tolerance.
    """
    import torch

    from .export.errors import VerificationError
    from .export.onnx import OnnxSettings, export_onnx
    from .export.verify import VerifyPlan, verify
    from .sources.outputs import torch_callable
    from .runtimes.artifact import load_runtime

    entry = segmentation_entry(model_name)
    model = build_trained(model_name, preset, weights)
    p = entry.preset(preset)
    signature = p.signature
    max_batch = p.max_batch_size if max_batch_size is None else max_batch_size
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    artifact = out / ARTIFACT_NAMES["onnx"]
    if Path(weights).resolve() != (out / WEIGHTS_NAME).resolve():
        shutil.copy2(weights, out / WEIGHTS_NAME)

    t0 = time.perf_counter()
    examples = signature.examples(min(2, max(max_batch, 1)), seed=seed)
    example_args = tuple(torch.from_numpy(examples[t.name]) for t in signature.inputs)
    options = export_onnx(model, signature, example_args, artifact, OnnxSettings(opset=opset))
    options.update(export_seconds=round(time.perf_counter() - t0, 3), weights=WEIGHTS_NAME,
                   weights_sha256=file_digest(out / WEIGHTS_NAME), trained=True)
    manifest = Manifest(
        model=entry.name, preset=preset, family=entry.family, task=entry.task, metric=entry.metric, format="onnx",
        artifact=artifact.name, signature=signature, max_batch_size=max_batch, precision="fp32",
        export_options=options, versions=_versions(),
    )
    in_names = [t.name for t in signature.inputs]
    out_names = [t.name for t in signature.outputs]
    runtime = load_runtime(str(artifact), "onnx", in_names, out_names, device="cpu")
    sizes = tuple(b for b in verify_batch_sizes if max_batch == 0 or b <= max_batch) or (1,)
    result = verify(torch_callable(model, in_names, out_names), runtime, signature, entry.task,
                    VerifyPlan(precision="fp32", batch_sizes=sizes, seed=seed))
    manifest.verification = result.to_dict()
    manifest.save(out)
    if not result.passed:
        raise VerificationError(f"trained {model_name} as onnx: verification failed: {result.message}")
    return manifest


def framework_dump(weights: str | Path, data_dir: str | Path, output_dir: str | Path,
                   model_name: str = TrainConfig.model, preset: str = TrainConfig.preset,
                   batch_size: int = DUMP_BATCH_SIZE, threads: int = TrainConfig.threads) -> Path:
    """What run_inference_on_fw.py --runtime framework does, but with the trained weights: eager
    PyTorch over an npz folder into a dump (labels included) that calculate_metrics.py reads."""
    import torch

    from .data.batches import FolderSource
    from .data.predict import predict_batches, write_dump
    from .sources.outputs import torch_callable

    torch.set_num_threads(threads)
    entry = segmentation_entry(model_name)
    signature = entry.signature(preset)
    model = build_trained(model_name, preset, weights)
    predict_fn = torch_callable(model, [t.name for t in signature.inputs], [t.name for t in signature.outputs])
    source = FolderSource(Path(data_dir), signature)
    meta = {"model": entry.name, "task": entry.task, "source": "torch",
            "extra": {"preset": preset, "weights": str(weights), "weights_sha256": file_digest(weights)}}
    return write_dump(predict_batches(source.batches(batch_size), predict_fn), output_dir, meta, dump_labels=True)


def train_segmentation(train_dir: str | Path, output_dir: str | Path, cfg: TrainConfig,
                       heldout_dir: str | Path | None = None, export_dir: str | Path | None = None,
                       export: TrainedExport | None = None) -> dict[str, Any]:
    """Train a registered segmentation model on an npz folder, score the held-out folder, save the weights and
    training.json, and (with `export_dir`) export a verified ONNX (as `export` says); returns what training.json
    records (plus the export's manifest under "manifest" when there is one). A failed verification raises
    VerificationError."""
    export = export or TrainedExport()
    train_dir, output_dir = Path(train_dir), Path(output_dir)
    entry = segmentation_entry(cfg.model)
    signature = entry.signature(cfg.preset)
    _, images, masks = load_folder(train_dir, signature)
    log.info(f"training {cfg.model} ({cfg.preset}) on {len(images)} samples from {train_dir}, budget "
             f"{cfg.max_seconds:g} s / {cfg.max_steps} steps, {cfg.threads} thread(s)")
    model = entry.build(cfg.preset, seed=cfg.seed)
    result = train(model, images, masks, cfg)
    log.info(f"trained {result.steps} steps in {result.seconds:.1f} s (stopped by {result.stopped_by}), "
             f"final loss {result.final_loss:.4f}")
    weights = output_dir / WEIGHTS_NAME
    sha = save_weights(model, weights, cfg.model, cfg.preset)
    info: dict[str, Any] = {
        "model": cfg.model, "preset": cfg.preset, "task": entry.task, "weights": WEIGHTS_NAME, "weights_sha256": sha,
        "parameters": sum(t.numel() for t in model.parameters()), "train_dir": str(train_dir),
        "train_samples": len(images), "config": train_config_dict(cfg), "result": vars(result)}
    if heldout_dir:
        _, h_images, h_masks = load_folder(heldout_dir, signature)
        metrics = evaluate(model, h_images, h_masks)
        info.update(heldout_dir=str(heldout_dir), heldout_samples=len(h_images), heldout_metrics=metrics)
        log.info(f"held-out ({len(h_images)} samples): " + ", ".join(f"{k}={v:.4f}" for k, v in metrics.items()))
    write_training_json(output_dir, info)
    log.info(f"wrote {weights} and {output_dir / TRAINING_JSON}")
    if export_dir:
        manifest = export_trained(weights, export_dir, cfg.model, cfg.preset, opset=export.opset,
                                  max_batch_size=export.max_batch_size)
        v = manifest.verification
        log.info(f"wrote {Path(export_dir) / manifest.artifact}: verified at batch sizes {v['batch_sizes']}, "
                 f"max abs err {v['max_abs_err']:.3g} -> OK")
        return {**info, "manifest": manifest}
    return info

