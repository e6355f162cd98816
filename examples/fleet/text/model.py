"""A small DistilBERT sentiment classifier built from its transformers config class (random weights, no hub). No
get_signature: its inputs are what the preprocess gives on the raw reviews (token ids padded to the batch's longest
text, and the attention mask)."""
from transformers import DistilBertConfig, DistilBertForSequenceClassification


def get_model():
    return DistilBertForSequenceClassification(DistilBertConfig(
        vocab_size=256, dim=64, n_layers=2, n_heads=4, hidden_dim=128, max_position_embeddings=128, num_labels=3))
