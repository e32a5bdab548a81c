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


# ---------------------------------------------------------------- attention sinks
def test_sink_shares_sum_to_one_and_match_a_loop():
    w = _weights(2, 3, 7)  # rows of random softmaxed weights
    special = np.array([True, False, False, True, False, False, True])
    s = ha.sink_shares(w, special)
    assert s.first.shape == s.special.shape == s.rest.shape == (2, 3) and s.first.dtype == np.float32
    np.testing.assert_allclose(s.first + s.special + s.rest, 1.0, atol=1e-5)
    for layer in range(2):
        for head in range(3):
            rows = w[layer, head, 1:]  # queries 1..N-1
            np.testing.assert_allclose(s.first[layer, head], rows[:, 0].mean(), atol=1e-6)
            np.testing.assert_allclose(s.special[layer, head], rows[:, [3, 6]].sum(-1).mean(), atol=1e-6)
            np.testing.assert_allclose(s.rest[layer, head], rows[:, [1, 2, 4, 5]].sum(-1).mean(), atol=1e-6)


def test_sink_shares_by_hand():
    w = np.array([[[[0.7, 0.1, 0.2],     # query 0 is left out
                    [0.5, 0.25, 0.25],
                    [0.1, 0.3, 0.6]]]], dtype=np.float32)  # (1, 1, 3, 3); token 2 is special ([SEP])
    s = ha.sink_shares(w, np.array([True, False, True]))
    np.testing.assert_allclose([s.first[0, 0], s.special[0, 0], s.rest[0, 0]], [0.3, 0.425, 0.275], atol=1e-6)
    np.testing.assert_allclose(s.first_every[0, 0], (0.7 + 0.5 + 0.1) / 3, atol=1e-6)  # query 0 counted too
    one = ha.sink_shares(w[..., :1, :], np.array([False, False, False]))  # one query: query 0 is all there is
    np.testing.assert_allclose([one.first[0, 0], one.special[0, 0], one.rest[0, 0]], [0.7, 0.0, 0.3], atol=1e-6)


def test_sink_shares_of_a_causal_map():
    """A decoder head whose every query puts half its weight on token 0 and spreads the rest over the others it
    can see: first = 1/2; no special tokens but token 0 (<s>), so special = 0."""
    n = 6
    w = np.zeros((1, 1, n, n), np.float32)
    w[0, 0, 0, 0] = 1.0
    for i in range(1, n):
        w[0, 0, i, 0] = 0.5
        w[0, 0, i, 1:i + 1] = 0.5 / i
    special = np.array([True] + [False] * (n - 1))
    s = ha.sink_shares(w, special)
    np.testing.assert_allclose([s.first[0, 0], s.special[0, 0], s.rest[0, 0]], [0.5, 0.0, 0.5], atol=1e-6)
    assert ha.is_causal(w)
