"""What an attention extraction returns, and the input checks before it: plain data, no torch.

Shared by the transformers path (viz_core.pretrained) and the numpy path of the packaged model
(viz_core.pretrained.bert_numpy), so a page can show the default model's attention without importing torch.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
MAX_CHARS = 20_000          # longer text is cut before tokenising (the model sees at most 512 tokens anyway)
DISPLAY_TOKEN_LIMIT = 512   # cap for models without a position limit (T5's relative positions)
METHODS = ("integrated_gradients",)  # token attribution methods
MAX_STEPS = 256             # path points of integrated gradients at most
UNKNOWN_CAUSES = ("long_word", "symbol", "script")


@dataclass
class UnknownCauses:
    """Why the text's unknown tokens are unknown, from the text each one stands for:
    - long_word: a word longer than the tokenizer's cap per word (WordPiece's max_input_chars_per_word, 100 for
      BERT): it writes one unknown token for the whole word, whatever its letters;
    - symbol: a piece with an emoji, symbol or control character the vocabulary has no entry for;
    - script: letters of a script the vocabulary lacks (a language the model never read)."""
    counts: dict[str, int]            # cause -> unknown tokens
    examples: dict[str, list[str]]    # cause -> up to 5 distinct pieces of the text (long words shortened)
    max_word_chars: int | None        # the tokenizer's cap per word, where it has one


def unknown_cause(piece: str, max_word_chars: int | None) -> str:
    """The cause (UNKNOWN_CAUSES) of one unknown token, from the text it stands for."""
    if max_word_chars and len(piece) > max_word_chars:
        return "long_word"
    if any(unicodedata.category(c)[0] in "SC" or ord(c) >= 0x1F000 for c in piece):
        return "symbol"
    return "script"


def unknown_causes(pieces: list[str], max_word_chars: int | None) -> UnknownCauses:
    """UnknownCauses of the unknown tokens whose text pieces are `pieces` (in text order)."""
    counts = {c: 0 for c in UNKNOWN_CAUSES}
    examples: dict[str, list[str]] = {c: [] for c in UNKNOWN_CAUSES}
    for piece in pieces:
        cause = unknown_cause(piece, max_word_chars)
        counts[cause] += 1
        shown = piece if len(piece) <= 24 else f"{piece[:10]}…{piece[-10:]}"
        if shown not in examples[cause] and len(examples[cause]) < 5:
            examples[cause].append(shown)
    return UnknownCauses(counts, examples, max_word_chars)


def max_word_chars_of(tokenizer_model) -> int | None:
    """WordPiece's cap per word of a `tokenizers` model (None for other models)."""
    value = getattr(tokenizer_model, "max_input_chars_per_word", None)
    return int(value) if isinstance(value, int) else None


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


@dataclass
class AttentionResult:
    """Attention of one input. weights: float32 (layers, heads, N, N), row = query, column = key, rows sum to 1.

    For a decoder-only model weights are its (causal) self-attention. For an encoder-decoder model weights are the
    encoder self-attention and decoder_weights / cross_weights hold the decoder's self and cross attention.
    """
    tokens: list[str]
    weights: np.ndarray
    special: np.ndarray                         # bool (N,): [CLS], [SEP], <s>, </s>, ...
    segments: np.ndarray                        # int8 (N,): 0 = text A, 1 = text B, -1 = special token
    kind: str = "encoder"
    n_input_tokens: int = 0                     # tokens before truncation
    truncated: bool = False
    decoder_tokens: list[str] = field(default_factory=list)
    decoder_weights: np.ndarray | None = None   # (layers, heads, T, T)
    cross_weights: np.ndarray | None = None     # (layers, heads, T, N): decoder queries over encoder keys
    decoder_truncated: bool = False
    decoder_special: np.ndarray | None = None   # bool (T,)
    n_unknown: int = 0                          # tokens of the text that became the unknown token ([UNK])
    n_text_tokens: int = 0                      # tokens of the text (special tokens not counted)
    unk_token: str = ""                         # the tokenizer's unknown token, e.g. "[UNK]"
    unknown: "UnknownCauses | None" = None      # why those tokens are unknown (unknown_causes)

    def parts(self) -> tuple[str, ...]:
        """Which attention maps this result has: ("self",) or ("encoder", "decoder", "cross")."""
        return ("encoder", "decoder", "cross") if self.decoder_weights is not None else ("self",)

    def part(self, name: str) -> tuple[np.ndarray, list[str], list[str], np.ndarray, np.ndarray]:
        """(weights (L, H, Nq, Nk), query tokens, key tokens, query special mask, key special mask) of one map."""
        if name in ("self", "encoder") or name not in self.parts():
            return self.weights, self.tokens, self.tokens, self.special, self.special
        if name == "decoder":
            return self.decoder_weights, self.decoder_tokens, self.decoder_tokens, self.decoder_special, \
                self.decoder_special
        return self.cross_weights, self.decoder_tokens, self.tokens, self.decoder_special, self.special


@dataclass
class QKV:
    """Queries, keys and values of one layer, per head: float32 (H, N, d_k), projections with their biases."""
    tokens: list[str]
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    weights: np.ndarray                         # (H, N, N): the model's own attention weights of that layer
    layer: int
    n_layers: int
    n_heads: int


@dataclass
class TokenAttribution:
    """Per-token scores of one input (text A, then text B for a pair; each with its own special tokens)."""
    tokens: list[str]
    scores: np.ndarray          # float32 (N,): IG attributions, same unit as f; sum ~ value - baseline_value
    attention: np.ndarray       # float32 (N,): last layer, mean over heads, weight each token receives (per text)
    rollout: np.ndarray         # float32 (N,): attention rollout after the last layer, same reading rows
    special: np.ndarray         # bool (N,)
    segments: np.ndarray        # int8 (N,): 0 = text A, 1 = text B, -1 = special token
    value: float                # f(x)
    baseline_value: float       # f(x')
    metric: str
    method: str = "integrated_gradients"
    steps: int = 32
    target_token: str = ""      # the scored next token (decoder-only models)
    lengths: tuple[int, ...] = ()  # tokens of each separately encoded text (A, then B)

    @property
    def completeness_gap(self) -> float:
        """sum_i IG_i - (f(x) - f(x')): 0 for the exact integral; small for a fine enough sum."""
        return float(self.scores.sum(dtype=np.float64) - (self.value - self.baseline_value))


@dataclass
class HeadImportance:
    """Effect of knocking out each head: effect[l, h] = ablated[l, h] - baseline (signed, same unit as the metric)."""
    effect: np.ndarray          # float32 (L, H)
    ablated: np.ndarray         # float32 (L, H): the metric with head (l, h) knocked out
    baseline: float             # the metric of the intact model
    metric: str                 # "pair_cosine", "self_cosine", "next_logprob" or "target_logprob"
    method: str                 # "zero" or "mean"
    part: str                   # which attention the heads belong to: "self", "encoder", "decoder" or "cross"
    target_token: str = ""      # the scored next token (decoder-only models)
    target_id: int = -1

    @property
    def shape(self) -> tuple[int, int]:
        return self.effect.shape


# ---------------------------------------------------------------- input checks
def check_attribution(method: str, steps: int) -> None:
    """A known attribution method and 1..MAX_STEPS path points, or an InputError."""
    if method not in METHODS:
        raise InputError("importance.bad_attr_method", f"method must be one of {METHODS}", method=str(method)[:30])
    if not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps <= MAX_STEPS:
        raise InputError("importance.bad_steps", f"steps must be 1..{MAX_STEPS}", max=MAX_STEPS)


def clean_text(text: str | None, what: str = "text") -> str:
    """Normalise user text (NFC, control characters removed, length bounded); empty text is an InputError.

    what names the box for the message: "text", "text_b" or "target".
    """
    text = unicodedata.normalize("NFC", _CONTROL.sub(" ", str(text or "")))[:MAX_CHARS]
    if not text.strip():
        raise InputError("attention.empty_text", f"the {what} is empty: type a sentence", what=what)
    return text
