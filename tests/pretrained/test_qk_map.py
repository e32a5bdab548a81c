"""viz_core.pretrained.qk_map: the weight-keeping balance, the PCA projection against numpy's SVD and covariance
eigenvectors, the attention row of a query, and the bundled sentences."""
import numpy as np
import pytest

from viz_core.pretrained import bert_numpy, qk_map


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.fixture(scope="module")
def qk():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(40, 8)) * 3 + 2.0  # queries far from the keys, and longer
    k = rng.normal(size=(40, 8)) * 0.5 - 1.0
    return q, k


def test_balance_keeps_every_attention_weight(qk):
    q, k = qk
    qb, kb = qk_map.balance(q, k)
    np.testing.assert_allclose(softmax(qb @ kb.T / np.sqrt(8)), softmax(q @ k.T / np.sqrt(8)), atol=1e-12)
    a = qb[0, 0] / q[0, 0]  # q -> a q
    np.testing.assert_allclose(qb, a * q, rtol=1e-12)
    np.testing.assert_allclose((kb * a).mean(0), q.mean(0), atol=1e-12)  # shifted keys share the queries' centre
    assert np.linalg.norm(qb, axis=1).mean() == pytest.approx(np.linalg.norm(kb, axis=1).mean())


def test_projection_is_the_pca_of_numpys_svd(qk):
    q, k = qk
    p = qk_map.project(q, k)
    qb, kb = qk_map.balance(q, k)
    x = np.concatenate([qb, kb])
    x = x - x.mean(0)
    _, s, vt = np.linalg.svd(x, full_matrices=False)
    ref = x @ vt[:2].T
    got = np.concatenate([p.q, p.k])
    for axis in range(2):  # the same axes up to sign
        sign = np.sign(got[:, axis] @ ref[:, axis])
        np.testing.assert_allclose(got[:, axis], sign * ref[:, axis], atol=1e-4)
    np.testing.assert_allclose(p.kept, s[:2] ** 2 / (s ** 2).sum(), rtol=1e-9)
    # the same from the covariance matrix's eigenvectors: axis variances are its two largest eigenvalues
    eig = np.sort(np.linalg.eigvalsh(np.cov(x.T, bias=True)))[::-1]
    np.testing.assert_allclose(got.var(0), eig[:2], rtol=1e-4)


def test_projection_signs_are_fixed(qk):
    q, k = qk
    p1, p2 = qk_map.project(q, k), qk_map.project(-q, -k)  # the same cloud mirrored
    for p in (p1, p2):
        xy = np.concatenate([p.q, p.k])
        assert (xy[np.abs(xy).argmax(0), [0, 1]] > 0).all()


def test_data_in_a_plane_keeps_all_its_variance():
    rng = np.random.default_rng(3)
    basis = rng.normal(size=(2, 6))
    q, k = rng.normal(size=(20, 2)) @ basis, rng.normal(size=(20, 2)) @ basis
    assert qk_map.project(q, k).kept.sum() == pytest.approx(1.0)


def test_attention_row_is_the_models_own_row():
    nb = bert_numpy.load_default()
    text = "the dog chased the ball"
    (tokens, q, k), = nb.queries_keys([text])
    weights = nb.attention(text).weights  # (L, H, N, N)
    assert tokens == nb.attention(text).tokens
    for layer, head, i in [(0, 0, 0), (3, 7, 2), (5, 11, len(tokens) - 1)]:
        np.testing.assert_allclose(qk_map.attention_row(q[layer, head, i], k[layer, head]), weights[layer, head, i],
                                   atol=2e-6)


def test_batched_queries_keys_equal_one_at_a_time():
    nb = bert_numpy.load_default()
    texts = ["a short one", "another short", "this sentence has rather more tokens in it"]
    together = nb.queries_keys(texts)
    for text, (tokens, q, k) in zip(texts, together):
        (t1, q1, k1), = nb.queries_keys([text])
        assert tokens == t1
        np.testing.assert_allclose(q, q1, atol=1e-5)
        np.testing.assert_allclose(k, k1, atol=1e-5)


def test_stack_keeps_sentences_positions_and_tokens():
    rng = np.random.default_rng(4)
    parts = [("ab", ["a", "b"], rng.normal(size=(1, 2, 2, 4)), rng.normal(size=(1, 2, 2, 4))),
             ("cde", ["c", "d", "e"], rng.normal(size=(1, 2, 3, 4)), rng.normal(size=(1, 2, 3, 4)))]
    s = qk_map.stack(parts)
    assert s.q.shape == (1, 2, 5, 4) and s.tokens == ("a", "b", "c", "d", "e") and s.texts == ("ab", "cde")
    assert s.sentence.tolist() == [0, 0, 1, 1, 1] and s.position.tolist() == [0, 1, 0, 1, 2]
    np.testing.assert_allclose(s.k[:, :, s.rows(1)], parts[1][3], atol=1e-6)


def test_bundled_sentences_are_ours_and_in_both_languages():
    s = qk_map.bundled_sentences()
    assert len(s["en"]) == len(s["zh"]) == 50
    assert all(len(set(v)) == len(v) for v in s.values())
    assert all(any("\u4e00" <= ch <= "\u9fff" for ch in line) for line in s["zh"])
    assert all(line.isascii() for line in s["en"])
