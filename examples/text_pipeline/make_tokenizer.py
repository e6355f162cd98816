#!/usr/bin/env python3
"""Train the text pipeline's tokenizer locally with the `tokenizers` library (a word-level vocabulary learnt from a
few sentences; nothing from the hub) and save it as tokenizer.json beside preprocess.py, which lists it in FILES so
the toolkit copies it next to the served preprocess model. Padding and truncation to SEQ_LEN are saved with it.
The same sentences give the same file on every run."""
from __future__ import annotations

import argparse
from pathlib import Path

from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

SEQ_LEN = 32
VOCAB_SIZE = 256  # model.py's embedding table has this many rows
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
SENTENCES = [
    "the service was quick and the staff were friendly",
    "the food was cold and the waiter was rude",
    "an average meal nothing special but fine",
    "I loved the coffee and the cake was wonderful",
    "terrible experience we waited an hour for a table",
    "the room was clean the bed was comfortable",
    "the delivery was late and the box was damaged",
    "it works as described no complaints",
    "great value for the price would buy again",
    "the screen broke after two days very disappointed",
    "the café was cosy and the music was nice",
    "okay product but the instructions were confusing",
]


def build() -> Tokenizer:
    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(SENTENCES, trainers.WordLevelTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIALS))
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                             special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tokenizer.enable_truncation(SEQ_LEN)
    tokenizer.enable_padding(length=SEQ_LEN, pad_id=tokenizer.token_to_id("[PAD]"), pad_token="[PAD]")
    return tokenizer


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--output", type=Path, default=Path(__file__).resolve().parent / "tokenizer.json")
    args = p.parse_args()
    tokenizer = build()
    tokenizer.save(str(args.output))
    print(f"{args.output}: {tokenizer.get_vocab_size()} tokens, padded to {SEQ_LEN}")


if __name__ == "__main__":
    main()
