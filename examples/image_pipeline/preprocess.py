"""Image bytes (JPEG, PNG, any size) -> the classifier's input: decode, RGB, resize to 64x64, scale to [0, 1],
normalise with the ImageNet mean and std, channels first. Runs in Triton's Python backend as
`<name>_preprocess`, and in-process for the toolkit's checks: the same function, the same batches."""
import io

import numpy as np
from PIL import Image

SIZE = 64
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(3, 1, 1)

# What this step takes and gives, per sample (the batch axis is not written): one encoded image, one
# float32 tensor named as the model's input. Without these, the toolkit reads them from the raw samples.
INPUTS = {"image": "bytes"}
OUTPUTS = {"input__0": ("float32", [3, SIZE, SIZE])}


def _pixels(data: bytes) -> np.ndarray:
    image = Image.open(io.BytesIO(data)).convert("RGB").resize((SIZE, SIZE), Image.BILINEAR)
    chw = np.asarray(image, dtype=np.float32).transpose(2, 0, 1) / 255.0
    return (chw - MEAN) / STD


def preprocess(image: np.ndarray) -> dict:
    """image: [batch] object array of encoded image bytes."""
    return {"input__0": np.stack([_pixels(bytes(b)) for b in image]).astype(np.float32)}
