"""Diffusion samplers written once, in pure numpy, around a batched denoiser callable.

    denoise(sample: (N, *shape) float32, t: (N, 1) float32, cond: (N, *cond_shape) | None) -> (N, *shape)

The callable can wrap torch, ONNX Runtime or a Triton client in-process, and the same code runs inside a
Triton Python-backend model, so a served pipeline and an offline one give the same result for the same
(cond, steps, seed, samples). `t` has a per-sample axis of size 1 because that is how the exported
denoisers take it (Triton batches every input along axis 0).

Conventions shared by every sampler:
- Conditioning of batch B is repeated `samples` times with `np.repeat(cond, samples, axis=0)`, so output
  row `b * samples + s` is sample s of conditioning b, and `out.reshape(B, samples, *shape)` groups them.
  With `cond=None` the batch is 1 (unconditional) and `denoise` receives `cond=None`.
- All randomness comes from one `np.random.default_rng(seed)`; its first draw is the initial noise
  `rng.standard_normal((samples * B, *shape))` (float64), scaled by the sampler's initial noise level.
- The state is kept in float64; the denoiser sees float32. The result is float32.
- What is particular to one sampler (DDIM's eta and schedule, EDM's noise levels) is its options dataclass
  (`DDIMOptions`, `EDMOptions`), each default written once; a pipeline stores them as a JSON object of their
  fields (`sampler_options`), read back with `options_for`.

Pure numpy and the standard library: this file is copied beside the served sampler model.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Union

import numpy as np

Denoiser = Callable[[np.ndarray, np.ndarray, Optional[np.ndarray]], np.ndarray]

TRAIN_STEPS = 1000


@dataclass(frozen=True)
class DDIMOptions:
    """DDIM: `eta` 0 is deterministic given the initial noise; the beta schedule and the timestep spacing."""

    eta: float = 0.0
    schedule: str = "scaled_linear"  # scaled_linear (Stable Diffusion) | linear (DDPM)
    spacing: str = "trailing"  # trailing | leading


@dataclass(frozen=True)
class EDMOptions:
    """EDM Heun: the Karras noise levels and, with `precondition`, the network taken as the raw F (see
    edm_heun_sample)."""

    sigma_min: float = 0.002
    sigma_max: float = 80.0
    rho: float = 7.0
    sigma_data: float = 0.5
    precondition: bool = True


SamplerOptions = Union[DDIMOptions, EDMOptions]


def _check(steps: int, samples: int) -> None:
    if not isinstance(steps, (int, np.integer)) or steps <= 0:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    if not isinstance(samples, (int, np.integer)) or samples <= 0:
        raise ValueError(f"samples must be a positive integer, got {samples!r}")


def _prepare(cond: np.ndarray | None, samples: int, shape: tuple[int, ...], seed: int
             ) -> tuple[np.ndarray | None, np.ndarray, np.random.Generator]:
    """Repeat the conditioning and draw the initial unit noise (the rng's first draw)."""
    if cond is None:
        batch, cond_rep = 1, None
    else:
        cond = np.asarray(cond)
        if cond.ndim == 0:
            raise ValueError("cond needs a batch axis: shape (B, ...)")
        batch, cond_rep = cond.shape[0], np.repeat(cond, samples, axis=0)
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((samples * batch, *tuple(shape)))
    return cond_rep, noise, rng


def _call(denoise: Denoiser, x: np.ndarray, t: float | np.ndarray, cond: np.ndarray | None) -> np.ndarray:
    """One network evaluation: float32 in, per-sample `t` of shape (N, 1), float64 out."""
    n = x.shape[0]
    t_arr = np.broadcast_to(np.asarray(t, dtype=np.float32).reshape(-1, 1), (n, 1)).copy()
    out = np.asarray(denoise(x.astype(np.float32), t_arr, cond))
    if out.shape != x.shape:
        raise ValueError(f"denoiser returned shape {out.shape}, expected {x.shape}")
    return out.astype(np.float64)


# --------------------------------------------------------------------------- DDIM

def alphas_cumprod(schedule: str = "scaled_linear", beta_start: float | None = None, beta_end: float | None = None,
                   train_steps: int = TRAIN_STEPS) -> np.ndarray:
    """ᾱ_t for t = 0..train_steps-1. "scaled_linear" is Stable Diffusion's (linear in sqrt(beta), 0.00085 ->
    0.012), "linear" is DDPM's (1e-4 -> 0.02)."""
    if schedule == "scaled_linear":
        b0, b1 = beta_start or 0.00085, beta_end or 0.012
        betas = np.linspace(b0**0.5, b1**0.5, train_steps, dtype=np.float64) ** 2
    elif schedule == "linear":
        b0, b1 = beta_start or 1e-4, beta_end or 0.02
        betas = np.linspace(b0, b1, train_steps, dtype=np.float64)
    else:
        raise ValueError(f"unknown beta schedule {schedule!r}; choose 'scaled_linear' or 'linear'")
    return np.cumprod(1.0 - betas)


def ddim_timesteps(steps: int, train_steps: int = TRAIN_STEPS, spacing: str = "trailing") -> np.ndarray:
    """Evenly spaced timesteps, descending. "trailing" starts at train_steps-1 (so even 1 step starts from pure
    noise; Lin et al. 2024), "leading" is diffusers' SD default (k * train_steps//steps)."""
    if steps > train_steps:
        raise ValueError(f"steps ({steps}) cannot exceed the {train_steps} training steps")
    if spacing == "trailing":
        return (np.round(np.arange(train_steps, 0, -train_steps / steps)) - 1).astype(np.int64)
    if spacing == "leading":
        return (np.arange(steps)[::-1] * (train_steps // steps)).astype(np.int64)
    raise ValueError(f"unknown timestep spacing {spacing!r}; choose 'trailing' or 'leading'")


def ddim_sample(denoise: Denoiser, cond: np.ndarray | None, steps: int, seed: int, samples: int = 1,
                shape: tuple[int, ...] = (4, 16, 16), options: DDIMOptions | None = None) -> np.ndarray:
    """DDIM (Song et al., 2021) with an epsilon-predicting `denoise(x_t, t, cond)`, t the training timestep.

    x_prev = sqrt(ᾱ_prev) x0 + sqrt(1 - ᾱ_prev - σ²) ε + σ z,  x0 = (x_t - sqrt(1 - ᾱ_t) ε) / sqrt(ᾱ_t),
    σ = eta sqrt((1 - ᾱ_prev) / (1 - ᾱ_t)) sqrt(1 - ᾱ_t / ᾱ_prev); ᾱ_prev = 1 after the last step.
    eta = 0 is deterministic given the initial noise; z is drawn from the same seeded rng. No clipping
    (latent space). Returns (samples * B, *shape) float32; `steps` network evaluations.
    """
    _check(steps, samples)
    o = options or DDIMOptions()
    eta = o.eta
    abar = alphas_cumprod(o.schedule)
    ts = ddim_timesteps(steps, len(abar), o.spacing)
    cond_rep, x, rng = _prepare(cond, samples, shape, seed)  # x_T ~ N(0, I): DDPM's prior has unit variance
    for i, t in enumerate(ts):
        a_t = abar[t]
        a_prev = abar[ts[i + 1]] if i + 1 < len(ts) else 1.0
        eps = _call(denoise, x, float(t), cond_rep)
        x0 = (x - np.sqrt(1.0 - a_t) * eps) / np.sqrt(a_t)
        sigma = eta * np.sqrt((1.0 - a_prev) / (1.0 - a_t)) * np.sqrt(1.0 - a_t / a_prev)
        x = np.sqrt(a_prev) * x0 + np.sqrt(max(1.0 - a_prev - sigma**2, 0.0)) * eps
        if sigma > 0:
            x = x + sigma * rng.standard_normal(x.shape)
    return x.astype(np.float32)


# --------------------------------------------------------------------------- EDM Heun

def edm_preconditioning(sigma: np.ndarray | float, sigma_data: float = 0.5) -> tuple[np.ndarray, ...]:
    """Karras et al. 2022, Table 1 (EDM): D(x; σ) = c_skip x + c_out F(c_in x; c_noise).
    c_skip = σd²/(σ²+σd²), c_out = σ σd / sqrt(σ²+σd²), c_in = 1/sqrt(σ²+σd²), c_noise = ln(σ)/4.
    Keeps the raw network's input and training target at unit variance at every noise level."""
    sigma = np.asarray(sigma, dtype=np.float64)
    norm = sigma**2 + sigma_data**2
    return sigma_data**2 / norm, sigma * sigma_data / np.sqrt(norm), 1.0 / np.sqrt(norm), np.log(sigma) / 4.0


def edm_sigmas(steps: int, sigma_min: float = 0.002, sigma_max: float = 80.0, rho: float = 7.0) -> np.ndarray:
    """Karras noise levels σ_0 = σ_max > ... > σ_{N-1} = σ_min, then σ_N = 0 (N + 1 values)."""
    if not 0 < sigma_min <= sigma_max:
        raise ValueError(f"need 0 < sigma_min <= sigma_max, got {sigma_min}, {sigma_max}")
    ramp = np.linspace(0.0, 1.0, steps) if steps > 1 else np.zeros(1)
    inv_rho = 1.0 / rho
    sig = (sigma_max**inv_rho + ramp * (sigma_min**inv_rho - sigma_max**inv_rho)) ** rho
    return np.append(sig, 0.0)


def edm_heun_sample(denoise: Denoiser, cond: np.ndarray | None, steps: int, seed: int, samples: int = 1,
                    shape: tuple[int, ...] = (4, 16, 16), options: EDMOptions | None = None) -> np.ndarray:
    """Deterministic EDM sampler (Karras et al. 2022, Algorithm 1; CorrDiff's with S_churn = 0).

    With `options.precondition` (default) `denoise` is the raw network F: it gets (c_in x, c_noise, cond) and
    the sampler forms D = c_skip x + c_out F — so a plain exported UNet works. Without it
    `denoise(x, sigma, cond)` already returns D(x; σ) (a model exported with EDMPrecond inside).
    Each step: Euler from σ_i to σ_{i+1}, then Heun's 2nd-order correction except on the final step to
    σ_N = 0, so 2 * steps - 1 evaluations. x_0 = σ_max * N(0, I). Returns (samples * B, *shape) float32.
    """
    _check(steps, samples)
    o = options or EDMOptions()
    sig = edm_sigmas(steps, o.sigma_min, o.sigma_max, o.rho)
    cond_rep, noise, _ = _prepare(cond, samples, shape, seed)

    def D(x: np.ndarray, sigma: float) -> np.ndarray:
        if not o.precondition:
            return _call(denoise, x, sigma, cond_rep)
        c_skip, c_out, c_in, c_noise = edm_preconditioning(sigma, o.sigma_data)
        return c_skip * x + c_out * _call(denoise, c_in * x, float(c_noise), cond_rep)

    x = noise * sig[0]
    for i in range(steps):
        s_cur, s_next = sig[i], sig[i + 1]
        d = (x - D(x, s_cur)) / s_cur
        x_next = x + (s_next - s_cur) * d
        if s_next > 0:
            d_next = (x_next - D(x_next, s_next)) / s_next
            x_next = x + (s_next - s_cur) * 0.5 * (d + d_next)
        x = x_next
    return x.astype(np.float32)


# --------------------------------------------------------------------------- registry

SAMPLERS: dict[str, Callable[..., np.ndarray]] = {"ddim": ddim_sample, "edm_heun": edm_heun_sample}
OPTIONS: dict[str, type] = {"ddim": DDIMOptions, "edm_heun": EDMOptions}

_EVALUATIONS: dict[str, Callable[[int], int]] = {"ddim": lambda n: n, "edm_heun": lambda n: 2 * n - 1}


def get_sampler(name: str) -> Callable[..., np.ndarray]:
    try:
        return SAMPLERS[name]
    except KeyError:
        raise ValueError(f"unknown sampler {name!r}; choose one of {', '.join(SAMPLERS)}") from None


def options_for(sampler: str, options: SamplerOptions | Mapping[str, Any] | None = None) -> SamplerOptions:
    """The options of `sampler` from a mapping of their fields (a pipeline's stored JSON, --sampler-option
    KEY=VALUE); ValueError naming the fields it has for any other key."""
    get_sampler(sampler)
    kind = OPTIONS[sampler]
    if isinstance(options, kind):
        return options
    given = dataclasses.asdict(options) if dataclasses.is_dataclass(options) else dict(options or {})
    names = [f.name for f in dataclasses.fields(kind)]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ValueError(f"{sampler} has no option {', '.join(unknown)}; its options are {', '.join(names)}")
    return kind(**given)


def evaluations(sampler: str, steps: int) -> int:
    """Denoiser evaluations (batched network calls) for `steps` steps: divide latency by this for per-step
    numbers. DDIM: steps; EDM Heun: 2 * steps - 1 (no correction on the last step to σ = 0)."""
    get_sampler(sampler)
    _check(steps, 1)
    return _EVALUATIONS[sampler](int(steps))


def chunked(denoise: Denoiser, max_batch: int) -> Denoiser:
    """Wrap a denoiser so no call exceeds `max_batch` rows (a served model's max_batch_size); the counts
    above are per full-batch evaluation and do not change."""
    if max_batch <= 0:
        raise ValueError(f"max_batch must be positive, got {max_batch}")

    def call(x: np.ndarray, t: np.ndarray, cond: np.ndarray | None) -> np.ndarray:
        parts = []
        for i in range(0, x.shape[0], max_batch):
            rows = slice(i, i + max_batch)
            parts.append(np.asarray(denoise(x[rows], t[rows], None if cond is None else cond[rows])))
        return np.concatenate(parts, axis=0)

    return call
