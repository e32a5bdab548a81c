"""A small encoder-decoder Transformer (Vaswani et al. 2017, figure 1), built from viz_core's own attention.

Every attention map can be read through named capture points, collected into one dict:
    enc.{i}.self_attn    (B, H, N_src, N_src)   encoder self-attention of layer i
    dec.{i}.self_attn    (B, H, N_tgt, N_tgt)   decoder masked (causal) self-attention of layer i
    dec.{i}.cross_attn   (B, H, N_tgt, N_src)   decoder -> encoder cross attention of layer i
Capturing is off by default: training then takes torch's fused attention kernel and never builds the weights.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import torch
from torch import nn

from ..attention import MultiHeadAttention
from ..masks import causal_padding_mask, cross_padding_mask, padding_mask

POSITIONS = ("sinusoidal", "learned")
NORMS = ("pre", "post")


@dataclass
class ModelConfig:
    """Hyperparameters of the encoder-decoder. Defaults: a 'small' model that learns the toy tasks in seconds."""
    src_vocab: int = 16            # source vocabulary size (special tokens included)
    tgt_vocab: int = 16            # target vocabulary size (special tokens included)
    d_model: int = 64              # width of every residual stream
    n_heads: int = 4               # query heads per attention layer
    n_kv_heads: int | None = None  # key/value heads: None = n_heads (MHA), 1 = MQA, in between = GQA
    n_enc_layers: int = 2          # encoder blocks
    n_dec_layers: int = 2          # decoder blocks
    d_ff: int = 128                # hidden width of the position-wise feed-forward network
    max_len: int = 32              # longest sequence (positions table size)
    positions: str = "sinusoidal"  # "sinusoidal" (the paper's fixed table) or "learned" (an nn.Embedding)
    norm: str = "pre"              # "pre": x + f(LN(x)) ; "post": LN(x + f(x)) as in the paper
    scale: bool = True             # divide Q K^T by sqrt(d_k) (False shows what the scaling prevents)
    emb_dropout: float = 0.0       # dropout on embeddings + positions
    attn_dropout: float = 0.0      # dropout on attention weights
    resid_dropout: float = 0.0     # dropout on each sublayer output before the residual add
    tie_weights: bool = False      # share the decoder input embedding with the output projection
    pad_id: int = 0                # padding token id in both vocabularies

    def __post_init__(self):
        kv = self.n_heads if self.n_kv_heads is None else self.n_kv_heads
        if self.d_model < 1 or self.n_heads < 1 or self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be a positive multiple of n_heads ({self.n_heads})")
        if kv < 1 or self.n_heads % kv:
            raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({kv})")
        if self.positions not in POSITIONS or self.norm not in NORMS:
            raise ValueError(f"positions must be one of {POSITIONS} and norm one of {NORMS}")
        if min(self.n_enc_layers, self.n_dec_layers, self.d_ff, self.max_len, self.src_vocab, self.tgt_vocab) < 1:
            raise ValueError("layers, d_ff, max_len and vocabulary sizes must be >= 1")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ModelConfig":
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown model config keys: {sorted(unknown)}")
        return cls(**data)


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d))  (section 3.5)."""
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (N, 1)
    rate = torch.pow(10000.0, -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (ceil(d/2),)
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(pos * rate)
    table[:, 1::2] = torch.cos(pos * rate[: d_model // 2])
    return table.float()  # (N, d_model)


class Embedding(nn.Module):
    """Token embedding times sqrt(d_model) (section 3.4) plus positions, then dropout."""

    def __init__(self, vocab: int, cfg: ModelConfig):
        super().__init__()
        self.tok = nn.Embedding(vocab, cfg.d_model)
        nn.init.normal_(self.tok.weight, std=cfg.d_model ** -0.5)  # so tok * sqrt(d) has unit scale
        self.scale = math.sqrt(cfg.d_model)
        if cfg.positions == "learned":
            self.pos = nn.Embedding(cfg.max_len, cfg.d_model)
            nn.init.normal_(self.pos.weight, std=1.0)
        else:
            self.register_buffer("pos_table", sinusoidal_table(cfg.max_len, cfg.d_model), persistent=False)
            self.pos = None
        self.drop = nn.Dropout(cfg.emb_dropout)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        n = ids.shape[1]
        pos = self.pos.weight[:n] if self.pos is not None else self.pos_table[:n]  # (N, d_model)
        return self.drop(self.tok(ids) * self.scale + pos)  # (B, N, d_model)


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W1 + b1) W2 + b2  (eq. 2)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.up = nn.Linear(cfg.d_model, cfg.d_ff)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))  # (B, N, d_model)


class Sublayer(nn.Module):
    """Residual wrapper: pre-norm x + drop(f(LN(x))), or post-norm LN(x + drop(f(x))) (section 5.4)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.norm = nn.LayerNorm(cfg.d_model)
        self.drop = nn.Dropout(cfg.resid_dropout)
        self.pre = cfg.norm == "pre"

    def forward(self, x: torch.Tensor, f) -> torch.Tensor:
        if self.pre:
            return x + self.drop(f(self.norm(x)))  # (B, N, d_model)
        return self.norm(x + self.drop(f(x)))  # (B, N, d_model)


def _attention(cfg: ModelConfig) -> MultiHeadAttention:
    return MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.n_kv_heads, dropout=cfg.attn_dropout, scale=cfg.scale)


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn, self.ffn = _attention(cfg), FeedForward(cfg)
        self.sub1, self.sub2 = Sublayer(cfg), Sublayer(cfg)

    def forward(self, x, mask, capture: dict | None, name: str):
        x = self.sub1(x, lambda h: _attend(self.self_attn, h, h, mask, capture, f"{name}.self_attn"))
        return self.sub2(x, self.ffn)  # (B, N_src, d_model)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.self_attn, self.cross_attn, self.ffn = _attention(cfg), _attention(cfg), FeedForward(cfg)
        self.sub1, self.sub2, self.sub3 = Sublayer(cfg), Sublayer(cfg), Sublayer(cfg)

    def forward(self, y, memory, self_mask, cross_mask, capture: dict | None, name: str):
        y = self.sub1(y, lambda h: _attend(self.self_attn, h, h, self_mask, capture, f"{name}.self_attn"))
        y = self.sub2(y, lambda h: _attend(self.cross_attn, h, memory, cross_mask, capture, f"{name}.cross_attn"))
        return self.sub3(y, self.ffn)  # (B, N_tgt, d_model)


def _attend(attn: MultiHeadAttention, x_q, x_kv, mask, capture: dict | None, name: str) -> torch.Tensor:
    """Run one attention layer; with a capture dict, store its weights (B, H, Nq, Nk) under `name`."""
    out, weights = attn(x_q, x_kv, mask=mask, need_weights=capture is not None)
    if capture is not None:
        capture[name] = weights.detach()
    return out  # (B, Nq, d_model)


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder Transformer: logits = W_out( Decoder(Embed(tgt_in), Encoder(Embed(src))) )."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.src_embed, self.tgt_embed = Embedding(cfg.src_vocab, cfg), Embedding(cfg.tgt_vocab, cfg)
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_enc_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.n_dec_layers))
        # pre-norm needs a final LayerNorm on each stack's output; post-norm already ends on one
        self.enc_norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()
        self.dec_norm = nn.LayerNorm(cfg.d_model) if cfg.norm == "pre" else nn.Identity()
        self.out = nn.Linear(cfg.d_model, cfg.tgt_vocab, bias=False)
        if cfg.tie_weights:
            self.out.weight = self.tgt_embed.tok.weight

    def encode(self, src: torch.Tensor, capture: dict | None = None) -> torch.Tensor:
        """src (B, N_src) token ids -> memory (B, N_src, d_model); pads blocked as keys."""
        self._check_len(src)
        mask = padding_mask(src == self.cfg.pad_id)  # (B, 1, 1, N_src)
        x = self.src_embed(src)  # (B, N_src, d_model)
        for i, layer in enumerate(self.encoder):
            x = layer(x, mask, capture, f"enc.{i}")
        return self.enc_norm(x)

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src: torch.Tensor,
               capture: dict | None = None) -> torch.Tensor:
        """tgt_in (B, N_tgt) ids starting with <bos> -> logits (B, N_tgt, tgt_vocab)."""
        self._check_len(tgt_in)
        self_mask = causal_padding_mask(tgt_in == self.cfg.pad_id)  # (B, 1, N_tgt, N_tgt)
        cross_mask = cross_padding_mask(tgt_in.shape[1], src == self.cfg.pad_id)  # (B, 1, N_tgt, N_src)
        y = self.tgt_embed(tgt_in)  # (B, N_tgt, d_model)
        for i, layer in enumerate(self.decoder):
            y = layer(y, memory, self_mask, cross_mask, capture, f"dec.{i}")
        return self.out(self.dec_norm(y))  # (B, N_tgt, tgt_vocab)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, capture: bool = False):
        """Returns (logits (B, N_tgt, tgt_vocab), captures). captures maps capture-point names (see module doc)
        to attention weights (B, H, Nq, Nk); it is empty unless capture=True."""
        maps: dict | None = {} if capture else None
        logits = self.decode(tgt_in, self.encode(src, maps), src, maps)
        return logits, (maps or {})

    def _check_len(self, ids: torch.Tensor) -> None:
        if ids.shape[1] > self.cfg.max_len:
            raise ValueError(f"sequence of length {ids.shape[1]} is longer than max_len {self.cfg.max_len}")


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters, shared (tied) tensors counted once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def capture_names(cfg: ModelConfig) -> list[str]:
    """Every capture point of a model built from cfg, in forward order."""
    enc = [f"enc.{i}.self_attn" for i in range(cfg.n_enc_layers)]
    dec = [f"dec.{i}.{k}" for i in range(cfg.n_dec_layers) for k in ("self_attn", "cross_attn")]
    return enc + dec
