"""Real architectures at toy sizes, each with a factory and a sample maker, for the conversion benchmark.

Every model is built from its library's own code with random weights (no downloads) and shrunk so that a
conversion takes seconds on a 2-core CPU; the point is to exercise each architecture's operators and output
structure, not its accuracy. torch, timm, torchvision and transformers are imported inside the builders so that
listing the corpus stays instant.

Over 400 lines on purpose: it holds one builder and one registry entry for each of the forty-odd architectures,
and splitting them would only scatter that data.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

if TYPE_CHECKING:
    from torch import nn

Sample = dict[str, np.ndarray]
SampleMaker = Callable[[int, int], list[Sample]]


@dataclass(frozen=True)
class Architecture:
    """One corpus entry: how to build the model and what realistic inputs it takes."""

    name: str
    library: str
    kind: str
    factory: str
    samples: SampleMaker
    outputs: tuple[str, ...] = ()
    max_batch_size: int = 8
    note: str = ""


# Samples ------------------------------------------------------------------------------------------------------

_LENGTHS = (12, 16, 20, 24)
_VOCAB = 512
_IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
_IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def _text(
    count: int, seed: int, *, vocab: int = _VOCAB, pad_id: int = 0, mask: bool = True, token_types: bool = False
) -> list[Sample]:
    """Token ids whose length cycles through _LENGTHS so the sequence axis is seen as dynamic; the attention mask
    is ones then right padding (at least half ones), and padded positions hold the pad id as a tokenizer writes."""
    out = []
    for index in range(count):
        rng = np.random.default_rng(seed + index)
        length = _LENGTHS[index % len(_LENGTHS)]
        real = int(rng.integers((length + 1) // 2, length, endpoint=True))
        ids = rng.integers(3, vocab, size=length, dtype=np.int64)
        ids[real:] = pad_id
        sample = {"input_ids": ids}
        if mask:
            sample["attention_mask"] = (np.arange(length) < real).astype(np.int64)
        if token_types:
            types = np.zeros(length, dtype=np.int64)
            types[int(rng.integers(1, real)) : real] = 1
            sample["token_type_ids"] = types
        out.append(sample)
    return out


def _images(count: int, seed: int, *, shape: tuple[int, ...], name: str = "x", normalize: bool = True) -> list[Sample]:
    """Pixels in [0, 1], ImageNet-normalized unless the model normalizes them itself (torchvision detection);
    channels lead, so a video (3, T, H, W) is normalized the same way."""
    out = []
    for index in range(count):
        pixels = np.random.default_rng(seed + index).random(shape, dtype=np.float32)
        if normalize:
            stats = (3,) + (1,) * (len(shape) - 1)
            pixels = (pixels - _IMAGENET_MEAN.reshape(stats)) / _IMAGENET_STD.reshape(stats)
        out.append({name: pixels.astype(np.float32)})
    return out


def _waveforms(count: int, seed: int, *, length: int | tuple[int, ...], name: str = "input_values") -> list[Sample]:
    """16 kHz tones plus noise, zero-mean and unit-variance as Wav2Vec2FeatureExtractor(do_normalize=True) gives;
    a tuple of lengths cycles, as recordings of different durations do."""
    lengths = length if isinstance(length, tuple) else (length,)
    out = []
    for index in range(count):
        size = lengths[index % len(lengths)]
        t = np.arange(size, dtype=np.float32) / 16_000
        rng = np.random.default_rng(seed + index)
        wave = sum(rng.uniform(0.1, 0.5) * np.sin(2 * np.pi * rng.uniform(100, 2000) * t) for _ in range(3))
        wave = wave + rng.normal(0, 0.01, size)
        out.append({name: ((wave - wave.mean()) / (wave.std() + 1e-7)).astype(np.float32)})
    return out


def _log_mel(count: int, seed: int, *, bins: int, frames: int) -> list[Sample]:
    """Whisper-style log-mel features, which its extractor scales to roughly [-1, 1.5]."""
    out = []
    for index in range(count):
        features = np.random.default_rng(seed + index).normal(0, 0.4, (bins, frames)).clip(-1, 1.5)
        out.append({"input_features": features.astype(np.float32)})
    return out


def _floats(count: int, seed: int, *, shapes: dict[str, tuple[int, ...]]) -> list[Sample]:
    """Standard-normal features, the scale a normalized input has."""
    out = []
    for index in range(count):
        rng = np.random.default_rng(seed + index)
        out.append({name: rng.standard_normal(shape, dtype=np.float32) for name, shape in shapes.items()})
    return out


def _seq2seq(count: int, seed: int) -> list[Sample]:
    """Source token ids of different lengths with their mask, and a decoder prefix of 6 ids (teacher forcing)."""
    out = _text(count, seed)
    for index, sample in enumerate(out):
        sample["decoder_input_ids"] = np.random.default_rng(seed + 1000 + index).integers(3, _VOCAB, 6, dtype=np.int64)
    return out


def _image_text_pairs(count: int, seed: int) -> list[Sample]:
    """Whole requests of 2 images and 2 captions (ids mark a batch), for a model that scores every image against
    every caption of its request."""
    out = []
    for index in range(count):
        rng = np.random.default_rng(seed + index)
        pixels = _images(2, seed + 10 * index, shape=(3, 32, 32), name="pixel_values")
        out.append({"ids": np.array([f"r{index}a", f"r{index}b"]), "input_ids": rng.integers(3, _VOCAB, (2, 8)),
                    "attention_mask": np.ones((2, 8), np.int64),
                    "pixel_values": np.stack([p["pixel_values"] for p in pixels])})
    return out


def _masks(count: int, seed: int) -> list[Sample]:
    """uint8 padding masks of different lengths: ones, then zeros."""
    out = []
    for index in range(count):
        length = _LENGTHS[index % len(_LENGTHS)]
        real = int(np.random.default_rng(seed + index).integers(length // 2, length + 1))
        out.append({"mask": (np.arange(length) < real).astype(np.uint8)})
    return out


def _samples(maker: Callable[..., list[Sample]], **kwargs: Any) -> SampleMaker:
    """A picklable (count, seed) sample maker, so entries can cross process boundaries."""
    return functools.partial(maker, **kwargs)


# Builders -----------------------------------------------------------------------------------------------------


def _import_torchvision() -> Any:
    """torchvision, importable beside the CPU torch; timm and transformers import it, so every builder calls this."""
    from ..compat import import_torchvision

    return import_torchvision()


_TEXT = dict(
    vocab_size=_VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
    max_position_embeddings=64,
)
_DECODER = dict(_TEXT, num_attention_heads=4, num_key_value_heads=2, use_cache=False)
_VISION = dict(
    image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
)
_SPEECH = dict(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, conv_dim=(32, 32, 32),
    conv_stride=(5, 4, 4), conv_kernel=(10, 8, 8), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
    vocab_size=32,
)


def _hf(model: str, config: str, **settings: Any) -> nn.Module:
    """A transformers model from its config class, with random weights."""
    _import_torchvision()
    import transformers

    return getattr(transformers, model)(getattr(transformers, config)(**settings)).eval()


def hf_bert_seqcls() -> nn.Module:
    return _hf("BertForSequenceClassification", "BertConfig", **_TEXT, num_labels=3)


def hf_bert_qa() -> nn.Module:
    return _hf("BertForQuestionAnswering", "BertConfig", **_TEXT)


def hf_roberta() -> nn.Module:
    return _hf("RobertaModel", "RobertaConfig", **_TEXT)


def hf_distilbert_seqcls() -> nn.Module:
    return _hf(
        "DistilBertForSequenceClassification", "DistilBertConfig", vocab_size=_VOCAB, dim=32, n_layers=2, n_heads=2,
        hidden_dim=64, max_position_embeddings=64, num_labels=3,
    )


def hf_albert_mlm() -> nn.Module:
    return _hf("AlbertForMaskedLM", "AlbertConfig", **_TEXT, embedding_size=16)


def hf_electra_tokcls() -> nn.Module:
    return _hf("ElectraForTokenClassification", "ElectraConfig", **_TEXT, embedding_size=16, num_labels=5)


def hf_t5_encoder() -> nn.Module:
    return _hf(
        "T5EncoderModel", "T5Config", vocab_size=_VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2,
        use_cache=False,
    )


def hf_deberta_v2_seqcls() -> nn.Module:
    return _hf(
        "DebertaV2ForSequenceClassification", "DebertaV2Config", **_TEXT, num_labels=3, relative_attention=True,
        pos_att_type=["p2c", "c2p"], position_buckets=16, max_relative_positions=-1,
    )


def hf_gpt2_lm() -> nn.Module:
    return _hf(
        "GPT2LMHeadModel", "GPT2Config", vocab_size=_VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=2,
        bos_token_id=1, eos_token_id=2, use_cache=False,
    )


def hf_llama_lm() -> nn.Module:
    return _hf("LlamaForCausalLM", "LlamaConfig", **_DECODER)


def hf_qwen2_lm() -> nn.Module:
    return _hf("Qwen2ForCausalLM", "Qwen2Config", **_DECODER)


def hf_opt_lm() -> nn.Module:
    return _hf(
        "OPTForCausalLM", "OPTConfig", vocab_size=_VOCAB, hidden_size=32, ffn_dim=64, num_hidden_layers=2,
        num_attention_heads=2, max_position_embeddings=64, word_embed_proj_dim=32, use_cache=False,
    )


def hf_vit_cls() -> nn.Module:
    return _hf("ViTForImageClassification", "ViTConfig", **_VISION, num_labels=10)


def hf_deit_distilled() -> nn.Module:
    return _hf("DeiTForImageClassificationWithTeacher", "DeiTConfig", **_VISION, num_labels=10)


def hf_segformer_seg() -> nn.Module:
    return _hf(
        "SegformerForSemanticSegmentation", "SegformerConfig", num_encoder_blocks=2, depths=[1, 1], sr_ratios=[4, 2],
        hidden_sizes=[16, 32], patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
        decoder_hidden_size=32, num_labels=4,
    )


def hf_convnext() -> nn.Module:
    return _hf("ConvNextModel", "ConvNextConfig", hidden_sizes=[16, 32], depths=[1, 1], num_stages=2)


def hf_swin_cls() -> nn.Module:
    return _hf(
        "SwinForImageClassification", "SwinConfig", image_size=32, patch_size=4, embed_dim=16, depths=[1, 1],
        num_heads=[1, 2], window_size=4, num_labels=10,
    )


def hf_yolos_det() -> nn.Module:
    return _hf(
        "YolosForObjectDetection", "YolosConfig", **dict(_VISION, image_size=[64, 64]), num_detection_tokens=10,
        num_labels=3,
    )


def hf_wav2vec2() -> nn.Module:
    return _hf("Wav2Vec2Model", "Wav2Vec2Config", **_SPEECH)


def hf_hubert() -> nn.Module:
    return _hf("HubertModel", "HubertConfig", **_SPEECH)


def hf_whisper_encoder() -> nn.Module:
    """Whisper's encoder alone, with 16 mel bins and 16 positions: it insists on 2 * max_source_positions frames."""
    _import_torchvision()
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    return WhisperEncoder(WhisperConfig(
        vocab_size=_VOCAB, num_mel_bins=16, d_model=32, encoder_layers=2, encoder_attention_heads=2,
        encoder_ffn_dim=64, decoder_layers=2, decoder_attention_heads=2, decoder_ffn_dim=64, max_source_positions=16,
        max_target_positions=32, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
        use_cache=False,
    )).eval()


def hf_wav2vec2_ctc() -> nn.Module:
    return _hf("Wav2Vec2ForCTC", "Wav2Vec2Config", **_SPEECH)


def hf_t5_seq2seq() -> nn.Module:
    return _hf("T5ForConditionalGeneration", "T5Config", vocab_size=_VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2,
               num_heads=2, decoder_start_token_id=0)


def hf_clip() -> nn.Module:
    return _hf("CLIPModel", "CLIPConfig", projection_dim=16,
               text_config=dict(vocab_size=_VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                num_attention_heads=2, max_position_embeddings=32, bos_token_id=1, eos_token_id=2),
               vision_config=dict(image_size=32, patch_size=8, hidden_size=32, intermediate_size=64,
                                  num_hidden_layers=1, num_attention_heads=2))


def hf_mamba_lm() -> nn.Module:
    return _hf("MambaForCausalLM", "MambaConfig", vocab_size=_VOCAB, hidden_size=32, state_size=8, num_hidden_layers=2,
               expand=2, conv_kernel=4)


def _torchvision(name: str, **kwargs: Any) -> nn.Module:
    """A torchvision model by its builder name, untrained."""
    return getattr(_import_torchvision().models, name)(weights=None, **kwargs).eval()


def tv_resnet18() -> nn.Module:
    return _torchvision("resnet18", num_classes=10)


def tv_mobilenet_v3_small() -> nn.Module:
    return _torchvision("mobilenet_v3_small", num_classes=10)


def tv_efficientnet_b0() -> nn.Module:
    return _torchvision("efficientnet_b0", num_classes=10)


def tv_shufflenet_v2() -> nn.Module:
    return _torchvision("shufflenet_v2_x0_5", num_classes=10)


def tv_vit() -> nn.Module:
    """torchvision's ViT code at toy size; its encoder runs nn.MultiheadAttention's fused path in eval."""
    models = _import_torchvision().models
    return models.VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64, num_classes=10
    ).eval()


def tv_deeplabv3() -> nn.Module:
    _import_torchvision()
    from torchvision.models.segmentation import deeplabv3_mobilenet_v3_large

    return deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=4, aux_loss=False).eval()


def tv_lraspp() -> nn.Module:
    _import_torchvision()
    from torchvision.models.segmentation import lraspp_mobilenet_v3_large

    return lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=4).eval()


def tv_mc3_18() -> nn.Module:
    _import_torchvision()
    from torchvision.models.video import mc3_18

    return mc3_18(weights=None, num_classes=10).eval()


def tv_ssdlite_det() -> nn.Module:
    """SSDlite320 (it resizes every image to 320x320), wrapped to take a 4-D batch and return per-image dicts."""
    from ..compat import register_torchvision_box_ops

    _import_torchvision()
    register_torchvision_box_ops()
    from torchvision.models.detection import ssdlite320_mobilenet_v3_large

    detector = ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=3)
    return _torch_classes().BatchedDetector(detector).eval()


def _timm(arch: str, **kwargs: Any) -> nn.Module:
    """A timm model, untrained, with a 10-class head."""
    from ..compat import import_timm

    return import_timm().create_model(arch, pretrained=False, num_classes=10, **kwargs).eval()


def timm_resnet18() -> nn.Module:
    return _timm("resnet18")


def timm_efficientnet_b0() -> nn.Module:
    return _timm("efficientnet_b0")


def timm_mobilenetv3_small() -> nn.Module:
    return _timm("mobilenetv3_small_100")


def timm_convnext_atto() -> nn.Module:
    return _timm("convnext_atto")


def timm_vit_tiny() -> nn.Module:
    return _timm("vit_tiny_patch16_224", img_size=32, patch_size=8)


def timm_swin_tiny() -> nn.Module:
    """Swin's code with its width and depth cut: the stock tiny variant is 28M parameters."""
    return _timm(
        "swin_tiny_patch4_window7_224", img_size=64, window_size=4, embed_dim=32, depths=(1, 1, 1, 1),
        num_heads=(1, 2, 4, 8),
    )


def timm_levit() -> nn.Module:
    return _timm("levit_128s", img_size=64)


def timm_regnetx_002() -> nn.Module:
    return _timm("regnetx_002")


@functools.cache
def _torch_classes() -> SimpleNamespace:
    """The plain-torch models, defined on first use so that importing the corpus does not import torch."""
    from typing import NamedTuple

    import torch
    from torch import Tensor, nn

    class TextTransformer(nn.Module):
        """Embedding + nn.TransformerEncoder; with a padding mask in eval it takes the nested-tensor fast path."""

        def __init__(self, vocab: int = _VOCAB, width: int = 32, classes: int = 3) -> None:
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

        def __init__(self, vocab: int = _VOCAB, width: int = 32, tags: int = 5) -> None:
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


# Registry -----------------------------------------------------------------------------------------------------


def _ref(builder: Callable[[], Any]) -> str:
    return f"{__name__}:{builder.__name__}"


_TEXT_SAMPLES = _samples(_text)
_IMAGE_32 = _samples(_images, shape=(3, 32, 32))
_IMAGE_64 = _samples(_images, shape=(3, 64, 64))
_PIXELS_32 = _samples(_images, shape=(3, 32, 32), name="pixel_values")
_PIXELS_64 = _samples(_images, shape=(3, 64, 64), name="pixel_values")
_AUDIO = _samples(_waveforms, length=3200)
_LOGITS = ("logits",)

_ENTRIES = [
    # transformers: text encoders
    Architecture("hf-bert-seqcls", "transformers", "text encoder", _ref(hf_bert_seqcls), _TEXT_SAMPLES),
    Architecture("hf-bert-qa", "transformers", "multi-input", _ref(hf_bert_qa), _samples(_text, token_types=True),
                 note="input_ids + attention_mask + token_type_ids; two outputs (start_logits, end_logits)"),
    Architecture("hf-roberta", "transformers", "text encoder", _ref(hf_roberta), _samples(_text, pad_id=1),
                 note="position ids derive from input_ids != pad id (1)"),
    Architecture("hf-distilbert-seqcls", "transformers", "text encoder", _ref(hf_distilbert_seqcls), _TEXT_SAMPLES),
    Architecture("hf-albert-mlm", "transformers", "text encoder", _ref(hf_albert_mlm), _TEXT_SAMPLES,
                 note="shared layer weights, factorized embeddings; per-token vocab logits"),
    Architecture("hf-electra-tokcls", "transformers", "text encoder", _ref(hf_electra_tokcls), _TEXT_SAMPLES),
    Architecture("hf-t5-encoder", "transformers", "text encoder", _ref(hf_t5_encoder), _TEXT_SAMPLES,
                 note="relative position buckets, RMS norm"),
    Architecture("hf-deberta-v2-seqcls", "transformers", "text encoder", _ref(hf_deberta_v2_seqcls), _TEXT_SAMPLES,
                 note="disentangled relative attention"),
    # transformers: decoders
    Architecture("hf-gpt2-lm", "transformers", "text decoder", _ref(hf_gpt2_lm), _TEXT_SAMPLES, _LOGITS),
    Architecture("hf-llama-lm", "transformers", "text decoder", _ref(hf_llama_lm), _TEXT_SAMPLES, _LOGITS,
                 note="RoPE, RMS norm, grouped-query attention (4 heads, 2 KV heads)"),
    Architecture("hf-qwen2-lm", "transformers", "text decoder", _ref(hf_qwen2_lm), _TEXT_SAMPLES, _LOGITS),
    Architecture("hf-opt-lm", "transformers", "text decoder", _ref(hf_opt_lm), _TEXT_SAMPLES, _LOGITS),
    # transformers: vision
    Architecture("hf-vit-cls", "transformers", "vision transformer", _ref(hf_vit_cls), _PIXELS_32),
    Architecture("hf-deit-distilled", "transformers", "vision transformer", _ref(hf_deit_distilled), _PIXELS_32,
                 note="three outputs: logits, cls_logits, distillation_logits"),
    Architecture("hf-swin-cls", "transformers", "vision transformer", _ref(hf_swin_cls), _PIXELS_32,
                 note="shifted-window attention"),
    Architecture("hf-convnext", "transformers", "CNN", _ref(hf_convnext), _PIXELS_64,
                 note="base model: last_hidden_state and pooler_output"),
    Architecture("hf-segformer-seg", "transformers", "segmentation", _ref(hf_segformer_seg), _PIXELS_64,
                 note="logits at 1/4 of the input resolution"),
    Architecture("hf-yolos-det", "transformers", "detection", _ref(hf_yolos_det), _PIXELS_64,
                 ("logits", "pred_boxes"), note="set prediction: fixed 10 detection tokens, so it batches"),
    # transformers: audio
    Architecture("hf-wav2vec2", "transformers", "audio encoder", _ref(hf_wav2vec2), _AUDIO,
                 note="0.2 s of 16 kHz audio; conv feature encoder, then transformer"),
    Architecture("hf-hubert", "transformers", "audio encoder", _ref(hf_hubert), _AUDIO),
    Architecture("hf-whisper-encoder", "transformers", "audio encoder", _ref(hf_whisper_encoder),
                 _samples(_log_mel, bins=16, frames=32), note="log-mel input of 16 bins x 32 frames (fixed)"),
    # torchvision
    Architecture("tv-resnet18", "torchvision", "CNN", _ref(tv_resnet18), _IMAGE_64),
    Architecture("tv-mobilenet-v3-small", "torchvision", "CNN", _ref(tv_mobilenet_v3_small), _IMAGE_64),
    Architecture("tv-efficientnet-b0", "torchvision", "CNN", _ref(tv_efficientnet_b0), _IMAGE_64),
    Architecture("tv-shufflenet-v2", "torchvision", "CNN", _ref(tv_shufflenet_v2), _IMAGE_64,
                 note="channel shuffle (reshape/transpose)"),
    Architecture("tv-vit", "torchvision", "vision transformer", _ref(tv_vit), _IMAGE_32,
                 note="nn.MultiheadAttention fused path"),
    Architecture("tv-deeplabv3", "torchvision", "segmentation", _ref(tv_deeplabv3), _IMAGE_64,
                 note="OrderedDict output 'out'; upsamples to the input size"),
    Architecture("tv-lraspp", "torchvision", "segmentation", _ref(tv_lraspp), _IMAGE_64,
                 note="OrderedDict output 'out'"),
    Architecture("tv-mc3-18", "torchvision", "video", _ref(tv_mc3_18), _samples(_images, shape=(3, 8, 32, 32)),
                 note="3-D convolutions over 8 frames"),
    Architecture("tv-ssdlite-det", "torchvision", "detection", _ref(tv_ssdlite_det),
                 _samples(_images, shape=(1, 3, 64, 64), normalize=False), max_batch_size=0,
                 note="one image per request (the sample carries its batch axis of 1); returns per-image boxes/scores/labels of varying count, so no batching; resizes to 320x320 "
                      "inside; registers a pure-torch torchvision::nms when torchvision's C++ ops are missing"),
    # timm
    Architecture("timm-resnet18", "timm", "CNN", _ref(timm_resnet18), _IMAGE_64),
    Architecture("timm-efficientnet-b0", "timm", "CNN", _ref(timm_efficientnet_b0), _IMAGE_64),
    Architecture("timm-mobilenetv3-small", "timm", "CNN", _ref(timm_mobilenetv3_small), _IMAGE_64),
    Architecture("timm-convnext-atto", "timm", "CNN", _ref(timm_convnext_atto), _IMAGE_64),
    Architecture("timm-vit-tiny", "timm", "vision transformer", _ref(timm_vit_tiny), _IMAGE_32,
                 note="img_size=32, patch_size=8"),
    Architecture("timm-swin", "timm", "vision transformer", _ref(timm_swin_tiny), _IMAGE_64,
                 note="swin_tiny code at embed_dim=32, one block per stage, window 4"),
    Architecture("timm-regnetx-002", "timm", "CNN", _ref(timm_regnetx_002), _IMAGE_64),
    # plain torch
    Architecture("torch-text-transformer", "torch", "text encoder", _ref(torch_text_transformer), _TEXT_SAMPLES,
                 note="nn.TransformerEncoder with a padding mask: nested-tensor fast path in eval"),
    Architecture("torch-lstm-tagger", "torch", "text encoder", _ref(torch_lstm_tagger), _samples(_text, mask=False),
                 note="2-layer bidirectional LSTM"),
    Architecture("torch-set-attention", "torch", "attention", _ref(torch_set_attention),
                 _samples(_floats, shapes={"x": (16, 32)}), note="nn.MultiheadAttention self-attention"),
    Architecture("torch-lazy-mlp", "torch", "MLP", _ref(torch_lazy_mlp), _samples(_floats, shapes={"x": (20,)}),
                 note="nn.LazyLinear: unmaterialized until the first forward"),
    Architecture("torch-dict-outputs", "torch", "multi-output", _ref(torch_dict_outputs), _IMAGE_32,
                 note="dict of embedding and logits"),
    Architecture("torch-namedtuple-outputs", "torch", "multi-output", _ref(torch_namedtuple_outputs), _IMAGE_32,
                 note="NamedTuple (logits, probabilities): output__0, output__1"),
    Architecture("torch-image-metadata", "torch", "multi-input", _ref(torch_image_metadata),
                 _samples(_floats, shapes={"image": (3, 32, 32), "metadata": (8,)})),
    # the real data of issue 35: ragged samples, a batch-coupled output, a cache, an export ORT cannot load,
    # underflowing outputs, a model that loads slowly
    Architecture("hf-wav2vec2-ctc", "transformers", "speech (CTC)", _ref(hf_wav2vec2_ctc),
                 _samples(_waveforms, length=(2400, 3200, 4000)), _LOGITS,
                 note="0.15-0.25 s recordings: frames per sample differ, no attention mask, so batched by length"),
    Architecture("hf-t5-seq2seq", "transformers", "encoder-decoder", _ref(hf_t5_seq2seq), _samples(_seq2seq),
                 note="returns past_key_values (an EncoderDecoderCache): left out, logits and encoder output served"),
    Architecture("hf-clip", "transformers", "image-text", _ref(hf_clip), _samples(_image_text_pairs),
                 note="logits_per_image is [B, B]: couples the batch, served one whole request per call"),
    Architecture("hf-mamba-lm", "transformers", "text decoder", _ref(hf_mamba_lm), _samples(_text, mask=False),
                 _LOGITS, note="selective scan as a Python loop without mamba_ssm: traced at one length"),
    Architecture("timm-levit", "timm", "vision transformer", _ref(timm_levit), _IMAGE_64,
                 note="levit_128s at 64x64: attention biases indexed by position"),
    Architecture("torch-underflow-seg", "torch", "segmentation", _ref(torch_underflow_segmenter), _IMAGE_32,
                 note="logits ~1e-42 (float32 subnormals): equal answers judged by the absolute tolerance"),
    Architecture("torch-mask-positions", "torch", "export edge", _ref(torch_mask_positions), _samples(_masks),
                 note="uint8 cumsum: the TorchScript-based ONNX file does not load in ONNX Runtime"),
]

ARCHITECTURES: dict[str, Architecture] = {entry.name: entry for entry in _ENTRIES}


def get(name: str) -> Architecture:
    """The corpus entry called `name`."""
    try:
        return ARCHITECTURES[name]
    except KeyError:
        raise KeyError(f"unknown architecture {name!r}; known: {', '.join(ARCHITECTURES)}") from None
