"""Task-level agreement between two output arrays of the same model (framework vs converted/served)."""
from __future__ import annotations

import numpy as np


def task_agreement(task: str, ref: np.ndarray, got: np.ndarray) -> dict[str, float]:
    if task == "classification":
        return {"top1_agreement": float(np.mean(ref.argmax(axis=-1) == got.argmax(axis=-1)))}
    if task == "segmentation":
        a, b = ref.argmax(axis=1), got.argmax(axis=1)
        dices = []
        for c in range(ref.shape[1]):
            inter = np.sum((a == c) & (b == c))
            total = np.sum(a == c) + np.sum(b == c)
            dices.append(1.0 if total == 0 else 2.0 * inter / total)
        return {"dice_agreement": float(np.mean(dices))}
    flat_r = ref.reshape(len(ref), -1)
    flat_g = got.reshape(len(got), -1)
    cos = np.sum(flat_r * flat_g, axis=1) / np.maximum(np.linalg.norm(flat_r, axis=1) * np.linalg.norm(flat_g, axis=1), 1e-12)
    return {"cosine_min": float(np.min(cos))}
