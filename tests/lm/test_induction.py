"""Induction data, the induction score's two rules, typed sequences, the phase change, and the shipped model's
induction head on typed repeats of every segment length."""
import numpy as np
import pytest
import torch

from viz_core.errors import InputError
from viz_core.lm.induction import (PHASE_GAP, half_losses, head_scores, induction_score, induction_targets,
                                   phase_change_step, previous_token_score, repeat_length, repeated_text,
                                   repeated_tokens, scattered_repeats, target_cells, typed_symbols)

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # small models: one torch thread


# ---------------------------------------------------------------- data
def test_repeated_tokens_repeat_their_segment():
    ids, rep = repeated_tokens(16, 10, 50, torch.Generator().manual_seed(0), min_repeat=4)
    assert ids.shape == (16, 20) and rep.shape == (16, 20)
    for b in range(16):
        length = 20 - int(rep[b].nonzero()[0]) + 1  # the copy starts one before the first repeated target
        assert ids[b, 20 - length:].tolist() == ids[b, 20 - 2 * length: 20 - length].tolist()
    fixed, rep = repeated_tokens(4, 6, 50, torch.Generator().manual_seed(1))
    assert torch.equal(fixed[:, :6], fixed[:, 6:]) and rep[:, 7:].all() and not rep[:, :7].any()


def _copies(ids: list[int], rep: list[bool]) -> list[tuple[int, int]]:
    """(start, length) of every later copy: a run of repeated targets starts one token after its copy's start."""
    runs, t = [], 0
    while t < len(rep):
        if rep[t]:
            end = t
            while end < len(rep) and rep[end]:
                end += 1
            runs.append((t - 1, end - t + 1))
            t = end
        else:
            t += 1
    return runs


def test_scattered_repeats_place_segments_of_varied_length_anywhere():
    ids, rep = scattered_repeats(200, 64, 64, torch.Generator().manual_seed(0), min_len=2)
    assert ids.shape == rep.shape == (200, 64) and ids.min() >= 0 and ids.max() < 64
    lengths, starts, counts = set(), set(), set()
    for b in range(200):
        seq = ids[b].tolist()
        copies = _copies(seq, rep[b].tolist())
        assert 1 <= len(copies) <= 2  # 2 or 3 occurrences
        counts.add(len(copies) + 1)
        for start, length in copies:
            segment = seq[start: start + length]
            # the same segment occurs earlier, ending before this copy starts
            assert any(seq[j: j + length] == segment for j in range(0, start - length + 1))
            lengths.add(length)
            starts.add(start)
    assert counts == {2, 3}
    assert min(lengths) <= 4 and max(lengths) >= 28  # short and long segments
    assert len(starts) > 40  # at many places, not a fixed offset


def test_scattered_repeats_are_reproducible_with_a_seed():
    a = scattered_repeats(8, 32, 64, torch.Generator().manual_seed(3))
    b = scattered_repeats(8, 32, 64, torch.Generator().manual_seed(3))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_half_losses_split_the_unpredictable_and_repeated_tokens():
    ids, rep = repeated_tokens(2, 4, 10, torch.Generator().manual_seed(0))  # N = 8; repeated targets 5..7
    logits = torch.zeros(2, 8, 10)
    logits[:, :-1].scatter_(2, ids[:, 1:, None], 100.0)  # perfect everywhere...
    logits[:, :4] = 0.0  # ...except on the targets 1..4 (the first copy and the copy's first token): uniform
    first, repeated = half_losses(logits, ids, rep)
    assert float(first) == pytest.approx(np.log(10) * 4 / 4, abs=1e-5) and float(repeated) < 1e-6


def test_repeated_text_is_a_segment_typed_twice():
    text = repeated_text(7, 64, seed=1)
    ids = [int(v) for v in text.split()]
    assert len(ids) == 14 and ids[:7] == ids[7:] and all(0 <= v < 64 for v in ids)
    assert repeat_length(ids) == 7 and repeated_text(7, 64, seed=1) == text


# ---------------------------------------------------------------- the induction score
def test_repeat_length_finds_only_a_whole_repeat():
    assert repeat_length([5, 7, 9, 5, 7, 9]) == 3
    assert repeat_length([1, 5, 7, 9, 5, 7, 9]) == 0  # a prefix: not the standard test
    assert repeat_length([4, 4]) == 0 and repeat_length([]) == 0


def test_standard_rule_reads_the_diagonal_at_offset_minus_l_plus_1():
    # the case: a chance repeat inside the first copy must not move the circle
    tokens = [3, 8, 3, 6, 1, 3, 8, 3, 6, 1]  # s = 3 8 3 6 1, L = 5
    assert target_cells(tokens) == [(5, 1), (6, 2), (7, 3), (8, 4), (9, 5)]
    w = np.random.default_rng(0).random((2, 3, 10, 10))
    expected = np.mean([w[..., i, i - 4] for i in range(5, 10)], axis=0)  # mean of the diagonal, second copy
    assert np.allclose(induction_score(w, tokens), expected)
    # the TransformerLens stripe attn.diagonal(offset=1 - L) restricted to the second copy
    stripe = np.diagonal(w, offset=-4, axis1=-2, axis2=-1)[..., -5:]
    assert np.allclose(induction_score(w, tokens), stripe.mean(-1))


def test_free_text_rule_counts_every_earlier_occurrence():
    tokens = ["a", "b", "a", "c", "a"]
    assert induction_targets(tokens) == [[], [], [1], [], [1, 3]]
    w = np.zeros((5, 5))
    w[2, 1] = 1.0  # query 2: all on the token after the earlier "a"
    w[4, 1], w[4, 3], w[4, 0] = 0.25, 0.25, 0.5  # query 4: half on the two targets together
    assert induction_score(w, tokens) == pytest.approx((1.0 + 0.5) / 2)


def test_induction_score_of_a_hand_built_pattern():
    tokens = [5, 7, 9, 5, 7, 9]  # x = s s: queries 3, 4, 5 read keys 1, 2, 3
    w = np.zeros((6, 6))
    w[np.arange(6), 0] = 1.0  # everyone looks at token 0...
    w[3, :] = [0.0, 1.0, 0, 0, 0, 0]  # ...except query 3: all on its target
    w[4, :] = [0.5, 0.0, 0.5, 0, 0, 0]  # query 4: half on its target
    assert induction_score(w, tokens) == pytest.approx((1.0 + 0.5 + 0.0) / 3)
    prev = np.eye(6, k=-1)
    prev[0, 0] = 1.0
    assert previous_token_score(prev) == 1.0
    assert previous_token_score(w) == pytest.approx(1 / 5)  # only query 1 looks at its previous token (key 0)
    p, ind = head_scores(np.stack([np.stack([w, prev])]), tokens)  # (L=1, H=2, N, N)
    assert ind.shape == (1, 2) and ind[0, 0] == pytest.approx(0.5) and ind[0, 1] == 0.0


def test_no_repeated_token_gives_zero():
    assert induction_score(np.ones((2, 4, 4)) / 4, [1, 2, 3, 4]).tolist() == [0.0, 0.0]


# ---------------------------------------------------------------- typed sequences
def test_typed_numbers_are_token_ids():
    typed = typed_symbols("1 2 3 63", 64)
    assert typed.ids == [1, 2, 3, 63] and typed.labels == ["1", "2", "3", "63"] and not typed.as_words


def test_typed_words_get_one_symbol_each():
    typed = typed_symbols("The cat saw the cat.", 64)
    assert typed.labels == ["The", "cat", "saw", "the", "cat", "."] and typed.as_words
    ids = typed.ids
    assert ids[0] == ids[3] and ids[1] == ids[4] and len(set(ids)) == 4 and all(0 <= i < 64 for i in ids)
    zh = typed_symbols("我爱猫，我爱猫。", 64)
    assert zh.labels == ["我", "爱", "猫", "，", "我", "爱", "猫", "。"] and zh.ids[:3] == zh.ids[4:7]
    assert typed_symbols("1 2 99", 64).as_words  # a number beyond the vocabulary: read as words


def test_typed_text_that_cannot_be_read_is_refused():
    with pytest.raises(InputError) as err:
        typed_symbols("   ", 64)
    assert err.value.code == "lm.empty_text"
    with pytest.raises(InputError) as err:
        typed_symbols(" ".join(f"w{i}" for i in range(70)), 64)
    assert err.value.code == "lm.too_many_words"


# ---------------------------------------------------------------- the phase change
def test_phase_change_is_the_first_evaluation_a_nat_below():
    history = [{"step": 10, "evaluated": False, "first_loss": 4.0, "repeat_loss": 1.0},  # not an evaluation
               {"step": 50, "evaluated": True, "first_loss": 4.1, "repeat_loss": 4.0},
               {"step": 100, "evaluated": True, "first_loss": 4.1, "repeat_loss": 4.1 - PHASE_GAP + 0.01},
               {"step": 150, "evaluated": True, "first_loss": 4.1, "repeat_loss": 4.1 - PHASE_GAP},
               {"step": 200, "evaluated": True, "first_loss": 4.1, "repeat_loss": 0.5}]
    assert phase_change_step(history) == 150
    assert phase_change_step(history[:3]) is None and phase_change_step([]) is None


# ------------------------------------------------------------ the shipped model finds induction on typed repeats
@pytest.fixture(scope="module")
def shipped():
    from viz_core import CHECKPOINTS_DIR
    from viz_core.lm.training import load_lm
    return load_lm(CHECKPOINTS_DIR / "lm_induction")


@pytest.mark.parametrize("length", [4, 5, 8, 12, 20, 30])
def test_the_shipped_model_finds_typed_repeats_of_any_length(shipped, length):
    """Fresh random segments (seeds never used in training) typed twice: some head scores >= 0.5."""
    best = [shipped.head_scores(repeated_text(length, 64, seed=900_000 + trial))[1].max() for trial in range(5)]
    assert np.mean(best) >= 0.5, best


@pytest.mark.parametrize("text", ["I went to the park and then I went to the park again .",
                                  "我今天在图书馆学习注意力机制，明天我还要在图书馆学习注意力机制。"])
def test_the_shipped_model_finds_a_repeated_phrase(shipped, text):
    prev, ind = shipped.head_scores(text)
    assert ind.max() >= 0.5 and prev.max() >= 0.5
    same = shipped.scores_of(shipped.attention(text))  # the page's one-forward-pass path
    assert np.array_equal(same[0], prev) and np.array_equal(same[1], ind)
    assert shipped.config.max_len >= 60  # a 30-token segment typed twice fits


def _transformer_lens_detect(pattern: torch.Tensor, tokens: torch.Tensor) -> float:
    """TransformerLens's head_detector for "induction_head", written out as its source does it (error_measure "mul",
    exclude_bos and exclude_current_token False): the duplicate-token pattern, rolled one key to the right, lower
    triangle; score = (pattern * detection).sum() / pattern.sum()."""
    n = tokens.shape[0]
    token_pattern = tokens.repeat(n, 1).numpy()
    eq = torch.tensor(token_pattern == token_pattern.T, dtype=torch.float64)
    eq.fill_diagonal_(0)
    duplicate = torch.tril(eq)
    shifted = torch.roll(duplicate, shifts=1, dims=1)
    detection = torch.tril(torch.cat((torch.zeros(n, 1, dtype=torch.float64), shifted[:, 1:]), dim=1))
    return float((pattern * detection).sum() / pattern.sum())


@pytest.mark.parametrize("tokens", [[3, 8, 1, 6, 3, 8, 1, 6], [0, 3, 8, 3, 1, 0, 3, 8, 3, 1], [5, 2, 5, 7, 2, 9]])
def test_transformer_lens_score_is_the_free_rule_over_every_row(tokens):
    from viz_core.lm.induction import induction_score, induction_targets, transformer_lens_induction
    rng = np.random.default_rng(1)
    n = len(tokens)
    w = np.tril(rng.random((2, n, n)))
    w /= w.sum(-1, keepdims=True)  # causal rows that sum to 1
    ours = transformer_lens_induction(w, tokens)
    for h in range(2):
        assert ours[h] == pytest.approx(_transformer_lens_detect(torch.tensor(w[h]), torch.tensor(tokens)), abs=1e-12)
    counted = sum(bool(k) for k in induction_targets(tokens, "free"))
    np.testing.assert_allclose(ours, induction_score(w, tokens, "free") * counted / n, atol=1e-12)
    if tokens == [3, 8, 1, 6, 3, 8, 1, 6]:  # x = s s without repeats inside s: the rules meet; TL gives half
        np.testing.assert_allclose(induction_score(w, tokens), induction_score(w, tokens, "free"))
        np.testing.assert_allclose(ours, induction_score(w, tokens) / 2)
