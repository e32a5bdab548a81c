"""A small GPT-style decoder-only Transformer with a KV cache (pre-norm, causal self-attention, optional MLP).

    x_0 = E[tok] + P[pos]
    x   = x + Attn(LN(x))          causal multi-head attention (MHA / GQA / MQA through n_kv_heads)
    x   = x + MLP(LN(x))           only when d_ff > 0 (d_ff = 0 gives an attention-only model)
    logits = LN(x) W_out

Attention maps are read through named capture points collected into one dict, as in model.py:
    blocks.{i}.attn    (B, H, N_q, N_k)   causal self-attention weights of block i
The KV cache keeps each layer's keys and values, (B, H_kv, T, d_k) each, so that a new token costs one row of
attention instead of a full recomputation of the prefix.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

from ..attention import MultiHeadAttention, scaled_dot_product_attention
from ..masks import causal_mask


@dataclass
class LMConfig:
    """Hyperparameters of the decoder. Defaults: the 2-layer attention-only model of the induction-head story."""
    vocab: int = 64                # tokens in the vocabulary
    d_model: int = 64              # width of the residual stream
    n_heads: int = 4               # query heads per layer
    n_kv_heads: int | None = None  # key/value heads: None = n_heads (MHA), 1 = MQA, in between = GQA
    n_layers: int = 2              # decoder blocks
    d_ff: int = 0                  # MLP hidden width; 0 = attention-only (Olsson et al. 2022's toy models)
    max_len: int = 64              # longest sequence (learned positions table size)

    def __post_init__(self):
        kv = self.n_heads if self.n_kv_heads is None else self.n_kv_heads
        if self.d_model < 1 or self.n_heads < 1 or self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be a positive multiple of n_heads ({self.n_heads})")
        if kv < 1 or self.n_heads % kv:
            raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({kv})")
        if min(self.vocab, self.n_layers, self.max_len) < 1 or self.d_ff < 0:
            raise ValueError("vocab, n_layers and max_len must be >= 1 and d_ff >= 0")

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def d_k(self) -> int:
        """Width of one head's queries, keys and values."""
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "LMConfig":
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown LM config keys: {sorted(unknown)}")
        return cls(**data)


# ---------------------------------------------------------------- KV cache
class KVCache:
    """Per-layer keys and values of the tokens seen so far: layer i holds k, v of shape (B, H_kv, T, d_k)."""

    def __init__(self, n_layers: int):
        self.k: list[torch.Tensor | None] = [None] * n_layers
        self.v: list[torch.Tensor | None] = [None] * n_layers

    @property
    def length(self) -> int:
        """T: tokens cached so far (0 when empty)."""
        return self.layer_length(0)

    def layer_length(self, layer: int) -> int:
        """Tokens cached in one layer (during a forward pass, earlier layers are already one step ahead)."""
        return 0 if self.k[layer] is None else self.k[layer].shape[2]

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the new tokens' k, v (B, H_kv, n, d_k) to layer `layer`; return the whole (B, H_kv, T + n, d_k)."""
        if self.k[layer] is not None:
            k = torch.cat([self.k[layer], k], dim=2)  # (B, H_kv, T + n, d_k)
            v = torch.cat([self.v[layer], v], dim=2)  # (B, H_kv, T + n, d_k)
        self.k[layer], self.v[layer] = k, v
        return k, v

    def shapes(self) -> list[tuple[int, ...]]:
        """The shape of each layer's key tensor (the value tensor has the same)."""
        return [tuple(k.shape) if k is not None else () for k in self.k]

    def nbytes(self) -> int:
        """Bytes held by all keys and values: 2 * layers * B * H_kv * T * d_k * bytes per number."""
        return sum(t.numel() * t.element_size() for t in self.k + self.v if t is not None)


def cache_bytes(cfg: LMConfig, length: int, batch: int = 1, bytes_per_number: int = 4,
                n_layers: int | None = None) -> int:
    """KV-cache size by the formula 2 * L * B * H_kv * T * d_k * bytes (no model needed): keys and values of
    T = length tokens in L = cfg.n_layers layers, or in n_layers of them (1: one layer's share)."""
    layers = cfg.n_layers if n_layers is None else n_layers
    return 2 * layers * batch * cfg.kv_heads * length * cfg.d_k * bytes_per_number


# ---------------------------------------------------------------- blocks
class CausalSelfAttention(nn.Module):
    """Masked multi-head self-attention built on viz_core.attention.MultiHeadAttention's projections, with a
    KV-cache path: softmax(Q K^T / sqrt(d_k) + M) V with M_ij = -inf for j > i (Vaswani et al. 2017, eq. 1)."""

    def __init__(self, cfg: LMConfig):
        super().__init__()
        self.mha = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.n_kv_heads)

    def forward(self, x: torch.Tensor, layer: int, cache: KVCache | None = None, capture: dict | None = None):
        """x (B, n, d_model) are the new tokens; with a cache they sit after its T tokens. Returns (B, n, d_model)."""
        m = self.mha
        b, n, _ = x.shape
        q = m._split(m.q_proj(x), m.n_heads)  # (B, H, n, d_k)
        k = m._split(m.k_proj(x), m.n_kv_heads)  # (B, H_kv, n, d_k)
        v = m._split(m.v_proj(x), m.n_kv_heads)  # (B, H_kv, n, d_k)
        past = 0 if cache is None else cache.layer_length(layer)
        if cache is not None:
            k, v = cache.append(layer, k, v)  # (B, H_kv, T + n, d_k)
        k, v = m._expand_kv(k), m._expand_kv(v)  # (B, H, T + n, d_k)
        if capture is None:
            out = _fused_causal(q, k, v, past)  # (B, H, n, d_k)
        else:
            mask = causal_mask(past + n, x.device)[past:]  # (n, T + n): query past+i sees keys 0..past+i
            out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, H, n, d_k), (B, H, n, T + n)
            capture[f"blocks.{layer}.attn"] = weights.detach()
        out = out.transpose(1, 2).reshape(b, n, m.d_model)  # (B, n, d_model)
        return m.o_proj(out)


def _fused_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, past: int) -> torch.Tensor:
    """torch's fused kernel for the same causal attention (weights never materialised)."""
    if past == 0:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, n, d_k)
    n = q.shape[2]
    allowed = ~causal_mask(past + n, q.device)[past:]  # (n, T + n), True = may attend
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)  # (B, H, n, d_k)


class MLP(nn.Module):
    """Position-wise feed-forward network: GELU(x W_1 + b_1) W_2 + b_2."""

    def __init__(self, cfg: LMConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, cfg.d_ff)
        self.proj = nn.Linear(cfg.d_ff, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x)))  # (B, n, d_model)


class Block(nn.Module):
    """Pre-norm decoder block: x + Attn(LN(x)), then x + MLP(LN(x)) when the config has an MLP."""

    def __init__(self, cfg: LMConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model) if cfg.d_ff else None
        self.mlp = MLP(cfg) if cfg.d_ff else None

    def forward(self, x, layer: int, cache: KVCache | None, capture: dict | None) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), layer, cache, capture)  # (B, n, d_model)
        if self.mlp is not None:
            x = x + self.mlp(self.ln2(x))  # (B, n, d_model)
        return x


class DecoderLM(nn.Module):
    """The decoder-only language model: token + learned position embeddings, n_layers blocks, final LN, unembed."""

    def __init__(self, cfg: LMConfig):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
        self.pos = nn.Embedding(cfg.max_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.out = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        self.apply(_init)

    def forward(self, ids: torch.Tensor, cache: KVCache | None = None, capture: bool = False):
        """ids (B, n) -> (logits (B, n, V), maps {"blocks.i.attn": (B, H, n, T + n)} or None).

        With a cache, ids are the new tokens after its T cached ones, and the cache grows by n."""
        past = 0 if cache is None else cache.length
        n = ids.shape[1]
        if past + n > self.cfg.max_len:
            raise ValueError(f"sequence of {past + n} tokens is longer than max_len {self.cfg.max_len}")
        maps = {} if capture else None
        positions = torch.arange(past, past + n, device=ids.device)  # (n,)
        x = self.tok(ids) + self.pos(positions)  # (B, n, d_model)
        for i, block in enumerate(self.blocks):
            x = block(x, i, cache, maps)  # (B, n, d_model)
        return self.out(self.ln_f(x)), maps  # (B, n, V)

    def new_cache(self) -> KVCache:
        return KVCache(self.cfg.n_layers)


def _init(module: nn.Module) -> None:
    """GPT-2's initialisation: N(0, 0.02) weights, zero biases."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
