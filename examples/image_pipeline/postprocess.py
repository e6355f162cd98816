"""The classifier's logits -> the top-5 labels as strings, with their softmax probabilities. Runs in Triton's
Python backend as `<name>_postprocess`; clients get labels, not logits."""
import numpy as np

LABELS = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
TOP = 5

INPUTS = {"output__0": ("float32", [len(LABELS)])}
OUTPUTS = {"labels": ("bytes", [TOP]), "scores": ("float32", [TOP])}


def postprocess(output__0: np.ndarray) -> dict:
    """output__0: [batch, 10] logits."""
    shifted = output__0 - output__0.max(axis=1, keepdims=True)
    probs = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    top = np.argsort(-probs, axis=1, kind="stable")[:, :TOP]
    labels = np.array([[LABELS[i].encode() for i in row] for row in top], dtype=object)
    return {"labels": labels, "scores": np.take_along_axis(probs, top, axis=1).astype(np.float32)}
