"""How attention computes its output, stage by stage: the worked example, masks, MHA / GQA / MQA, cross and additive
attention, and the arithmetic of parameters and the KV cache.

Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + M) V      (Vaswani et al. 2017, eq. 1; M = -inf where blocked)

Everything returns plain numpy data for the figures; the math goes through viz_core.attention and viz_core.masks.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field

import numpy as np
import torch

from ..attention import (AdditiveAttention, MultiHeadAttention, additive_scores, attention_scores, masked_softmax,
                        scaled_dot_product_attention)
from ..errors import InputError
from ..runtime.seeding import seeded, unseeded
from ..masks import (causal_mask, combine_masks, cross_padding_mask, fully_blocked_rows, padding_mask,
                    sliding_window_mask)

# ---------------------------------------------------------------- the worked example of the study notes
WORKED_TOKENS = ("哈基咪", "南北", "绿豆")
WORKED_IDS = (133, 23, 58)
WORKED_X = np.array([  # (3, d_model 4): the three embeddings the notes print
    [1.0333236, -0.07687391, 1.94313157, -1.26162928],
    [1.18221604, -0.0298283, -1.46568319, 1.37369452],
    [-0.13959719, -0.50792964, -0.88052409, 1.52022357]])
WORKED_WQ = np.array([[0.2, 0.1], [0.3, 0.5], [0.4, 0.6], [0.1, 0.2]])  # (d_model 4, d_k 2)
WORKED_WK = np.array([[0.1, 0.3], [0.2, 0.4], [0.5, 0.7], [0.1, 0.2]])  # (d_model 4, d_k 2)
WORKED_WV = np.eye(4)                                                  # (d_model 4, d_v 4): identity, so V = X
MAX_MATRIX_CELL = 1e4      # bigger entries overflow nothing, but make the heatmaps unreadable
PAD = "[PAD]"              # the pad token of the mask demos; "<pad>" is accepted too
MAX_BATCH, MAX_TOKENS = 6, 12


@dataclass
class StepConfig:
    """Options of the step-by-step view."""
    scale: bool = True          # divide Q K^T by sqrt(d_k)
    causal: bool = False        # add the causal (look-ahead) mask
    dropout: float = 0.0        # dropout probability on the weights (training mode); 0 = eval
    seed: int = 0               # seed of the dropout pattern


@dataclass
class AttentionSteps:
    """Every intermediate matrix of single-head attention, as float64 numpy arrays (row = query, column = key)."""
    tokens: list[str]
    q: np.ndarray               # (N, d_k)
    k: np.ndarray               # (N, d_k)
    v: np.ndarray               # (N, d_v)
    scores: np.ndarray          # (N, N) Q K^T
    scaled: np.ndarray          # (N, N) Q K^T / sqrt(d_k) (or unchanged when scaling is off)
    mask: np.ndarray | None     # (N, N) bool, True = blocked
    masked: np.ndarray          # (N, N) scaled with -inf at blocked cells
    weights: np.ndarray         # (N, N) softmax, rows sum to 1
    dropped: np.ndarray | None  # (N, N) weights after dropout (kept cells / (1 - p)), None in eval mode
    out: np.ndarray             # (N, d_v)
    divisor: float              # sqrt(d_k), or 1 when scaling is off
    x: np.ndarray | None = None
    w: dict[str, np.ndarray] = field(default_factory=dict)   # "q", "k", "v" projection matrices when known


# ---------------------------------------------------------------- matrices typed by the user
def format_matrix(m: np.ndarray) -> str:
    """(R, C) -> '1,2;3,4' (rows by ';', cells by ','): the form a matrix takes in the URL."""
    return ";".join(",".join(f"{float(x):.6g}" for x in row) for row in np.asarray(m))


def split_matrix(text: str, shape: tuple[int, int]) -> list[list[str]]:
    """'1,2;3,4' -> a grid of cell strings of exactly `shape`; missing cells are '' (reported by parse_cells)."""
    rows = [r.split(",") for r in (text or "").split(";")]
    return [[(rows[i][j].strip() if i < len(rows) and j < len(rows[i]) else "") for j in range(shape[1])]
            for i in range(shape[0])]


def parse_cells(cells: list[list], name: str) -> np.ndarray:
    """Grid of cells (strings or numbers) -> float array; InputError naming the first bad cell (1-based)."""
    out = np.zeros((len(cells), len(cells[0]) if cells else 0))
    for i, row in enumerate(cells):
        for j, cell in enumerate(row):
            out[i, j] = _cell(cell, name, i, j)
    if out.size == 0:
        raise InputError("mechanics.empty_matrix", f"{name} has no cells", name=name)
    return out


def _cell(cell, name: str, i: int, j: int) -> float:
    text = "" if cell is None else str(cell).strip()
    if not text:
        raise InputError("mechanics.empty_cell", f"{name}: cell ({i + 1}, {j + 1}) is empty", name=name,
                         row=i + 1, col=j + 1)
    try:
        value = float(text)
    except ValueError:
        raise InputError("mechanics.bad_cell", f"{name}: cell ({i + 1}, {j + 1}) is {text!r}, not a number",
                         name=name, row=i + 1, col=j + 1, value=text[:20]) from None
    if not math.isfinite(value) or abs(value) > MAX_MATRIX_CELL:
        raise InputError("mechanics.big_cell", f"{name}: cell ({i + 1}, {j + 1}) must be finite and within "
                         f"±{MAX_MATRIX_CELL:g}", name=name, row=i + 1, col=j + 1, limit=f"{MAX_MATRIX_CELL:g}")
    return value


# ---------------------------------------------------------------- step by step
def project(x: np.ndarray, wq: np.ndarray, wk: np.ndarray, wv: np.ndarray):
    """Q = X W_q, K = X W_k, V = X W_v for X (N, d_model); checks that the inner sizes agree."""
    for name, w in (("W_q", wq), ("W_k", wk), ("W_v", wv)):
        if w.shape[0] != x.shape[1]:
            raise InputError("mechanics.shape_mismatch", f"{name} needs {x.shape[1]} rows (d_model)", name=name,
                             rows=x.shape[1])
    if wq.shape[1] != wk.shape[1]:
        raise InputError("mechanics.dk_mismatch", "W_q and W_k need the same number of columns (d_k)")
    return x @ wq, x @ wk, x @ wv  # (N, d_k), (N, d_k), (N, d_v)


def _dropout_fn(p: float, seed: int):
    """Inverted dropout with its own generator: keep each weight with prob 1 - p, divide kept ones by 1 - p."""
    if p <= 0:
        return None
    if p >= 1:
        raise InputError("mechanics.bad_dropout", "dropout must be below 1")
    gen = torch.Generator().manual_seed(seed)
    return lambda w: w * (torch.rand(w.shape, generator=gen, dtype=w.dtype) >= p) / (1 - p)


def attention_steps(q, k, v, tokens, cfg: StepConfig | None = None, key_tokens=None) -> AttentionSteps:
    """Every stage of softmax(Q K^T / sqrt(d_k) + M) V for q (Nq, d_k), k (Nk, d_k), v (Nk, d_v)."""
    cfg = cfg or StepConfig()
    q, k, v = (torch.as_tensor(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    if q.shape[0] == 0 or k.shape[0] == 0:
        raise InputError("mechanics.zero_length", "a sequence needs at least one token")
    if cfg.causal and q.shape[0] != k.shape[0]:
        raise InputError("mechanics.causal_cross", "the causal mask needs as many queries as keys")
    mask = causal_mask(q.shape[0]) if cfg.causal else None  # (N, N)
    scores = attention_scores(q, k, scale=False)  # (Nq, Nk)
    scaled = attention_scores(q, k, scale=cfg.scale)  # (Nq, Nk)
    masked = scaled if mask is None else scaled.masked_fill(mask, float("-inf"))
    weights = masked_softmax(scaled, mask)  # (Nq, Nk)
    drop = _dropout_fn(cfg.dropout, cfg.seed)
    out, final = scaled_dot_product_attention(q, k, v, mask=mask, dropout=drop, scale=cfg.scale)  # (Nq, d_v)
    return AttentionSteps(
        tokens=list(tokens), q=q.numpy(), k=k.numpy(), v=v.numpy(), scores=scores.numpy(), scaled=scaled.numpy(),
        mask=None if mask is None else mask.numpy(), masked=masked.numpy(), weights=weights.numpy(),
        dropped=final.numpy() if drop else None, out=out.numpy(),
        divisor=math.sqrt(q.shape[-1]) if cfg.scale else 1.0)


def worked_steps(x, wq, wk, wv, tokens=WORKED_TOKENS, cfg: StepConfig | None = None) -> AttentionSteps:
    """The notes' example (or the user's edit of it): project X, then every stage of attention."""
    q, k, v = project(np.asarray(x, float), np.asarray(wq, float), np.asarray(wk, float), np.asarray(wv, float))
    steps = attention_steps(q, k, v, tokens, cfg)
    steps.x, steps.w = np.asarray(x, float), {"q": np.asarray(wq, float), "k": np.asarray(wk, float),
                                               "v": np.asarray(wv, float)}
    return steps


def random_inputs(n: int, d_model: int, d_k: int, d_v: int, seed: int = 0):
    """X ~ N(0, 1) (n, d_model) and W ~ N(0, 1/d_model), so each entry of Q, K, V has variance about 1."""
    if min(n, d_model, d_k, d_v) < 1:
        raise InputError("mechanics.zero_length", "every size must be at least 1")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d_model))
    wq, wk, wv = (rng.standard_normal((d_model, d)) / math.sqrt(d_model) for d in (d_k, d_k, d_v))
    return x, wq, wk, wv


def max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(np.asarray(a, float) - np.asarray(b, float)))) if np.size(a) else 0.0


# ---------------------------------------------------------------- batched multi-head shapes
@dataclass
class ShapeStep:
    """One line of the batched walk-through: the code, the resulting shape and memory layout, a note key."""
    code: str
    shape: tuple | None
    stride: tuple | None
    contiguous: bool | None
    note: str                  # i18n key suffix (mechanics.shape_<note>)
    error: str = ""            # the RuntimeError torch raises, for the step that fails on purpose


def shape_walkthrough(b: int, n: int, d_model: int, n_heads: int, seed: int = 0) -> list[ShapeStep]:
    """Run one multi-head self-attention on real tensors and record every shape change:
    (B, N, d_model) -> (B, H, N, d_k) -> (B, H, N, N) -> (B, N, d_model)."""
    check_heads(d_model, n_heads)
    with seeded(seed):
        mha = MultiHeadAttention(d_model, n_heads).eval()
        x = torch.randn(b, n, d_model)  # (B, N, d_model)
    d_k = d_model // n_heads
    steps: list[ShapeStep] = []

    def rec(code, t, note):
        steps.append(ShapeStep(code, tuple(t.shape), tuple(t.stride()), t.is_contiguous(), note))
        return t

    with torch.inference_mode():
        x = rec("x", x, "input")  # (B, N, d_model)
        q = rec("q = q_proj(x)", mha.q_proj(x), "proj")  # (B, N, H*d_k)
        q = rec(f"q = q.view({b}, {n}, {n_heads}, {d_k})", q.view(b, n, n_heads, d_k), "view_split")
        q = rec("q = q.transpose(1, 2)", q.transpose(1, 2), "transpose_heads")  # (B, H, N, d_k)
        k = mha.k_proj(x).view(b, n, n_heads, d_k).transpose(1, 2)  # (B, H, N, d_k)
        v = mha.v_proj(x).view(b, n, n_heads, d_k).transpose(1, 2)  # (B, H, N, d_k)
        s = rec("scores = q @ k.transpose(-2, -1) / sqrt(d_k)", q @ k.transpose(-2, -1) / math.sqrt(d_k), "scores")
        w = rec("weights = scores.softmax(-1)", s.softmax(-1), "softmax")  # (B, H, N, N)
        o = rec("out = weights @ v", w @ v, "mix")  # (B, H, N, d_k)
        o = rec("out = out.transpose(1, 2)", o.transpose(1, 2), "transpose_back")  # (B, N, H, d_k)
        steps.append(_failing_view(o, b, n, d_model))
        o = rec("out = out.contiguous()", o.contiguous(), "contiguous")
        o = rec(f"out = out.view({b}, {n}, {d_model})", o.view(b, n, d_model), "merge")  # (B, N, d_model)
        rec("y = o_proj(out)", mha.o_proj(o), "out_proj")
    return steps


def _failing_view(o: torch.Tensor, b: int, n: int, d_model: int) -> ShapeStep:
    """view() on the transposed tensor: works only if its memory happens to be laid out contiguously."""
    code = f"out.view({b}, {n}, {d_model})   # without contiguous()"
    try:
        o.view(b, n, d_model)
    except RuntimeError as exc:
        return ShapeStep(code, None, None, None, "view_fails", error=str(exc).split("\n")[0][:200])
    return ShapeStep(code, (b, n, d_model), None, None, "view_lucky")


# ---------------------------------------------------------------- masks
@dataclass
class PaddedBatch:
    """Sentences of different lengths padded into one (B, N) grid; is_pad True where a position is padding."""
    tokens: list[list[str]]
    is_pad: np.ndarray         # bool (B, N)


def parse_batch(text: str, pad_side: str = "end") -> PaddedBatch:
    """One sentence per line, tokens split on spaces; '[PAD]' may be written anywhere (start, middle, end).

    Shorter lines are filled with pads at pad_side ('end' or 'start') up to the longest line.
    """
    lines = [ln.split() for ln in (text or "").splitlines() if ln.strip()]
    if not lines:
        raise InputError("mechanics.empty_batch", "write at least one sentence (one per line)")
    if len(lines) > MAX_BATCH or max(map(len, lines)) > MAX_TOKENS:
        raise InputError("mechanics.batch_too_big", f"at most {MAX_BATCH} sentences of {MAX_TOKENS} tokens",
                         rows=MAX_BATCH, tokens=MAX_TOKENS)
    n = max(map(len, lines))
    fill = [[PAD] * (n - len(ln)) for ln in lines]
    rows = [ln + f if pad_side == "end" else f + ln for ln, f in zip(lines, fill)]
    rows = [[PAD if tok.lower() in ("[pad]", "<pad>") else tok for tok in row] for row in rows]
    return PaddedBatch(tokens=rows, is_pad=np.array([[tok == PAD for tok in row] for row in rows]))


def parse_tokens(text: str, what: str = "query") -> list[str]:
    """Whitespace tokens of one sentence (the query side of cross attention); InputError if empty or too long."""
    tokens = (text or "").split()
    if not tokens:
        raise InputError("mechanics.empty_sentence", f"the {what} sentence is empty", what=what)
    if len(tokens) > MAX_TOKENS:
        raise InputError("mechanics.sentence_too_long", f"at most {MAX_TOKENS} tokens", tokens=MAX_TOKENS)
    return tokens


@dataclass
class MaskView:
    """One batch item under one mask kind: the mask, the scores before / after masking, and the weights that four
    common ways of masking produce."""
    kind: str
    q_tokens: list[str]
    k_tokens: list[str]
    mask: np.ndarray           # bool (Nq, Nk), True = blocked
    batch_mask_shape: tuple    # shape of the mask as built for the whole batch, before picking the item
    scores: np.ndarray         # (Nq, Nk) Q K^T / sqrt(d_k)
    masked: np.ndarray         # (Nq, Nk) with -inf at blocked cells
    weights: dict[str, np.ndarray]   # method -> (Nq, Nk) weights
    query_is_pad: np.ndarray   # bool (Nq,): rows whose result is thrown away
    fully_blocked: np.ndarray  # bool (Nq,): rows with no visible key


MASK_KINDS = ("causal", "sliding", "padding", "causal_padding", "cross")
DEFAULT_WINDOW = 3          # W of the sliding-window demo (sentences hold at most MAX_TOKENS tokens)
MASK_METHODS = ("add_inf", "fill_inf", "fill_1e9", "safe")


def batch_mask(kind: str, is_pad_k: torch.Tensor, n_q: int, window: int = DEFAULT_WINDOW) -> torch.Tensor:
    """The mask of a whole batch, True = blocked: causal (N, N); sliding window of `window` keys (N, N); padding
    (B, 1, 1, N); causal + padding (B, 1, N, N); cross padding (B, 1, Nq, Nk)."""
    n = is_pad_k.shape[1]
    if kind == "causal":
        return causal_mask(n)  # (N, N)
    if kind == "sliding":
        if window < 1:
            raise InputError("mechanics.bad_window", "the window must hold at least one key")
        return sliding_window_mask(n, window)  # (N, N)
    if kind == "padding":
        return padding_mask(is_pad_k)  # (B, 1, 1, N)
    if kind == "causal_padding":
        return combine_masks(causal_mask(n), padding_mask(is_pad_k))  # (B, 1, N, N)
    if kind == "cross":
        return cross_padding_mask(n_q, is_pad_k)  # (B, 1, Nq, Nk)
    raise InputError("mechanics.bad_mask_kind", f"unknown mask kind {kind!r}", kind=kind)


def masked_weights(scores: torch.Tensor, mask: torch.Tensor) -> dict[str, np.ndarray]:
    """The weights four ways of masking give (mask True = blocked):
    add_inf: scores + mask * (-inf) (0 * -inf = NaN everywhere); fill_inf: masked_fill(-inf) (NaN on rows with no
    visible key); fill_1e9: masked_fill(-1e9) (fully blocked rows become uniform, i.e. attend to pads); safe: ours,
    masked_fill(-inf) then zero the fully blocked rows."""
    add_inf = torch.softmax(scores + mask.to(scores.dtype) * float("-inf"), dim=-1)
    return {"add_inf": add_inf.numpy(),
            "fill_inf": torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1).numpy(),
            "fill_1e9": torch.softmax(scores.masked_fill(mask, -1e9), dim=-1).numpy(),
            "safe": masked_softmax(scores, mask).numpy()}


def mask_view(batch: PaddedBatch, item: int, kind: str, query_text: str = "", d_k: int = 4,
              seed: int = 0, window: int = DEFAULT_WINDOW) -> MaskView:
    """Build the batch mask of `kind` (window: W of the sliding-window mask), pick batch item `item`, and mask
    random scores of that item with it."""
    if not 0 <= item < len(batch.tokens):
        raise InputError("mechanics.bad_item", "no such sentence in the batch", last=len(batch.tokens))
    is_pad = torch.as_tensor(batch.is_pad)  # (B, Nk)
    k_tokens = batch.tokens[item]
    q_tokens = parse_tokens(query_text, "query") if kind == "cross" else k_tokens
    full = batch_mask(kind, is_pad, len(q_tokens), window)
    mask = full.expand(len(batch.tokens), 1, len(q_tokens), len(k_tokens))[item, 0]  # (Nq, Nk)
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(len(q_tokens), d_k, generator=gen, dtype=torch.float64)  # (Nq, d_k)
    k = torch.randn(len(k_tokens), d_k, generator=gen, dtype=torch.float64)  # (Nk, d_k)
    scores = attention_scores(q, k)  # (Nq, Nk)
    q_pad = np.zeros(len(q_tokens), bool) if kind == "cross" else batch.is_pad[item].copy()
    return MaskView(kind=kind, q_tokens=q_tokens, k_tokens=k_tokens, mask=mask.numpy(),
                    batch_mask_shape=tuple(full.shape), scores=scores.numpy(),
                    masked=scores.masked_fill(mask, float("-inf")).numpy(), weights=masked_weights(scores, mask),
                    query_is_pad=q_pad, fully_blocked=fully_blocked_rows(mask)[:, 0].numpy())


def method_summary(view: MaskView) -> list[dict]:
    """Per masking method: NaN cells, weight left on blocked cells of usable rows, and what fully blocked rows get."""
    usable = ~view.fully_blocked
    rows = []
    for name in MASK_METHODS:
        w = view.weights[name]
        leak = np.nan_to_num(np.where(view.mask & usable[:, None], w, 0.0), nan=0.0)
        blocked = w[view.fully_blocked]
        rows.append({"method": name, "nan_cells": int(np.isnan(w).sum()), "max_blocked_weight": float(leak.max()),
                     "blocked_row_sum": (float(np.nansum(blocked[0])) if blocked.size and not np.isnan(blocked).all()
                                         else (float("nan") if blocked.size else None))})
    return rows


def sliding_reach(window: int, n_layers: int) -> int:
    """How far back a token's information can come from after n_layers sliding layers of window W: each layer
    reaches W - 1 positions further, so l (W - 1) (the receptive field grows like a stack of convolutions)."""
    return n_layers * (window - 1)


def fp16_fill_check() -> dict[str, str]:
    """What -1e9 and finfo.min do in float16 (max 65504): masked_fill(-1e9) raises, finfo(float16).min works."""
    s = torch.zeros(1, 2, dtype=torch.float16)
    m = torch.tensor([[False, True]])
    try:
        s.masked_fill(m, -1e9)
        big = "ok"
    except RuntimeError as exc:
        big = str(exc).split("\n")[0]
    low = torch.finfo(torch.float16).min
    w = torch.softmax(s.masked_fill(m, low), -1)
    return {"fill_1e9": big, "finfo_min": f"{low:g}", "finfo_weights": str([round(float(x), 4) for x in w[0]])}


# ---------------------------------------------------------------- MHA / GQA / MQA
def check_heads(d_model: int, n_heads: int, n_kv_heads: int | None = None) -> None:
    """InputError unless n_heads divides d_model and n_kv_heads divides n_heads."""
    if n_heads < 1 or d_model < 1 or d_model % n_heads:
        raise InputError("mechanics.heads_not_divisor", f"d_model ({d_model}) must be divisible by the number of "
                         f"heads ({n_heads})", d_model=d_model, heads=n_heads)
    if n_kv_heads is not None and (n_kv_heads < 1 or n_heads % n_kv_heads):
        raise InputError("mechanics.kv_not_divisor", f"the number of heads ({n_heads}) must be divisible by the "
                         f"number of KV heads ({n_kv_heads})", heads=n_heads, kv=n_kv_heads)


def divisors(n: int) -> list[int]:
    """Positive divisors of n, ascending: the KV-head counts a model with n query heads can use."""
    return [d for d in range(1, n + 1) if n % d == 0]


def variant_name(n_heads: int, n_kv_heads: int) -> str:
    """'MHA' when every query head has its own K/V, 'MQA' when all share one, 'GQA' in between."""
    return "MHA" if n_kv_heads == n_heads else "MQA" if n_kv_heads == 1 else "GQA"


def head_groups(n_heads: int, n_kv_heads: int) -> list[int]:
    """KV head used by each query head: g(i) = i // (H / H_kv), as repeat_interleave lays them out."""
    check_heads(n_heads, n_heads, n_kv_heads)
    return [i // (n_heads // n_kv_heads) for i in range(n_heads)]


def pooled_variant(mha: MultiHeadAttention, n_kv_heads: int) -> MultiHeadAttention:
    """GQA / MQA from an MHA by mean-pooling the K and V projection heads of each group (Ainslie et al. 2023, 2.1).
    Q and output projections are copied, so the variants differ only in how many K/V heads they keep."""
    check_heads(mha.d_model, mha.n_heads, n_kv_heads)
    with unseeded():  # its initial weights are overwritten below
        new = MultiHeadAttention(mha.d_model, mha.n_heads, n_kv_heads).eval()
    g, d_k = mha.n_heads // n_kv_heads, mha.d_k
    with torch.no_grad():
        new.q_proj.weight.copy_(mha.q_proj.weight)
        new.o_proj.weight.copy_(mha.o_proj.weight)
        for name in ("k_proj", "v_proj"):
            w = getattr(mha, name).weight.view(n_kv_heads, g, d_k, mha.d_model).mean(1)  # (H_kv, d_k, d_model)
            getattr(new, name).weight.copy_(w.reshape(n_kv_heads * d_k, mha.d_model))
    return new


@dataclass
class VariantComparison:
    """MHA, the chosen GQA and MQA on the same input x (N, d_model)."""
    names: list[str]
    kv_heads: list[int]
    outputs: np.ndarray        # (3, N, d_model)
    weights: np.ndarray        # (3, H, N, N)
    params: list[int]          # attention parameters of each module (counted on the module)
    rel_diff: list[float]      # ||out - out_MHA|| / ||out_MHA||


def compare_variants(d_model: int, n_heads: int, n_kv_heads: int, n_tokens: int, seed: int = 0) -> VariantComparison:
    """One MultiHeadAttention per variant (MHA, GQA with n_kv_heads, MQA), GQA/MQA pooled from the MHA's K/V heads,
    all applied to the same random input with a causal mask."""
    check_heads(d_model, n_heads, n_kv_heads)
    if n_tokens < 1:
        raise InputError("mechanics.zero_length", "a sequence needs at least one token")
    with seeded(seed):
        mha = MultiHeadAttention(d_model, n_heads).eval()
        x = torch.randn(1, n_tokens, d_model)  # (1, N, d_model)
    kvs = [n_heads, n_kv_heads, 1]
    outs, ws, params = [], [], []
    with torch.inference_mode():
        for kv in kvs:
            m = mha if kv == n_heads else pooled_variant(mha, kv)
            out, w = m(x, mask=causal_mask(n_tokens))  # (1, N, d_model), (1, H, N, N)
            outs.append(out[0].numpy())
            ws.append(w[0].numpy())
            params.append(sum(p.numel() for p in m.parameters()))
    ref = np.linalg.norm(outs[0]) or 1.0
    return VariantComparison(names=[variant_name(n_heads, kv) for kv in kvs], kv_heads=kvs, outputs=np.stack(outs),
                             weights=np.stack(ws), params=params,
                             rel_diff=[float(np.linalg.norm(o - outs[0]) / ref) for o in outs])


def equivalence_check(d_model: int, n_heads: int, n_tokens: int = 5, seed: int = 0) -> dict[str, float]:
    """Max |difference| between GQA(kv = H) and torch.nn.MultiheadAttention with the same weights (MHA), and
    between GQA(kv = 1) and a hand-written MQA that broadcasts one K/V head over all query heads."""
    check_heads(d_model, n_heads)
    with seeded(seed):
        x = torch.randn(2, n_tokens, d_model)  # (B, N, d_model)
        gqa_h = MultiHeadAttention(d_model, n_heads, n_kv_heads=n_heads).eval()
        ref = torch.nn.MultiheadAttention(d_model, n_heads, bias=False, batch_first=True).eval()
        gqa_1 = MultiHeadAttention(d_model, n_heads, n_kv_heads=1).eval()
    with torch.inference_mode():
        ref.in_proj_weight.copy_(torch.cat([gqa_h.q_proj.weight, gqa_h.k_proj.weight, gqa_h.v_proj.weight]))
        ref.out_proj.weight.copy_(gqa_h.o_proj.weight)
        ours, w_ours = gqa_h(x)
        theirs, w_theirs = ref(x, x, x, need_weights=True, average_attn_weights=False)
        mqa = _hand_mqa(gqa_1, x)
        ours_1, _ = gqa_1(x)
    return {"mha_out": max_abs_diff(ours.numpy(), theirs.numpy()),
            "mha_weights": max_abs_diff(w_ours.numpy(), w_theirs.numpy()),
            "mqa_out": max_abs_diff(ours_1.numpy(), mqa.numpy())}


def _hand_mqa(m: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    """Multi-query attention written directly: H query heads, ONE key/value head broadcast over them."""
    b, n, _ = x.shape
    q = m.q_proj(x).view(b, n, m.n_heads, m.d_k).transpose(1, 2)  # (B, H, N, d_k)
    k = m.k_proj(x).unsqueeze(1)  # (B, 1, N, d_k): one head, broadcast over H
    v = m.v_proj(x).unsqueeze(1)  # (B, 1, N, d_k)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(m.d_k), dim=-1)  # (B, H, N, N)
    return m.o_proj((w @ v).transpose(1, 2).reshape(b, n, m.d_model))  # (B, N, d_model)


# ---------------------------------------------------------------- parameters and KV cache
@dataclass(frozen=True)
class ModelShape:
    """The sizes that decide attention parameters and the KV cache."""
    name: str
    d_model: int               # hidden size
    n_heads: int               # query heads
    n_layers: int              # decoder layers (each keeps its own K and V)
    n_kv_heads: int            # what the real model uses
    d_head: int = 0            # per-head size; 0 -> d_model // n_heads
    bytes_per_value: int = 2   # 2 = fp16 / bf16
    window: int = 0            # sliding window W of the sliding layers; 0 = every layer attends to all tokens
    full_every: int = 0        # with a window: every full_every-th layer (1-based) is full attention, the rest slide

    @property
    def head_dim(self) -> int:
        return self.d_head or self.d_model // self.n_heads

    def layer_kinds(self) -> list[str]:
        """'full' or 'sliding' per layer: Gemma 3's 5 : 1 pattern is window 512, full_every 6 (layers 5, 11, 17
        0-based are full)."""
        if not self.window:
            return ["full"] * self.n_layers
        return ["full" if self.full_every and (i + 1) % self.full_every == 0 else "sliding"
                for i in range(self.n_layers)]


GEMMA3_270M = ModelShape("Gemma 3 270M", 640, 4, 18, 1, d_head=256, window=512, full_every=6)  # MQA, 5 sliding : 1
SMOLLM2_135M = ModelShape("SmolLM2-135M", 576, 9, 30, 3, d_head=64)  # Llama family, GQA: 3 groups of 3 query heads
PRESETS = {  # published configurations (hidden size, heads, layers, KV heads, head size)
    "gemma3_270m": GEMMA3_270M,       # the two real decoders the app ships offline
    "smollm2_135m": SMOLLM2_135M,
    "llama2_7b": ModelShape("Llama-2-7B", 4096, 32, 32, 32),
    "mistral_7b": ModelShape("Mistral-7B", 4096, 32, 32, 8),
    "llama2_70b": ModelShape("Llama-2-70B", 8192, 64, 80, 8),
    "falcon_7b": ModelShape("Falcon-7B", 4544, 71, 32, 1, d_head=64),
    "gpt2": ModelShape("GPT-2 small", 768, 12, 12, 12),
}
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}


def custom_shape(d_model: int, n_heads: int, n_layers: int, bytes_per_value: int) -> ModelShape:
    """A user-defined shape; InputError unless heads divide d_model and every size is positive."""
    if n_layers < 1 or bytes_per_value < 1:
        raise InputError("mechanics.zero_length", "every size must be at least 1")
    check_heads(d_model, n_heads)
    return ModelShape("custom", d_model, n_heads, n_layers, n_heads, bytes_per_value=bytes_per_value)


def attention_params(d_model: int, n_heads: int, n_kv_heads: int, d_head: int, bias: bool = False) -> int:
    """Parameters of one attention layer: W_q (d_model x H d_h) + W_k, W_v (d_model x H_kv d_h each) + W_o."""
    weights = 2 * d_model * n_heads * d_head + 2 * d_model * n_kv_heads * d_head  # W_q, W_o + W_k, W_v
    biases = n_heads * d_head + 2 * n_kv_heads * d_head + d_model  # b_q + b_k, b_v + b_o
    return weights + (biases if bias else 0)


def kv_cache_bytes(shape: ModelShape, n_kv_heads: int, n_tokens: int = 1, batch: int = 1) -> int:
    """K and V of every layer: 2 x layers x H_kv x d_head x bytes, per token of every sequence in the batch
    (no window: every layer keeps every token)."""
    return 2 * shape.n_layers * n_kv_heads * shape.head_dim * shape.bytes_per_value * n_tokens * batch


def cached_tokens(shape: ModelShape, n_tokens: int) -> list[int]:
    """Tokens each layer's KV cache holds after n_tokens: all of them in a full layer, at most W in a sliding one
    (older keys fall out of every query's window, so they can be dropped)."""
    return [n_tokens if kind == "full" else min(n_tokens, shape.window) for kind in shape.layer_kinds()]


def windowed_cache_bytes(shape: ModelShape, n_kv_heads: int, n_tokens: int, batch: int = 1) -> int:
    """The KV cache with sliding layers capped at W tokens: 2 x H_kv x d_head x bytes x B x sum_l min(N, W_l);
    equals kv_cache_bytes when the shape has no window."""
    per_token_layer = 2 * n_kv_heads * shape.head_dim * shape.bytes_per_value * batch  # one token of one layer
    return per_token_layer * sum(cached_tokens(shape, n_tokens))


def kv_table(shape: ModelShape, n_tokens: int, batch: int) -> list[dict]:
    """Every legal KV-head count for this shape: variant, attention parameters (all layers), KV cache per token and
    for n_tokens x batch: bytes_total as the model keeps it (sliding layers capped at W), bytes_no_window as if every
    layer kept every token (the same for a model without a window)."""
    if n_tokens < 1 or batch < 1:
        raise InputError("mechanics.zero_length", "every size must be at least 1")
    rows = []
    for kv in divisors(shape.n_heads):
        rows.append({"kv_heads": kv, "variant": variant_name(shape.n_heads, kv),
                     "group": shape.n_heads // kv,
                     "params": shape.n_layers * attention_params(shape.d_model, shape.n_heads, kv, shape.head_dim),
                     "bytes_per_token": kv_cache_bytes(shape, kv),
                     "bytes_total": windowed_cache_bytes(shape, kv, n_tokens, batch),
                     "bytes_no_window": kv_cache_bytes(shape, kv, n_tokens, batch)})
    return rows


@dataclass
class KVCacheView:
    """The KV-cache comparison of one model shape: every legal H_kv, the chosen one, and the numbers of its bars."""
    rows: list[dict]           # kv_table: one row per H_kv (variant, params, bytes per token, bytes in total)
    chosen: int                # index into rows of the chosen H_kv
    labels: list[str]          # "8 (GQA)" per row
    total_gib: np.ndarray      # (R,) KV cache of n_tokens x batch, GiB (2^30 bytes)
    total_text: list[str]      # the same, readable ("12.5 GiB")
    params_millions: np.ndarray  # (R,) attention parameters of all layers, millions
    params_text: list[str]     # the same, readable ("537 M")
    groups: list[int]          # (H,) KV head read by each query head under the chosen H_kv: g(i) = i // (H / H_kv)


def kv_cache_view(shape: ModelShape, n_tokens: int, batch: int, n_kv_heads: int) -> KVCacheView:
    """kv_table for every legal H_kv plus what its bars show: cache = 2 L H_kv d_head bytes N B,
    params = 2 L d_model d_head (H + H_kv). InputError if n_kv_heads does not divide shape.n_heads."""
    groups = head_groups(shape.n_heads, n_kv_heads)
    rows = kv_table(shape, n_tokens, batch)
    totals = np.array([r["bytes_total"] for r in rows], dtype=np.float64)  # (R,)
    params = np.array([r["params"] for r in rows], dtype=np.float64)  # (R,)
    return KVCacheView(rows, next(i for i, r in enumerate(rows) if r["kv_heads"] == n_kv_heads),
                       [f"{r['kv_heads']} ({r['variant']})" for r in rows],
                       totals / 2**30, [format_bytes(r["bytes_total"]) for r in rows],
                       params / 1e6, [format_count(r["params"]) for r in rows], groups)


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KiB' (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} TiB"


def format_count(n: float) -> str:
    """12_582_912 -> '12.6 M'."""
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= div:
            return f"{n / div:.3g} {unit}"
    return f"{n:.0f}"


# ---------------------------------------------------------------- cross attention
def embed_tokens(tokens: list[str], d_model: int, salt: int = 0) -> np.ndarray:
    """Toy embeddings: a fixed random vector per distinct token string (same word -> same vector), (N, d_model)."""
    vecs = [np.random.default_rng([zlib.crc32(tok.encode("utf-8")), salt]).standard_normal(d_model) for tok in tokens]
    return np.stack(vecs) if vecs else np.zeros((0, d_model))


@dataclass
class CrossResult:
    q_tokens: list[str]
    k_tokens: list[str]
    weights: np.ndarray        # (H, Nq, Nk)
    out: np.ndarray            # (Nq, d_model)
    shapes: dict[str, tuple]   # name -> shape of x_q, x_kv, Q, K, V, weights, out

    @property
    def pad_mask(self) -> np.ndarray:
        """bool (Nq, Nk): True where the key is a pad (blocked for every query)."""
        is_pad = np.array([tok == PAD for tok in self.k_tokens], dtype=bool)  # (Nk,)
        return np.repeat(is_pad[None, :], len(self.q_tokens), axis=0)  # (Nq, Nk)


def cross_attention(q_tokens: list[str], k_tokens: list[str], d_model: int = 8, n_heads: int = 2,
                    seed: int = 0, k_is_pad: list[bool] | None = None) -> CrossResult:
    """Q from the target sentence, K and V from the source sentence (Nq != Nk allowed): weights (H, Nq, Nk).
    Random (untrained) projections: the pattern is arbitrary, the shapes are the lesson."""
    check_heads(d_model, n_heads)
    if not q_tokens or not k_tokens:
        raise InputError("mechanics.zero_length", "a sequence needs at least one token")
    with seeded(seed):
        mha = MultiHeadAttention(d_model, n_heads).eval()
    x_q = torch.as_tensor(embed_tokens(q_tokens, d_model, 1), dtype=torch.float32)[None]  # (1, Nq, d_model)
    x_kv = torch.as_tensor(embed_tokens(k_tokens, d_model, 2), dtype=torch.float32)[None]  # (1, Nk, d_model)
    mask = None if not k_is_pad or not any(k_is_pad) else padding_mask(torch.tensor([k_is_pad]))  # (1, 1, 1, Nk)
    with torch.inference_mode():
        out, w = mha(x_q, x_kv, mask=mask)  # (1, Nq, d_model), (1, H, Nq, Nk)
    nq, nk, d_k = len(q_tokens), len(k_tokens), d_model // n_heads
    shapes = {"x_q": (1, nq, d_model), "x_kv": (1, nk, d_model), "Q": (1, n_heads, nq, d_k),
              "K": (1, n_heads, nk, d_k), "V": (1, n_heads, nk, d_k), "weights": tuple(w.shape),
              "out": tuple(out.shape)}
    return CrossResult(q_tokens, k_tokens, w[0].numpy(), out[0].numpy(), shapes)


# ---------------------------------------------------------------- additive vs dot product
@dataclass
class AdditiveComparison:
    dot_scores: np.ndarray     # (Nq, Nk) Q K^T / sqrt(d_k)
    add_scores: np.ndarray     # (Nq, Nk) v_a^T tanh(W_q q + W_k k)
    dot_weights: np.ndarray
    add_weights: np.ndarray


def additive_vs_dot(q: np.ndarray, k: np.ndarray, v: np.ndarray, d_hidden: int = 8,
                    seed: int = 0) -> AdditiveComparison:
    """Both compatibility functions on the same Q, K, V; the additive one with random (untrained) W_q, W_k, v_a."""
    if d_hidden < 1:
        raise InputError("mechanics.zero_length", "every size must be at least 1")
    q, k, v = (torch.as_tensor(np.asarray(a, dtype=np.float64)) for a in (q, k, v))
    with seeded(seed):
        add = AdditiveAttention(q.shape[-1], k.shape[-1], d_hidden).double().eval()
    with torch.inference_mode():
        _, add_w = add(q, k, v)  # (Nq, Nk)
        add_s = additive_scores(q, k, add.w_q.weight, add.w_k.weight, add.v_a.weight[0])  # (Nq, Nk)
        dot_w = masked_softmax(attention_scores(q, k))
    return AdditiveComparison(dot_scores=attention_scores(q, k).numpy(), add_scores=add_s.numpy(),
                              dot_weights=dot_w.numpy(), add_weights=add_w.numpy())


def attention_cost(n_q: int, n_k: int, d_k: int, d_hidden: int) -> dict[str, dict[str, float]]:
    """Multiply-adds and the largest intermediate tensor (values) of the score computation.

    dot: Q K^T is Nq Nk d_k multiply-adds, intermediate Nq Nk.
    additive: projections (Nq + Nk) d_k d_h, then per pair d_h adds + d_h tanh + d_h multiply-adds with v_a;
    intermediate Nq Nk d_h (the hidden layer of every pair)."""
    dot = {"macs": n_q * n_k * d_k, "memory": n_q * n_k}
    add = {"macs": (n_q + n_k) * d_k * d_hidden + 2 * n_q * n_k * d_hidden, "memory": n_q * n_k * d_hidden,
           "tanh": n_q * n_k * d_hidden}
    return {"dot": dot, "additive": add}


SWEEP_NS = tuple(2 ** i for i in range(3, 14))  # sequence lengths of the cost curves: 8 .. 8192


@dataclass
class CostSweep:
    """attention_cost of both methods for N_q = N_k = N over a range of N (d_k, d_h fixed)."""
    n: np.ndarray               # (K,) sequence lengths
    dot_macs: np.ndarray        # (K,) N^2 d_k
    dot_memory: np.ndarray      # (K,) N^2
    additive_macs: np.ndarray   # (K,) 2 N d_k d_h + 2 N^2 d_h
    additive_memory: np.ndarray  # (K,) N^2 d_h (also the number of tanh evaluations)

    def arrays(self) -> dict[str, np.ndarray]:
        """The curves by the names of the download file."""
        return dict(n=self.n, dot_macs=self.dot_macs, additive_macs=self.additive_macs, dot_memory=self.dot_memory,
                    additive_memory=self.additive_memory)


def cost_sweep(d_k: int, d_hidden: int, ns=SWEEP_NS) -> CostSweep:
    """The cost curves: attention_cost(N, N, d_k, d_hidden) for every N in ns, as int64 arrays."""
    costs = [attention_cost(n, n, d_k, d_hidden) for n in ns]

    def column(method: str, what: str) -> np.ndarray:
        return np.array([c[method][what] for c in costs], dtype=np.int64)  # (K,)

    return CostSweep(np.array(ns, dtype=np.int64), column("dot", "macs"), column("dot", "memory"),
                     column("additive", "macs"), column("additive", "memory"))
