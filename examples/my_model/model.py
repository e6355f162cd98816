"""Your model, the way the toolkit takes it: `get_model(**kwargs)` returns an nn.Module and the optional
`get_signature(**kwargs)` names its tensors (per sample, without the batch axis).

    python triton/convert_model.py --input-path examples/my_model/model.py --input-type pyt \\
        --model-arg width=16 --checkpoint workspace/my_model/weights.safetensors \\
        --output-type onnx --output-path workspace/my_model/onnx

--model-arg key=value reaches both functions as keyword arguments.
"""
from __future__ import annotations

from torch import nn

IMAGE_SIZE = 32
NUM_CLASSES = 4  # which quadrant of the image is brightest (make_checkpoint.py's task)


class QuadrantNet(nn.Module):
    """A small convnet: two conv blocks, global pooling, a linear head."""

    def __init__(self, width: int = 16, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
        )
        self.head = nn.Linear(8 * width, num_classes)

    def forward(self, image):
        return self.head(self.body(image))


def get_model(width: int = 16, num_classes: int = NUM_CLASSES) -> nn.Module:
    return QuadrantNet(width, num_classes)


def get_signature(num_classes: int = NUM_CLASSES, **_) -> dict:
    return {
        "inputs": [{"name": "image", "shape": [3, IMAGE_SIZE, IMAGE_SIZE], "dtype": "float32"}],
        "outputs": [{"name": "logits", "shape": [num_classes], "dtype": "float32"}],
        "max_batch_size": 16,
        "task": "classification",
    }
