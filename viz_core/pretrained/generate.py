"""Generation on a real decoder (a LoadedModel) token by token, and the KV cache of the model's own shape.

Sampling is the rule of our small model (viz_core.lm.generate.sampling_probs, Holtzman et al. 2020 for top-p):

    p = softmax(z / T);  keep the k most likely (top-k) and the smallest set whose mass reaches p (top-p);
    renormalise and draw with a seeded torch.Generator.  T = 0 means greedy: argmax z.

With the cache (transformers' DynamicCache, use_cache=True) the prompt is read once and every later step feeds one
token against the cached keys and values; without it (for checking) every step recomputes the whole sequence. Both
give the same tokens for the same seed (tests/pretrained/test_generate_real.py).

KV cache of a model with L layers, H_kv key/value heads of width d_head, b bytes a value (Shazeer 2019, MQA;
Ainslie et al. 2023, GQA):

    bytes per token = 2 (K and V) * L * H_kv * d_head * b          MHA of the same size: H_kv = H
    bytes of T tokens = 2 * H_kv * d_head * b * (L_full * T + L_sliding * min(T, W - 1))

where a sliding-window layer (Gemma 3: 15 of 18 layers, W = 512) keeps only its last W - 1 tokens (what
transformers' DynamicSlidingWindowLayer holds between steps).

Every step returns plain numpy / str data and never a (steps x vocab) array: the chosen token, the TOP_SHOWN most
likely next tokens, and the new token's attention row per layer and head (L, H, T).
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import InputError
from ..lm.generate import check_sampling, sampling_probs
from .lens import finish_logits
from .result import clean_text
from .token_text import token_labels

MAX_PROMPT_TOKENS = 96     # longer prompts are cut (the step view shows every key of every step)
MAX_NEW_TOKENS = 64        # at most this many new tokens per generation
TOP_SHOWN = 10             # next tokens kept per step (ids, labels, probabilities)
EXACT_CANDIDATES = 1024    # most likely tokens whose logits are recomputed in float32 (see next_logits)


@dataclass(frozen=True)
class RealGenSettings:
    n_new: int = 40            # new tokens (cut to MAX_NEW_TOKENS and the model's positions)
    temperature: float = 0.8   # T; 0 = greedy
    top_k: int = 0             # 0 = no top-k filter
    top_p: float = 0.95        # 1 = no top-p filter
    seed: int = 0              # torch.Generator seed: the same seed draws the same tokens


@dataclass
class RealStep:
    token: int                 # the token chosen at this step
    label: str                 # its label (token_text.token_labels)
    p_model: float             # its probability under softmax(z / T)
    p_sampled: float           # its probability in the filtered distribution it was drawn from
    top_ids: np.ndarray        # (TOP_SHOWN,) int64, the most likely next tokens under softmax(z / T)
    top_labels: list[str]      # their labels
    top_probs: np.ndarray      # (TOP_SHOWN,) float32, softmax(z / T) at top_ids
    top_sampled: np.ndarray    # (TOP_SHOWN,) float32, the filtered distribution at top_ids
    attention: np.ndarray      # (L, H, T) float32, the new token's attention row over every token so far


@dataclass
class RealTrace:
    model: str                          # the LoadedModel's name
    prompt_ids: list[int]               # the prompt as read (cut to MAX_PROMPT_TOKENS)
    prompt_labels: list[str]
    n_prompt_typed: int                 # tokens of the prompt before the cut
    settings: RealGenSettings
    use_cache: bool
    steps: list[RealStep] = field(default_factory=list)
    stop: str = "length"                # "eos" (the model ended its text) or "length" (n_new reached)
    seconds: float = 0.0                # wall time of the steps
    text: str = ""                      # prompt + continuation, decoded
    continuation: str = ""              # the new tokens, decoded
    cache_shapes: list[tuple[int, ...]] = field(default_factory=list)  # each layer's K shape at the end
    cache_bytes: int = 0                # bytes of every cached K and V at the end (0 without the cache)

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + [s.token for s in self.steps]

    @property
    def cut(self) -> bool:
        return self.n_prompt_typed > len(self.prompt_ids)

    @property
    def keys(self) -> list[str]:
        """Labels of every token the last step attends to: the prompt and all new tokens but the last."""
        return self.prompt_labels + [s.label for s in self.steps[:-1]]

    @property
    def tokens_per_second(self) -> float:
        return len(self.steps) / self.seconds if self.seconds > 0 else 0.0


# ---------------------------------------------------------------- the prompt and the end of text
def encode_prompt(m, prompt: str, max_tokens: int = MAX_PROMPT_TOKENS) -> tuple[list[int], int]:
    """(ids cut to max_tokens, tokens before the cut) of a prompt, with the tokenizer's own special tokens (Gemma's
    <bos>). A longer prompt keeps its end (the model continues the text from where it stops) and its leading special
    token. InputError lm.real_empty for a blank prompt."""
    if not str(prompt or "").strip():
        raise InputError("lm.real_empty", "the prompt is empty: type a few words")
    ids = list(m.tokenize(clean_text(prompt), add_special_tokens=True)["input_ids"])
    if len(ids) <= max_tokens:
        return ids, len(ids)
    bos = getattr(m.tokenizer, "bos_token_id", None)
    head = ids[:1] if bos is not None and ids[0] == bos else []
    return head + ids[len(ids) - (max_tokens - len(head)):], len(ids)


def eos_ids(m) -> set[int]:
    """The tokens that end a text: the config's eos_token_id (an int or a list), the tokenizer's, and a chat
    model's end of turn (Gemma's <end_of_turn>, SmolLM2's <|im_end|>) where the vocabulary has one."""
    found = set()
    for value in (getattr(m.model.config, "eos_token_id", None), getattr(m.tokenizer, "eos_token_id", None)):
        found |= set(value) if isinstance(value, (list, tuple)) else {value}
    found |= {_token_id(m.tokenizer, name) for name in ("<end_of_turn>", "<|im_end|>", "<|endoftext|>")}
    return {int(i) for i in found if isinstance(i, int)}


def _token_id(tokenizer, token: str) -> int | None:
    """The id of a token of the vocabulary, or None (never the unknown token's id)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return backend.token_to_id(token)
    return tokenizer.get_vocab().get(token)


# ---------------------------------------------------------------- one step
def next_logits(m, hidden: torch.Tensor) -> torch.Tensor:
    """z = W_U h (the model's own finish after it: Gemma 2's soft cap, ...): hidden (d,) -> float32 (V,).

    A float32 head is applied as it is. A 16-bit W_U (the packaged decoders, precision.SlicedLinear) is read in
    one 16-bit pass over the vocabulary, and the EXACT_CANDIDATES most likely tokens of that pass are recomputed in
    float32: the shown and sampled top of the distribution is exact, the rest within a 16-bit rounding of z (about
    0.01 for |z| ~ 20). One float32 pass over Gemma's 262,144 x 640 W_U costs 5-10 times as much per token."""
    head = m.lm_head
    weight = head.weight
    if weight.dtype == torch.float32:
        return finish_logits(m.model.config, head(hidden[None].float())[0])  # (V,)
    z = torch.nn.functional.linear(hidden.to(weight.dtype), weight).float()  # (V,) in 16 bits
    top = torch.topk(z, min(EXACT_CANDIDATES, z.numel())).indices  # (C,)
    z[top] = weight[top].float() @ hidden.float()  # (C,) exact
    bias = getattr(head, "bias", None)
    if bias is not None:
        z = z + bias.float()
    return finish_logits(m.model.config, z)


def attention_rows(attentions, n_keys: int) -> np.ndarray:
    """The last query's row of every layer's attention (1, H, q, T_l) -> (L, H, T) float32. A sliding-window layer
    that kept fewer keys (T_l < T) reads the most recent ones: its row is right-aligned, the older keys 0."""
    rows = np.zeros((len(attentions), attentions[0].shape[1], n_keys), dtype=np.float32)  # (L, H, T)
    for layer, a in enumerate(attentions):
        row = a[0, :, -1].float().numpy()  # (H, T_l)
        rows[layer, :, n_keys - row.shape[-1]:] = row
    return rows


def filtered_distribution(z: torch.Tensor, probs: torch.Tensor, s: RealGenSettings,
                          candidates: int = EXACT_CANDIDATES) -> torch.Tensor:
    """sampling_probs(z, T, k, p) (V,), computed on the C most likely tokens where that gives the same distribution.

    Over C tokens of mass m_C the softmax is p_i / m_C, so top-p' = p / m_C keeps exactly the tokens top-p keeps
    over all V when the nucleus lies within them (m_C >= p), top-k keeps the same k when k <= C, and the kept
    values renormalise to the same numbers. Otherwise (no filter, or a nucleus wider than C) all V are used.
    probs: softmax(z / T) (V,), T > 0."""
    top = torch.topk(probs, min(candidates, probs.numel()))
    mass = float(top.values.sum())
    if not (0 < s.top_k <= candidates or (s.top_p < 1 and mass >= s.top_p)):
        return sampling_probs(z, s.temperature, s.top_k, s.top_p)  # (V,)
    top_p = min(1.0, s.top_p / mass) if s.top_p < 1 else 1.0
    sub = sampling_probs(z[top.indices], s.temperature, s.top_k, top_p)  # (C,)
    return torch.zeros_like(probs).index_copy_(0, top.indices, sub)  # (V,)


def _draw(z: torch.Tensor, s: RealGenSettings, gen: torch.Generator) -> tuple[int, torch.Tensor, torch.Tensor]:
    """(token, softmax(z / T), the filtered distribution drawn from), both (V,). T = 0: the argmax, one-hot."""
    if s.temperature == 0:
        return int(z.argmax()), torch.softmax(z, -1), sampling_probs(z, 0.0, s.top_k, s.top_p)
    probs = torch.softmax((z - z.max()) / s.temperature, -1)  # (V,)
    sampled = filtered_distribution(z, probs, s)  # (V,)
    return int(torch.multinomial(sampled, 1, generator=gen)), probs, sampled


def _step(token: int, probs: torch.Tensor, sampled: torch.Tensor, rows: np.ndarray) -> RealStep:
    top = torch.topk(probs, min(TOP_SHOWN, probs.numel()))
    ids = top.indices.numpy().astype(np.int64)  # (TOP_SHOWN,)
    return RealStep(token=token, label="", p_model=float(probs[token]), p_sampled=float(sampled[token]),
                    top_ids=ids, top_labels=[], top_probs=top.values.float().numpy().astype(np.float32),
                    top_sampled=sampled[top.indices].float().numpy().astype(np.float32), attention=rows)


# ---------------------------------------------------------------- the loop
def _check(settings: RealGenSettings) -> None:
    try:
        check_sampling(settings.temperature, settings.top_k, settings.top_p)
    except ValueError as exc:
        raise InputError("lm.real_bad_settings", str(exc)) from exc


@torch.inference_mode()
def generate_real(m, prompt: str, settings: RealGenSettings = RealGenSettings(), use_cache: bool = True,
                  max_prompt: int = MAX_PROMPT_TOKENS) -> RealTrace:
    """Append up to settings.n_new tokens to the prompt, one step at a time, stopping at an end-of-text token
    (eos_ids); see RealTrace. use_cache=False recomputes the whole sequence at every step (the check). The shared
    model is only read: no hooks, no attribute changes. InputError for an empty prompt or settings that define no
    distribution."""
    _check(settings)
    ids, n_typed = encode_prompt(m, prompt, max_prompt)
    n_new = max(1, min(int(settings.n_new), MAX_NEW_TOKENS, m.max_tokens - len(ids)))
    trace = RealTrace(m.name, ids, token_labels(m.tokenizer, ids), n_typed, settings, use_cache)
    gen, stops = torch.Generator().manual_seed(int(settings.seed)), eos_ids(m)
    cache, feed = None, torch.tensor([ids])  # (1, N): the whole prompt first
    start = time.perf_counter()
    for _ in range(n_new):
        out = m.model(input_ids=feed if use_cache else torch.tensor([trace.ids]), past_key_values=cache,
                      use_cache=use_cache, output_attentions=True, return_dict=True)
        cache = out.past_key_values if use_cache else None
        n_keys = len(trace.ids)
        token, probs, sampled = _draw(next_logits(m, out.last_hidden_state[0, -1]), settings, gen)  # (d,) -> (V,)
        trace.steps.append(_step(token, probs, sampled, attention_rows(out.attentions, n_keys)))
        if token in stops:
            trace.stop = "eos"
            break
        feed = torch.tensor([[token]])  # (1, 1)
    trace.seconds = time.perf_counter() - start
    _finish(m, trace, cache)
    return trace


def _finish(m, trace: RealTrace, cache) -> None:
    """Labels, the decoded text and the final cache's shapes (after the timing: none of it is generation)."""
    labels = token_labels(m.tokenizer, [s.token for s in trace.steps])
    for s, label in zip(trace.steps, labels):
        s.label = label
    tops = token_labels(m.tokenizer, np.concatenate([s.top_ids for s in trace.steps]).tolist()) if trace.steps else []
    for i, s in enumerate(trace.steps):
        s.top_labels = tops[i * len(s.top_ids):(i + 1) * len(s.top_ids)]
    trace.text = m.tokenizer.decode(trace.ids, skip_special_tokens=True)
    trace.continuation = m.tokenizer.decode([s.token for s in trace.steps], skip_special_tokens=True)
    if cache is not None:
        trace.cache_shapes = cache_shapes(cache)
        trace.cache_bytes = cache_nbytes(cache)


# ---------------------------------------------------------------- the cache of the model's real shape
def cache_shapes(cache) -> list[tuple[int, ...]]:
    """Each layer's cached K shape (B, H_kv, T_l, d_head) of a transformers cache."""
    return [tuple(layer.keys.shape) for layer in cache.layers]


def cache_nbytes(cache) -> int:
    """Bytes of every K and V tensor a transformers cache holds."""
    return sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))


@dataclass(frozen=True)
class KVShape:
    """What a decoder's KV cache is made of (module docstring for the formulas)."""
    n_layers: int              # L
    n_heads: int               # query heads H
    n_kv_heads: int            # key/value heads H_kv (= H: MHA, 1: MQA, else GQA)
    head_dim: int              # d_head
    bytes_per_value: int = 4   # b: float32 as run here (a 16-bit server: 2)
    n_sliding: int = 0         # layers with a sliding window (Gemma 3: 15 of 18)
    window: int | None = None  # W, the window of those layers (None: no sliding window)

    @property
    def variant(self) -> str:
        if self.n_kv_heads == self.n_heads:
            return "mha"
        return "mqa" if self.n_kv_heads == 1 else "gqa"

    def bytes_per_token(self, kv_heads: int | None = None) -> int:
        """2 * L * H_kv * d_head * b: what each token adds while no window is full (kv_heads: another H_kv)."""
        return 2 * self.n_layers * (kv_heads or self.n_kv_heads) * self.head_dim * self.bytes_per_value

    def mha_bytes_per_token(self) -> int:
        """The same model with multi-head attention (H_kv = H)."""
        return self.bytes_per_token(self.n_heads)

    def cached_tokens(self, tokens: int) -> list[int]:
        """Tokens each layer holds after `tokens` tokens: T, or min(T, W - 1) in a sliding-window layer (layers in
        order: the sliding ones are not necessarily first, but the total is what counts)."""
        kept = min(tokens, self.window - 1) if self.window else tokens
        return [kept] * self.n_sliding + [tokens] * (self.n_layers - self.n_sliding)

    def cache_bytes(self, tokens: int, kv_heads: int | None = None) -> int:
        """2 * H_kv * d_head * b * (L_full * T + L_sliding * min(T, W - 1))."""
        per_layer_token = 2 * (kv_heads or self.n_kv_heads) * self.head_dim * self.bytes_per_value
        return per_layer_token * sum(self.cached_tokens(tokens))


def _field(config, name: str, default=None):
    value = config.get(name, default) if isinstance(config, Mapping) else getattr(config, name, default)
    return default if value is None else value


def kv_shape_of(config, bytes_per_value: int = 4) -> KVShape:
    """The KVShape of a transformers config (or its config.json as a dict): num_hidden_layers,
    num_attention_heads, num_key_value_heads, head_dim (else hidden_size / H), layer_types and sliding_window."""
    layers, heads = int(_field(config, "num_hidden_layers")), int(_field(config, "num_attention_heads"))
    kv = int(_field(config, "num_key_value_heads", heads))
    head_dim = int(_field(config, "head_dim", 0) or _field(config, "hidden_size") // heads)
    window = _field(config, "sliding_window")
    types = list(_field(config, "layer_types", []) or [])
    sliding = sum(t == "sliding_attention" for t in types) if window else 0
    return KVShape(layers, heads, kv, head_dim, bytes_per_value, sliding, int(window) if sliding else None)
