"""UTF-8 reviews -> token ids and attention mask with transformers' BertTokenizerFast from the local vocab.txt (no
hub), each batch padded to its longest text as a served batch is. Importing transformers loads ssl: this step runs in
the server's Python-backend stub on the interpreter the user runs (server.libpython)."""
from pathlib import Path

import numpy as np
from transformers import BertTokenizerFast

FILES = ["vocab.txt"]
INPUTS = {"text": "text"}
_tokenizer = BertTokenizerFast(vocab=str(Path(__file__).resolve().parent / "vocab.txt"))


def preprocess(text: np.ndarray) -> dict:
    """text: [batch] object array of UTF-8 bytes."""
    enc = _tokenizer([bytes(t).decode("utf-8") for t in text], padding="longest", truncation=True, max_length=64,
                     return_tensors="np")
    return {"input_ids": enc["input_ids"].astype(np.int64), "attention_mask": enc["attention_mask"].astype(np.int64)}
