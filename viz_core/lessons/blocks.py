"""The parts of a Transformer block that are not attention: norms, the FFN, residual wiring, dropout, label smoothing.

Shapes: B batch, N positions, D = d_model features, K classes. Functions take torch tensors; the teaching
experiments at the bottom return plain numpy data for the figure builders.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..attention import MultiHeadAttention
from ..errors import InputError
from ..runtime.seeding import seeded
from ..runtime.threads import thread_budget


# ================================================================ norms
def _affine(x_hat: torch.Tensor, gamma, beta) -> torch.Tensor:
    """gamma * x_hat + beta (either may be None, a scalar or a (D,) vector)."""
    y = x_hat if gamma is None else x_hat * gamma
    return y if beta is None else y + beta


def layer_norm(x: torch.Tensor, gamma=None, beta=None, eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm (Ba et al. 2016), over the last axis of each token on its own:

    y = gamma * (x - mu) / sqrt(sigma^2 + eps) + beta,  mu and sigma^2 the mean and *biased* variance over D.
    Equals torch.nn.LayerNorm(D, eps).
    """
    mu = x.mean(-1, keepdim=True)                      # (..., 1)
    var = x.var(-1, unbiased=False, keepdim=True)      # (..., 1)
    return _affine((x - mu) / torch.sqrt(var + eps), gamma, beta)  # (..., D)


def std_layer_norm(x: torch.Tensor, gamma=None, beta=None, eps: float = 1e-6) -> torch.Tensor:
    """The study notes' variant: y = gamma * (x - mu) / (s + eps) + beta with s the *unbiased* std (divides by D - 1)
    and eps added to the std instead of the variance. It shrinks outputs by sqrt((D - 1) / D) and treats
    near-constant vectors differently; it is not torch.nn.LayerNorm. Needs D >= 2 (s is undefined for one feature).
    """
    mu = x.mean(-1, keepdim=True)                      # (..., 1)
    s = x.std(-1, unbiased=True, keepdim=True)         # (..., 1)
    return _affine((x - mu) / (s + eps), gamma, beta)  # (..., D)


def rms_norm(x: torch.Tensor, gamma=None, eps: float | None = None) -> torch.Tensor:
    """RMSNorm (Zhang & Sennrich 2019): y = gamma * x / sqrt(mean(x^2) + eps): no centring, no beta.

    eps=None uses torch.finfo(x.dtype).eps, as torch.nn.RMSNorm does.
    """
    eps = torch.finfo(x.dtype).eps if eps is None else eps
    rms = torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)  # (..., 1)
    return _affine(x / rms, gamma, None)


def batch_norm(x: torch.Tensor, gamma=None, beta=None, eps: float = 1e-5,
               valid: torch.Tensor | None = None) -> torch.Tensor:
    """BatchNorm (Ioffe & Szegedy 2015) in training mode for token vectors x (B, N, D): each feature is normalised
    with the mean and biased variance over all B * N positions of the batch, or over the valid ones only when
    valid (B, N) bool is given (padding excluded). With valid=None it equals nn.BatchNorm1d(D) on x.transpose(1, 2).
    """
    w = torch.ones(x.shape[:2], dtype=x.dtype) if valid is None else valid.to(x.dtype)  # (B, N)
    w = w[..., None]                                                  # (B, N, 1)
    count = w.sum((0, 1)).clamp_min(1.0)                              # (D,) broadcast from (1,)
    mu = (x * w).sum((0, 1)) / count                                  # (D,)
    var = ((x - mu).pow(2) * w).sum((0, 1)) / count                   # (D,)
    return _affine((x - mu) / torch.sqrt(var + eps), gamma, beta)     # (B, N, D)


class LayerNorm(nn.Module):
    """Module form of layer_norm with learnable gamma (weight) and beta (bias), like nn.LayerNorm."""

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))   # gamma
        self.bias = nn.Parameter(torch.zeros(d_model))    # beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.weight, self.bias, self.eps)


# ================================================================ FFN and residual wiring
ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class FeedForward(nn.Module):
    """Position-wise feed-forward network (paper eq. 2): FFN(x) = max(0, x W1 + b1) W2 + b2, or GELU instead of
    max(0, .). d_ff defaults to 4 * d_model (512 -> 2048 in the base model). The same weights act on every position.
    """

    def __init__(self, d_model: int, d_ff: int | None = None, activation: str = "relu", dropout: float = 0.0):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.d_ff = 4 * d_model if d_ff is None else d_ff
        self.act = ACTIVATIONS[activation]
        self.w1 = nn.Linear(d_model, self.d_ff)
        self.w2 = nn.Linear(self.d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.w1(x))  # (..., d_ff)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.dropout(self.hidden(x)))  # (..., d_model)


class Residual(nn.Module):
    """One residual connection around a sublayer, with the norm after (post-norm, the paper's
    LayerNorm(x + Dropout(Sublayer(x)))) or before (pre-norm, x + Dropout(Sublayer(LayerNorm(x))))."""

    def __init__(self, d_model: int, norm_first: bool, dropout: float = 0.0):
        super().__init__()
        self.norm_first = norm_first
        self.norm = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)  # sublayer output, before the residual add

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))  # (B, N, D)
        return self.norm(x + self.dropout(sublayer(x)))       # (B, N, D)


class EncoderBlock(nn.Module):
    """Self-attention then FFN, each inside a Residual (pre- or post-norm). With a causal mask this is also the
    block of a decoder-only language model. Matches torch.nn.TransformerEncoderLayer(norm_first=...)."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int | None = None, norm_first: bool = False,
                 dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, bias=True)
        self.ffn = FeedForward(d_model, d_ff, activation, dropout)
        self.res_attn = Residual(d_model, norm_first, dropout)
        self.res_ffn = Residual(d_model, norm_first, dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.res_attn(x, lambda h: self.attn(h, mask=mask)[0])  # (B, N, D)
        return self.res_ffn(x, self.ffn)                             # (B, N, D)


def xavier_init_(module: nn.Module) -> nn.Module:
    """Xavier-uniform weights for every matrix, zero biases (as the Annotated Transformer initialises)."""
    for name, p in module.named_parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
        elif name.endswith("bias") and "norm" not in name:
            nn.init.zeros_(p)
    return module


# ================================================================ dropout
def dropout(x: torch.Tensor, p: float, training: bool = True,
            generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverted dropout: y = x * m / (1 - p), m ~ Bernoulli(1 - p) per element; in eval y = x.

    Dividing by (1 - p) at training time keeps E[y] = x, so nothing needs rescaling at inference.
    Returns (y, keep) with keep the bool mask of surviving elements. p = 1 drops everything (y = 0).
    """
    if not 0.0 <= p <= 1.0:
        raise InputError("anatomy.bad_p", f"dropout probability must be in [0, 1], got {p}", p=p)
    if not training or p == 0.0:
        return x.clone(), torch.ones_like(x, dtype=torch.bool)
    keep = torch.rand(x.shape, generator=generator) >= p  # (same shape as x)
    if p == 1.0:
        return torch.zeros_like(x), keep
    return x * keep / (1.0 - p), keep


# ================================================================ label smoothing
def smoothed_targets(targets: torch.Tensor, n_classes: int, eps: float) -> torch.Tensor:
    """q = (1 - eps) * one_hot(y) + eps / K: eps of the mass spread evenly over all K classes (the true one too),
    the convention of torch.nn.functional.cross_entropy(label_smoothing=eps). targets (B,) -> (B, K)."""
    _check_smoothing(n_classes, eps)
    one_hot = F.one_hot(targets, n_classes).to(torch.float64)  # (B, K)
    return (1.0 - eps) * one_hot + eps / n_classes


def target_distribution(n_classes: int, eps: float, true_class: int = 0) -> np.ndarray:
    """The smoothed target of one example as numpy (K,): 1 - eps + eps/K on the true class, eps/K elsewhere."""
    return smoothed_targets(torch.tensor([true_class]), n_classes, eps)[0].numpy()


def label_smoothing_loss(logits: torch.Tensor, targets: torch.Tensor, eps: float) -> torch.Tensor:
    """Mean over the batch of H(q, p) = -sum_k q_k log p_k, computed from logits with log_softmax, so that
    no probability is ever rounded to 0 and then logged (finite for any finite logits)."""
    q = smoothed_targets(targets, logits.shape[-1], eps).to(logits.dtype)  # (B, K)
    log_p = F.log_softmax(logits, dim=-1)                                   # (B, K)
    return -(q * log_p).sum(-1).mean()


def naive_smoothing_loss(logits: torch.Tensor, targets: torch.Tensor, eps: float) -> torch.Tensor:
    """The unsafe way: log(softmax(z)). A probability that underflows to 0 gives log(0) = -inf, and the loss is
    inf (or nan when eps = 0, from 0 * -inf). Kept only to show the failure next to label_smoothing_loss."""
    q = smoothed_targets(targets, logits.shape[-1], eps).to(logits.dtype)  # (B, K)
    return -(q * torch.log(torch.softmax(logits, dim=-1))).sum(-1).mean()


def _check_smoothing(n_classes: int, eps: float) -> None:
    if n_classes < 2:
        raise InputError("anatomy.bad_classes", f"need at least 2 classes, got {n_classes}", k=n_classes)
    if not 0.0 <= eps <= 1.0:
        raise InputError("anatomy.bad_eps", f"label smoothing must be in [0, 1], got {eps}", eps=eps)


def smoothing_check(n_classes: int, eps: float, batch: int = 8, seed: int = 0) -> tuple[float, float]:
    """(our label_smoothing_loss, torch.nn.functional.cross_entropy(label_smoothing=eps)) on random logits."""
    _check_smoothing(n_classes, eps)
    g = torch.Generator().manual_seed(seed)
    logits = 3 * torch.randn(batch, n_classes, generator=g, dtype=torch.float64)  # (B, K)
    targets = torch.randint(n_classes, (batch,), generator=g)                    # (B,)
    ref = F.cross_entropy(logits, targets, label_smoothing=eps)
    return float(label_smoothing_loss(logits, targets, eps)), float(ref)


def optimal_confidence(n_classes: int, eps: float) -> float:
    """The probability on the true class that minimises the smoothed loss: p = q, so 1 - eps + eps / K."""
    _check_smoothing(n_classes, eps)
    return 1.0 - eps + eps / n_classes


def loss_vs_confidence(n_classes: int, eps: float, confidence: np.ndarray) -> np.ndarray:
    """H(q, p) when the model puts c on the true class and (1 - c) / (K - 1) on each other class (exact, float64).
    At c = 1 the other classes get p = 0: the loss is +inf for eps > 0 and 0 for eps = 0 (0 * log 0 := 0)."""
    _check_smoothing(n_classes, eps)
    c = np.asarray(confidence, dtype=np.float64)
    q_true, q_other = 1.0 - eps + eps / n_classes, eps / n_classes
    with np.errstate(divide="ignore", invalid="ignore"):
        other = np.where(q_other > 0, -(n_classes - 1) * q_other * np.log((1.0 - c) / (n_classes - 1)), 0.0)
    return -q_true * np.log(c) + other


def loss_vs_margin(n_classes: int, eps: float, margins: np.ndarray, dtype=torch.float32) -> dict[str, np.ndarray]:
    """The true class's logit is m, every other logit 0. Returns the confidence softmax(z)_true and the loss
    computed naively (log of softmax) and safely (log_softmax), in dtype (float32: softmax underflows near m = 104)."""
    _check_smoothing(n_classes, eps)
    m = torch.as_tensor(np.asarray(margins, dtype=np.float64), dtype=dtype)          # (M,)
    logits = torch.zeros(len(m), n_classes, dtype=dtype)                             # (M, K)
    logits[:, 0] = m
    targets = torch.zeros(len(m), dtype=torch.long)
    q = smoothed_targets(targets, n_classes, eps).to(dtype)                          # (M, K)
    naive = -(q * torch.log(torch.softmax(logits, -1))).sum(-1)                      # (M,)
    safe = -(q * F.log_softmax(logits, -1)).sum(-1)                                  # (M,)
    return {"margin": m.double().numpy(), "confidence": torch.softmax(logits, -1)[:, 0].double().numpy(),
            "naive": naive.double().numpy(), "safe": safe.double().numpy()}


# ================================================================ teaching experiments (numpy out)
# Each runs with one CPU thread in the calling session only (thread_budget): the tensors are tiny, and on a busy
# machine the threads' spin-waiting made them about 10x slower (measured: 9.6 s -> 0.9 s).
@dataclass(frozen=True)
class NormBatch:
    """A small batch of token vectors for comparing norms."""
    batch: int = 3          # B sentences
    seq_len: int = 4        # N positions each
    d_model: int = 6        # D features
    n_pad: int = 1          # padded positions in every sentence but the first (pad vectors are zeros)
    pad_side: str = "end"   # "end" or "start": where the pads sit (the notes assume the end; both happen)
    seed: int = 0


def make_norm_batch(cfg: NormBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """Token vectors x (B, N, D) with feature j drawn from N(j - D/2, (1 + j/2)^2) so features differ in mean and
    scale (BatchNorm's business), and valid (B, N) bool: False at padded positions, whose vectors are 0."""
    _check_norm_batch(cfg)
    g = torch.Generator().manual_seed(cfg.seed)
    j = torch.arange(cfg.d_model, dtype=torch.float64)
    x = torch.randn(cfg.batch, cfg.seq_len, cfg.d_model, generator=g, dtype=torch.float64)  # (B, N, D)
    x = x * (1.0 + j / 2) + (j - cfg.d_model / 2)
    valid = torch.ones(cfg.batch, cfg.seq_len, dtype=torch.bool)                              # (B, N)
    if cfg.n_pad:
        cols = slice(cfg.seq_len - cfg.n_pad, None) if cfg.pad_side == "end" else slice(0, cfg.n_pad)
        valid[1:, cols] = False
    return x * valid[..., None], valid


def _check_norm_batch(cfg: NormBatch) -> None:
    if cfg.d_model < 2:
        raise InputError("anatomy.bad_d_norm", "d_model must be at least 2 (the unbiased std needs 2 features)")
    if not 0 <= cfg.n_pad < cfg.seq_len:
        raise InputError("anatomy.bad_pads", f"padded positions must be fewer than the sequence length "
                         f"({cfg.seq_len}), got {cfg.n_pad}", n=cfg.seq_len)
    if cfg.pad_side not in ("end", "start"):
        raise InputError("anatomy.bad_pad_side", f"pad_side must be 'end' or 'start', got {cfg.pad_side!r}")


@thread_budget(1)
def compare_norms(cfg: NormBatch, gamma: float = 1.0, beta: float = 0.0) -> dict:
    """All norms on the same batch. Returns numpy arrays: x (B, N, D), valid (B, N), outputs per norm
    (layer, batch, batch_masked, rms, std_variant, torch_layer), and the checks the page reports."""
    x, valid = make_norm_batch(cfg)
    out = {"layer": layer_norm(x, gamma, beta), "rms": rms_norm(x, gamma),
           "batch": batch_norm(x, gamma, beta), "batch_masked": batch_norm(x, gamma, beta, valid=valid),
           "std_variant": std_layer_norm(x, gamma, beta)}
    out["torch_layer"] = _torch_layer_norm(x, gamma, beta)
    alone = batch_norm(x[:1], gamma, beta)  # sentence 0 normalised in a batch of its own
    real = valid[..., None].expand_as(x)
    checks = {
        "torch_max_diff": _max_abs(out["layer"] - out["torch_layer"]),
        "std_max_diff": _max_abs(out["layer"] - out["std_variant"]),
        "std_ratio": math.sqrt((cfg.d_model - 1) / cfg.d_model),
        "bn_pad_shift": _max_abs((out["batch"] - out["batch_masked"])[real]),
        "bn_batch_shift": _max_abs(out["batch"][:1] - alone),
        "ln_batch_shift": _max_abs(out["layer"][:1] - layer_norm(x[:1], gamma, beta)),
        "single_token": cfg.batch * cfg.seq_len == 1,
    }
    arrays = {k: v.detach().numpy() for k, v in out.items()}
    return {"x": x.numpy(), "valid": valid.numpy(), "out": arrays, "checks": checks}


def _torch_layer_norm(x: torch.Tensor, gamma: float, beta: float) -> torch.Tensor:
    ln = nn.LayerNorm(x.shape[-1], dtype=x.dtype)
    with torch.no_grad():
        ln.weight.fill_(gamma)
        ln.bias.fill_(beta)
        return ln(x)


def _max_abs(t: torch.Tensor) -> float:
    return float(t.abs().max()) if t.numel() else 0.0


def norm_statistics(y: np.ndarray, valid: np.ndarray) -> dict[str, np.ndarray]:
    """Mean and (biased) std of y (B, N, D) over features per real token (T,) and over real tokens per feature (D,)."""
    real = y[valid]  # (T, D)
    return {"token_mean": real.mean(1), "token_std": real.std(1),
            "feature_mean": real.mean(0), "feature_std": real.std(0)}


def eps_placement_curve(d_model: int, scales: np.ndarray, eps_correct: float = 1e-5,
                        eps_variant: float = 1e-6) -> dict[str, np.ndarray]:
    """Output std of LayerNorm and of the std variant for an input row [+s, -s, +s, -s, ...] (biased std s),
    over a range of s: the variant sits sqrt((D-1)/D) lower for ordinary s and parts ways near s ~ eps."""
    s = np.asarray(scales, dtype=np.float64)
    row = np.where(np.arange(d_model) % 2 == 0, 1.0, -1.0)
    x = torch.as_tensor(s[:, None] * (row - row.mean()) / row.std())  # (S, D), biased std = s
    return {"scale": s, "layer": layer_norm(x, eps=eps_correct).std(-1, unbiased=False).numpy(),
            "std_variant": std_layer_norm(x, eps=eps_variant).std(-1, unbiased=False).numpy()}


@thread_budget(1)
def norm_placement_at_init(depth: int, d_model: int = 32, n_heads: int = 4, seq_len: int = 8, batch: int = 4,
                           n_classes: int = 16, seeds: tuple[int, ...] = (0, 1, 2)) -> dict[str, np.ndarray]:
    """Pre-norm vs post-norm stacks of `depth` EncoderBlocks at Xavier initialisation (Xiong et al. 2020).

    Per seed, one set of weights wired both ways, and one forward/backward of a cross-entropy loss (random readout,
    random targets) on x ~ N(0, 1) for each wiring; returns
    per layer (depth,), averaged over seeds, for "pre" and "post": the gradient norm of that layer's parameters
    (_grad) and the RMS of the residual stream after it (_act).
    """
    if not 1 <= depth <= 64:
        raise InputError("anatomy.bad_depth", f"depth must be between 1 and 64, got {depth}", depth=depth)
    runs = [_pre_and_post(depth, d_model, n_heads, seq_len, batch, n_classes, s) for s in seeds]
    out = {"layer": np.arange(1, depth + 1)}
    for name in ("pre", "post"):
        out[f"{name}_grad"] = np.mean([r[name][0] for r in runs], axis=0)
        out[f"{name}_act"] = np.mean([r[name][1] for r in runs], axis=0)
    return out


def _pre_and_post(depth, d_model, n_heads, seq_len, batch, n_classes, seed) -> dict:
    """The same Xavier-initialised weights, input and targets, wired first pre-norm, then post-norm."""
    with seeded(seed):
        stack = nn.ModuleList(xavier_init_(EncoderBlock(d_model, n_heads)) for _ in range(depth))
        readout = nn.Linear(d_model, n_classes)
        x = torch.randn(batch, seq_len, d_model)                              # (B, N, D)
        targets = torch.randint(n_classes, (batch, seq_len))                  # (B, N)
    return {name: _grads_and_acts(stack, readout, x, targets, first) for name, first in (("pre", True),
                                                                                         ("post", False))}


def _grads_and_acts(stack: nn.ModuleList, readout: nn.Module, x: torch.Tensor, targets: torch.Tensor,
                    norm_first: bool) -> tuple[np.ndarray, np.ndarray]:
    for module in stack.modules():
        if isinstance(module, Residual):
            module.norm_first = norm_first
    stack.zero_grad(set_to_none=True)
    acts = []
    for block in stack:
        x = block(x)                                                          # (B, N, D)
        acts.append(float(x.detach().pow(2).mean().sqrt()))
    h = layer_norm(x) if norm_first else x                                    # pre-norm stacks end with a norm
    logits = readout(h)                                                       # (B, N, K)
    F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).backward()
    grads = [math.sqrt(sum(float(p.grad.pow(2).sum()) for p in b.parameters())) for b in stack]
    return np.array(grads), np.array(acts)


@thread_budget(1)
def ffn_demo(d_model: int, mult: int = 4, activation: str = "relu", n_tokens: int = 6, seed: int = 0) -> dict:
    """One FFN on n_tokens random token vectors: hidden activations (N, d_ff), their share of exact zeros, and the
    position-wise check: running the whole sequence equals running each token alone (max difference)."""
    if d_model < 1 or mult < 1:
        raise InputError("anatomy.bad_ffn", "d_model and the d_ff multiplier must be at least 1")
    with seeded(seed):
        ffn = xavier_init_(FeedForward(d_model, mult * d_model, activation)).double().eval()
        x = torch.randn(n_tokens, d_model, dtype=torch.float64)               # (N, D)
    with torch.no_grad():
        h, y = ffn.hidden(x), ffn(x)                                          # (N, d_ff), (N, D)
        one_by_one = torch.stack([ffn(x[i]) for i in range(n_tokens)])        # (N, D)
    return {"x": x.numpy(), "hidden": h.numpy(), "y": y.numpy(), "zero_share": float((h == 0).double().mean()),
            "positionwise_diff": _max_abs(y - one_by_one)}


def block_parameter_split(d_model: int, d_ff: int, decoder: bool = False) -> dict[str, int]:
    """Parameters of one block by part (with biases): attention 4 (D^2 + D) per attention sublayer (the decoder has
    two: self and cross), FFN 2 D d_ff + d_ff + D, LayerNorm 2 D per residual."""
    n_attn = 2 if decoder else 1
    return {"attention": n_attn * 4 * (d_model * d_model + d_model),
            "ffn": 2 * d_model * d_ff + d_ff + d_model,
            "norm": (n_attn + 1) * 2 * d_model}


@thread_budget(1)
def dropout_places_demo(p: float, training: bool, n_tokens: int = 5, d_model: int = 8, seed: int = 0) -> dict:
    """Dropout at its three places in a Transformer, on small random tensors: the attention weights (N, N) after
    softmax, a sublayer output (N, D) before the residual add, and embeddings + positions (N, D).
    Returns per place: before, after, keep mask (numpy)."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(n_tokens, n_tokens, generator=g)
    tensors = {"attention": torch.softmax(scores, -1),                        # (N, N)
               "sublayer": torch.randn(n_tokens, d_model, generator=g),       # (N, D)
               "embedding": torch.randn(n_tokens, d_model, generator=g)}      # (N, D)
    out = {}
    for place, t in tensors.items():
        y, keep = dropout(t, p, training, generator=g)
        out[place] = {"before": t.numpy(), "after": y.numpy(), "keep": keep.numpy()}
    return out


@thread_budget(1)
def dropout_statistics(p: float, n_draws: int = 2000, size: int = 256, seed: int = 0) -> dict[str, np.ndarray]:
    """Per draw (n_draws,): kept fraction and mean output / mean input for our dropout and torch.nn.Dropout on the
    same all-ones input of `size` elements. Both should centre on 1 - p and 1. "step": spacing of the ratio's values.
    Needs p < 1."""
    g = torch.Generator().manual_seed(seed)
    x = torch.ones(n_draws, size)                                             # (draws, size)
    ours, keep = dropout(x, p, True, generator=g)
    with seeded(seed):
        ref = nn.Dropout(p).train()(x)                                        # (draws, size)
    return {"ours_keep": keep.double().mean(1).numpy(), "ours_mean": ours.double().mean(1).numpy(),
            "torch_keep": (ref != 0).double().mean(1).numpy(), "torch_mean": ref.double().mean(1).numpy(),
            "step": np.array(1.0 / (size * (1.0 - p)))}


def activation_curves(lo: float = -4.0, hi: float = 4.0, n: int = 161) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """ReLU(x) = max(0, x) and GELU(x) = x * Phi(x) on a grid, for drawing."""
    x = torch.linspace(lo, hi, n, dtype=torch.float64)
    return x.numpy(), {name: fn(x).numpy() for name, fn in (("ReLU", F.relu), ("GELU", F.gelu))}
