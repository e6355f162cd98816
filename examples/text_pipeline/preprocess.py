"""UTF-8 text -> token ids and attention mask, padded to 32, with the tokenizer make_tokenizer.py trained
(tokenizer.json beside this file: FILES has the toolkit copy it next to the served model). No declarations of its
outputs: the toolkit reads them by running this on the raw samples."""
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

FILES = ["tokenizer.json"]
INPUTS = {"text": "text"}  # one UTF-8 string per sample: raw samples are checked to decode

_tokenizer = Tokenizer.from_file(str(Path(__file__).resolve().parent / "tokenizer.json"))


def preprocess(text: np.ndarray) -> dict:
    """text: [batch] object array of UTF-8 bytes."""
    encodings = _tokenizer.encode_batch([bytes(t).decode("utf-8") for t in text])
    return {"input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64)}
