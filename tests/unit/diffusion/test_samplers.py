"""Samplers: deterministic by seed, exact evaluation counts, and correct on denoisers with known answers."""
from __future__ import annotations

import numpy as np
import pytest

from deployment_toolkit.diffusion import samplers as S

SHAPE = (2, 4, 4)


def toy_denoiser(x: np.ndarray, t: np.ndarray, cond: np.ndarray | None) -> np.ndarray:
    """Depends on all three inputs, so a sampler that drops or misaligns one changes the result."""
    c = 0.0 if cond is None else cond[:, :, None, None]
    return np.tanh(0.5 * x + 0.3 * c) * (1.0 + 0.001 * t[:, :, None, None])


class Counting:
    def __init__(self, fn=toy_denoiser):
        self.fn, self.calls, self.seen = fn, 0, []

    def __call__(self, x, t, cond):
        self.calls += 1
        self.seen.append((x.shape, x.dtype, t.shape, t.dtype, None if cond is None else cond.copy()))
        return self.fn(x, t, cond)


COND = np.arange(6, dtype=np.float32).reshape(3, 2) / 6.0


@pytest.mark.parametrize("name", sorted(S.SAMPLERS))
def test_deterministic_by_seed(name):
    run = lambda seed: S.SAMPLERS[name](toy_denoiser, COND, steps=4, seed=seed, samples=2, shape=SHAPE)  # noqa: E731
    a, b, c = run(7), run(7), run(8)
    assert a.shape == (6, *SHAPE) and a.dtype == np.float32
    assert a.tobytes() == b.tobytes()
    assert np.abs(a - c).max() > 1e-3


@pytest.mark.parametrize("name", sorted(S.SAMPLERS))
@pytest.mark.parametrize("bad", [{"steps": 0}, {"steps": -1}, {"samples": 0}])
def test_rejects_non_positive_steps_and_samples(name, bad):
    kwargs = dict(steps=2, seed=0, samples=1, shape=SHAPE) | bad
    with pytest.raises(ValueError, match="steps|samples"):
        S.SAMPLERS[name](toy_denoiser, COND, **kwargs)
    with pytest.raises(ValueError):
        S.evaluations(name, 0)


def test_unknown_sampler():
    with pytest.raises(ValueError, match="unknown sampler"):
        S.evaluations("euler_a", 10)


@pytest.mark.parametrize("name", sorted(S.SAMPLERS))
@pytest.mark.parametrize("steps", [1, 2, 5])
def test_evaluation_counts(name, steps):
    counter = Counting()
    S.SAMPLERS[name](counter, COND, steps=steps, seed=0, samples=2, shape=SHAPE)
    assert counter.calls == S.evaluations(name, steps)
    assert S.evaluations(name, steps) == {"ddim": steps, "edm_heun": 2 * steps - 1}[name]
    for x_shape, x_dtype, t_shape, t_dtype, cond in counter.seen:  # the served model's batched I/O
        assert x_shape == (6, *SHAPE) and x_dtype == np.float32
        assert t_shape == (6, 1) and t_dtype == np.float32
        np.testing.assert_array_equal(cond, np.repeat(COND, 2, axis=0))  # row b * samples + s


def test_unconditional_batch_is_one():
    out = S.ddim_sample(Counting(), None, steps=2, seed=0, samples=3, shape=SHAPE)
    assert out.shape == (3, *SHAPE)


def test_ddim_zero_noise_prediction_rescales_initial_noise():
    """eps = 0: each step is x_prev = sqrt(a_prev / a_t) x_t; the product telescopes to x_T / sqrt(abar[t_0])
    with a_prev = 1 after the last step, for any step count."""
    zero = lambda x, t, c: np.zeros_like(x)  # noqa: E731
    x_T = np.random.default_rng(5).standard_normal((6, *SHAPE))  # the rng's first draw, documented
    abar = S.alphas_cumprod("scaled_linear")
    for steps in (1, 3, 10):
        out = S.ddim_sample(zero, COND, steps=steps, seed=5, samples=2, shape=SHAPE)
        np.testing.assert_allclose(out, x_T / np.sqrt(abar[999]), rtol=1e-5)


def test_ddim_timesteps():
    np.testing.assert_array_equal(S.ddim_timesteps(4), [999, 749, 499, 249])
    np.testing.assert_array_equal(S.ddim_timesteps(4, spacing="leading"), [750, 500, 250, 0])
    assert S.ddim_timesteps(1).tolist() == [999]


@pytest.mark.parametrize("spacing", ["trailing", "leading"])
def test_ddim_matches_diffusers_scheduler(spacing):
    import torch  # runtime dependencies (pyproject): missing is a broken install, not a skip

    import deployment_toolkit.compat as compat

    compat.import_torchvision()
    import diffusers
    sched = diffusers.DDIMScheduler(
        num_train_timesteps=1000, beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012,
        clip_sample=False, set_alpha_to_one=True, timestep_spacing=spacing, steps_offset=0,
    )
    steps, samples = 10, 2  # 10 divides 1000: diffusers' prev = t - 1000 // steps agrees with the list
    sched.set_timesteps(steps)
    ours = S.ddim_sample(toy_denoiser, COND, steps=steps, seed=3, samples=samples, shape=SHAPE,
                         options=S.DDIMOptions(spacing=spacing))
    x = torch.from_numpy(np.random.default_rng(3).standard_normal((6, *SHAPE)))
    cond = np.repeat(COND, samples, axis=0)
    for t in sched.timesteps:
        eps = toy_denoiser(x.numpy().astype(np.float32), np.full((6, 1), float(t), np.float32), cond)
        x = sched.step(torch.from_numpy(eps.astype(np.float64)), t, x).prev_sample
    np.testing.assert_allclose(ours, x.numpy(), atol=1e-4)


def test_ddim_eta_adds_seeded_noise():
    a = S.ddim_sample(toy_denoiser, COND, steps=3, seed=1, shape=SHAPE, options=S.DDIMOptions(eta=1.0))
    b = S.ddim_sample(toy_denoiser, COND, steps=3, seed=1, shape=SHAPE, options=S.DDIMOptions(eta=1.0))
    c = S.ddim_sample(toy_denoiser, COND, steps=3, seed=1, shape=SHAPE, options=S.DDIMOptions(eta=0.0))
    assert a.tobytes() == b.tobytes() and np.abs(a - c).max() > 1e-3


def test_edm_sigmas():
    sig = S.edm_sigmas(5, sigma_min=0.002, sigma_max=80.0)
    assert sig[0] == pytest.approx(80.0) and sig[-2] == pytest.approx(0.002) and sig[-1] == 0.0
    assert np.all(np.diff(sig) < 0)
    np.testing.assert_allclose(S.edm_sigmas(1, 0.002, 80.0), [80.0, 0.0])


def test_edm_heun_point_mass_converges_to_the_point():
    """For data = one point x0 the ideal denoiser is D = x0; the ODE then lands on x0 exactly (the last
    Euler step to sigma = 0 returns D). Checked both as D itself and as a raw network under preconditioning."""
    x0 = np.linspace(-1, 1, int(np.prod(SHAPE))).reshape(SHAPE)

    def ideal_D(x, sigma, cond):
        return np.broadcast_to(x0, x.shape).astype(np.float32)

    def ideal_raw(x_in, c_noise, cond):  # invert D = c_skip x + c_out F(c_in x, c_noise)
        sigma = np.exp(4.0 * c_noise.astype(np.float64))[:, :, None, None]
        c_skip, c_out, c_in, _ = S.edm_preconditioning(sigma)
        return ((x0 - c_skip * (x_in / c_in)) / c_out).astype(np.float32)

    out = S.edm_heun_sample(ideal_D, COND, steps=6, seed=0, samples=2, shape=SHAPE,
                            options=S.EDMOptions(precondition=False))
    np.testing.assert_allclose(out, np.broadcast_to(x0, out.shape), atol=1e-6)
    out = S.edm_heun_sample(ideal_raw, COND, steps=6, seed=0, samples=2, shape=SHAPE)
    np.testing.assert_allclose(out, np.broadcast_to(x0, out.shape), atol=1e-3)


def test_edm_heun_is_second_order_on_gaussian_data():
    """Data ~ N(0, s^2): D(x; sigma) = x s^2 / (s^2 + sigma^2) and the probability-flow ODE has the exact
    solution x(0) = x_T s / sqrt(s^2 + sigma_max^2). Heun's error must fall ~4x per doubling of steps."""
    s, sigma_max = 0.5, 80.0

    def D(x, sigma, cond):
        return x * s**2 / (s**2 + sigma[:, :, None, None] ** 2)

    x_T = np.random.default_rng(2).standard_normal((3, *SHAPE)) * sigma_max
    exact = x_T * s / np.sqrt(s**2 + sigma_max**2)

    def err(steps):
        out = S.edm_heun_sample(D, COND, steps=steps, seed=2, shape=SHAPE,
                                options=S.EDMOptions(sigma_max=sigma_max, precondition=False))
        return np.abs(out - exact).max() / np.abs(exact).max()

    e32, e64 = err(32), err(64)
    assert e64 < 0.01
    assert e32 / e64 > 3.0


def test_chunked_denoiser_gives_identical_samples():
    full = S.edm_heun_sample(toy_denoiser, COND, steps=3, seed=4, samples=3, shape=SHAPE)
    counter = Counting()
    chunked = S.edm_heun_sample(S.chunked(counter, 4), COND, steps=3, seed=4, samples=3, shape=SHAPE)
    assert full.tobytes() == chunked.tobytes()
    assert counter.calls == 3 * S.evaluations("edm_heun", 3)  # 9 rows -> 4 + 4 + 1
    assert max(shape[0] for shape, *_ in counter.seen) == 4


def test_options_are_read_from_their_fields_and_unknown_ones_are_named():
    assert S.options_for("ddim", {"eta": 0.5}) == S.DDIMOptions(eta=0.5)
    assert S.options_for("edm_heun") == S.EDMOptions()
    with pytest.raises(ValueError, match="edm_heun has no option eta; its options are sigma_min"):
        S.options_for("edm_heun", {"eta": 0.5})
