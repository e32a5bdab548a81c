"""viz_core.lessons.positional against the paper's formula written out by hand, the angle-sum identities, complex-number
rotation (RoPE) and torch attention's permutation equivariance."""
import math

import numpy as np
import pytest
import torch

from viz_core.lessons import positional as P
from viz_core.errors import InputError


def _reference_pe(max_len, d_model, base=10_000.0):
    """The formula, one cell at a time: PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(...)."""
    pe = np.zeros((max_len, d_model))
    for pos in range(max_len):
        for j in range(d_model):
            i = j // 2
            angle = pos / base ** (2 * i / d_model)
            pe[pos, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return pe


def _annotated_transformer_pe(max_len, d_model):
    """The Annotated Transformer's torch implementation (even d_model only)."""
    position = torch.arange(0, max_len, dtype=torch.float64).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * -(math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe.numpy()


# ---------------------------------------------------------------- the formula
def test_worked_example_of_the_notes_position_4_d_model_4():
    pe = P.sinusoidal_encoding(8, 4)
    np.testing.assert_allclose(pe[0], [0, 1, 0, 1], atol=1e-15)
    np.testing.assert_allclose(pe[4], [-0.7568, -0.6536, 0.03999, 0.9992], atol=1e-4)
    np.testing.assert_allclose(pe[4], [math.sin(4), math.cos(4), math.sin(0.04), math.cos(0.04)], rtol=1e-14)


@pytest.mark.parametrize("max_len,d_model", [(9, 1), (9, 2), (17, 5), (33, 16), (20, 7), (12, 64)])
def test_matches_formula_cell_by_cell_any_d_model(max_len, d_model):
    pe = P.sinusoidal_encoding(max_len, d_model)
    assert pe.shape == (max_len, d_model) and pe.dtype == np.float64
    np.testing.assert_allclose(pe, _reference_pe(max_len, d_model), rtol=0, atol=1e-12)


@pytest.mark.parametrize("d_model", [2, 8, 128, 512])
def test_matches_annotated_transformer(d_model):
    np.testing.assert_allclose(P.sinusoidal_encoding(50, d_model), _annotated_transformer_pe(50, d_model), atol=1e-9)


def test_odd_d_model_last_column_is_a_sine_with_its_own_pair_index():
    pe = P.sinusoidal_encoding(30, 5)  # last column j = 4: pair i = 2, frequency 10000^(-4/5)
    pos = np.arange(30)
    np.testing.assert_allclose(pe[:, 4], np.sin(pos / 10_000 ** (4 / 5)), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(P.sinusoidal_encoding(30, 1)[:, 0], np.sin(pos), atol=1e-15)


def test_wavelengths_run_from_2pi_to_2pi_base():
    lam = P.wavelengths(512)
    assert lam.shape == (256,)
    assert lam[0] == pytest.approx(2 * math.pi)
    assert lam[-1] == pytest.approx(2 * math.pi * 10_000 ** (510 / 512))
    assert np.all(np.diff(lam) > 0)
    # the encoding really repeats after one wavelength in every pair (checked on the fractional positions)
    d = 6  # (with d = 8, pair 1's wavelength 20 pi happens to be a multiple of pair 0's)
    lam1 = P.wavelengths(d)[1]  # pair 1 = columns 2 and 3
    shifted = P.encoding_at(np.arange(5) + lam1, d)[:, 2:4]
    np.testing.assert_allclose(shifted, P.encoding_at(np.arange(5), d)[:, 2:4], atol=1e-9)
    assert not np.allclose(P.encoding_at(np.arange(5) + lam1, d)[:, 0:2], P.encoding_at(np.arange(5), d)[:, 0:2])


def test_empty_and_bad_sizes():
    assert P.sinusoidal_encoding(0, 16).shape == (0, 16)
    assert P.sinusoidal_encoding(3.0, 4.0).shape == (3, 4)
    for max_len, d_model, code in [(5, 0, "positions.bad_d_model"), (5, -3, "positions.bad_d_model"),
                                   (-1, 8, "positions.bad_max_len"), (2.5, 8, "positions.bad_max_len"),
                                   (100_000, 1_000, "positions.too_large")]:
        with pytest.raises(InputError) as err:
            P.sinusoidal_encoding(max_len, d_model)
        assert err.value.code == code


# ---------------------------------------------------------------- similarity depends on p - q only
@pytest.mark.parametrize("d_model", [2, 16, 64])
def test_dot_product_depends_only_on_offset(d_model):
    pe = P.sinusoidal_encoding(60, d_model)
    sim = P.similarity(pe)
    np.testing.assert_allclose(sim, sim.T)
    np.testing.assert_allclose(np.diag(sim), d_model / 2)
    assert P.toeplitz_deviation(sim) < 1e-10
    k = np.arange(60)
    np.testing.assert_allclose(sim[0], P.dot_by_offset(k, d_model), atol=1e-10)
    np.testing.assert_allclose(sim[0], P.dot_by_offset(-k, d_model), atol=1e-10)  # |p - q|: symmetric in k
    cos = P.similarity(pe, cosine=True)
    np.testing.assert_allclose(cos, sim / (d_model / 2), atol=1e-12)


def test_odd_d_model_breaks_the_offset_property_a_little():
    sim = P.similarity(P.sinusoidal_encoding(60, 7))
    dev = P.toeplitz_deviation(sim)
    assert 1e-6 < dev < 0.1  # the lone low-frequency sine column depends on p + q, not only p - q


def test_toeplitz_deviation_detects_non_toeplitz():
    assert P.toeplitz_deviation(np.array([[1.0, 2.0], [3.0, 1.0]])) == 0.0
    assert P.toeplitz_deviation(np.array([[1.0, 2.0], [3.0, 4.0]])) == 3.0


# ---------------------------------------------------------------- relative positions: rotation
@pytest.mark.parametrize("d_model,k", [(2, 1), (16, 3), (64, 17), (128, 40)])
def test_shift_is_a_fixed_rotation(d_model, k):
    pe = P.sinusoidal_encoding(100, d_model)
    predicted, err = P.shift_by_rotation(pe, k)
    assert predicted.shape == (100 - k, d_model)
    assert np.abs(err).max() < 1e-12
    np.testing.assert_allclose(predicted, pe[: 100 - k] @ P.rotation_matrix(d_model, k).T, atol=1e-12)
    blocks = P.rotation_blocks(d_model, k)
    for b in blocks:  # each block is a proper rotation
        np.testing.assert_allclose(b @ b.T, np.eye(2), atol=1e-14)
        assert np.linalg.det(b) == pytest.approx(1.0)


def test_rotations_compose_and_match_complex_multiplication():
    d = 32
    np.testing.assert_allclose(P.rotation_matrix(d, 3) @ P.rotation_matrix(d, 4), P.rotation_matrix(d, 7), atol=1e-12)
    np.testing.assert_allclose(P.rotation_matrix(d, -5), P.rotation_matrix(d, 5).T, atol=1e-14)
    pe = P.sinusoidal_encoding(20, d)
    z = pe[:, 1::2] + 1j * pe[:, 0::2]  # cos + j sin = exp(j pos w)
    w = P.angular_frequencies(d)
    np.testing.assert_allclose(z[5] * np.exp(1j * 6 * w), z[11], atol=1e-12)


def test_odd_d_model_rotation_error_only_in_lone_column():
    k = 6
    _, err = P.shift_by_rotation(P.sinusoidal_encoding(80, 9), k)
    assert np.abs(err[:, :8]).max() < 1e-12
    lone_w = P.angular_frequencies(9)[-1]
    assert 0 < np.abs(err[:, 8]).max() <= k * lone_w + 1e-12  # |sin(a + kw) - sin(a)| <= kw


def test_bad_shift():
    with pytest.raises(InputError) as err:
        P.shift_by_rotation(P.sinusoidal_encoding(5, 4), 5)
    assert err.value.code == "positions.bad_shift"


# ---------------------------------------------------------------- worked example
def test_worked_example_same_word_at_positions_0_and_4():
    ex = P.worked_example(P.parse_vector("1.0, 0.5, 0.8, 0.3"), (0, 4))
    np.testing.assert_allclose(ex.inputs[0], [1.0, 1.5, 0.8, 1.3], atol=1e-12)
    np.testing.assert_allclose(ex.inputs[1], [0.2432, -0.1536, 0.84, 1.2992], atol=1e-4)
    assert ex.cosine < 0.99  # the same word no longer gives the same vector
    scaled = P.worked_example(np.array([1.0, 0.5, 0.8, 0.3]), (0, 4), scale=True)
    np.testing.assert_allclose(scaled.embedding, [2.0, 1.0, 1.6, 0.6])
    assert scaled.cosine > ex.cosine  # a larger token vector: positions move it relatively less


@pytest.mark.parametrize("text,code", [("", "positions.empty_vector"), ("1, x, 3", "positions.bad_number"),
                                       ("1 nan", "positions.bad_vector"),
                                       (" ".join(["1"] * 65), "positions.bad_vector")])
def test_parse_vector_rejects(text, code):
    with pytest.raises(InputError) as err:
        P.parse_vector(text)
    assert err.value.code == code


def test_parse_vector_accepts_spaces_and_chinese_commas():
    np.testing.assert_array_equal(P.parse_vector("1，2 3,4"), [1, 2, 3, 4])


# ---------------------------------------------------------------- sqrt(d_model)
def test_norm_study_against_theory():
    ds = [16, 64, 256, 1024]
    s = P.norm_study(ds)
    np.testing.assert_allclose(s.pe_norm, np.sqrt(np.array(ds) / 2), rtol=1e-12)  # sin^2 + cos^2 = 1 per pair
    np.testing.assert_allclose(s.token_norm, 1.0, atol=0.05)  # entries N(0, 1/d): E||e||^2 = 1
    np.testing.assert_allclose(s.scaled_norm, s.token_norm * np.sqrt(ds), rtol=1e-12)
    # nearly orthogonal token and PE: cos = |x| / sqrt(|x|^2 + |PE|^2)
    np.testing.assert_allclose(s.cos_raw, 1 / np.sqrt(1 + np.array(ds) / 2), rtol=0.1)
    np.testing.assert_allclose(s.cos_scaled[1:], math.sqrt(2 / 3), atol=0.02)
    assert np.all(s.cos_scaled > s.cos_raw)


def test_nearest_token_survives_only_with_scaling():
    cfg = P.NormConfig(n_tokens=128, n_positions=32)
    assert P.nearest_token_accuracy(256, scale=True, cfg=cfg) == 1.0
    assert P.nearest_token_accuracy(256, scale=False, cfg=cfg) < 0.6


# ---------------------------------------------------------------- RoPE and learned tables
def test_rope_matches_complex_multiplication_and_is_relative():
    rng = np.random.default_rng(0)
    d, n = 16, 12
    x = rng.standard_normal((n, d))
    pos = np.arange(n)
    rot = P.rope_rotate(x, pos)
    z = (x[:, 0::2] + 1j * x[:, 1::2]) * np.exp(1j * pos[:, None] * P.angular_frequencies(d))
    np.testing.assert_allclose(rot[:, 0::2], z.real, atol=1e-12)
    np.testing.assert_allclose(rot[:, 1::2], z.imag, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(rot, axis=1), np.linalg.norm(x, axis=1))
    q, k = rng.standard_normal(d), rng.standard_normal(d)
    scores = P.rope_rotate(np.tile(q, (n, 1)), pos) @ P.rope_rotate(np.tile(k, (n, 1)), pos).T  # (n, n)
    assert P.toeplitz_deviation(scores) < 1e-10  # q_p . k_r depends on r - p only
    table = P.rope_table(n, d)
    assert table.shape == (n, d) and P.toeplitz_deviation(P.cosine_similarity(table)) < 1e-10
    with pytest.raises(InputError):
        P.rope_rotate(np.ones((2, 5)), np.arange(2))


def test_rope_adjacent_pairs_equal_hf_llama_halves_up_to_a_permutation():
    """Ours (and RoFormer's) rotates pairs (2i, 2i+1); Hugging Face's Llama rotates pairs (i, i + d/2) (rotate_half).

    With the permutation that lists the even dimensions first and the odd ones after, both are the same rotation:
    llama(P x) = P ours(x) for every position; a dot product q.k, and hence attention, is unchanged by P.
    """
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    d, n = 16, 10
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    pos = np.arange(n)
    cfg = LlamaConfig(hidden_size=d, num_attention_heads=1, head_dim=d, rope_theta=P.BASE,
                      max_position_embeddings=64)
    rotary = LlamaRotaryEmbedding(cfg)
    perm = np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])  # adjacent layout -> halves layout
    q_t, k_t = (torch.tensor(a[:, perm])[None, None] for a in (q, k))  # (1, 1, n, d)
    cos, sin = rotary(q_t, torch.arange(n)[None])                      # (1, n, d)
    q_hf, k_hf = (a[0, 0].numpy() for a in apply_rotary_pos_emb(q_t, k_t, cos, sin))
    ours_q, ours_k = P.rope_rotate(q, pos), P.rope_rotate(k, pos)
    np.testing.assert_allclose(q_hf, ours_q[:, perm], atol=1e-5)
    np.testing.assert_allclose(k_hf, ours_k[:, perm], atol=1e-5)
    np.testing.assert_allclose(q_hf @ k_hf.T, ours_q @ ours_k.T, atol=1e-4)  # same scores
    assert np.abs(q_hf - ours_q).max() > 0.1  # without the permutation the two layouts really differ


def test_cosine_similarity_of_a_made_up_learned_table():
    learned = np.random.default_rng(1).standard_normal((20, 8)).astype(np.float32)
    cos = P.cosine_similarity(learned)
    np.testing.assert_allclose(np.diag(cos), 1.0, atol=1e-6)
    assert np.all(np.abs(cos) <= 1 + 1e-9)
    assert P.toeplitz_deviation(cos) > 0.1  # a random table has no offset structure


# ---------------------------------------------------------------- order matters
def test_attention_without_pe_is_permutation_equivariant():
    tokens = "the cat sat on the mat".split()
    for kind in P.PERMUTATIONS:
        perm = P.permutation(len(tokens), kind, seed=3)
        assert sorted(perm) == list(range(len(tokens)))
        r = P.order_experiment(tokens, perm, d_model=8, use_pe=False)
        assert r.max_diff < 1e-12
        np.testing.assert_allclose(r.weights_perm, r.weights[perm][:, perm], atol=1e-12)
        np.testing.assert_allclose(r.weights.sum(1), 1.0)


def test_attention_with_pe_sees_the_order():
    tokens = "the cat sat on the mat".split()
    r = P.order_experiment(tokens, P.permutation(6, "reverse"), d_model=8, use_pe=True)
    assert r.max_diff > 1e-2
    assert not np.allclose(r.weights_perm, r.weights[r.perm][:, r.perm])


def test_repeated_words_share_an_embedding_and_inputs_are_checked():
    emb = P.token_embeddings(["a", "b", "a"], 6)
    np.testing.assert_array_equal(emb[0], emb[2])
    assert not np.allclose(emb[0], emb[1])
    with pytest.raises(InputError):
        P.parse_tokens("one")
    with pytest.raises(InputError):
        P.parse_tokens(" ".join(["w"] * 17))
    with pytest.raises(InputError):
        P.permutation(4, "sideways")
