"""viz_core.lessons.position_demos (what the Positions page draws) against references written out by hand: the paper's
formula cell by cell, dot products in loops, the 2x2 rotation of the angle-sum formulas, and the invariants each
study is about (a Toeplitz similarity, norms of sqrt(d/2) and 1, permutation equivariance without PE)."""
import math

import numpy as np
import pytest

from viz_core.lessons import position_demos as demos
from viz_core.lessons import positional as P
from viz_core.errors import InputError


def _w(i: int, d_model: int) -> float:
    """w_i = 10000^(-2i / d_model), written out."""
    return 10_000.0 ** (-2 * i / d_model)


def _pe_cell(pos: float, j: int, d_model: int) -> float:
    """PE(pos, 2i) = sin(pos w_i), PE(pos, 2i+1) = cos(pos w_i), one cell at a time."""
    angle = pos * _w(j // 2, d_model)
    return math.sin(angle) if j % 2 == 0 else math.cos(angle)


def _pe(max_len: int, d_model: int) -> np.ndarray:
    return np.array([[_pe_cell(p, j, d_model) for j in range(d_model)] for p in range(max_len)]).reshape(
        max_len, d_model)


# ---------------------------------------------------------------- the table and its waves
def test_small_table_is_drawn_whole_and_download_is_float32():
    view = demos.encoding_view(7, 5)
    assert view.shape == (7, 5)
    np.testing.assert_array_equal(view.rows, [0, 1, 2, 3, 4, 5, 6])
    np.testing.assert_array_equal(view.cols, [0, 1, 2, 3, 4])
    np.testing.assert_allclose(view.values, _pe(7, 5), atol=1e-12)
    table = demos.download_table(7, 5)
    assert table.dtype == np.float32 and table.shape == (7, 5)
    np.testing.assert_allclose(table, _pe(7, 5), atol=1e-7)


def test_big_table_is_thinned_by_rows_and_whole_pairs():
    view = demos.encoding_view(1000, 512)
    step = math.ceil(1000 / 200)  # 5: every fifth position
    np.testing.assert_array_equal(view.rows, np.arange(0, 1000, step))
    pairs = range(0, 256, math.ceil(256 / 96))  # every third pair, both of its columns
    assert view.cols.tolist() == [j for i in pairs for j in (2 * i, 2 * i + 1)]
    assert view.shape == (1000, 512) and view.values.shape == (len(view.rows), len(view.cols))
    for r, c in [(0, 0), (3, 7), (len(view.rows) - 1, len(view.cols) - 1), (17, 40)]:
        assert view.values[r, c] == pytest.approx(_pe_cell(view.rows[r], view.cols[c], 512), abs=1e-9)


def test_table_view_limits_and_odd_width():
    table = np.arange(30 * 9, dtype=float).reshape(30, 9)
    view = demos.table_view(table, demos.ViewLimits(rows=10, cols=6))
    np.testing.assert_array_equal(view.rows, [0, 3, 6, 9, 12, 15, 18, 21, 24, 27])
    np.testing.assert_array_equal(view.cols, [0, 1, 4, 5, 8])  # pairs 0, 2, 4 (every ceil(5 / 3)-th); 9 does not exist
    np.testing.assert_array_equal(view.values, table[[0, 3, 6, 9, 12, 15, 18, 21, 24, 27]][:, [0, 1, 4, 5, 8]])


def test_waves_follow_sin_and_cos_between_the_positions():
    w = demos.waves(20, 16, (0, 13), n_dense=101)
    np.testing.assert_array_equal(w.positions, np.arange(20))
    np.testing.assert_allclose(w.x_dense, np.linspace(0, 19, 101))
    assert w.dense.shape == (101, 2) and w.samples.shape == (20, 2)
    np.testing.assert_allclose(w.dense[:, 0], np.sin(w.x_dense))  # column 0: sin(x w_0), w_0 = 1
    np.testing.assert_allclose(w.dense[:, 1], np.cos(w.x_dense * _w(6, 16)))  # column 13: cos of pair 6
    np.testing.assert_allclose(w.samples, _pe(20, 16)[:, [0, 13]], atol=1e-12)
    assert demos.waves(1, 4, (1,)).x_dense[-1] == 1.0  # a one-position table still spans a curve


# ---------------------------------------------------------------- similarity
def test_similarity_profile_against_loops():
    pe = _pe(12, 6)
    for p in (0, 5, 11):
        dots = [sum(pe[p, j] * pe[q, j] for j in range(6)) for q in range(p, 12)]
        np.testing.assert_allclose(demos.similarity_profile(pe, p), dots, atol=1e-12)
        norms = [math.sqrt(sum(pe[q, j] ** 2 for j in range(6))) for q in range(p, 12)]
        np.testing.assert_allclose(demos.similarity_profile(pe, p, cosine=True),
                                   [x / (n * norms[0]) for x, n in zip(dots, norms)], atol=1e-12)


def test_similarity_view_depends_on_distance_only():
    v = demos.similarity_view(40, 16, cosine=False)
    pe = _pe(40, 16)
    np.testing.assert_array_equal(v.idx, np.arange(40))
    np.testing.assert_allclose(v.sim, pe @ pe.T, atol=1e-10)
    assert v.deviation < 1e-10 and v.mid == 20
    theory = [sum(math.cos(k * _w(i, 16)) for i in range(8)) for k in range(40)]  # sum_i cos(k w_i)
    np.testing.assert_allclose(v.theory, theory, atol=1e-10)
    np.testing.assert_allclose(v.profile_0, theory, atol=1e-10)  # from position 0 ...
    np.testing.assert_allclose(v.profile_mid[:20], theory[:20], atol=1e-10)  # ... and from the middle: the same
    assert np.all(np.isnan(v.profile_mid[20:]))  # no position 20 + k for k >= 20
    np.testing.assert_array_equal(v.offsets, np.arange(40))


def test_similarity_view_cosine_and_odd_width():
    v = demos.similarity_view(30, 8, cosine=True)
    np.testing.assert_allclose(np.diag(v.sim), 1.0, atol=1e-12)
    np.testing.assert_allclose(v.profile_0, np.array(v.theory) / 4, atol=1e-12)  # ||PE|| = sqrt(d / 2) = 2
    assert demos.similarity_view(30, 7, cosine=False).deviation > 1e-6  # the lone sine depends on p too


def test_similarity_view_is_thinned():
    v = demos.similarity_view(1000, 4, cosine=False)
    np.testing.assert_array_equal(v.idx, np.arange(0, 1000, 5))
    assert v.sim.shape == (200, 200) and v.profile_0.shape == v.profile_mid.shape == (1000,)


# ---------------------------------------------------------------- rotation
def test_rotation_view_is_the_angle_sum_rotation():
    k, pair, d = 9, 1, 32
    v = demos.rotation_view(64, d, k, pair)
    theta = k * _w(pair, d)
    assert v.angle_deg == pytest.approx(theta * 180 / math.pi, rel=1e-12)
    assert v.corner.shape == (8, 8)
    for i in range(4):  # four 2x2 blocks [[cos kw, sin kw], [-sin kw, cos kw]] on the diagonal
        a = k * _w(i, d)
        np.testing.assert_allclose(v.corner[2 * i:2 * i + 2, 2 * i:2 * i + 2],
                                   [[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]], atol=1e-15)
    off = v.corner.copy()
    for i in range(4):
        off[2 * i:2 * i + 2, 2 * i:2 * i + 2] = 0
    assert not off.any()
    np.testing.assert_allclose(v.pair_values, [[math.sin(p * _w(pair, d)), math.cos(p * _w(pair, d))]
                                               for p in range(64)], atol=1e-12)
    assert v.dim_errors.shape == (d,) and v.max_error < 1e-12


def test_rotation_view_odd_width_and_small_corner():
    v = demos.rotation_view(50, 5, 3, 0)
    assert v.corner.shape == (5, 5) and v.corner[4, 4] == 1.0  # the lone sine is kept as it is
    np.testing.assert_array_less(v.dim_errors[:4], 1e-12)
    expected = max(abs(math.sin(p * _w(2, 5)) - math.sin((p + 3) * _w(2, 5))) for p in range(47))
    assert v.dim_errors[4] == pytest.approx(expected, rel=1e-12) and v.max_error == v.dim_errors[4]
    with pytest.raises(InputError):
        demos.rotation_view(10, 4, 10, 0)


# ---------------------------------------------------------------- sqrt(d_model)
def test_nearest_accuracies_against_explicit_sums():
    d = 16
    e, pe = P.token_table(256, d), _pe(128, d)  # the default NormConfig: 256 tokens, 128 positions
    expected = []
    for table in (e, e * math.sqrt(d)):
        sums = table[:, None, :] + pe[None, :, :]  # (V, P, d): every x_t + PE(p) built out
        nearest = np.argmax(sums @ table.T, axis=-1)  # (V, P) the most similar table row
        expected.append(np.mean(nearest == np.arange(256)[:, None]))
    got = demos.nearest_accuracies((d,))
    assert list(got) == [d]
    assert got[d] == pytest.approx(tuple(expected), abs=1e-12)


# ---------------------------------------------------------------- learned vs fixed vs rotary
def test_comparison_separates_a_random_table_from_the_fixed_ones():
    d, n = 16, 40
    learned = np.random.default_rng(0).standard_normal((60, d)).astype(np.float32)
    c = demos.comparison(learned, n)
    assert c.d_model == d and list(c.tables) == ["learned", "sinusoidal", "rope"]
    np.testing.assert_array_equal(c.offsets, np.arange(n))
    assert c.deviations["sinusoidal"] < 1e-9 and c.deviations["rope"] < 1e-9 and c.deviations["learned"] > 0.1
    assert c.norms["sinusoidal"] == pytest.approx((math.sqrt(d / 2),) * 3, rel=1e-12)  # sin^2 + cos^2 per pair
    assert c.norms["rope"] == pytest.approx((1.0, 1.0, 1.0), rel=1e-12)  # a rotated unit vector
    row_norms = [math.sqrt(sum(float(x) ** 2 for x in row)) for row in learned[:n]]
    assert c.norms["learned"] == pytest.approx((np.mean(row_norms), min(row_norms), max(row_norms)), rel=1e-6)
    theory = [sum(math.cos(k * _w(i, d)) for i in range(d // 2)) / (d / 2) for k in range(n)]
    np.testing.assert_allclose(c.profiles["sinusoidal"], theory, atol=1e-12)
    idx, sim = c.sims["learned"]
    x = learned[:n].astype(float)
    cos = [[x[a] @ x[b] / (np.linalg.norm(x[a]) * np.linalg.norm(x[b])) for b in idx] for a in idx]
    np.testing.assert_allclose(sim, cos, atol=1e-9)
    np.testing.assert_array_equal(c.tables["learned"].values, x)  # 40 x 16 fits the narrow heatmap whole


def test_comparison_thins_a_big_table_for_the_narrow_heatmaps():
    c = demos.comparison(np.ones((512, 384)), 512)
    view = c.tables["learned"]
    np.testing.assert_array_equal(view.rows, np.arange(0, 512, 4))
    assert len(view.cols) <= 96 and view.shape == (512, 384)
    assert c.sims["rope"][1].shape == (128, 128) and c.profiles["rope"].shape == (512,)


# ---------------------------------------------------------------- order matters
def test_order_experiments_without_pe_only_permute_the_output():
    tokens = ("the", "cat", "sat", "on", "the", "mat")
    no_pe, with_pe = demos.order_experiments(tokens, "reverse", 0, 8)
    assert not no_pe.use_pe and with_pe.use_pe
    np.testing.assert_array_equal(no_pe.perm, [5, 4, 3, 2, 1, 0])
    np.testing.assert_array_equal(with_pe.perm, no_pe.perm)
    assert no_pe.permuted_tokens == ["mat", "the", "on", "sat", "cat", "the"]
    for r in (no_pe, with_pe):
        by_hand = np.array([r.out_perm[n] - r.out[r.perm[n]] for n in range(6)])
        np.testing.assert_array_equal(r.expected, [r.out[i] for i in r.perm])
        np.testing.assert_array_equal(r.difference, by_hand)
        np.testing.assert_allclose(r.row_difference, [math.sqrt(sum(v * v for v in row)) for row in by_hand])
        assert r.max_diff == pytest.approx(np.abs(by_hand).max())
    assert no_pe.max_diff < 1e-12 and with_pe.max_diff > 1e-3
    np.testing.assert_allclose(no_pe.weights_perm, no_pe.weights[no_pe.perm][:, no_pe.perm], atol=1e-12)


def test_order_experiments_shuffle_is_seeded():
    tokens = tuple("a b c d e f g".split())
    a, _ = demos.order_experiments(tokens, "shuffle", 7, 4)
    b, _ = demos.order_experiments(tokens, "shuffle", 7, 4)
    np.testing.assert_array_equal(a.perm, b.perm)
    assert sorted(a.perm.tolist()) == list(range(7))


def test_worked_example_rows_are_the_five_the_page_shows():
    ex = P.worked_example(np.array([1.0, 0.5, 0.8, 0.3]), (0, 4))
    e = [1.0, 0.5, 0.8, 0.3]
    pe4 = [math.sin(4), math.cos(4), math.sin(0.04), math.cos(0.04)]
    np.testing.assert_allclose(ex.rows, [e, [0, 1, 0, 1], [1.0, 1.5, 0.8, 1.3], pe4,
                                         [a + b for a, b in zip(e, pe4)]], atol=1e-12)
