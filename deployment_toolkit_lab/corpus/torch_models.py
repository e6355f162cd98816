"""The corpus's plain-torch models: the cases a user's own module brings (fused attention, an LSTM, lazy modules,
dict and namedtuple outputs, two inputs, logits that underflow, an op ONNX Runtime cannot load). The classes are
defined on first use so that listing the corpus does not import torch.
"""
from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import TYPE_CHECKING

from .samples import VOCAB

if TYPE_CHECKING:
    from torch import nn


@functools.cache
def _torch_classes() -> SimpleNamespace:
    """The plain-torch models, defined on first use so that importing the corpus does not import torch."""
    from typing import NamedTuple

    import torch
    from torch import Tensor, nn

    class TextTransformer(nn.Module):
        """Embedding + nn.TransformerEncoder; with a padding mask in eval it takes the nested-tensor fast path."""

        def __init__(self, vocab: int = VOCAB, width: int = 32, classes: int = 3) -> None:
            super().__init__()
            self.tokens = nn.Embedding(vocab, width, padding_idx=0)
            self.positions = nn.Embedding(64, width)
            layer = nn.TransformerEncoderLayer(width, 4, dim_feedforward=64, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, num_layers=2)
            self.head = nn.Linear(width, classes)

        def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
            positions = torch.arange(input_ids.shape[1], device=input_ids.device)
            hidden = self.encoder(self.tokens(input_ids) + self.positions(positions),
                                  src_key_padding_mask=attention_mask == 0)
            weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
            return self.head((hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0))

    class UnderflowSegmenter(nn.Module):
        """A segmentation head whose logits underflow to ~1e-42 (what a random-weight model gave a user): float32
        subnormals, which one runtime keeps and another flushes to zero."""

        def __init__(self, classes: int = 3) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, classes, 1))

        def forward(self, x: Tensor) -> Tensor:
            return self.body(x) * 1e-42

    class MaskPositions(nn.Module):
        """Token positions from a uint8 padding mask: the TorchScript-based exporter writes a CumSum on uint8,
        which ONNX Runtime cannot load."""

        def forward(self, mask: Tensor) -> Tensor:
            return mask.cumsum(1) * mask

    class LstmTagger(nn.Module):
        """A bidirectional LSTM tagging every token: the recurrent case."""

        def __init__(self, vocab: int = VOCAB, width: int = 32, tags: int = 5) -> None:
            super().__init__()
            self.tokens = nn.Embedding(vocab, width)
            self.lstm = nn.LSTM(width, width, num_layers=2, batch_first=True, bidirectional=True)
            self.head = nn.Linear(2 * width, tags)

        def forward(self, input_ids: Tensor) -> Tensor:
            return self.head(self.lstm(self.tokens(input_ids))[0])

    class SetAttention(nn.Module):
        """Self-attention over a set of feature vectors through nn.MultiheadAttention (fused path in eval)."""

        def __init__(self, width: int = 32, classes: int = 10) -> None:
            super().__init__()
            self.attention = nn.MultiheadAttention(width, 4, batch_first=True)
            self.norm = nn.LayerNorm(width)
            self.head = nn.Linear(width, classes)

        def forward(self, x: Tensor) -> Tensor:
            attended = self.attention(x, x, x, need_weights=False)[0]
            return self.head(self.norm(x + attended).mean(1))

    class LazyMlp(nn.Module):
        """An MLP of nn.LazyLinear layers whose parameters only take shape on the first forward call."""

        def __init__(self, classes: int = 10) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.LazyLinear(64), nn.ReLU(), nn.LazyLinear(classes))

        def forward(self, x: Tensor) -> Tensor:
            return self.body(x)

    def small_cnn(width: int = 32) -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, width, 3, stride=2, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )

    class EmbedAndClassify(nn.Module):
        """Returns a dict of two tensors, as retrieval models that serve an embedding beside the logits do."""

        def __init__(self, classes: int = 10) -> None:
            super().__init__()
            self.features = small_cnn()
            self.head = nn.Linear(32, classes)

        def forward(self, x: Tensor) -> dict[str, Tensor]:
            embedding = self.features(x)
            return {"embedding": nn.functional.normalize(embedding, dim=-1), "logits": self.head(embedding)}

    Prediction = NamedTuple("Prediction", [("logits", Tensor), ("probabilities", Tensor)])

    class ClassifyWithProbabilities(nn.Module):
        """Returns a NamedTuple (logits, probabilities)."""

        def __init__(self, classes: int = 10) -> None:
            super().__init__()
            self.features = small_cnn()
            self.head = nn.Linear(32, classes)

        def forward(self, x: Tensor) -> Prediction:
            logits = self.head(self.features(x))
            return Prediction(logits, logits.softmax(-1))

    class ImageWithMetadata(nn.Module):
        """Two inputs fused late: an image and a float metadata vector (e.g. capture settings)."""

        def __init__(self, metadata: int = 8, classes: int = 10) -> None:
            super().__init__()
            self.image = small_cnn()
            self.metadata = nn.Sequential(nn.Linear(metadata, 16), nn.ReLU())
            self.head = nn.Linear(32 + 16, classes)

        def forward(self, image: Tensor, metadata: Tensor) -> Tensor:
            return self.head(torch.cat([self.image(image), self.metadata(metadata)], dim=1))

    class BatchedDetector(nn.Module):
        """A torchvision detector taking a 4-D batch instead of a list of images; returns its list of dicts."""

        def __init__(self, detector: nn.Module) -> None:
            super().__init__()
            self.detector = detector

        def forward(self, x: Tensor) -> list[dict[str, Tensor]]:
            images = list(x.unbind(0))
            if torch.jit.is_scripting():
                return self.detector(images)[1]
            return self.detector(images)

    return SimpleNamespace(
        TextTransformer=TextTransformer, LstmTagger=LstmTagger, SetAttention=SetAttention, LazyMlp=LazyMlp,
        EmbedAndClassify=EmbedAndClassify, ClassifyWithProbabilities=ClassifyWithProbabilities,
        ImageWithMetadata=ImageWithMetadata, BatchedDetector=BatchedDetector, UnderflowSegmenter=UnderflowSegmenter,
        MaskPositions=MaskPositions,
    )


def torch_text_transformer() -> nn.Module:
    return _torch_classes().TextTransformer().eval()


def torch_lstm_tagger() -> nn.Module:
    return _torch_classes().LstmTagger().eval()


def torch_set_attention() -> nn.Module:
    return _torch_classes().SetAttention().eval()


def torch_lazy_mlp() -> nn.Module:
    return _torch_classes().LazyMlp().eval()


def torch_dict_outputs() -> nn.Module:
    return _torch_classes().EmbedAndClassify().eval()


def torch_namedtuple_outputs() -> nn.Module:
    return _torch_classes().ClassifyWithProbabilities().eval()


def torch_image_metadata() -> nn.Module:
    return _torch_classes().ImageWithMetadata().eval()


def torch_underflow_segmenter() -> nn.Module:
    return _torch_classes().UnderflowSegmenter().eval()


def torch_mask_positions() -> nn.Module:
    return _torch_classes().MaskPositions().eval()
