"""Generation token by token, with and without the KV cache: sampling filters, a trace of every step (its
next-token distribution and attention row), a proof that the cache changes nothing, and timings.

Sampling (Holtzman et al. 2020 for top-p):
    p = softmax(z / T);  keep the k most likely (top-k) and the smallest set whose mass reaches p (top-p);
    renormalise and draw.  T = 0 means greedy: argmax z.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from .model import DecoderLM


# ---------------------------------------------------------------- sampling
def check_sampling(temperature: float, top_k: int, top_p: float) -> None:
    """ValueError unless temperature >= 0, top_k >= 0 and 0 < top_p <= 1 (top_p = 0 would keep no token at all,
    and its renormalisation would divide by zero)."""
    if not temperature >= 0:  # also refuses NaN
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if top_k < 0:
        raise ValueError(f"top_k must be >= 0 (0 = no top-k filter), got {top_k}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1] (1 = no top-p filter), got {top_p}")


def sampling_probs(logits: torch.Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """The distribution the next token is drawn from: logits (V,) -> probabilities (V,), non-negative, summing to 1.

        p = softmax((z - max z) / T)   (the shift changes nothing but keeps a tiny T from overflowing)
        top-k keeps the k largest p (ties at the k-th value included); top-p keeps the smallest prefix of the sorted
        p whose mass reaches top_p (always at least the most likely token); the kept p are renormalised.

    temperature 0 gives a one-hot argmax; top_k 0 and top_p 1 switch those filters off. A logit of -inf is a token
    that is never drawn. ValueError for temperature < 0, top_k < 0, top_p outside (0, 1] (see check_sampling), and
    for logits holding NaN or +inf or no finite value at all."""
    check_sampling(temperature, top_k, top_p)
    if logits.isnan().any() or (logits == float("inf")).any() or not torch.isfinite(logits).any():
        raise ValueError("the logits hold NaN or infinite values: the model's weights are broken")
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(), logits.numel()).to(logits.dtype)  # (V,)
    probs = torch.softmax((logits - logits.max()) / temperature, dim=-1)  # (V,)
    keep = torch.ones_like(probs, dtype=torch.bool)
    if 0 < top_k < probs.numel():
        keep &= probs >= torch.topk(probs, top_k).values[-1]
    if top_p < 1.0:
        order = torch.argsort(probs, descending=True)
        before = torch.cumsum(probs[order], dim=0) - probs[order]  # mass of the more likely tokens
        nucleus = torch.zeros_like(keep)
        nucleus[order] = before < top_p  # the smallest prefix whose mass reaches top_p
        keep &= nucleus
    probs = probs * keep
    return probs / probs.sum()


# ---------------------------------------------------------------- the prompt
PROMPT_MAX_CHARS = 5_000  # a prompt box holds a few paragraphs; a longer text is cut here, and the page says so


def context_window(prompt: list[int], max_len: int, n_new: int) -> list[int]:
    """The end of a prompt that leaves room for n_new tokens in the model's max_len positions (at least its last
    token): a long prompt is continued from where it stops."""
    keep = max(1, max_len - max(0, n_new))
    return list(prompt[-keep:])


# ---------------------------------------------------------------- trace
@dataclass
class GenStep:
    token: int                # the token chosen at this step
    probs: np.ndarray         # (V,) the model's softmax(z / T) before the filters
    sampled: np.ndarray       # (V,) the filtered distribution the token was drawn from
    attention: np.ndarray     # (L, H, T) the new token's attention row over every token so far


@dataclass
class GenTrace:
    prompt: list[int]
    steps: list[GenStep] = field(default_factory=list)
    cache_shapes: list[list[tuple[int, ...]]] = field(default_factory=list)  # per step: each layer's K shape
    cache_bytes: list[int] = field(default_factory=list)                      # per step: bytes of all K and V

    @property
    def ids(self) -> list[int]:
        return self.prompt + [s.token for s in self.steps]


@torch.inference_mode()
def generate(model: DecoderLM, prompt: list[int], n_new: int, temperature: float = 1.0, top_k: int = 0,
             top_p: float = 1.0, seed: int = 0, use_cache: bool = True, never: tuple[int, ...] = ()) -> GenTrace:
    """Append up to n_new tokens to prompt (stopping at max_len), recording each step (see GenTrace). Tokens in
    `never` (e.g. the unknown token) are never drawn; the trace's probs still show the model's own distribution.
    ValueError for sampling settings that define no distribution (see check_sampling) or an empty prompt."""
    check_sampling(temperature, top_k, top_p)
    if not prompt:
        raise ValueError("the prompt must hold at least one token")
    gen = torch.Generator().manual_seed(seed)
    trace = GenTrace(list(prompt))
    n_new = max(0, min(n_new, model.cfg.max_len - len(prompt)))
    cache = model.new_cache() if use_cache else None
    feed = torch.tensor([prompt])  # (1, N) the whole prompt first, then one token at a time
    for _ in range(n_new):
        logits, maps = model(feed if use_cache else torch.tensor([trace.ids]), cache=cache, capture=True)
        z = logits[0, -1]  # (V,)
        allowed = z.index_fill(0, torch.tensor(never, dtype=torch.long), float("-inf")) if never else z  # (V,)
        sampled = sampling_probs(allowed, temperature, top_k, top_p)
        token = int(torch.multinomial(sampled, 1, generator=gen)) if temperature > 0 else int(allowed.argmax())
        rows = torch.stack([maps[f"blocks.{i}.attn"][0, :, -1] for i in range(model.cfg.n_layers)])  # (L, H, T)
        probs = torch.softmax((z - z.max()) / temperature, -1) if temperature > 0 else torch.softmax(z, -1)  # (V,)
        trace.steps.append(GenStep(token, probs.numpy(), sampled.numpy(), rows.numpy()))
        if cache is not None:
            trace.cache_shapes.append(cache.shapes())
            trace.cache_bytes.append(cache.nbytes())
        feed = torch.tensor([[token]])  # (1, 1)
    return trace


# ---------------------------------------------------------------- cache == recomputation
@torch.inference_mode()
def cache_difference(model: DecoderLM, ids: list[int]) -> float:
    """max |logits with the cache - logits of a full recomputation| over every position of ids, feeding the
    first token alone and then one token at a time through the cache."""
    full, _ = model(torch.tensor([ids]))  # (1, N, V)
    cache = model.new_cache()
    steps = [model(torch.tensor([[t]]), cache=cache)[0] for t in ids]  # N x (1, 1, V)
    return float((torch.cat(steps, dim=1) - full).abs().max())


# ---------------------------------------------------------------- timing
@torch.inference_mode()
def time_per_token(model: DecoderLM, lengths: list[int], use_cache: bool, repeats: int = 5) -> list[float]:
    """Seconds to produce one new token when `length` tokens are already there, for each length.

    Without the cache the model recomputes all length + 1 positions; with it, one position against the cached
    keys and values (the cache is filled beforehand and not timed)."""
    out = []
    for n in lengths:
        n = max(1, min(n, model.cfg.max_len - 1))
        ids = torch.randint(0, model.cfg.vocab, (1, n + 1), generator=torch.Generator().manual_seed(0))
        out.append(_best_time(lambda: _one_token(model, ids, use_cache), repeats))
    return out


def _one_token(model: DecoderLM, ids: torch.Tensor, use_cache: bool):
    if not use_cache:
        return lambda: model(ids)
    cache = model.new_cache()
    model(ids[:, :-1], cache=cache)  # prefill, not timed
    k, v = list(cache.k), list(cache.v)

    def step():
        cache.k, cache.v = list(k), list(v)  # the same prefix each time
        return model(ids[:, -1:], cache=cache)
    return step


def _best_time(make, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        fn = make()
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best
