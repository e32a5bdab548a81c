"""The learning path of the Start page: its steps, in the order of the study notes, and the answer of each step
computed by the app (never written down by hand).

Each step asks a question with a few predictions to choose from (stable option ids; their words live in
locales/start.json as start.<step>_opt_<option>). `answer(step)` runs the experiment that settles it with the same
viz_core code the pages use and returns the option its numbers point to, the numbers for the answer's sentence and
a small matrix to draw. Three steps read a trained model (the shipped reverse translator, the shipped induction
language model, the packaged MiniLM): the page passes it in, so this module loads nothing. The induction and sink
steps read a real decoder instead (REAL_MODEL, Gemma 3 270M) where it is ready: their `real` variant names the
page that link opens, and their words are the start.<step>_<key>_real strings where those exist.

A step whose question reasons from numbers lists them in GIVENS (shown with the question, before the prediction;
their sentence is start.<step>_given). The score counts each step's first prediction (`counted`, `score`): the one
made before the answer was shown, whatever the student chose after.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from viz_core.lessons import blocks, mechanics, optimizers, positional, scaling
from viz_core.attention import MultiHeadAttention, scaled_dot_product_attention
from viz_core.masks import causal_mask, padding_mask
from viz_core.runtime.seeding import seeded

SINK_TEXT = "The students read the notes before the exam because it was hard."  # the last step's sentence
REVERSE_SOURCE = "3 1 4 1 5"      # the source the reverse step decodes
INDUCTION_SEGMENT = 8             # length L of the random segment the induction step repeats (x = s s)
CAUSAL_TOKENS = ("I", "like", "green", "tea", ".")
PAD_BATCH = (("the", "cat", "sat", "[PAD]", "[PAD]"), ("a", "dog", "ran", "home", "fast"))
ORDER_TOKENS = ("dog", "bites", "man")
RACE_STEPS = 50                   # the optimizer step's race: bowl, lr 0.1, 50 updates
RACERS = ("sgd", "momentum", "adam")
DEPTH = 24                        # the residual step's stack
MARGIN = 1.5                      # "spread evenly" wins unless the pattern beats an even share by this factor
REAL_MODEL = "gemma3-270m"        # the real decoder the induction and sink steps read when it is ready


@dataclass(frozen=True)
class Step:
    """One step: a question (start.<id>_text), its predictions, and the page + state where the app shows it."""
    id: str
    topic: str                                # the part of the path (start.topic_<topic>)
    options: tuple[str, ...]                  # prediction ids, start.<id>_opt_<option>
    page: str                                 # the page the step's link opens ...
    params: tuple[tuple[str, str], ...]       # ... in this state (its query parameters)
    formula: str = ""                         # LaTeX shown with the question
    needs: str = ""                           # "" | "reverse" | "induction" | "minilm": a model the page passes in
    real: tuple[str, tuple[tuple[str, str], ...]] | None = None  # (page, params) of the link when the step reads
    #                                                              REAL_MODEL instead of `needs`

    @property
    def link_params(self) -> dict[str, str]:
        return dict(self.params)

    def link(self, real: bool = False) -> tuple[str, dict[str, str]]:
        """(page, params) the step's link opens: the real model's variant when real and the step has one."""
        if real and self.real is not None:
            return self.real[0], dict(self.real[1])
        return self.page, self.link_params


@dataclass
class Answer:
    """What the app computed for a step: the option its numbers point to, the numbers (as text, for the answer's
    sentence), and a matrix to draw (rows top to bottom, columns left to right) when the step has one."""
    correct: str
    values: dict[str, str]
    matrix: np.ndarray | None = None          # (rows, cols)
    rows: list[str] = field(default_factory=list)
    cols: list[str] = field(default_factory=list)
    mask: np.ndarray | None = None            # bool (rows, cols), True = blocked (drawn hatched)
    signed: bool = False                      # a signed matrix (diverging colours) rather than probabilities
    axes: tuple[str, str] = ("key", "query")  # (x, y) axis names, ids start.axis_<name>


STEPS: tuple[Step, ...] = (
    Step("qk", "attention", ("self", "south", "bean"), "mechanics", (("section", "steps"), ("src", "worked")),
         r"S = QK^\top,\quad S_{ij} = q_i \cdot k_j"),
    Step("softmax", "attention", ("p33", "p67", "p100"), "scaling", (("part", "softmax"), ("dk", "1"), ("n", "16")),
         r"p_i = \frac{e^{z_i}}{\sum_j e^{z_j}}"),
    Step("mix", "attention", ("o6", "o0", "o10"), "mechanics", (("section", "steps"), ("src", "worked")),
         r"o_i = \sum_j A_{ij}\, v_j"),
    Step("saturation", "scaling", ("p02", "p05", "p1"), "scaling", (("part", "softmax"), ("dk", "512"), ("n", "16")),
         r"\operatorname{Var}(q\cdot k) = d_k \;\Rightarrow\; \operatorname{softmax}\!\left(\frac{QK^\top}"
         r"{\sqrt{d_k}}\right)"),
    Step("causal", "masks", ("above", "below", "diagonal"), "mechanics",
         (("section", "masks"), ("kind", "causal")), r"M_{ij} = \begin{cases} 0 & j \le i \\ -\infty & j > i \end{cases}"),
    Step("padding", "masks", ("zero", "small", "same"), "mechanics", (("section", "masks"), ("kind", "padding")),
         r"\operatorname{softmax}(S + M),\quad M_{ij} = \begin{cases} 0 & x_j \ne \texttt{[PAD]} \\ -\infty & "
         r"x_j = \texttt{[PAD]} \end{cases}"),
    Step("heads", "heads", ("same", "eighth", "tiny"), "mechanics",
         (("section", "variants"), ("preset", "llama2_70b"), ("kv", "8")),
         r"\text{KV cache} = 2\,L\,H_{kv}\,d_{head}\cdot\text{bytes}\cdot N"),
    Step("order", "positions", ("moves", "changes", "vanishes"), "positions", (("part", "order"),),
         r"\operatorname{Attn}(PX) = P\,\operatorname{Attn}(X)"),
    Step("waves", "positions", ("first", "last", "same"), "positions", (("part", "heatmap"),),
         r"PE_{(pos,\,2i)} = \sin\!\frac{pos}{10000^{2i/d}},\quad PE_{(pos,\,2i+1)} = \cos\!\frac{pos}{10000^{2i/d}}"),
    Step("layernorm", "block", ("zero_one", "unchanged", "zero_half"), "anatomy", (("section", "norms"),),
         r"\mathrm{LN}(x) = \gamma\,\frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta"),
    Step("residual", "block", ("same", "larger", "smaller"), "anatomy", (("section", "placement"), ("depth", "24")),
         r"\text{pre-norm: } x_{l+1} = x_l + F(\mathrm{LN}(x_l)),\quad \text{post-norm: } x_{l+1} = "
         r"\mathrm{LN}(x_l + F(x_l))"),
    Step("optimizer", "training", RACERS, "optimizers",
         (("surface", "bowl"), ("steps", str(RACE_STEPS)), ("racers", "sgd,momentum,adam")),
         r"f(x, y) = 0.1\,x^2 + 2\,y^2"),
    Step("reverse", "training", ("diagonal", "anti", "uniform"), "train",
         (("task", "reverse"), ("tab", "attention"), ("kind", "cross"), ("src_reverse", REVERSE_SOURCE)),
         r"A^{cross} = \operatorname{softmax}\!\left(\frac{Q_{dec} K_{enc}^\top}{\sqrt{d_k}}\right)", "reverse"),
    Step("induction", "trained", ("same_token", "next_after", "previous"), "language_model", (("tab", "induction"),),
         r"x = s\,s:\quad A_{i,\; i - L + 1} \gg \frac{1}{i + 1}", "induction",
         real=("attention", (("model", REAL_MODEL), ("view", "heads")))),
    Step("sinks", "trained", ("special", "next", "even"), "attention", (("view", "sinks"), ("text", SINK_TEXT)),
         r"\text{share}_{special} = \frac{1}{N-1}\sum_{i \ge 1} \sum_{j \in \text{special}} A_{ij}", "minilm",
         real=("attention", (("model", REAL_MODEL), ("view", "sinks"), ("text", SINK_TEXT)))),
)
REAL_STEPS = tuple(s.id for s in STEPS if s.real is not None)
TOPICS = ("attention", "scaling", "masks", "heads", "positions", "block", "training", "trained")


def step(step_id: str) -> Step:
    """The step with this id (KeyError if there is none)."""
    for s in STEPS:
        if s.id == step_id:
            return s
    raise KeyError(step_id)


def nearest(value: float, choices: dict[str, float], log: bool = False) -> str:
    """The option whose number is closest to value (on a log scale when log=True)."""
    f = (lambda x: np.log(x)) if log else (lambda x: x)
    return min(choices, key=lambda k: abs(f(value) - f(choices[k])))


def fmt(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}"


# ---------------------------------------------------------------- the score: first predictions count
def counted(first: str | None, chosen: str | None) -> str | None:
    """The prediction the score counts for a step: the first one the student made (before the answer was shown), or
    the current one where no first is recorded; None while the step has no prediction."""
    if chosen is None:
        return None
    return chosen if first is None else first


def score(predictions: dict[str, str | None], correct: dict[str, str | None]) -> tuple[int, int]:
    """(right, done): of the steps with a counted prediction (done), how many match the app's answer (right; a step
    whose answer could not be computed, correct None, is done but not right)."""
    done = [k for k, v in predictions.items() if v is not None]
    return sum(predictions[k] == correct.get(k) for k in done), len(done)


# ---------------------------------------------------------------- 1. one token looks at the others
def given_qk() -> dict[str, str]:
    """The numbers step 1 asks the student to reason from, shown with its question: the query of 哈基咪 (q) and the
    keys of the three tokens (k1, k2, k3) of the notes' worked example, already projected to d_k 2, each as "a, b"."""
    s = mechanics.worked_steps(mechanics.WORKED_X, mechanics.WORKED_WQ, mechanics.WORKED_WK, mechanics.WORKED_WV)
    vec = lambda v: ", ".join(fmt(x) for x in v)  # noqa: E731  (d_k,) -> "a, b"
    return {"q": vec(s.q[0]), **{f"k{j + 1}": vec(k) for j, k in enumerate(s.k)}}  # s.q, s.k: (3, d_k 2)


def answer_qk() -> Answer:
    """The notes' worked example (3 tokens, d_model 4, d_k 2): which key query 0 weighs most."""
    s = mechanics.worked_steps(mechanics.WORKED_X, mechanics.WORKED_WQ, mechanics.WORKED_WK, mechanics.WORKED_WV)
    row = s.weights[0]  # (3,)
    best = int(row.argmax())
    return Answer(step("qk").options[best], {"token": s.tokens[best], "p": fmt(row[best]),
                                             "score": fmt(s.scores[0, best]), "d_k": "2"},
                  s.weights, list(s.tokens), list(s.tokens))


def answer_softmax() -> Answer:
    """softmax(2, 1, 0): the largest weight."""
    z = np.array([2.0, 1.0, 0.0])
    p = scaling.softmax(z)  # (3,)
    return Answer(nearest(float(p.max()), {"p33": 1 / 3, "p67": 2 / 3, "p100": 1.0}),
                  {"p": fmt(p.max()), "all": ", ".join(fmt(x) for x in p), "sum": fmt(p.sum())},
                  p[None, :], ["p"], ["z = 2", "z = 1", "z = 0"], axes=("key", "row"))


def answer_mix() -> Answer:
    """Weights (0.7, 0.2, 0.1) over values (10, 0, -10): the output, a weighted average."""
    w = torch.tensor([[0.7, 0.2, 0.1]], dtype=torch.float64)   # (1, 3)
    v = torch.tensor([[10.0], [0.0], [-10.0]], dtype=torch.float64)  # (3, 1)
    out = float((w @ v).item())
    return Answer(nearest(out, {"o6": 6.0, "o0": 0.0, "o10": 10.0}), {"out": fmt(out)})


# ---------------------------------------------------------------- 2. why divide by sqrt(d_k)
def answer_saturation(d_k: int = 512, n_keys: int = 16) -> Answer:
    """Mean largest softmax weight of rows of n_keys logits q.k with d_k dimensions, without and with the scale."""
    sweep = scaling.saturation_sweep(scaling.SaturationConfig(n_keys=n_keys, temperature=1.0,
                                                              n_rows=scaling.rows_for(n_keys)), d_ks=(d_k,))
    raw, scaled = (float(x) for x in sweep.max_p[:, 0])
    z = scaling.example_row(d_k, n_keys)
    rows = np.stack([scaling.softmax(scaling.row_logits(z, d_k, s)) for s in (False, True)])  # (2, n_keys)
    var = scaling.dot_product_variance(d_k)
    return Answer(nearest(raw, {"p02": 0.2, "p05": 0.5, "p1": 1.0}),
                  {"raw": fmt(raw), "scaled": fmt(scaled), "var": fmt(var), "d_k": str(d_k), "n": str(n_keys)},
                  rows, ["no_scale", "scaled"], [str(j) for j in range(n_keys)], axes=("key", "row"))


# ---------------------------------------------------------------- 3. masks
def answer_causal() -> Answer:
    """Which cells the look-ahead mask blocks, for a 5-token sentence."""
    n = len(CAUSAL_TOKENS)
    mask = causal_mask(n).numpy()  # (n, n)
    kinds = {"above": np.triu(np.ones((n, n), bool), 1), "below": np.tril(np.ones((n, n), bool), -1),
             "diagonal": np.eye(n, dtype=bool)}
    correct = next(k for k, m in kinds.items() if (m == mask).all())
    weights = scaled_dot_product_attention(*_random_qkv(n, 4, seed=1), mask=torch.from_numpy(mask))[1].numpy()
    return Answer(correct, {"hidden": str(int(mask.sum())), "n": str(n), "total": str(n * n)},
                  weights, list(CAUSAL_TOKENS), list(CAUSAL_TOKENS), mask=mask)


def _random_qkv(n: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(n, d, generator=g, dtype=torch.float64) for _ in range(3))  # 3 x (n, d)


def answer_padding() -> Answer:
    """A padded batch: the weight a real query gives the [PAD] keys after the padding mask."""
    is_pad = torch.tensor([[t == "[PAD]" for t in row] for row in PAD_BATCH])  # (B, N)
    b, n = is_pad.shape
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(b, 1, n, 4, generator=g, dtype=torch.float64) for _ in range(3))  # (B, 1, N, 4)
    _, w = scaled_dot_product_attention(q, k, v, mask=padding_mask(is_pad))  # (B, 1, N, N)
    w0 = w[0, 0].numpy()  # (N, N): the padded sentence
    real = ~is_pad[0].numpy()
    on_pad = float(w0[np.ix_(real, ~real)].max())
    unmasked = scaled_dot_product_attention(q, k, v)[1][0, 0].numpy()
    before = float(unmasked[np.ix_(real, ~real)].sum(-1).mean())
    correct = "zero" if on_pad == 0.0 else "small" if on_pad < 0.5 * before else "same"
    mask = np.broadcast_to(~real[None, :], w0.shape)
    return Answer(correct, {"max": fmt(on_pad), "before": fmt(before), "n_pad": str(int((~real).sum()))},
                  w0, list(PAD_BATCH[0]), list(PAD_BATCH[0]), mask=np.array(mask))


# ---------------------------------------------------------------- 4. many heads
def answer_heads(preset: str = "llama2_70b", n_tokens: int = 4096) -> Answer:
    """KV cache of a GQA model (64 query heads, 8 key/value heads) against the same model as plain MHA."""
    shape = mechanics.PRESETS[preset]
    view = mechanics.kv_cache_view(shape, n_tokens, 1, shape.n_kv_heads)
    by_kv = {r["kv_heads"]: r["bytes_total"] for r in view.rows}
    ratio = by_kv[shape.n_kv_heads] / by_kv[shape.n_heads]
    return Answer(nearest(ratio, {"same": 1.0, "eighth": 1 / 8, "tiny": 1 / 64}, log=True),
                  {"ratio": f"1/{round(1 / ratio)}", "gqa": mechanics.format_bytes(by_kv[shape.n_kv_heads]),
                   "mha": mechanics.format_bytes(by_kv[shape.n_heads]), "heads": str(shape.n_heads),
                   "kv": str(shape.n_kv_heads), "model": shape.name, "n": f"{n_tokens:,}"})


# ---------------------------------------------------------------- 5. positions
def answer_order(seed: int = 0) -> Answer:
    """Self-attention without positions: outputs of "dog bites man" and "man bites dog" compared word by word."""
    with seeded(seed):
        mha = MultiHeadAttention(8, 2).double().eval()
    words = {w: torch.randn(8, dtype=torch.float64, generator=torch.Generator().manual_seed(i))
             for i, w in enumerate(sorted(set(ORDER_TOKENS)))}
    swapped = tuple(reversed(ORDER_TOKENS))
    with torch.no_grad():
        outs = [mha(torch.stack([words[w] for w in s])[None])[0][0] for s in (ORDER_TOKENS, swapped)]  # 2 x (3, 8)
    diff = max(float((outs[0][i] - outs[1][swapped.index(w)]).abs().max()) for i, w in enumerate(ORDER_TOKENS))
    size = float(outs[0].abs().max())
    return Answer("moves" if diff < 1e-9 * max(size, 1.0) else "changes", {"diff": f"{diff:.1e}", "size": fmt(size)})


def answer_waves(n_positions: int = 64, d_model: int = 16) -> Answer:
    """Which dimensions of the sinusoidal encoding change fastest from one position to the next."""
    pe = positional.sinusoidal_encoding(n_positions, d_model)  # (P, d)
    change = np.abs(np.diff(pe, axis=0)).mean(0)  # (d,)
    half = d_model // 2
    first, last = float(change[:half].mean()), float(change[half:].mean())
    correct = "same" if np.isclose(first, last, rtol=0.1) else "first" if first > last else "last"
    pe4 = positional.sinusoidal_encoding(5, 4)[4]
    return Answer(correct, {"first": fmt(change[0]), "last": fmt(change[-1]),
                            "pe4": ", ".join(f"{x:.3f}" for x in pe4), "d": str(d_model)},
                  pe, [str(p) for p in range(n_positions)], [str(i) for i in range(d_model)], signed=True,
                  axes=("dimension", "position"))


# ---------------------------------------------------------------- 6. the block around attention
def answer_layernorm() -> Answer:
    """LayerNorm of (1, 2, 3, 4) with gamma = 1, beta = 0: the output's mean and (population) standard deviation."""
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)
    y = blocks.layer_norm(x)[0]  # (4,)
    mean, std = float(y.mean()), float(y.std(unbiased=False))
    choices = {"zero_one": (0.0, 1.0), "unchanged": (2.5, float(x.std(unbiased=False))), "zero_half": (0.0, 0.5)}
    correct = min(choices, key=lambda k: abs(mean - choices[k][0]) + abs(std - choices[k][1]))
    return Answer(correct, {"y": ", ".join(f"{v:.3f}" for v in y.tolist()), "mean": f"{mean:.1e}",
                            "std": f"{std:.7f}"})  # 0.9999960: as many digits as show it is below 1


def answer_residual(depth: int = DEPTH) -> Answer:
    """RMS of the residual stream after the last of `depth` pre-norm blocks at initialisation, against the first."""
    r = blocks.norm_placement_at_init(depth)
    growth = float(r["pre_act"][-1] / r["pre_act"][0])
    correct = "larger" if growth > 1.5 else "smaller" if growth < 1 / 1.5 else "same"
    return Answer(correct, {"first": fmt(r["pre_act"][0]), "last": fmt(r["pre_act"][-1]), "growth": fmt(growth, 2),
                            "post": fmt(r["post_act"][-1]), "depth": str(depth)})


# ---------------------------------------------------------------- 7. training
def answer_optimizer(steps: int = RACE_STEPS) -> Answer:
    """The optimizer race on the bowl, same learning rate for all: who ends lowest after `steps` updates."""
    surface = "bowl"
    cfg = optimizers.RaceConfig(surface, (-4.5, 2.0), steps, tuple(optimizers.RacerSpec(n, 0.1) for n in RACERS))
    result = optimizers.race(cfg)
    final = {t.name: float(t.loss[-1]) for t in result.trajectories}
    best = min(final, key=final.get)
    return Answer(best, {n: f"{v:.2g}" for n, v in final.items()} | {"steps": str(steps)})


def answer_reverse(translator: Any, source: str = REVERSE_SOURCE) -> Answer:
    """Cross attention of the shipped reverse model, last decoder layer, averaged over heads: how much of each
    output row sits on the anti-diagonal (output i reads source N-1-i) against the diagonal and a uniform row."""
    r = translator.attention(source)
    last = translator.config.n_dec_layers - 1
    w = np.asarray(r.maps[f"dec.{last}.cross_attn"]).mean(0)  # (T, N): heads averaged
    n = len(r.src)
    anti = float(np.mean([w[i, n - 1 - i] for i in range(n)]))
    diag = float(np.mean([w[i, i] for i in range(n)]))
    uniform = 1.0 / n
    correct = max({"anti": anti, "diagonal": diag, "uniform": uniform * MARGIN}.items(), key=lambda kv: kv[1])[0]
    return Answer(correct, {"anti": fmt(anti), "diag": fmt(diag), "uniform": fmt(uniform), "layer": str(last),
                            "source": source, "output": translator.translate(source)},
                  w, list(r.tgt_in), list(r.src), axes=("source", "output"))


# ---------------------------------------------------------------- 8. what trained heads do
def induction_text(vocab: int, length: int = INDUCTION_SEGMENT, seed: int = 0) -> str:
    """The induction step's sequence: a random segment of `length` symbols, then the same segment again."""
    from viz_core.lm.induction import repeated_text
    return repeated_text(length, vocab, seed)


def answer_induction(lm: Any, length: int = INDUCTION_SEGMENT) -> Answer:
    """The shipped induction model on x = s s: where its strongest induction head looks from the second copy
    (see induction_picks)."""
    text = induction_text(lm.config.vocab, length)
    a = lm.attention(text)
    _, ind = lm.scores_of(a)
    answer = induction_picks(np.asarray(a.weights), list(a.tokens), ind, length)
    answer.values["text"] = text
    return answer


def answer_induction_real(weights: np.ndarray, tokens: list[str], length: int = INDUCTION_SEGMENT,
                          model: str = "Gemma 3 270M") -> Answer:
    """A real decoder on [bos] s s (weights (L, H, N, N), tokens (N,)): the same question, its heads ranked by the
    standard induction score (viz_core.pretrained.heads.induction_from_weights)."""
    from viz_core.pretrained.heads import induction_from_weights
    ind = induction_from_weights(np.asarray(weights)[None], length)  # (L, H)
    answer = induction_picks(np.asarray(weights), list(tokens), ind, length)
    answer.values["model"] = model
    return answer


def induction_picks(weights: np.ndarray, tokens: list[str], ind: np.ndarray, length: int) -> Answer:
    """Where the strongest induction head (argmax of ind (L, H)) looks from the second copy of ... s s (weights
    (L, H, N, N), a start token or none before s s). For query i in the second copy, the candidates are the earlier
    same token (i - L), the token after it (i - L + 1) and the previous token (i - 1); counted by the row's largest
    weight."""
    layer, head = (int(x) for x in np.unravel_index(int(ind.argmax()), ind.shape))
    w = weights[layer, head]  # (N, N)
    first = w.shape[-1] - 2 * length  # where s starts: 1 after a start token, else 0
    queries = range(first + length, first + 2 * length)
    picks = [int(w[i].argmax()) for i in queries]
    counts = {"same_token": sum(p == i - length for p, i in zip(picks, queries)),
              "next_after": sum(p == i - length + 1 for p, i in zip(picks, queries)),
              "previous": sum(p == i - 1 for p, i in zip(picks, queries))}
    correct = max(counts, key=counts.get)
    return Answer(correct, {"layer": str(layer), "head": str(head), "score": fmt(ind[layer, head]),
                            "hits": str(counts["next_after"]), "queries": str(length)},
                  w, list(tokens), list(tokens), mask=np.triu(np.ones_like(w, dtype=bool), 1))


def answer_sinks(tokens: list[str], weights: np.ndarray, special: np.ndarray, neighbour: int = 1) -> Answer:
    """A trained model on an ordinary sentence: the mean share of attention on its special tokens ([CLS] and [SEP]
    of a BERT-style encoder, the first token <bos> of a decoder) over every head, against the share on the
    neighbouring word (neighbour = +1: the next one, for an encoder; -1: the previous one, all a decoder can see
    nearby) and the share those tokens would get if attention were spread evenly."""
    from viz_core.pretrained.head_analysis import sink_shares
    s = sink_shares(weights, special)
    on_special = float((s.first + s.special).mean())
    n = len(tokens)
    nxt = float(np.mean(np.diagonal(weights, offset=neighbour, axis1=-2, axis2=-1)))
    even = float(np.asarray(special).sum() / n)
    shares = {"special": on_special, "next": nxt, "even": even * MARGIN}
    correct = max(shares, key=shares.get)
    per_layer = (s.first + s.special)  # (L, H)
    return Answer(correct, {"special": fmt(on_special), "next": fmt(nxt), "even": fmt(even), "n": str(n),
                            "layers": str(weights.shape[0]), "heads": str(weights.shape[1])},
                  per_layer, [str(i) for i in range(per_layer.shape[0])],
                  [str(h) for h in range(per_layer.shape[1])], axes=("head", "layer"))


ANSWERS = {"qk": answer_qk, "softmax": answer_softmax, "mix": answer_mix, "saturation": answer_saturation,
           "causal": answer_causal, "padding": answer_padding, "heads": answer_heads, "order": answer_order,
           "waves": answer_waves, "layernorm": answer_layernorm, "residual": answer_residual,
           "optimizer": answer_optimizer}  # the steps that need no trained model (the others take it as argument)
GIVENS = {"qk": given_qk}  # the steps whose question comes with its numbers (start.<id>_given)
