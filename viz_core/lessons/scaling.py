"""Why attention divides by sqrt(d_k): the statistics of q.k, softmax saturation, and the gradient that survives it.

For q, k ~ N(0, I_{d_k}) with independent components,
    E[q.k] = 0,   Var(q.k) = sum_i Var(q_i k_i) = d_k,   so   Var(q.k / sqrt(d_k)) = 1
(Vaswani et al. 2017, section 3.2.1 and footnote 4). Large logits push softmax towards a one-hot vector, where its
Jacobian diag(p) - p p^T is nearly zero and little gradient flows back to the queries and keys.

Part 4 of the page trains the same tiny attention model with and without the scale (train_experiment).
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..attention import scaled_dot_product_attention
from ..runtime.device import DeviceBatches
from ..errors import InputError
from ..runtime.seeding import seeded
from ..runtime.threads import thread_budget

DK_GRID = tuple(2 ** i for i in range(13))  # the d_k values the page sweeps: 1, 2, 4, ..., 4096
MAX_DK = 65_536            # largest d_k accepted by the public functions
MAX_SAMPLES = 1_000_000    # largest number of samples accepted
MAX_WORK = 400_000_000     # bound on d_k * n_samples (about a second of random numbers)
MAX_KEYS = 4096            # longest softmax row accepted
_BLOCK = 64                # q and k are drawn 64 dimensions at a time, so every d_k reuses the same draws
SATURATION_MAX_P = 0.9     # "saturated": the mean largest weight of a row is at least this


# ---------------------------------------------------------------- validation
def _check_int(value, name: str, lo: int, hi: int) -> int:
    """value as an int in [lo, hi], else an InputError that says the allowed range."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InputError("scaling.bad_int", f"{name} must be a whole number, got {value!r}", name=name, lo=lo, hi=hi)
    if not lo <= int(value) <= hi:
        raise InputError("scaling.out_of_range", f"{name} must be between {lo} and {hi}, got {value}",
                         name=name, lo=lo, hi=hi, value=int(value))
    return int(value)


def _check_positive(value, name: str, lo: float, hi: float) -> float:
    """value as a finite float in [lo, hi]."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise InputError("scaling.bad_number", f"{name} must be a number, got {value!r}", name=name) from None
    if not (np.isfinite(value) and lo <= value <= hi):
        raise InputError("scaling.out_of_range", f"{name} must be between {lo} and {hi}, got {value}",
                         name=name, lo=lo, hi=hi, value=value)
    return value


def _check_work(d_k: int, n: int) -> None:
    if d_k * n > MAX_WORK:
        raise InputError("scaling.too_much_work", f"d_k x n_samples = {d_k * n} is above {MAX_WORK}; "
                         "use fewer samples or a smaller d_k", work=d_k * n, limit=MAX_WORK)


# ---------------------------------------------------------------- part 1: Var(q.k)
def dot_product_samples_multi(d_ks: Sequence[int], n_samples: int = 10_000, seed: int = 0) -> np.ndarray:
    """Samples of q.k = sum_i q_i k_i for q, k ~ N(0, I_{d_k}), for several d_k from ONE stream of draws.

    Dimensions are drawn in fixed blocks, so the samples for d_k are exactly the first d_k coordinates of the
    draws for any larger d_k: dot_product_samples(d) equals this function's row for d, bit for bit.
    Returns float64 (len(d_ks), n_samples), unscaled.
    """
    d_ks = [_check_int(d, "d_k", 1, MAX_DK) for d in d_ks] or [_check_int(None, "d_k", 1, MAX_DK)]
    n = _check_int(n_samples, "n_samples", 2, MAX_SAMPLES)
    _check_work(max(d_ks), n)
    gen = torch.Generator().manual_seed(int(seed))
    out = np.empty((len(d_ks), n))                                         # (D, n)
    total = torch.zeros(n, dtype=torch.float64)                            # running sum over finished blocks
    # One thread (this session's only): for these small tensors thread hand-offs cost more than they save, and on a
    # busy shared CPU several times more (the d_k = 1..4096 sweep: 8.6 s with 2 threads, 3.0 s with 1).
    with thread_budget(1):
        for start in range(0, max(d_ks), _BLOCK):
            q = torch.randn(_BLOCK, n, generator=gen)                      # (block, n)
            k = torch.randn(_BLOCK, n, generator=gen)                      # (block, n)
            partial = (q * k).double().cumsum(0)                           # (block, n): prefix sums in the block
            for i, d in enumerate(d_ks):
                if start < d <= start + _BLOCK:
                    out[i] = (total + partial[d - start - 1]).numpy()
            total += partial[-1]
    return out


def dot_product_samples(d_k: int, n_samples: int = 10_000, seed: int = 0) -> np.ndarray:
    """n_samples values of q.k for q, k ~ N(0, I_{d_k}), unscaled: float64 (n_samples,)."""
    return dot_product_samples_multi([d_k], n_samples, seed)[0]


def dot_product_variance(d_k: int, scaled: bool = False, n_samples: int = 10_000, seed: int = 0) -> float:
    """Empirical Var(q.k) (or Var(q.k / sqrt(d_k)) when scaled) for q, k ~ N(0, I_{d_k}).

    Theory: d_k unscaled, 1 scaled. Unbiased sample variance (ddof=1) of n_samples seeded draws.
    """
    x = dot_product_samples(d_k, n_samples, seed)                          # (n_samples,)
    if scaled:
        x = x / np.sqrt(d_k)
    return float(np.var(x, ddof=1))


@dataclass(frozen=True)
class VarianceSweep:
    """q.k samples for a grid of d_k, with their measured variances (unscaled: theory d_k; scaled: theory 1)."""
    d_ks: np.ndarray          # (D,) int
    samples: np.ndarray       # (D, n_samples) unscaled q.k

    @property
    def var_unscaled(self) -> np.ndarray:
        return self.samples.var(axis=1, ddof=1)                            # (D,)

    @property
    def var_scaled(self) -> np.ndarray:
        return self.var_unscaled / self.d_ks                               # Var(x / sqrt(d)) = Var(x) / d

    def index(self, d_k: int) -> int:
        hits = np.flatnonzero(self.d_ks == d_k)
        if not hits.size:
            raise InputError("scaling.dk_not_in_grid", f"d_k={d_k} is not in the sweep", d_k=d_k)
        return int(hits[0])


def variance_sweep(d_ks: Sequence[int] = DK_GRID, n_samples: int = 10_000, seed: int = 0) -> VarianceSweep:
    """Var(q.k) measured at every d_k of the grid (one shared stream of draws, see dot_product_samples_multi)."""
    d_ks = sorted({_check_int(d, "d_k", 1, MAX_DK) for d in d_ks})
    return VarianceSweep(np.asarray(d_ks), dot_product_samples_multi(d_ks, n_samples, seed))


def normal_pdf(x: np.ndarray, variance: float) -> np.ndarray:
    """Density of N(0, variance): the theoretical curve drawn over the histograms."""
    return np.exp(-0.5 * x ** 2 / variance) / np.sqrt(2 * np.pi * variance)


# ---------------------------------------------------------------- part 2: softmax saturation
def softmax(logits: np.ndarray) -> np.ndarray:
    """Row softmax along the last axis, stable for any logit size: exp(z - max z) / sum exp(z - max z)."""
    z = np.asarray(logits, dtype=np.float64)
    e = np.exp(z - z.max(axis=-1, keepdims=True))                         # (..., N)
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    shifted = z - z.max(axis=-1, keepdims=True)                            # (..., N)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def softmax_jacobian(p: np.ndarray) -> np.ndarray:
    """J = d softmax(z) / d z = diag(p) - p p^T, for p (..., N) -> (..., N, N)."""
    p = np.asarray(p, dtype=np.float64)
    return p[..., :, None] * np.eye(p.shape[-1]) - p[..., :, None] * p[..., None, :]  # (..., N, N)


def jacobian_frobenius(p: np.ndarray) -> np.ndarray:
    """||diag(p) - p p^T||_F of a probability vector p without building J and without cancellation, (..., N) -> (...,).

    From J_ii = p_i (1 - p_i) and J_ij = -p_i p_j (i != j):

        ||J||_F^2 = sum_i p_i^2 (1 - p_i)^2 + sum_i p_i^2 (S_2 - p_i^2),   S_2 = sum_j p_j^2,

    two sums of non-negative terms. The expanded form sum p^2 - 2 sum p^3 + (sum p^2)^2 subtracts numbers close to
    1 when one weight takes almost everything, and returns an exact 0 where the true norm is 7e-11. Here the two
    differences are never formed by cancelling subtraction: for the largest entry m, 1 - p_m = sum_{j != m} p_j and
    S_2 - p_m^2 = sum_{j != m} p_j^2 are summed from the small entries themselves; for every other entry
    p_i <= 1/2 and p_i^2 <= S_2 / 2, so 1 - p_i and S_2 - p_i^2 lose at most one bit. Relative error ~1e-15 at any
    saturation. 0 for a one-hot p; sqrt(N-1)/N for the uniform p.
    """
    p = np.asarray(p, dtype=np.float64)
    is_max = np.arange(p.shape[-1]) == p.argmax(-1)[..., None]             # (..., N): one True per row
    rest = np.where(is_max, 0.0, p)                                        # (..., N) every entry but the largest
    rest1 = rest.sum(-1, keepdims=True)                                    # (..., 1) 1 - p_m
    rest2 = (rest ** 2).sum(-1, keepdims=True)                             # (..., 1) S_2 - p_m^2
    s2 = rest2 + (p * is_max).sum(-1, keepdims=True) ** 2                  # (..., 1) S_2
    complement = np.where(is_max, rest1, 1.0 - p)                          # (..., N) 1 - p_i
    others = np.where(is_max, rest2, s2 - p ** 2)                          # (..., N) sum_{j != i} p_j^2
    return np.sqrt((p ** 2 * (complement ** 2 + others)).sum(-1))


@dataclass(frozen=True)
class SoftmaxStats:
    """Per-row statistics of softmax(z): largest weight, entropy (nats), ||J||_F. Each (...,)."""
    max_p: np.ndarray
    entropy: np.ndarray
    jacobian_norm: np.ndarray


def softmax_stats(logits: np.ndarray) -> SoftmaxStats:
    """max_j p_j, H(p) = -sum p log p (0 log 0 = 0), and ||diag(p) - p p^T||_F of p = softmax(logits) per row."""
    logp = log_softmax(logits)                                             # (..., N)
    p = np.exp(logp)
    entropy = -(p * logp).sum(-1)
    return SoftmaxStats(p.max(-1), np.maximum(entropy, 0.0), jacobian_frobenius(p))


def uniform_reference(n_keys: int) -> SoftmaxStats:
    """The statistics of the flattest row (all weights 1/N): max 1/N, entropy log N, ||J||_F = sqrt(N-1)/N."""
    n = _check_int(n_keys, "N", 1, MAX_KEYS)
    return SoftmaxStats(np.asarray(1.0 / n), np.asarray(np.log(n)), np.asarray(np.sqrt(n - 1) / n))


def logit_rows(d_k: int, n_keys: int, n_rows: int, seed: int = 0, normals: np.ndarray | None = None) -> np.ndarray:
    """n_rows rows of N logits z_j = q.k_j for one q and N keys, all ~ N(0, I_{d_k}); unscaled, (n_rows, N).

    Exact in distribution without drawing d_k-dimensional vectors: given q, the z_j are independent N(0, |q|^2),
    and |q|^2 ~ chi^2(d_k). So z = sqrt(chi^2_{d_k}) * g with g ~ N(0, I_N). normals: optional g to share
    between several d_k (common random numbers give smooth curves over d_k).
    """
    d_k = _check_int(d_k, "d_k", 1, MAX_DK)
    rng = np.random.default_rng([int(seed), d_k])
    g = rng.standard_normal((n_rows, n_keys)) if normals is None else normals  # (n_rows, N)
    norm_q = np.sqrt(rng.chisquare(d_k, size=(n_rows, 1)))                      # (n_rows, 1) = |q|
    return norm_q * g


def example_row(d_k: int, n_keys: int, seed: int = 0) -> np.ndarray:
    """One row of logits drawn literally: q (d_k,), K (N, d_k) ~ N(0, I), z = K q, unscaled (N,)."""
    d_k = _check_int(d_k, "d_k", 1, MAX_DK)
    n = _check_int(n_keys, "N", 1, MAX_KEYS)
    rng = np.random.default_rng(int(seed))
    q = rng.standard_normal(d_k)                                           # (d_k,)
    keys = rng.standard_normal((n, d_k))                                   # (N, d_k)
    return keys @ q                                                        # (N,)


def row_logits(z: np.ndarray, d_k: int, scaled: bool, temperature: float = 1.0) -> np.ndarray:
    """What softmax sees: z / (sqrt(d_k) * T) when scaled, z / T otherwise."""
    return z / ((np.sqrt(d_k) if scaled else 1.0) * temperature)


@dataclass(frozen=True)
class SaturationSweep:
    """Mean softmax statistics over rows of N logits, for each d_k, unscaled (index 0) and scaled (index 1)."""
    d_ks: np.ndarray          # (D,)
    n_keys: int
    temperature: float
    max_p: np.ndarray         # (2, D)
    entropy: np.ndarray       # (2, D)
    jacobian_norm: np.ndarray  # (2, D)


@dataclass(frozen=True)
class SaturationConfig:
    n_keys: int = 16            # N: logits per row (keys per query)
    temperature: float = 1.0    # T: softmax(z / T); T > 1 flattens, T < 1 sharpens
    n_rows: int = 2000          # rows averaged per d_k
    seed: int = 0


def rows_for(n_keys: int, budget: int = 64_000, lo: int = 250, hi: int = 2000) -> int:
    """Rows to average per d_k for rows of length N: hi, fewer for long rows so that a sweep costs about the same
    for every N (never fewer than lo; a long row averages over many weights already)."""
    return int(min(hi, max(lo, budget // max(n_keys, 1))))


def saturation_sweep(cfg: SaturationConfig = SaturationConfig(), d_ks: Sequence[int] = DK_GRID) -> SaturationSweep:
    """Average max p, entropy and ||J||_F of softmax(q.K^T / (s T)), s = 1 (unscaled) or sqrt(d_k) (scaled)."""
    n = _check_int(cfg.n_keys, "N", 2, MAX_KEYS)
    rows = _check_int(cfg.n_rows, "rows", 1, 100_000)
    temp = _check_positive(cfg.temperature, "T", 1e-3, 1e3)
    d_ks = np.asarray(sorted({_check_int(d, "d_k", 1, MAX_DK) for d in d_ks}))
    g = np.random.default_rng(int(cfg.seed)).standard_normal((rows, n))       # (rows, N), shared by every d_k
    stats = np.empty((3, 2, len(d_ks)))                                        # (stat, unscaled/scaled, D)
    for j, d in enumerate(d_ks):
        z = logit_rows(int(d), n, rows, cfg.seed, normals=g)                   # (rows, N)
        for s, scaled in enumerate((False, True)):
            row = softmax_stats(row_logits(z, int(d), scaled, temp))
            stats[:, s, j] = row.max_p.mean(), row.entropy.mean(), row.jacobian_norm.mean()
    return SaturationSweep(d_ks, n, temp, stats[0], stats[1], stats[2])


def saturation_onset(d_ks: np.ndarray, max_p: np.ndarray, threshold: float = SATURATION_MAX_P) -> int | None:
    """The smallest d_k whose mean largest weight reaches threshold (None if it never does in the grid)."""
    hits = np.flatnonzero(np.asarray(max_p) >= threshold)
    return int(np.asarray(d_ks)[hits[0]]) if hits.size else None


# ---------------------------------------------------------------- part 3: a real model's q and k
@dataclass(frozen=True)
class HeadScores:
    """One head's raw scores q.k and the attention they give with and without 1/sqrt(d_k)."""
    d_k: int
    raw: np.ndarray             # (N, N) q_i . k_j
    scaled: np.ndarray          # (N, N) q_i . k_j / sqrt(d_k)
    weights_raw: np.ndarray     # (N, N) softmax over keys of raw
    weights_scaled: np.ndarray  # (N, N) softmax over keys of scaled: what the model computes
    stats_raw: SoftmaxStats     # per query row, (N,)
    stats_scaled: SoftmaxStats


def head_scores(q: np.ndarray, k: np.ndarray, head: int) -> HeadScores:
    """S = Q_h K_h^T for head h of q, k (H, N, d_k); softmax(S) and softmax(S / sqrt(d_k)) row by row."""
    q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    if q.ndim != 3 or q.shape != k.shape:
        raise InputError("scaling.bad_qk", f"q and k must both be (H, N, d_k), got {q.shape} and {k.shape}")
    h = _check_int(head, "head", 0, q.shape[0] - 1)
    d_k = q.shape[-1]
    raw = q[h] @ k[h].T                                                    # (N, N)
    scaled = raw / np.sqrt(d_k)                                            # (N, N)
    return HeadScores(d_k, raw, scaled, softmax(raw), softmax(scaled), softmax_stats(raw), softmax_stats(scaled))


def max_abs_difference(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b|: how closely our softmax(QK^T / sqrt(d_k)) reproduces the model's own weights."""
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


# ---------------------------------------------------------------- part 4: the same tiny model, trained twice
@dataclass(frozen=True)
class ExperimentConfig:
    d_k: int = 512             # width of queries and keys: the large d_k under test
    d_model: int = 32          # embedding width before the q/k/v projections
    n_symbols: int = 64        # distinct key symbols
    n_values: int = 32         # value classes; a model that has learnt nothing scores loss log(32) = 3.47
    n_pairs: int = 16          # key/value pairs per example: the attention row length N
    batch: int = 64            # examples per step
    steps: int = 300           # Adam steps per run
    lr: float = 3e-3           # Adam learning rate
    seed: int = 0              # same initial weights and the same batches for both runs
    max_seconds: float = 10.0  # wall-clock bound for both runs together; a run that hits it stops early


def check_experiment(cfg: ExperimentConfig) -> ExperimentConfig:
    """Bounds that keep one experiment within seconds on a CPU."""
    _check_int(cfg.d_k, "d_k", 1, 4096)
    _check_int(cfg.d_model, "d_model", 1, 256)
    _check_int(cfg.n_values, "values", 2, 1024)
    _check_int(cfg.n_pairs, "N", 1, 256)
    _check_int(cfg.n_symbols, "symbols", cfg.n_pairs, 4096)
    _check_int(cfg.batch, "batch", 1, 1024)
    _check_int(cfg.steps, "steps", 1, 2000)
    _check_positive(cfg.lr, "lr", 1e-6, 1.0)
    _check_positive(cfg.max_seconds, "max_seconds", 0.1, 120.0)
    return cfg


class LookupAttention(torch.nn.Module):
    """One attention head that must find, among N (key, value) pairs, the value stored under the query's key.

    q = W_q E[query], k_j = W_k E[key_j], v_j = W_v F[value_j]; out = Attention(q, K, V) (scaled or not);
    logits = W_o out. It can only succeed by putting its attention on the matching key.
    """

    def __init__(self, cfg: ExperimentConfig, scale: bool):
        super().__init__()
        self.scale = scale
        self.key_emb = torch.nn.Embedding(cfg.n_symbols, cfg.d_model)
        self.value_emb = torch.nn.Embedding(cfg.n_values, cfg.d_model)
        self.q_proj = torch.nn.Linear(cfg.d_model, cfg.d_k, bias=False)
        self.k_proj = torch.nn.Linear(cfg.d_model, cfg.d_k, bias=False)
        self.v_proj = torch.nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.out = torch.nn.Linear(cfg.d_model, cfg.n_values)

    def forward(self, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor):
        """query (B,), keys (B, N), values (B, N) -> (logits (B, n_values), weights (B, N))."""
        table = self.key_emb.weight                                        # (n_symbols, d_model)
        # project the symbol table once, then look rows up: the same as projecting every embedded token, cheaper
        q = F.embedding(query, self.q_proj(table))[:, None]                # (B, 1, d_k)
        k = F.embedding(keys, self.k_proj(table))                          # (B, N, d_k)
        v = self.v_proj(self.value_emb(values))                            # (B, N, d_model)
        out, weights = scaled_dot_product_attention(q, k, v, scale=self.scale)  # (B, 1, d_model), (B, 1, N)
        return self.out(out[:, 0]), weights[:, 0]                          # (B, n_values), (B, N)


def lookup_batch(cfg: ExperimentConfig, gen: torch.Generator, batch: int | None = None):
    """N distinct key symbols with random values; the query is one of the keys, the target its value.

    Returns query (B,), keys (B, N), values (B, N), target (B,).
    """
    b = batch or cfg.batch
    keys = torch.rand(b, cfg.n_symbols, generator=gen).argsort(-1)[:, :cfg.n_pairs]  # (B, N) distinct symbols
    values = torch.randint(0, cfg.n_values, (b, cfg.n_pairs), generator=gen)         # (B, N)
    pick = torch.randint(0, cfg.n_pairs, (b, 1), generator=gen)                      # (B, 1)
    return keys.gather(1, pick)[:, 0], keys, values, values.gather(1, pick)[:, 0]


@dataclass(frozen=True)
class RunResult:
    """One training run: per-step training loss and gradient size, and held-out results."""
    scale: bool
    loss: np.ndarray           # (steps_done,) cross-entropy per step
    max_weight: np.ndarray     # (steps_done,) mean largest attention weight of the step's batch (1 = one-hot)
    accuracy: float            # held-out accuracy after training
    init_max_weight: float     # held-out mean largest attention weight before training
    final_max_weight: float    # ... and after
    seconds: float
    truncated: bool            # stopped by the time bound before cfg.steps


@dataclass(frozen=True)
class ExperimentResult:
    config: ExperimentConfig
    unscaled: RunResult
    scaled: RunResult


def _evaluate(model: LookupAttention, batch) -> tuple[float, float]:
    """(accuracy, mean largest attention weight) on a fixed batch."""
    query, keys, values, target = batch
    with torch.no_grad():
        logits, weights = model(query, keys, values)
    return float((logits.argmax(-1) == target).float().mean()), float(weights.max(-1).values.mean())


def train_run(cfg: ExperimentConfig, scale: bool, max_seconds: float | None = None,
              device: torch.device | str = "cpu") -> RunResult:
    """Train LookupAttention with Adam for cfg.steps (or until max_seconds), seeded: same cfg, same result.

    On any device in float32: the experiment is about the size of q.k, which bf16 would round to 3 digits. The
    weights start on the CPU (the same initial weights everywhere) and the batches come from a CPU generator."""
    check_experiment(cfg)
    device = torch.device(device)
    with seeded(cfg.seed):
        model = LookupAttention(cfg, scale).to(device)                    # same initial weights for both runs
    data = torch.Generator().manual_seed(cfg.seed + 1)
    batches = DeviceBatches(lambda: lookup_batch(cfg, data), device)
    held_out = tuple(x.to(device) for x in lookup_batch(cfg, torch.Generator().manual_seed(cfg.seed + 2), batch=1024))
    init_max = _evaluate(model, held_out)[1]
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    losses, max_w, start = [], [], time.perf_counter()
    limit = cfg.max_seconds if max_seconds is None else max_seconds
    for _ in range(cfg.steps):
        query, keys, values, target = batches.next()
        logits, weights = model(query, keys, values)                      # (B, n_values), (B, N)
        loss = F.cross_entropy(logits, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())                                      # () each, on the device
        max_w.append(weights.detach().max(-1).values.mean())
        if time.perf_counter() - start > limit:
            break
    curves = torch.stack([torch.stack(losses), torch.stack(max_w)]).cpu().numpy()  # (2, steps_done): one copy
    accuracy, final_max = _evaluate(model, held_out)
    return RunResult(scale, curves[0].astype(np.float64), curves[1].astype(np.float64), accuracy, init_max,
                     final_max, time.perf_counter() - start, curves.shape[1] < cfg.steps)


def train_experiment(cfg: ExperimentConfig = ExperimentConfig(), device: torch.device | str = "cpu"
                     ) -> ExperimentResult:
    """The same model, data and seed trained twice: scores q.k (unscaled) and q.k / sqrt(d_k) (scaled).

    Each run gets half of cfg.max_seconds, single-threaded in this session's thread only (viz_core.runtime.threads). Denormals are flushed to zero while
    it runs: probabilities below 1e-38 become 0, which changes no curve visibly but makes the unscaled (saturated)
    run about twice as fast.
    """
    check_experiment(cfg)
    half = cfg.max_seconds / 2
    torch.set_flush_denormal(True)  # a saturated softmax is full of denormal floats, which are slow on CPUs
    try:
        with thread_budget(1):
            return ExperimentResult(cfg, train_run(cfg, False, half, device), train_run(cfg, True, half, device))
    finally:
        torch.set_flush_denormal(False)  # torch's default (it has no getter to restore from)
