"""viz_core.lessons.scaling: Var(q.k) against theory, softmax statistics against torch, saturation invariants, experiment."""
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import viz_core
from viz_core.lessons import scaling
from viz_core.attention import scaled_dot_product_attention
from viz_core.errors import InputError


def _rel_tolerance(d_k: int, n: int, sigmas: float = 4.0) -> float:
    """sigmas standard errors of a sample variance: sqrt((kurtosis - 1) / n), kurtosis of q.k = 3 + 6 / d_k."""
    return sigmas * math.sqrt((2 + 6 / d_k) / n)


# ---------------------------------------------------------------- part 1: Var(q.k)
@pytest.mark.parametrize("d_k,n", [(1, 10_000), (3, 10_000), (64, 10_000), (100, 10_000), (1024, 4000),
                                   (4096, 2000)])
def test_variance_matches_theory(d_k, n):
    tol = _rel_tolerance(d_k, n)
    assert abs(scaling.dot_product_variance(d_k, n_samples=n) / d_k - 1) < tol
    assert abs(scaling.dot_product_variance(d_k, scaled=True, n_samples=n) - 1) < tol


def test_public_api_is_reexported_and_scaled_is_unscaled_over_dk():
    assert viz_core.dot_product_variance is scaling.dot_product_variance
    v, vs = scaling.dot_product_variance(256), scaling.dot_product_variance(256, scaled=True)
    assert vs == pytest.approx(v / 256, rel=1e-12)


def test_samples_are_real_products_not_normal_draws():
    """For d_k = 1, q.k = q_1 k_1: a product of two normals has kurtosis 9 (a normal has 3) and mean |x| = 2/pi."""
    x = scaling.dot_product_samples(1, n_samples=200_000, seed=1)
    kurtosis = np.mean(x ** 4) / np.mean(x ** 2) ** 2
    assert 7.5 < kurtosis < 10.5
    assert np.mean(np.abs(x)) == pytest.approx(2 / np.pi, rel=0.02)
    big = scaling.dot_product_samples(1024, n_samples=8000, seed=1)  # central limit: nearly normal
    assert np.mean(big ** 4) / np.mean(big ** 2) ** 2 == pytest.approx(3.0, abs=0.25)
    assert abs(big.mean()) < 4 * math.sqrt(1024 / 8000)


def test_sweep_rows_equal_single_draws_and_are_nested():
    sweep = scaling.variance_sweep([1, 64, 65, 200], n_samples=500, seed=3)
    for i, d in enumerate(sweep.d_ks):
        np.testing.assert_array_equal(sweep.samples[i], scaling.dot_product_samples(int(d), 500, seed=3))
    assert sweep.index(65) == 2
    np.testing.assert_allclose(sweep.var_scaled, sweep.var_unscaled / sweep.d_ks)
    assert not np.allclose(sweep.samples[1], sweep.samples[2])  # one more dimension changes every sample


def test_seed_reproducible_and_different_seeds_differ():
    a = scaling.dot_product_samples(50, 1000, seed=7)
    np.testing.assert_array_equal(a, scaling.dot_product_samples(50, 1000, seed=7))
    assert not np.allclose(a, scaling.dot_product_samples(50, 1000, seed=8))


@pytest.mark.parametrize("kwargs", [dict(d_k=0), dict(d_k=-3), dict(d_k=2.5), dict(d_k=True), dict(d_k="8"),
                                    dict(d_k=scaling.MAX_DK + 1), dict(d_k=4, n_samples=1),
                                    dict(d_k=65_536, n_samples=1_000_000)])
def test_bad_arguments_raise_input_errors(kwargs):
    with pytest.raises(InputError) as info:
        scaling.dot_product_variance(**kwargs)
    assert info.value.code.startswith("scaling.")


def test_sweep_index_unknown_dk():
    with pytest.raises(InputError, match="not in the sweep"):
        scaling.variance_sweep([1, 2], n_samples=10).index(3)


# ---------------------------------------------------------------- part 2: softmax statistics
def test_jacobian_matches_torch_autograd():
    z = torch.randn(7, dtype=torch.float64) * 3
    p = torch.softmax(z, -1).numpy()
    reference = torch.autograd.functional.jacobian(lambda x: torch.softmax(x, -1), z).numpy()
    np.testing.assert_allclose(scaling.softmax_jacobian(p), reference, atol=1e-12)
    assert scaling.jacobian_frobenius(p) == pytest.approx(np.linalg.norm(reference), rel=1e-10)


def test_jacobian_batched_and_extremes():
    p = np.random.default_rng(0).dirichlet(np.ones(5), size=(3, 4))            # (3, 4, 5)
    jac = scaling.softmax_jacobian(p)
    assert jac.shape == (3, 4, 5, 5)
    np.testing.assert_allclose(jac.sum(-1), 0, atol=1e-12)                   # rows of J sum to 0
    np.testing.assert_allclose(jac, np.swapaxes(jac, -1, -2))                # symmetric
    np.testing.assert_allclose(scaling.jacobian_frobenius(p), np.linalg.norm(jac, axis=(-2, -1)), rtol=1e-10)
    assert scaling.jacobian_frobenius(np.eye(6)[2]) == 0.0                     # one-hot: no gradient at all
    n = 16
    assert scaling.jacobian_frobenius(np.full(n, 1 / n)) == pytest.approx(math.sqrt(n - 1) / n)
    assert scaling.jacobian_frobenius(np.array([0.5, 0.5, 0, 0])) == pytest.approx(0.5)  # the largest possible


def _exact_jacobian_norm(p) -> float:
    """||diag(p) - p p^T||_F in exact rational arithmetic, for the floats of p renormalised to sum to exactly 1."""
    q = [Fraction(float(x)) for x in p]
    total = sum(q)
    q = [x / total for x in q]
    square = sum((q[i] * (i == j) - q[i] * q[j]) ** 2 for i in range(len(q)) for j in range(len(q)))
    return math.sqrt(square)


def _expanded_formula(p) -> float:
    """The textbook expansion sum p^2 - 2 sum p^3 + (sum p^2)^2, which cancels catastrophically when saturated."""
    s2 = (p ** 2).sum()
    return math.sqrt(max(s2 - 2 * (p ** 3).sum() + s2 ** 2, 0.0))


@pytest.mark.parametrize("d_k, true_norm", [(256, 7.249e-11), (1024, 4.765e-9)])
def test_jacobian_norm_of_saturated_rows_is_not_zero(d_k, true_norm):
    """The Scaling page's example row (N = 16, seed 0, unscaled): exact reference, not an exact 0."""
    p = scaling.softmax(scaling.row_logits(scaling.example_row(d_k, 16, 0), d_k, False, 1.0))
    exact = _exact_jacobian_norm(p)
    assert exact == pytest.approx(true_norm, rel=1e-3)
    assert scaling.jacobian_frobenius(p) == pytest.approx(exact, rel=1e-12)
    assert _expanded_formula(p) == 0.0  # the textbook formula's answer: the test does exercise the cancellation


def test_jacobian_norm_against_exact_fractions_at_every_saturation():
    rng = np.random.default_rng(3)
    for scale in (0.1, 1, 10, 30, 100, 300, 700):
        z = rng.standard_normal((4, 9)) * scale
        p = scaling.softmax(z)                                                       # (4, 9)
        ours = scaling.jacobian_frobenius(p)
        for row, value in zip(p, ours):
            exact = _exact_jacobian_norm(row)
            assert value == pytest.approx(exact, rel=1e-12, abs=1e-300), (scale, row.max())
    dyadic = np.array([1 - 3 * 2.0 ** -42, 2.0 ** -42, 2.0 ** -41])                  # exact in float64, sums to 1
    assert scaling.jacobian_frobenius(dyadic) == pytest.approx(_exact_jacobian_norm(dyadic), rel=1e-13)


def test_jacobian_norm_matches_autograd_for_moderate_logits():
    # seeded: an unseeded draw could saturate a row, whose norm (about 1e-10) then differs beyond rtol (seen once)
    z = torch.randn(20, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 5
    p = torch.softmax(z, -1)
    reference = [torch.linalg.matrix_norm(torch.autograd.functional.jacobian(lambda x: torch.softmax(x, -1), row))
                 for row in z]
    np.testing.assert_allclose(scaling.jacobian_frobenius(p.numpy()), torch.stack(reference).numpy(), rtol=1e-12)


def test_softmax_stats_match_torch():
    z = torch.randn(50, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 4
    st = scaling.softmax_stats(z.numpy())
    p = torch.softmax(z, -1)
    np.testing.assert_allclose(scaling.softmax(z.numpy()), p.numpy(), rtol=1e-12)
    np.testing.assert_allclose(st.max_p, p.max(-1).values.numpy(), rtol=1e-12)
    np.testing.assert_allclose(st.entropy, torch.distributions.Categorical(logits=z).entropy().numpy(), atol=1e-10)


def test_softmax_stats_bounds_and_huge_logits():
    z = np.random.default_rng(1).standard_normal((200, 12)) * np.array([0.01, 1, 100, 1e6])[:, None, None]
    st = scaling.softmax_stats(z)                                              # (4, 200)
    assert np.all(np.isfinite(st.entropy)) and np.all(np.isfinite(st.jacobian_norm))
    assert np.all((st.max_p >= 1 / 12 - 1e-12) & (st.max_p <= 1))
    assert np.all((st.entropy >= 0) & (st.entropy <= math.log(12) + 1e-12))
    assert np.all((st.jacobian_norm >= 0) & (st.jacobian_norm <= 0.5 + 1e-12))
    assert st.jacobian_norm[-1].max() < 1e-12 and st.entropy[-1].max() < 1e-9  # logits x 1e6: one-hot
    ref = scaling.uniform_reference(12)
    assert st.max_p[0].max() == pytest.approx(float(ref.max_p), abs=1e-2)
    assert st.entropy[0].min() == pytest.approx(float(ref.entropy), abs=1e-3)


def test_sharper_logits_never_raise_entropy():
    """dH/dc of softmax(c z) is -c Var_p(z) <= 0: entropy falls and the largest weight rises as logits grow."""
    z = np.random.default_rng(2).standard_normal((100, 8))
    stats = [scaling.softmax_stats(c * z) for c in (0.5, 1, 2, 4, 8, 16)]
    for a, b in zip(stats, stats[1:]):
        assert np.all(b.entropy <= a.entropy + 1e-12)
        assert np.all(b.max_p >= a.max_p - 1e-12)


def test_logit_rows_shortcut_matches_brute_force():
    """sqrt(chi^2_d) * g has the law of K q: same variance, same max-weight statistics, same shared-q dependence."""
    rows, n = 20_000, 4
    fast = scaling.logit_rows(1, n, rows, seed=0)
    rng = np.random.default_rng(5)
    q, keys = rng.standard_normal((rows, 1)), rng.standard_normal((rows, n, 1))
    brute = (keys @ q[:, :, None])[..., 0]                                     # (rows, N)
    for z in (fast, brute):
        assert z.var() == pytest.approx(1.0, rel=0.05)
        sq = z ** 2                                                            # corr(z_1^2, z_2^2) = 2 / (2d + 6)
        assert np.corrcoef(sq[:, 0], sq[:, 1])[0, 1] == pytest.approx(0.25, abs=0.04)
    d_k = 64
    fast = scaling.logit_rows(d_k, 16, 4000, seed=1)
    brute = np.stack([scaling.example_row(d_k, 16, seed=s) for s in range(4000)])
    a, b = (scaling.softmax_stats(z).max_p.mean() for z in (fast, brute))
    assert a == pytest.approx(b, abs=0.02)


def test_example_row_is_k_times_q():
    d_k, n = 10, 5
    rng = np.random.default_rng(3)
    q, keys = rng.standard_normal(d_k), rng.standard_normal((n, d_k))
    np.testing.assert_allclose(scaling.example_row(d_k, n, seed=3), keys @ q)


def test_scaling_is_the_temperature_sqrt_dk():
    z = scaling.example_row(256, 8)
    np.testing.assert_allclose(scaling.row_logits(z, 256, scaled=False, temperature=16.0),
                               scaling.row_logits(z, 256, scaled=True, temperature=1.0))


def test_saturation_sweep_invariants():
    sweep = scaling.saturation_sweep(scaling.SaturationConfig(n_keys=16, n_rows=1000))
    unscaled, scaled = sweep.max_p
    assert unscaled[0] == pytest.approx(scaled[0])                             # d_k = 1: the two are the same
    assert np.all(np.diff(unscaled) > 0)                                       # sharper with every doubling
    assert unscaled[-1] > 0.95 and sweep.jacobian_norm[0, -1] < 0.05           # saturated at d_k = 4096
    assert np.ptp(scaled[3:]) < 0.03 and np.ptp(sweep.jacobian_norm[1, 3:]) < 0.03  # scaled: flat in d_k
    assert np.all(sweep.entropy <= math.log(16)) and np.all(sweep.entropy >= 0)
    onset = scaling.saturation_onset(sweep.d_ks, unscaled)
    assert onset in sweep.d_ks and unscaled[list(sweep.d_ks).index(onset)] >= 0.9
    assert unscaled[list(sweep.d_ks).index(onset) - 1] < 0.9
    assert scaling.saturation_onset(sweep.d_ks, scaled) is None


def test_temperature_moves_saturation():
    hot = scaling.saturation_sweep(scaling.SaturationConfig(n_keys=16, temperature=10.0, n_rows=500))
    cold = scaling.saturation_sweep(scaling.SaturationConfig(n_keys=16, temperature=0.1, n_rows=500))
    assert np.all(hot.max_p[1] < 0.15)                                         # near uniform (1/16)
    assert np.all(cold.max_p[1] > 0.7)                                         # scaled, but T = 0.1 sharpens
    assert scaling.saturation_onset(hot.d_ks, hot.max_p[0]) is None           # T = 10 delays the unscaled onset
    assert hot.max_p[0, -1] > 0.5                                              # ... but cannot stop the growth
    low = scaling.saturation_sweep(scaling.SaturationConfig(n_keys=2, temperature=0.05, n_rows=500))
    assert scaling.saturation_onset(low.d_ks, low.max_p[1]) == 1               # N = 2: saturated from d_k = 1


def test_rows_for_keeps_the_cost_bounded():
    assert scaling.rows_for(16) == 2000 and scaling.rows_for(512) == 250 and scaling.rows_for(100) == 640
    assert all(scaling.rows_for(n) * n <= 250 * 4096 for n in range(2, 4097))


@pytest.mark.parametrize("cfg", [scaling.SaturationConfig(n_keys=1), scaling.SaturationConfig(temperature=0.0),
                                 scaling.SaturationConfig(temperature=float("nan")),
                                 scaling.SaturationConfig(n_keys=100_000)])
def test_saturation_bad_config(cfg):
    with pytest.raises(InputError):
        scaling.saturation_sweep(cfg, d_ks=[1, 2])


# ---------------------------------------------------------------- part 3: one head of a model
def test_head_scores_match_attention_module():
    q, k = torch.randn(3, 6, 8), torch.randn(3, 6, 8)
    s = scaling.head_scores(q.numpy(), k.numpy(), head=2)
    _, w_scaled = scaled_dot_product_attention(q, k, k, scale=True)
    _, w_raw = scaled_dot_product_attention(q, k, k, scale=False)
    np.testing.assert_allclose(s.weights_scaled, w_scaled[2].numpy(), atol=1e-6)
    np.testing.assert_allclose(s.weights_raw, w_raw[2].numpy(), atol=1e-6)
    np.testing.assert_allclose(s.raw, (q[2] @ k[2].T).numpy(), rtol=1e-5, atol=1e-5)
    assert s.scaled.var() == pytest.approx(s.raw.var() / 8)
    assert s.stats_raw.max_p.shape == (6,) and scaling.max_abs_difference(s.weights_scaled, w_scaled[2]) < 1e-6
    with pytest.raises(InputError):
        scaling.head_scores(q.numpy(), k.numpy(), head=3)
    with pytest.raises(InputError):
        scaling.head_scores(q.numpy()[0], k.numpy()[0], head=0)


# ---------------------------------------------------------------- part 4: the experiment
def test_lookup_batch_targets_are_the_matching_values():
    cfg = scaling.ExperimentConfig(n_pairs=5, n_symbols=9, batch=32)
    query, keys, values, target = scaling.lookup_batch(cfg, torch.Generator().manual_seed(0))
    assert keys.shape == values.shape == (32, 5)
    assert all(len(set(row.tolist())) == 5 for row in keys)                   # keys of one example are distinct
    where = (keys == query[:, None]).float().argmax(1)
    assert torch.equal(values.gather(1, where[:, None])[:, 0], target)


def test_model_forward_is_attention_over_projected_embeddings():
    cfg = scaling.ExperimentConfig(d_k=12, d_model=6, n_symbols=10, n_values=7, n_pairs=4)
    query, keys, values, _ = scaling.lookup_batch(cfg, torch.Generator().manual_seed(1), batch=3)
    for scale in (True, False):
        m = scaling.LookupAttention(cfg, scale)
        logits, w = m(query, keys, values)
        q = m.q_proj(m.key_emb(query))[:, None]                                # (B, 1, d_k)
        k = m.k_proj(m.key_emb(keys))                                          # (B, N, d_k)
        v = m.v_proj(m.value_emb(values))
        ref = F.scaled_dot_product_attention(q, k, v, scale=None if scale else 1.0)
        torch.testing.assert_close(logits, m.out(ref[:, 0]), atol=1e-5, rtol=1e-5)
        assert w.shape == (3, 4)


def test_experiment_is_reproducible_and_bounded():
    cfg = scaling.ExperimentConfig(d_k=64, steps=15, max_seconds=60)
    threads = torch.get_num_threads()
    a, b = scaling.train_experiment(cfg), scaling.train_experiment(cfg)
    assert torch.get_num_threads() == threads
    for run_a, run_b in ((a.scaled, b.scaled), (a.unscaled, b.unscaled)):
        np.testing.assert_array_equal(run_a.loss, run_b.loss)
        assert len(run_a.loss) == 15 and not run_a.truncated and np.all(np.isfinite(run_a.loss))
    assert a.scaled.scale and not a.unscaled.scale
    short = scaling.train_run(scaling.ExperimentConfig(d_k=64, steps=2000), True, max_seconds=0.2)
    assert short.truncated and 0 < len(short.loss) < 2000


def test_unscaled_large_dk_starts_saturated_and_learns_later():
    """The page's claim at d_k = 512: the scaled run learns within ~60 steps, the unscaled one sits at chance."""
    cfg = scaling.ExperimentConfig(d_k=512, steps=100, max_seconds=120)
    r = scaling.train_experiment(cfg)
    assert r.unscaled.init_max_weight > 0.7 > 0.2 > r.scaled.init_max_weight
    chance = math.log(cfg.n_values)
    assert r.scaled.loss[80:].mean() < 0.5
    assert r.unscaled.loss[80:].mean() > 0.8 * chance


@pytest.mark.parametrize("field,value", [("d_k", 0), ("d_k", 5000), ("steps", 0), ("n_symbols", 3), ("lr", 0.0)])
def test_experiment_bad_config(field, value):
    with pytest.raises(InputError):
        scaling.train_experiment(scaling.ExperimentConfig(**{field: value}))


def test_histogram_bars_are_numpys_density_binned_on_the_server():
    """The histogram arrives as `bins` bars (np.histogram, density=True), never as the raw samples."""
    from viz_core.plots import scaling as plots

    values = np.random.default_rng(0).normal(0, 3, 10_000)
    fig = plots.histogram(values, name="q·k", colour="#123456", x_title="q·k", y_title="density", title="t",
                          theory_variance=9.0, bins=60)
    bars = fig.data[0]
    density, edges = np.histogram(values, bins=60, density=True)
    assert bars.type == "bar" and len(bars.y) == 60
    np.testing.assert_allclose(bars.y, density)
    np.testing.assert_allclose(bars.x, (edges[:-1] + edges[1:]) / 2)
    assert abs(float(np.sum(np.asarray(bars.y) * np.asarray(bars.width))) - 1.0) < 1e-9  # areas sum to 1
    assert len(fig.to_json()) < 20_000  # 60 bars and the theory curve, not 10,000 samples
