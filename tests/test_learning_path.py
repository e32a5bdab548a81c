"""viz_core.learning.path: each step's answer is read off numbers the app computes, checked here against references
(torch.nn.functional, the formulas) and with made-up inputs whose right answer differs, so no answer is fixed."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from viz_core import i18n
from viz_core.learning import path


def test_steps_are_complete_and_in_both_languages():
    ids = [s.id for s in path.STEPS]
    assert 10 <= len(ids) <= 15 and len(set(ids)) == len(ids)
    assert [s.topic for s in path.STEPS] == sorted((s.topic for s in path.STEPS), key=path.TOPICS.index)
    assert set(path.TOPICS) == {s.topic for s in path.STEPS}  # every part of the path has a step
    for s in path.STEPS:
        assert s.needs or s.id in path.ANSWERS
        for lang in ("en", "zh"):
            for key in ("title", "text", "answer", "why", "link") + tuple(f"opt_{o}" for o in s.options):
                assert i18n.t(f"start.{s.id}_{key}", lang)
    with pytest.raises(KeyError):
        path.step("nope")


def test_nearest_picks_the_closest_number():
    assert path.nearest(0.62, {"a": 0.33, "b": 0.67, "c": 1.0}) == "b"
    assert path.nearest(0.02, {"same": 1, "eighth": 1 / 8, "tiny": 1 / 64}, log=True) == "tiny"


def test_softmax_and_mix_match_torch():
    a = path.answer_softmax()
    p = F.softmax(torch.tensor([2.0, 1.0, 0.0], dtype=torch.float64), -1).numpy()
    np.testing.assert_allclose(a.matrix[0], p, atol=1e-12)
    assert a.correct == "p67" and a.values["p"] == f"{p.max():.3g}"
    assert path.answer_mix().values["out"] == "6"


def test_worked_example_row_is_the_softmax_of_scaled_scores():
    from viz_core.lessons import mechanics as mech
    a = path.answer_qk()
    x = torch.tensor(mech.WORKED_X, dtype=torch.float64)
    q, k = x @ torch.tensor(mech.WORKED_WQ), x @ torch.tensor(mech.WORKED_WK)
    w = F.softmax(q @ k.T / np.sqrt(2), -1).numpy()
    np.testing.assert_allclose(a.matrix, w, atol=1e-9)
    assert a.correct == ("self", "south", "bean")[int(w[0].argmax())]


def test_masks_block_what_they_say():
    c = path.answer_causal()
    n = len(path.CAUSAL_TOKENS)
    assert c.correct == "above" and int(c.values["hidden"]) == n * (n - 1) // 2
    assert np.all(c.matrix[c.mask] == 0) and np.allclose(c.matrix.sum(-1), 1)
    p = path.answer_padding()
    assert p.correct == "zero" and np.all(p.matrix[:3, 3:] == 0) and np.allclose(p.matrix.sum(-1), 1)


def test_scaling_kv_cache_order_waves_norms():
    s = path.answer_saturation()
    assert s.correct == "p1" and float(s.values["raw"]) > 0.9 and float(s.values["scaled"]) < 0.5
    assert abs(float(s.values["var"]) - 512) < 0.1 * 512  # Var(q.k) = d_k
    assert path.answer_saturation(d_k=1).correct != "p1"  # small d_k: not saturated, another answer
    h = path.answer_heads()
    assert h.correct == "eighth" and h.values["ratio"] == "1/8"
    assert path.answer_heads("gpt2").correct == "same"  # GPT-2 has as many K/V heads as query heads
    assert path.answer_order().correct == "moves" and float(path.answer_order().values["diff"]) < 1e-12
    w = path.answer_waves()
    assert w.correct == "first"
    np.testing.assert_allclose([float(v) for v in w.values["pe4"].split(", ")],
                               [np.sin(4), np.cos(4), np.sin(4 / 100), np.cos(4 / 100)], atol=5e-4)
    ln = path.answer_layernorm()
    ref = F.layer_norm(torch.tensor([1.0, 2, 3, 4], dtype=torch.float64), (4,))
    assert ln.correct == "zero_one" and ln.values["y"] == ", ".join(f"{v:.3f}" for v in ref.tolist())
    assert float(ln.values["std"]) == pytest.approx(float(ref.std(unbiased=False)), abs=5e-8)
    assert float(ln.values["std"]) < 1  # shown with the digits that show it is below 1 (0.9999960, not 1.0000)
    r = path.answer_residual(depth=12)
    assert r.correct == "larger" and float(r.values["post"]) == pytest.approx(1.0, abs=1e-3)


def test_optimizer_race_answer_is_the_lowest_final_loss():
    a = path.answer_optimizer()
    losses = {n: float(a.values[n]) for n in path.RACERS}
    assert a.correct == min(losses, key=losses.get) == "momentum"
    assert path.answer_optimizer(steps=300).correct in ("momentum", "adam")  # both reach ~1e-13 by then


def _translator(maps: np.ndarray):
    """A stand-in for a trained translator whose last-layer cross attention is `maps` (H, T, N)."""
    n = maps.shape[-1]
    result = SimpleNamespace(maps={"dec.0.cross_attn": maps}, src=[str(i) for i in range(n)],
                             tgt_in=["<bos>"] + [str(i) for i in range(maps.shape[1] - 1)])
    return SimpleNamespace(attention=lambda text: result, translate=lambda text: "x",
                           config=SimpleNamespace(n_dec_layers=1))


@pytest.mark.parametrize("shape, expected", [("anti", "anti"), ("diagonal", "diagonal"), ("uniform", "uniform")])
def test_reverse_answer_follows_the_cross_attention(shape, expected):
    n = 5
    eye = np.eye(n + 1, n)
    maps = {"anti": np.flip(np.eye(n), 1), "diagonal": np.eye(n), "uniform": np.full((n, n), 1 / n)}[shape]
    maps = np.concatenate([maps, np.full((1, n), 1 / n)])[None].repeat(2, 0)  # (H 2, T n + 1, N n)
    assert eye.shape == maps.shape[1:]
    assert path.answer_reverse(_translator(maps)).correct == expected


@pytest.mark.parametrize("pattern, expected", [("special", "special"), ("next", "next"), ("even", "even")])
def test_sinks_answer_follows_the_weights(pattern, expected):
    n = 8
    special = np.zeros(n, bool)
    special[[0, -1]] = True
    w = {"special": np.tile(np.eye(n)[0], (n, 1)), "next": np.eye(n, k=1) + np.eye(n, k=-(n - 1)),
         "even": np.full((n, n), 1 / n)}[pattern]
    weights = np.broadcast_to(w, (2, 3, n, n)).astype(np.float32)
    a = path.answer_sinks([str(i) for i in range(n)], weights, special)
    assert a.correct == expected and a.matrix.shape == (2, 3)


def _repeat_weights(pattern: str, length: int, start: int) -> np.ndarray:
    """(L 2, H 2, N, N) causal weights on [start] s s: head (1, 1) follows `pattern` in the second copy, the others
    attend to token 0 only."""
    n = start + 2 * length
    w = np.zeros((2, 2, n, n))
    w[..., 0] = 1.0
    for i in range(start + length, n):
        j = {"next_after": i - length + 1, "same_token": i - length, "previous": i - 1}[pattern]
        w[1, 1, i] = 0.0
        w[1, 1, i, j] = 1.0
    return w


@pytest.mark.parametrize("start", [0, 1])
@pytest.mark.parametrize("pattern", ["next_after", "same_token", "previous"])
def test_induction_picks_follow_the_strongest_heads_rows(pattern, start):
    length = 6
    w = _repeat_weights(pattern, length, start)
    ind = np.zeros((2, 2))
    ind[1, 1] = 1.0
    a = path.induction_picks(w, [str(i) for i in range(w.shape[-1])], ind, length)
    assert a.correct == pattern and (a.values["layer"], a.values["head"]) == ("1", "1")
    assert a.values["hits"] == str(length if pattern == "next_after" else 0)


def test_real_induction_answer_ranks_heads_by_the_standard_score():
    """On [bos] s s the made-up induction head (1, 1) scores 1 and every other head 0."""
    length = 8
    w = _repeat_weights("next_after", length, 1)
    a = path.answer_induction_real(w, ["<bos>"] + [str(i) for i in range(length)] * 2, length, model="M")
    assert a.correct == "next_after" and a.values["score"] == "1" and a.values["model"] == "M"
    assert (a.values["layer"], a.values["head"]) == ("1", "1") and a.matrix.shape == (17, 17)


def test_decoder_sinks_compare_with_the_previous_word():
    n = 8
    special = np.zeros(n, bool)
    special[0] = True
    prev = np.eye(n, k=-1)
    prev[0, 0] = 1.0
    weights = np.broadcast_to(prev, (2, 3, n, n)).astype(np.float32)
    assert path.answer_sinks([str(i) for i in range(n)], weights, special, neighbour=-1).correct == "next"
    assert path.answer_sinks([str(i) for i in range(n)], weights, special, neighbour=1).correct != "next"


def test_real_variants_have_links_and_words():
    assert set(path.REAL_STEPS) == {"induction", "sinks"}
    for s in path.STEPS:
        assert s.link() == (s.page, s.link_params) and s.link(real=s.real is None) == (s.page, s.link_params)
    page, params = path.step("sinks").link(real=True)
    assert page == "attention" and params == {"model": path.REAL_MODEL, "view": "sinks", "text": path.SINK_TEXT}
    assert path.step("induction").link(real=True) == ("attention", {"model": path.REAL_MODEL, "view": "heads"})
    for step_id in path.REAL_STEPS:
        for lang in ("en", "zh"):
            for key in ("text", "answer", "why", "link", "fig"):
                assert i18n.t(f"start.{step_id}_{key}_real", lang)


def test_the_first_prediction_is_the_one_that_counts():
    """A change made after the answer was shown never replaces the first prediction (the score could be
    gamed by switching to the answer)."""
    assert path.counted(None, "south") == "south"        # the first choice: it counts
    assert path.counted("south", "self") == "south"      # changed after the answer: the first still counts
    assert path.counted("south", None) is None           # no prediction now (cleared): nothing counts
    assert path.counted(None, None) is None
    first = {"qk": "south", "softmax": "p67", "mix": None, "causal": "below"}
    correct = {"qk": "self", "softmax": "p67", "mix": "o6", "causal": None}  # causal: its answer could not be computed
    assert path.score(first, correct) == (1, 3)
    assert path.score({}, correct) == (0, 0)


def test_step_one_gives_the_numbers_it_asks_about():
    """Step 1 asks which key the query of 哈基咪 weighs most: it shows that query and the three keys (the notes'
    x W_Q, x W_K), and those numbers, as shown, point to the app's answer."""
    from viz_core.lessons import mechanics as mech
    given = path.GIVENS["qk"]()
    assert set(given) == {"q", "k1", "k2", "k3"}
    x = torch.tensor(mech.WORKED_X, dtype=torch.float64)
    q, k = x @ torch.tensor(mech.WORKED_WQ), x @ torch.tensor(mech.WORKED_WK)  # (3, 2) each
    shown = {name: np.array([float(v) for v in given[name].split(", ")]) for name in given}
    np.testing.assert_allclose(shown["q"], q[0].numpy(), rtol=5e-3)
    for j in range(3):
        np.testing.assert_allclose(shown[f"k{j + 1}"], k[j].numpy(), rtol=5e-3)
    scores = [shown["q"] @ shown[f"k{j + 1}"] for j in range(3)]
    assert path.step("qk").options[int(np.argmax(scores))] == path.answer_qk().correct
    for lang in ("en", "zh"):
        text = i18n.t("start.qk_given", lang, **given)
        assert all(v in text for v in given.values())
