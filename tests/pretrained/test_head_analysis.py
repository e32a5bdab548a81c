"""viz_core.pretrained.head_analysis: aggregates, rollout, statistics and thumbnails against direct formulas."""
import numpy as np
import pytest

from viz_core.pretrained import head_analysis as ha

rng = np.random.default_rng(0)


def _weights(layers=3, heads=4, n=6):
    return rng.dirichlet(np.ones(n), size=(layers, heads, n)).astype(np.float32)


def test_aggregate_mean_max():
    w = _weights()
    np.testing.assert_allclose(ha.aggregate(w, "mean"), w.mean(1))
    np.testing.assert_allclose(ha.aggregate(w, "max"), w.max(1))
    with pytest.raises(ValueError):
        ha.aggregate(w, "median")


def test_rollout_matches_definition():
    w = _weights()
    r = ha.rollout(w)
    eye = np.eye(6)
    a = [0.5 * eye + 0.5 * w[i].mean(0) for i in range(3)]
    a = [x / x.sum(-1, keepdims=True) for x in a]
    np.testing.assert_allclose(r[2], a[2] @ a[1] @ a[0], atol=1e-6)
    np.testing.assert_allclose(r.sum(-1), 1.0, atol=1e-5)


def test_keep_tokens_renormalises():
    w = _weights()
    keep = np.array([False, True, True, True, True, False])
    out = ha.keep_tokens(w, keep)
    assert out.shape == (3, 4, 4, 4)
    np.testing.assert_allclose(out.sum(-1), 1.0, atol=1e-6)
    sub = w[:, :, 1:5, 1:5]
    np.testing.assert_allclose(out, sub / sub.sum(-1, keepdims=True), atol=1e-6)


def test_head_statistics_on_known_patterns():
    n = 5
    ident = np.broadcast_to(np.eye(n), (1, 1, n, n)).astype(np.float32)
    prev = np.zeros((1, 1, n, n), np.float32)
    prev[0, 0, 0, 0] = 1
    prev[0, 0, np.arange(1, n), np.arange(n - 1)] = 1
    uniform = np.full((1, 1, n, n), 1 / n, np.float32)
    s = ha.head_statistics(np.concatenate([ident, prev, uniform], axis=1))
    np.testing.assert_allclose(s.self[0], [1, 0.2, 0.2], atol=1e-6)
    np.testing.assert_allclose(s.previous[0], [0, 1, 0.2], atol=1e-6)
    np.testing.assert_allclose(s.entropy[0], [0, 0, np.log2(n)], atol=1e-5)
    np.testing.assert_allclose(s.distance[0, 0], 0, atol=1e-6)
    np.testing.assert_allclose(s.distance[0, 1], 4 / 5, atol=1e-6)
    special = np.array([True, False, False, False, True])
    s2 = ha.head_statistics(uniform, special)
    np.testing.assert_allclose(s2.special, 0.4, atol=1e-6)


def test_segment_blocks():
    seg = np.array([-1, 0, 0, -1, 1, 1, -1])
    rows, cols = ha.segment_block(seg, "A->B")
    assert rows.tolist() == [False, True, True, False, False, False, False]
    assert cols.tolist() == [False, False, False, False, True, True, False]


def test_thumbnail_keeps_row_sums_and_small_inputs():
    w = _weights(1, 1, 100)[0, 0]
    th = ha.thumbnail(w, 32)
    assert th.shape == (32, 32)
    np.testing.assert_allclose(th.sum(-1), 1.0, atol=1e-5)
    small = _weights(1, 1, 8)[0, 0]
    np.testing.assert_array_equal(ha.thumbnail(small, 32), small)


def test_is_causal():
    w = _weights()
    assert not ha.is_causal(w)
    assert ha.is_causal(np.tril(w))
