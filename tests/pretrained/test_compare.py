"""viz_core.pretrained.compare: token alignment, the difference map and the ranking of heads, against the module's
formulas written out as loops, on made-up attention whose answer is known."""
import numpy as np
import pytest

from viz_core.pretrained import compare


def softmax_rows(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_same_tokens_align_one_to_one():
    al = compare.align(list("abc"), list("abc"))
    assert al.a.tolist() == [0, 1, 2] and al.b.tolist() == [0, 1, 2] and not al.changed.any() and al.both.all()


def test_a_changed_word_is_paired_and_marked():
    a, b = ["[CLS]", "the", "cat", "sat", "[SEP]"], ["[CLS]", "the", "dog", "sat", "[SEP]"]
    al = compare.align(a, b)
    assert al.a.tolist() == [0, 1, 2, 3, 4] and al.b.tolist() == [0, 1, 2, 3, 4]
    assert al.changed.tolist() == [False, False, True, False, False]
    assert al.labels(a, b) == ["[CLS]", "the", "cat→dog", "sat", "[SEP]"]


def test_an_added_word_is_in_one_text_only():
    a, b = ["x", "the", "cat", "y"], ["x", "the", "big", "cat", "y"]
    al = compare.align(a, b)
    assert al.a.tolist() == [0, 1, -1, 2, 3] and al.b.tolist() == [0, 1, 2, 3, 4]
    assert al.labels(a, b) == ["x", "the", "+big", "cat", "y"]
    removed = compare.align(b, a)
    assert removed.labels(b, a) == ["x", "the", "−big", "cat", "y"]


def test_runs_of_different_lengths_stay_unpaired():
    a, b = ["s", "one", "e"], ["s", "two", "words", "e"]
    al = compare.align(a, b)
    assert al.labels(a, b) == ["s", "−one", "+two", "+words", "e"]
    assert al.both.tolist() == [True, False, False, False, True]


def loop_difference(wa, wb, q, k):
    """D_ij = w'[q.b_i, k.b_j] - w[q.a_i, k.a_j], 0 for a missing token, over the queries in both texts."""
    rows = [(i, j) for i, j in zip(q.a, q.b) if i >= 0 and j >= 0]
    out = np.zeros((len(rows), len(k.a)))
    for r, (qa, qb) in enumerate(rows):
        for c, (ka, kb) in enumerate(zip(k.a, k.b)):
            out[r, c] = (wb[qb, kb] if kb >= 0 else 0.0) - (wa[qa, ka] if ka >= 0 else 0.0)
    return out


def test_difference_and_distance_match_the_formula():
    rng = np.random.default_rng(0)
    a, b = ["c", "the", "cat", "sat", "s"], ["c", "the", "big", "dog", "sat", "s"]
    wa, wb = softmax_rows(rng.normal(size=(2, 3, 5, 5))), softmax_rows(rng.normal(size=(2, 3, 6, 6)))
    al = compare.align(a, b)
    d = compare.difference(wa, wb, al, al)  # (L, H, M, P)
    assert d.shape == (2, 3, int(al.both.sum()), len(al.a))
    for layer in range(2):
        for head in range(3):
            ref = loop_difference(wa[layer, head], wb[layer, head], al, al)
            np.testing.assert_allclose(d[layer, head], ref, atol=1e-6)
    dist = compare.head_distances(wa, wb, al, al)
    ref = np.array([[0.5 * np.abs(loop_difference(wa[i, j], wb[i, j], al, al)).sum(-1).mean() for j in range(3)]
                    for i in range(2)])
    np.testing.assert_allclose(dist, ref, atol=1e-6)
    assert ((dist >= 0) & (dist <= 1)).all()


def test_identical_attention_is_distance_zero_and_disjoint_is_one():
    w = softmax_rows(np.random.default_rng(1).normal(size=(1, 2, 4, 4)))
    al = compare.align(list("abcd"), list("abcd"))
    assert np.allclose(compare.head_distances(w, w, al, al), 0)
    first, last = np.zeros((1, 1, 4, 4)), np.zeros((1, 1, 4, 4))
    first[..., 0], last[..., 3] = 1.0, 1.0  # every query on key 0, then on key 3
    assert np.allclose(compare.head_distances(first, last, al, al), 1.0)


def test_weight_on_an_added_word_counts():
    """Text A' adds a key; a head that puts half of each row on it has moved 0.5, one that ignores it has not."""
    a, b = ["c", "x", "s"], ["c", "x", "new", "s"]
    al = compare.align(a, b)
    wa = np.full((1, 2, 3, 3), 1 / 3)
    wb = np.zeros((1, 2, 4, 4))
    wb[:, 0, :, [0, 1, 3]] = 1 / 6
    wb[:, 0, :, 2] = 0.5   # head 0: half on "new", the rest spread as before
    wb[:, 1, :, [0, 1, 3]] = 1 / 3  # head 1: nothing on "new"
    dist = compare.head_distances(wa, wb, al, al)
    np.testing.assert_allclose(dist[0], [0.5, 0.0], atol=1e-6)


def test_cross_attention_aligns_queries_and_keys_separately():
    rng = np.random.default_rng(2)
    qa, qb = ["<s>", "le", "chat"], ["<s>", "le", "chat"]  # decoder tokens: the same target
    ka, kb = ["the", "cat", "</s>"], ["the", "black", "cat", "</s>"]
    wa, wb = softmax_rows(rng.normal(size=(3, 3))), softmax_rows(rng.normal(size=(3, 4)))
    q, k = compare.align(qa, qb), compare.align(ka, kb)
    d = compare.difference(wa, wb, q, k)
    assert d.shape == (3, 4)
    np.testing.assert_allclose(d, loop_difference(wa, wb, q, k), atol=1e-6)


def test_ranking_orders_heads_by_distance_with_nan_last():
    dist = np.array([[0.1, 0.7, np.nan], [0.7, 0.3, 0.0]])
    r = compare.rank_heads(dist)
    assert list(zip(r.layer.tolist(), r.head.tolist())) == [(0, 1), (1, 0), (1, 1), (0, 0), (1, 2), (0, 2)]
    assert np.isnan(r.distance[-1]) and r.distance[0] == pytest.approx(0.7)


def test_nothing_aligned_gives_nan():
    al = compare.align(["a"], ["b", "c"])
    assert not al.both.any()
    assert np.isnan(compare.head_distances(np.ones((1, 1, 1, 1)), np.full((1, 1, 2, 2), 0.5), al, al)).all()


def test_on_grid_places_each_text_on_the_shared_grid():
    a, b = ["c", "the", "cat", "s"], ["c", "the", "big", "cat", "s"]
    al = compare.align(a, b)
    wa = np.arange(16, dtype=float).reshape(4, 4)
    ga, gb = compare.on_grid(wa, al.a, al.a), compare.on_grid(np.ones((5, 5)), al.b, al.b)
    assert ga.shape == gb.shape == (5, 5)
    assert np.isnan(ga[2]).all() and np.isnan(ga[:, 2]).all() and not np.isnan(gb).any()  # "big": not in A
    np.testing.assert_array_equal(np.delete(np.delete(ga, 2, 0), 2, 1), wa)
