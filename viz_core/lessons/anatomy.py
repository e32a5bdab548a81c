"""From tokens to the next token, and what a Transformer's parameters are spent on.

text -> toy tokenizer -> ids -> embedding * sqrt(d_model) -> + positions -> blocks -> linear tied to the embedding
-> softmax -> temperature / top-k / top-p -> next token; every step recorded with its shape.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .blocks import EncoderBlock, xavier_init_
from ..errors import InputError
from ..masks import causal_mask
from ..runtime.seeding import seeded
from ..runtime.threads import thread_budget

# ================================================================ toy tokenizer
SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")
PINNED = {"哈基咪": 133, "南北": 23, "绿豆": 58}  # the study notes' ids (vocabulary 1000, d_model 4)
WORDS = ("the", "a", "cat", "dog", "sat", "on", "mat", "ran", "to", "and", "is", "was", "in", "of", "it", "he",
         "she", "they", "we", "you", "i", "saw", "big", "small", "red", "green", "beans", "soup", "attention",
         "all", "need", "model", "token", "next", "word", "layer", "norm", "hello", "world", "good", "day",
         "我", "你", "他", "喜欢", "吃", "喝", "汤", "猫", "狗", "在", "的", "是", "好", "今天", "注意力", "模型",
         ".", ",", "?", "!", "。", "，", "？", "！")
MIN_VOCAB, MAX_VOCAB, MAX_TOKENS = 200, 50_000, 32


def build_vocab(size: int) -> list[str]:
    """A deterministic word-level vocabulary of `size` entries: specials at 0-3, the notes' words at their ids,
    our small word list in order, then filler words "w<id>" (they stand in for the rest of a real vocabulary)."""
    if not MIN_VOCAB <= size <= MAX_VOCAB:
        raise InputError("anatomy.bad_vocab", f"vocabulary size must be in [{MIN_VOCAB}, {MAX_VOCAB}], got {size}",
                         lo=MIN_VOCAB, hi=MAX_VOCAB)
    vocab: list[str | None] = [None] * size
    vocab[:len(SPECIALS)] = SPECIALS
    for word, idx in PINNED.items():
        vocab[idx] = word
    free = (i for i in range(size) if vocab[i] is None)
    for word in dict.fromkeys(WORDS):  # keeps order, drops repeats
        vocab[next(free)] = word
    return [w if w is not None else f"w{i}" for i, w in enumerate(vocab)]


class ToyTokenizer:
    """Word-level tokenizer: split on spaces, then cut each piece into the longest vocabulary words from the left
    (so 哈基咪南北绿豆 needs no spaces); English is lower-cased; characters that start no word become <unk>."""

    def __init__(self, vocab_size: int = 1000):
        self.vocab = build_vocab(vocab_size)
        self.ids = {w: i for i, w in enumerate(self.vocab) if not w.startswith("<")}
        self.longest = max(len(w) for w in self.ids)

    def tokenize(self, text: str) -> list[str]:
        if not text.strip():
            raise InputError("anatomy.empty_text", "type at least one word")
        tokens = [t for piece in text.lower().split() for t in self._split(piece)]
        if len(tokens) > MAX_TOKENS:
            raise InputError("anatomy.too_many_tokens", f"at most {MAX_TOKENS} tokens, got {len(tokens)}",
                             n=len(tokens), max=MAX_TOKENS)
        return tokens

    def _split(self, piece: str) -> list[str]:
        out, i = [], 0
        while i < len(piece):
            n = next((n for n in range(min(self.longest, len(piece) - i), 0, -1) if piece[i:i + n] in self.ids), 0)
            out.append(piece[i:i + n] if n else "<unk>")
            i += max(n, 1)
        return [t for j, t in enumerate(out) if t != "<unk>" or j == 0 or out[j - 1] != "<unk>"]

    def encode(self, text: str) -> tuple[list[str], list[int]]:
        tokens = self.tokenize(text)
        return tokens, [self.ids.get(t, 1) for t in tokens]


# ================================================================ a tiny decoder-only language model
@dataclass(frozen=True)
class TinyLMConfig:
    vocab_size: int = 1000   # V, the notes' toy vocabulary
    d_model: int = 4         # D, the notes' example; d_k = D / n_heads
    n_heads: int = 2
    n_layers: int = 2        # EncoderBlocks with a causal mask (post-norm, as in the paper)
    seed: int = 0            # random weights: nothing is trained, the predictions are arbitrary


def sinusoid(n: int, d: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)) (paper section 3.5): (n, d)."""
    pos = torch.arange(n, dtype=torch.float32)[:, None]                        # (n, 1)
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, d, 2, dtype=torch.float32) / d)  # (ceil(d/2),)
    pe = torch.zeros(n, d)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq[: d // 2])
    return pe  # (n, d)


class TinyLM(nn.Module):
    """Embedding (std 1/sqrt(D), so that * sqrt(D) gives unit-scale vectors) -> + positions -> causal blocks ->
    output linear that reuses the embedding matrix (weight tying, paper section 3.4)."""

    def __init__(self, cfg: TinyLMConfig):
        super().__init__()
        _check_lm(cfg)
        self.cfg = cfg
        with seeded(cfg.seed):
            self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
            nn.init.normal_(self.embed.weight, std=cfg.d_model ** -0.5)
            self.blocks = nn.ModuleList(xavier_init_(EncoderBlock(cfg.d_model, cfg.n_heads))
                                        for _ in range(cfg.n_layers))
        self.eval()

    @torch.inference_mode()
    def trace(self, ids: list[int]) -> list[tuple[str, torch.Tensor]]:
        """Every intermediate tensor of one forward pass, in order: (step name, tensor without a batch axis)."""
        n, d = len(ids), self.cfg.d_model
        steps = [("ids", torch.tensor(ids))]                                        # (N,)
        steps.append(("embedding", self.embed(steps[0][1])))                        # (N, D)
        steps.append(("scaled", steps[-1][1] * math.sqrt(d)))                       # (N, D)
        steps.append(("positions", sinusoid(n, d)))                                 # (N, D)
        x = (steps[-2][1] + steps[-1][1])[None]                                     # (1, N, D)
        steps.append(("sum", x[0]))
        for i, block in enumerate(self.blocks):
            x = block(x, mask=causal_mask(n))                                       # (1, N, D)
            steps.append((f"block{i + 1}", x[0]))
        logits = x[0] @ self.embed.weight.T                                         # (N, V)
        steps.append(("logits", logits))
        steps.append(("softmax", torch.softmax(logits, -1)))                        # (N, V)
        steps.append(("last", logits[-1]))                                          # (V,)
        return steps


def _check_lm(cfg: TinyLMConfig) -> None:
    if cfg.d_model < 2 or cfg.d_model % cfg.n_heads:
        raise InputError("anatomy.bad_heads", f"d_model ({cfg.d_model}) must be divisible by the heads "
                         f"({cfg.n_heads})", d=cfg.d_model, h=cfg.n_heads)
    if not 0 <= cfg.n_layers <= 12:
        raise InputError("anatomy.bad_layers", f"layers must be between 0 and 12, got {cfg.n_layers}")


# ================================================================ sampling
@dataclass(frozen=True)
class Sampling:
    temperature: float = 1.0  # 0 -> greedy (argmax); < 1 sharpens, > 1 flattens
    top_k: int = 0            # keep the k most likely tokens; 0 = off
    top_p: float = 1.0        # keep the smallest set whose probability reaches p (nucleus); 1 = off


def next_token_distribution(logits: torch.Tensor, s: Sampling) -> np.ndarray:
    """softmax(z / T) restricted to the top-k tokens, then to the top-p nucleus, renormalised: (V,) float64.
    Same order and rules as Hugging Face's Temperature, TopK and TopP logits warpers. T = 0 is greedy."""
    _check_sampling(s, logits.shape[-1])
    z = logits.double()                                                          # (V,)
    if s.temperature == 0:
        return np.eye(len(z))[int(z.argmax())]
    z = z / s.temperature
    if s.top_k:
        kth = torch.topk(z, s.top_k).values[-1]
        z = z.masked_fill(z < kth, float("-inf"))
    if s.top_p < 1.0:
        p_sorted, order = torch.softmax(z, -1).sort(descending=True)              # (V,)
        before = p_sorted.cumsum(0) - p_sorted                                    # mass strictly above each token
        drop = torch.zeros_like(z, dtype=torch.bool)
        drop[order] = before >= s.top_p
        z = z.masked_fill(drop, float("-inf"))
    return torch.softmax(z, -1).numpy()


def _check_sampling(s: Sampling, vocab: int) -> None:
    if not 0.0 <= s.temperature <= 100.0:
        raise InputError("anatomy.bad_temperature", f"temperature must be in [0, 100], got {s.temperature}")
    if not 0 <= s.top_k <= vocab:
        raise InputError("anatomy.bad_top_k", f"top-k must be between 0 and the vocabulary size {vocab}",
                         v=vocab)
    if not 0.0 < s.top_p <= 1.0:
        raise InputError("anatomy.bad_top_p", f"top-p must be in (0, 1], got {s.top_p}")


def sample(probs: np.ndarray, seed: int) -> int:
    """One draw from probs (V,) with a seeded generator."""
    g = torch.Generator().manual_seed(seed)
    return int(torch.multinomial(torch.as_tensor(probs), 1, generator=g))


@dataclass
class PathResult:
    tokens: list[str]
    steps: list[tuple[str, tuple[int, ...], np.ndarray]]  # (step, shape, values)
    probs: np.ndarray       # (V,) the model's next-token distribution (T = 1, nothing cut)
    filtered: np.ndarray    # (V,) after temperature / top-k / top-p
    next_id: int
    vocab: list[str]
    n_params: int           # parameters of the tiny model (the tied output matrix counted once)


@thread_budget(1)
def next_token_path(text: str, cfg: TinyLMConfig, s: Sampling, sample_seed: int = 0) -> PathResult:
    """The whole path for one text: tokenizer, TinyLM trace, sampling. Shapes have no batch axis."""
    tok = ToyTokenizer(cfg.vocab_size)
    tokens, ids = tok.encode(text)
    model = TinyLM(cfg)
    trace = model.trace(ids)
    last = trace[-1][1]                                                          # (V,)
    filtered = next_token_distribution(last, s)
    steps = [(name, tuple(t.shape), t.numpy()) for name, t in trace]
    return PathResult(tokens, steps, torch.softmax(last.double(), -1).numpy(), filtered,
                      sample(filtered, sample_seed), tok.vocab, sum(p.numel() for p in model.parameters()))


# ================================================================ parameter counting
@dataclass(frozen=True)
class TransformerSizes:
    """Sizes of an encoder-decoder Transformer; defaults: the paper's base model (Table 3)."""
    vocab: int = 37_000     # shared source-target BPE vocabulary (WMT EN-DE, section 5.1)
    d_model: int = 512
    n_heads: int = 8        # splits d_model into heads: does not change the count
    d_ff: int = 2048
    n_enc: int = 6
    n_dec: int = 6
    sharing: str = "all"    # "all": encoder input, decoder input and pre-softmax linear share one matrix
                            # (section 3.4); "decoder": only decoder input and output share; "none"


SHARING = ("all", "decoder", "none")


def count_parameters(cfg: TransformerSizes) -> dict[str, int]:
    """Exact parameter count by part. Linear layers have biases (as in torch.nn.Transformer); each stack ends with a
    LayerNorm; the pre-softmax linear has no bias of its own. Sum = reference_parameter_count(cfg)."""
    _check_sizes(cfg)
    d, v = cfg.d_model, cfg.vocab
    attn = 4 * (d * d + d)                         # W_q, W_k, W_v, W_o and their biases
    ffn = 2 * d * cfg.d_ff + cfg.d_ff + d          # W_1, b_1, W_2, b_2
    norm = 2 * d                                   # gamma, beta
    n_matrices = {"all": 1, "decoder": 2, "none": 3}[cfg.sharing]
    return {
        "embeddings": min(n_matrices, 2) * v * d,
        "enc_attention": cfg.n_enc * attn, "enc_ffn": cfg.n_enc * ffn, "enc_norms": cfg.n_enc * 2 * norm,
        "dec_self_attention": cfg.n_dec * attn, "dec_cross_attention": cfg.n_dec * attn,
        "dec_ffn": cfg.n_dec * ffn, "dec_norms": cfg.n_dec * 3 * norm,
        "final_norms": 2 * norm,
        "output": v * d if cfg.sharing == "none" else 0,
    }


def _check_sizes(cfg: TransformerSizes) -> None:
    if min(cfg.vocab, cfg.d_model, cfg.n_heads, cfg.d_ff) < 1 or min(cfg.n_enc, cfg.n_dec) < 0:
        raise InputError("anatomy.bad_sizes", "every size must be positive")
    if cfg.d_model % cfg.n_heads:
        raise InputError("anatomy.bad_heads", f"d_model ({cfg.d_model}) must be divisible by the heads "
                         f"({cfg.n_heads})", d=cfg.d_model, h=cfg.n_heads)
    if cfg.sharing not in SHARING:
        raise InputError("anatomy.bad_sharing", f"sharing must be one of {SHARING}, got {cfg.sharing!r}")


def reference_parameter_count(cfg: TransformerSizes) -> int:
    """The same model built from torch modules on the meta device (no memory): nn.Transformer plus embeddings and
    an output linear, tied as cfg.sharing says; counts each distinct parameter tensor once."""
    _check_sizes(cfg)
    with torch.device("meta"):
        core = nn.Transformer(cfg.d_model, cfg.n_heads, cfg.n_enc, cfg.n_dec, cfg.d_ff, batch_first=True)
        src, tgt = nn.Embedding(cfg.vocab, cfg.d_model), nn.Embedding(cfg.vocab, cfg.d_model)
        out = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
    if cfg.sharing in ("all", "decoder"):
        out.weight = tgt.weight
    if cfg.sharing == "all":
        src.weight = tgt.weight
    whole = nn.ModuleList([core, src, tgt, out])
    return sum(p.numel() for p in whole.parameters())  # parameters() yields a shared tensor once


def readable_count(n: int) -> str:
    """63084544 -> '63.08M'."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)

