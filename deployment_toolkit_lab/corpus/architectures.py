"""Real architectures at toy sizes, each with a factory and a sample maker, for the conversion benchmark.

Every model is built from its library's own code with random weights (no downloads) and shrunk so that a
conversion takes seconds on a 2-core CPU; the point is to exercise each architecture's operators and output
structure, not its accuracy. torch, timm, torchvision and transformers are imported inside the builders so that
listing the corpus stays instant.

The samples live in `samples`, the plain-torch models in `torch_models`; this module holds the library builders
and the registry.

Over 400 lines on purpose: it holds one builder and one registry entry for each of the fifty-odd architectures,
and splitting them further would only scatter that data.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from .samples import (VOCAB as _VOCAB, SampleMaker, floats as _floats, image_text_pairs as _image_text_pairs,
                      images as _images, log_mel as _log_mel, masks as _masks, sample_maker as _samples,
                      seq2seq as _seq2seq, text as _text, waveforms as _waveforms)
from .torch_models import (_torch_classes, torch_dict_outputs, torch_image_metadata, torch_lazy_mlp, torch_lstm_tagger,
                           torch_mask_positions, torch_namedtuple_outputs, torch_set_attention,
                           torch_text_transformer, torch_underflow_segmenter)

if TYPE_CHECKING:
    from torch import nn


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



# Builders -----------------------------------------------------------------------------------------------------


def _import_torchvision() -> Any:
    """torchvision, importable beside the CPU torch; timm and transformers import it, so every builder calls this."""
    from deployment_toolkit.compat import import_torchvision

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
    from deployment_toolkit.compat import register_torchvision_box_ops

    _import_torchvision()
    register_torchvision_box_ops()
    from torchvision.models.detection import ssdlite320_mobilenet_v3_large

    detector = ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=3)
    return _torch_classes().BatchedDetector(detector).eval()


def _timm(arch: str, **kwargs: Any) -> nn.Module:
    """A timm model, untrained, with a 10-class head."""
    from deployment_toolkit.compat import import_timm

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


# Registry -----------------------------------------------------------------------------------------------------


def _ref(builder: Callable[[], Any]) -> str:
    return f"{builder.__module__}:{builder.__name__}"


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
