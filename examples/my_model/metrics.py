"""Your metrics, the way the toolkit takes them (the DLE form): `MetricsCalculator.calc` gets the whole dump
(outputs, labels, ids; inputs with --dump-inputs) and returns named numbers for the CSV and --threshold.

    python triton/calculate_metrics.py --metrics examples/my_model/metrics.py \\
        --dump-dir workspace/my_model/dump_triton --csv workspace/my_model/accuracy.csv \\
        --threshold 'balanced_accuracy>=0.9'
"""
from typing import Any, Dict, List, Optional

import numpy as np

from deployment_toolkit.metrics.user import BaseMetricsCalculator


class MetricsCalculator(BaseMetricsCalculator):
    def calc(self, *, ids: List[Any], y_pred: Dict[str, np.ndarray], x: Optional[Dict[str, np.ndarray]],
             y_real: Optional[Dict[str, np.ndarray]]) -> Dict[str, float]:
        if not y_real:
            raise ValueError("no labels in the dump: run the inference with --dump-labels")
        logits = next(iter(y_pred.values()))  # the model's only output, whatever it is named
        predicted = np.argmax(logits, axis=1)
        truth = y_real["labels"]
        recalls = [float(np.mean(predicted[truth == c] == c)) for c in np.unique(truth)]
        return {"accuracy": float(np.mean(predicted == truth)), "balanced_accuracy": float(np.mean(recalls))}
