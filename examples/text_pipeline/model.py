"""The text pipeline's network: a small BERT encoder for sequence classification, built from its config class with
random weights (no hub). Its inputs are the token ids and attention mask that preprocess.py makes, padded to 32."""
from transformers import BertConfig, BertForSequenceClassification

SEQ_LEN = 32
VOCAB_SIZE = 256
LABELS = 3


def get_model(layers: int = 2):
    config = BertConfig(vocab_size=VOCAB_SIZE, hidden_size=32, num_hidden_layers=layers, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64, num_labels=LABELS)
    return BertForSequenceClassification(config)


def get_signature(**_) -> dict:
    return {
        "inputs": [{"name": "input_ids", "shape": [SEQ_LEN], "dtype": "int64", "value_range": [0, VOCAB_SIZE]},
                   {"name": "attention_mask", "shape": [SEQ_LEN], "dtype": "int64", "value_range": [0, 2]}],
        "outputs": [{"name": "logits", "shape": [LABELS], "dtype": "float32"}],
        "max_batch_size": 8,
        "task": "classification",
    }
