"""Logits -> a label string and its probability per text. It declares nothing: its input is the model output its
parameter names (logits), its outputs are read from what it returns on the raw samples."""
import numpy as np

LABELS = ("negative", "neutral", "positive")


def postprocess(logits: np.ndarray) -> dict:
    shifted = logits - logits.max(axis=1, keepdims=True)
    probs = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    best = probs.argmax(axis=1)
    return {"label": np.array([LABELS[i] for i in best], dtype=object),
            "probability": probs[np.arange(len(best)), best].astype(np.float32)}
