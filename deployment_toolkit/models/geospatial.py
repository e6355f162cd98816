"""Multispectral (Sentinel-2-like) encoders that return a pooled embedding (random weights).

Two kinds:
- fixed-band timm backbones (`s2_resnet50`, `s2_vit_small`): 13 input channels, `num_classes=0` so the
  output is the pooled feature vector;
- `dofa_vit`: a wavelength-conditioned encoder in the style of DOFA (Xiong et al., 2024, "Neural Plasticity-
  Inspired Multimodal Foundation Model for Earth Observation"). A hypernetwork turns each band's centre
  wavelength into that band's patch-embedding kernel, so one network takes any number of bands. torchgeo
  has the original but pulls ~500 MB of dependencies, so a compact version lives here.
"""
from __future__ import annotations

import torch
from torch import nn

from ..compat import import_timm
from ..spec import ModelSignature, TensorSpec
from .registry import Preset, image_signature, register_model
from ..errors import UserInputError

# Sentinel-2 MSI band centre wavelengths in micrometres, bands B1..B8, B8A, B9..B12 (13 bands, L1C order).
S2_WAVELENGTHS_UM: tuple[float, ...] = (
    0.443, 0.490, 0.560, 0.665, 0.705, 0.740, 0.783, 0.842, 0.865, 0.945, 1.375, 1.610, 2.190,
)
S2_BANDS = len(S2_WAVELENGTHS_UM)

FAMILY = dict(family="geospatial", task="embedding", metric="cosine")


# --------------------------------------------------------------------------- fixed-band timm encoders

def _timm_embedding_presets(dim: int, small_size: int, small_kwargs: dict) -> dict[str, Preset]:
    out = [TensorSpec("output__0", (dim,))]
    return {
        "small": Preset("small", image_signature(S2_BANDS, small_size, out), dict(small_kwargs), max_batch_size=8),
        "full": Preset("full", image_signature(S2_BANDS, 224, out), {}, max_batch_size=32),
    }


def _timm_embedding_builder(arch: str):
    def build(**kwargs) -> nn.Module:
        timm = import_timm()
        return timm.create_model(arch, pretrained=False, in_chans=S2_BANDS, num_classes=0, **kwargs)

    build.__name__ = f"build_s2_{arch}"
    return build


register_model(
    "s2_resnet50",
    presets=_timm_embedding_presets(2048, 64, {}),
    description="timm resnet50, 13 Sentinel-2 bands in, 2048-d pooled embedding out (num_classes=0); "
    "small preset keeps the architecture at 64x64",
    **FAMILY,
)(_timm_embedding_builder("resnet50"))

register_model(
    "s2_vit_small",
    presets=_timm_embedding_presets(384, 64, {"img_size": 64}),
    description="timm vit_small_patch16_224, 13 Sentinel-2 bands in, 384-d pooled (CLS) embedding out; "
    "small preset uses img_size=64",
    **FAMILY,
)(_timm_embedding_builder("vit_small_patch16_224"))


# --------------------------------------------------------------------------- DOFA-style encoder

def _timm_block() -> type[nn.Module]:
    """timm's ViT block (ONNX-exportable attention); imported via compat for the torchvision workaround."""
    import_timm()
    from timm.models.vision_transformer import Block

    return Block


def wavelength_embedding(wavelengths_um: torch.Tensor, dim: int) -> torch.Tensor:
    """1-D sin/cos embedding of wavelengths (in nm, as DOFA does) -> (bands, dim)."""
    half = dim // 2
    omega = 1.0 / (10000.0 ** (torch.arange(half, dtype=torch.float32, device=wavelengths_um.device) / half))
    angles = (wavelengths_um.float() * 1000.0)[:, None] * omega[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)


class WavelengthHypernetwork(nn.Module):
    """Wavelengths -> patch-embedding weight (bands * p * p, embed_dim) and bias (embed_dim,).

    Like DOFA's `Dynamic_MLP_OFA`: the wavelength embeddings pass a residual MLP, then one transformer
    layer together with learned weight tokens and a bias token; each band's output token is projected to
    that band's p*p*embed_dim kernel, the bias token to the bias. Every op is independent of the band
    count, so the exported graph keeps the band axis dynamic.
    """

    def __init__(self, embed_dim: int, patch_size: int, wave_dim: int = 128, num_tokens: int = 16,
                 num_heads: int = 4, scale: float = 0.01) -> None:
        super().__init__()
        Block = _timm_block()
        self.embed_dim, self.patch_size, self.wave_dim, self.scale = embed_dim, patch_size, wave_dim, scale
        self.fc = nn.Sequential(nn.Linear(wave_dim, wave_dim), nn.GELU(), nn.Linear(wave_dim, wave_dim))
        self.weight_tokens = nn.Parameter(torch.randn(1, num_tokens, wave_dim) * 0.02)
        self.bias_token = nn.Parameter(torch.randn(1, 1, wave_dim) * 0.02)
        self.mixer = Block(wave_dim, num_heads, mlp_ratio=2.0, qkv_bias=True)
        self.to_weight = nn.Linear(wave_dim, patch_size * patch_size * embed_dim)
        self.to_bias = nn.Linear(wave_dim, embed_dim)
        self.num_tokens = num_tokens

    def forward(self, wavelengths_um: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        emb = wavelength_embedding(wavelengths_um, self.wave_dim)
        emb = emb + self.fc(emb)  # (bands, wave_dim)
        tokens = torch.cat([self.weight_tokens, emb[None], self.bias_token], dim=1)
        out = self.mixer(tokens)[0]
        band_tokens = out[self.num_tokens:-1] + emb  # slice ends at -1: no band count baked into the graph
        weight = self.to_weight(band_tokens).reshape(-1, self.embed_dim)  # (bands*p*p, E), rows (band, i, j)
        bias = self.to_bias(out[-1])
        return weight * self.scale, bias * self.scale


class DOFAEncoder(nn.Module):
    """Wavelength-conditioned ViT: forward(image (B, bands, H, W), wavelengths (B, bands) in µm) -> (B, dim).

    Triton batches every input along axis 0, so wavelengths arrive once per sample; they describe the
    request's bands and must be equal across the batch: the model uses row 0 (checked in eager mode only,
    a data-dependent check cannot live in a traced/exported graph).
    """

    def __init__(self, img_size: int = 224, patch_size: int = 16, embed_dim: int = 768, depth: int = 12,
                 num_heads: int = 12, wave_dim: int = 128, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        Block = _timm_block()
        if img_size % patch_size:
            raise UserInputError(f"img_size {img_size} must be a multiple of patch_size {patch_size}")
        self.patch_size = patch_size
        self.embed_dim = embed_dim
        self.patch_embed = WavelengthHypernetwork(embed_dim, patch_size, wave_dim=wave_dim)
        num_patches = (img_size // patch_size) ** 2
        self.cls_token = nn.Parameter(torch.randn(1, 1, embed_dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, num_patches + 1, embed_dim) * 0.02)
        self.blocks = nn.Sequential(*[Block(embed_dim, num_heads, mlp_ratio, qkv_bias=True) for _ in range(depth)])
        self.fc_norm = nn.LayerNorm(embed_dim)

    def _patchify(self, x: torch.Tensor) -> torch.Tensor:
        """(B, bands, H, W) -> (B, patches, bands * p * p). The legacy ONNX exporter refuses a conv whose
        kernel comes from the graph with an unknown band count, while reshape/matmul keep that axis dynamic."""
        p = self.patch_size
        hp, wp = x.shape[-2] // p, x.shape[-1] // p
        x = x.reshape(x.shape[0], -1, hp, p, wp, p).permute(0, 2, 4, 1, 3, 5)  # (B, hp, wp, bands, p, p)
        return x.reshape(x.shape[0], hp * wp, -1)

    def forward(self, x: torch.Tensor, wavelengths: torch.Tensor) -> torch.Tensor:
        if not (torch.jit.is_tracing() or torch.jit.is_scripting()) and wavelengths.dim() == 2:
            if not bool(torch.all(wavelengths == wavelengths[:1])):
                raise UserInputError("wavelengths must be the same for every sample of a batch")
        waves = wavelengths[0] if wavelengths.dim() == 2 else wavelengths
        weight, bias = self.patch_embed(waves)
        x = self._patchify(x) @ weight + bias  # (B, patches, E): a stride-p conv written as a matmul
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.blocks(x)
        return self.fc_norm(x[:, 1:].mean(dim=1))  # DOFA pools the patch tokens (global_pool="avg")


def _dofa_presets() -> dict[str, Preset]:
    def signature(size: int, dim: int) -> ModelSignature:
        return ModelSignature(
            inputs=(
                TensorSpec("input__0", (-1, size, size), example_shape=(S2_BANDS, size, size)),
                TensorSpec("wavelengths__1", (-1,), example_shape=(S2_BANDS,), value=list(S2_WAVELENGTHS_UM),
                           batch_uniform=True),
            ),
            outputs=(TensorSpec("output__0", (dim,)),),
        )

    small = dict(img_size=64, patch_size=16, embed_dim=192, depth=2, num_heads=3, wave_dim=64)
    full = dict(img_size=224, patch_size=16, embed_dim=768, depth=12, num_heads=12, wave_dim=128)  # DOFA-base
    return {
        "small": Preset("small", signature(64, small["embed_dim"]), small, max_batch_size=8),
        "full": Preset("full", signature(224, full["embed_dim"]), full, max_batch_size=32),
    }


@register_model(
    "dofa_vit",
    presets=_dofa_presets(),
    description="DOFA-style wavelength-conditioned ViT (any number of bands): a hypernetwork builds the "
    "patch-embedding kernel per band from its wavelength (µm, input wavelengths__1, same for every sample "
    "of a batch; row 0 is used); mean-pooled embedding out. Full = DOFA-base (768-d, 12 blocks)",
    tags=("dynamic-bands",),
    **FAMILY,
)
def build_dofa_vit(**kwargs) -> nn.Module:
    return DOFAEncoder(**kwargs)
