"""What a student can measure about a real decoder's heads: induction and previous-token scores, the attention sink of
each layer, and the block from which the logit lens settles on an answer.

The test input is the standard one of Olsson et al. (2022) and TransformerLens: R random tokens r_1 .. r_T drawn
uniformly from the ordinary vocabulary (no special or added tokens), written twice after the model's start token,

    x = [bos] r_1 .. r_T r_1 .. r_T        (N = 2T + 1 positions; position t + 1 holds r_t)

Nothing but the repeat makes the second half predictable, so a head that attends from r_t in the second copy to
the token after r_t's first occurrence is doing induction, whatever the text it was trained on. The scores reuse
the definitions of viz_core.lm.induction (our own small model) and head_analysis (per-head statistics, sink
shares): one definition for every model in the app. The model is only read: no attribute set, no hook left.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..lm.induction import induction_score
from .head_analysis import head_statistics, sink_shares

if TYPE_CHECKING:
    from .load import LoadedModel

SEQ_LEN = 40            # T: each half of the repeated sequence (2 x 40 tokens + bos = 81 positions)
N_SEQS = 4              # sequences averaged (about a second on Gemma 3 270M, 2 cores)
LENS_PROMPT = "The capital of France is"
LENS_ANSWER = " Paris"


@dataclass
class HeadScores:
    """The head scores of one model on repeated random tokens, and what was read to get them."""
    induction: np.ndarray   # float32 (L, H): mean A[i, i - T + 1] over the second half (see induction_scores)
    previous: np.ndarray    # float32 (L, H): mean A[i, i - 1] over i >= 1
    sink: np.ndarray        # float32 (L,): share of attention on the first token, mean over heads and queries 1..N-1
    n_seqs: int             # sequences read
    seq_len: int            # T, the length of each half
    n_tokens: int           # tokens read in all: n_seqs * (2T + 1)


# ---------------------------------------------------------------- the input
def ordinary_ids(tokenizer, vocab_size: int) -> np.ndarray:
    """Token ids below vocab_size that are neither special nor added tokens (Gemma's 6,000 <unusedN>, image and
    chat markers): the pool the random tokens are drawn from. int64 (V',)."""
    extra = set(getattr(tokenizer, "all_special_ids", None) or ())
    extra |= set(getattr(tokenizer, "added_tokens_decoder", None) or {})
    ids = np.arange(min(vocab_size, len(tokenizer)), dtype=np.int64)
    return ids[~np.isin(ids, np.fromiter(extra, dtype=np.int64, count=len(extra)))] if extra else ids


def start_id(tokenizer) -> int | None:
    """The id written before the sequence: bos, else eos (GPT-2's <|endoftext|> serves as both), else none."""
    for attr in ("bos_token_id", "eos_token_id"):
        value = getattr(tokenizer, attr, None)
        if isinstance(value, int):
            return value
    return None


def repeated_random_ids(m: "LoadedModel", seq_len: int = SEQ_LEN, n_seqs: int = N_SEQS, seed: int = 0
                        ) -> np.ndarray:
    """[start] + r + r for n_seqs random r of seq_len ordinary tokens each (uniform, with replacement): int64
    (B, 2T + 1), or (B, 2T) for a tokenizer without a start token. The same seed gives the same sequences."""
    if seq_len < 2 or n_seqs < 1:
        raise ValueError(f"seq_len must be >= 2 and n_seqs >= 1, got {seq_len}, {n_seqs}")
    pool = ordinary_ids(m.tokenizer, int(m.model.config.vocab_size))
    r = np.random.default_rng(seed).choice(pool, size=(n_seqs, seq_len))  # (B, T)
    ids = np.concatenate([r, r], axis=1)  # (B, 2T)
    first = start_id(m.tokenizer)
    return ids if first is None else np.concatenate([np.full((n_seqs, 1), first), ids], axis=1)  # (B, 2T + 1)


def attention_of_ids(m: "LoadedModel", ids: np.ndarray) -> np.ndarray:
    """Every layer's attention for a batch of equal-length token id rows (no padding): (B, N) -> float32
    (B, L, H, N, N). One batched forward pass, attentions returned by transformers itself (eager attention)."""
    with torch.inference_mode():
        out = m.model(input_ids=torch.as_tensor(ids, dtype=torch.long), output_attentions=True, return_dict=True)
    if not out.attentions or any(a is None for a in out.attentions):
        raise RuntimeError(f"{m.name} returned no attention weights: load it with attn_implementation='eager'")
    return torch.stack([a.float() for a in out.attentions], dim=1).numpy()  # (B, L, H, N, N)


def repeated_attention(m: "LoadedModel", seq_len: int, seed: int = 0) -> tuple[np.ndarray, list[str]]:
    """One repeated random sequence [start] + r + r: its attention (L, H, N, N) and token labels (N,)."""
    from .token_text import token_labels
    ids = repeated_random_ids(m, seq_len, 1, seed)  # (1, N)
    return attention_of_ids(m, ids)[0], token_labels(m.tokenizer, ids[0].tolist())  # (L, H, N, N), (N,)


# ---------------------------------------------------------------- scores from weights
def induction_from_weights(weights: np.ndarray, seq_len: int) -> np.ndarray:
    """The induction score of every head on [start] + r + r (or r + r): (B, L, H, N, N) -> float32 (L, H).

        ind(l, h) = 1/B sum_b 1/T sum_{i = s + T}^{s + 2T - 1} A^{l,h}_b[i, i - T + 1]

    s = N - 2T (1 with a start token): query i reads r_t in the second copy, key i - T + 1 is the token right after
    r_t's first occurrence. viz_core.lm.induction.induction_score on the r + r block is exactly this diagonal."""
    start = weights.shape[-1] - 2 * seq_len
    block = weights[..., start:, start:]  # (B, L, H, 2T, 2T)
    tokens = list(range(seq_len)) * 2  # any segment repeated: the score reads positions, not token values
    return np.mean([induction_score(w, tokens) for w in block], axis=0).astype(np.float32)  # (L, H)


def previous_from_weights(weights: np.ndarray) -> np.ndarray:
    """mean_b mean_{i >= 1} A_b[i, i - 1] (head_analysis.head_statistics' previous): (B, L, H, N, N) -> (L, H)."""
    return np.mean([head_statistics(w).previous for w in weights], axis=0).astype(np.float32)  # (L, H)


def sink_from_weights(weights: np.ndarray) -> np.ndarray:
    """The sink size of each layer: mean_b mean_h mean_{i >= 1} A_b[i, 0] (head_analysis.sink_shares' first share,
    averaged over heads): (B, L, H, N, N) -> float32 (L,)."""
    n = weights.shape[-1]
    none = np.zeros(n, dtype=bool)
    return np.mean([sink_shares(w, none).first.mean(-1) for w in weights], axis=0).astype(np.float32)  # (L,)


# ---------------------------------------------------------------- scores of a model
def head_scores(m: "LoadedModel", seq_len: int = SEQ_LEN, n_seqs: int = N_SEQS, seed: int = 0) -> HeadScores:
    """Induction, previous-token and sink scores of a decoder from one batched pass over repeated random tokens."""
    ids = repeated_random_ids(m, seq_len, n_seqs, seed)  # (B, N)
    w = attention_of_ids(m, ids)  # (B, L, H, N, N)
    return HeadScores(induction=induction_from_weights(w, seq_len), previous=previous_from_weights(w),
                      sink=sink_from_weights(w), n_seqs=n_seqs, seq_len=seq_len, n_tokens=int(ids.size))


def induction_scores(m: "LoadedModel", seq_len: int = SEQ_LEN, n_seqs: int = N_SEQS, seed: int = 0) -> np.ndarray:
    """The standard (TransformerLens) induction score of every head: float32 (L, H) in [0, 1].

        x_b = [bos] r_b r_b,   r_b = T tokens uniform over the ordinary vocabulary (b = 1 .. B = n_seqs)
        ind(l, h) = 1/B sum_b 1/T sum_{i = T + 1}^{2T} A^{l,h}_b[i, i - T + 1]

    Query i holds a token of the second copy; key i - T + 1 is the token right after that token's earlier
    occurrence, the one an induction head copies. seq_len = T."""
    return head_scores(m, seq_len, n_seqs, seed).induction


def previous_token_scores(m: "LoadedModel", text: str | None = None, seq_len: int = SEQ_LEN, n_seqs: int = N_SEQS,
                          seed: int = 0) -> np.ndarray:
    """prev(l, h) = mean_{i >= 1} A^{l,h}[i, i - 1]: float32 (L, H), on repeated random tokens (as
    induction_scores) or, with text, on that text's attention (attention_for)."""
    if text is None:
        return head_scores(m, seq_len, n_seqs, seed).previous
    from .load import attention_for
    return previous_from_weights(attention_for(m, text).weights[None])


def sink_sizes(m: "LoadedModel", seq_len: int = SEQ_LEN, n_seqs: int = N_SEQS, seed: int = 0) -> np.ndarray:
    """sink(l) = 1/H sum_h mean_{i >= 1} A^{l,h}[i, 0]: float32 (L,), on repeated random tokens."""
    return head_scores(m, seq_len, n_seqs, seed).sink


def top_heads(scores: np.ndarray, k: int = 5) -> list[tuple[int, int, float]]:
    """The k highest-scoring heads as (layer, head, score), best first: (L, H) -> k triples."""
    order = np.argsort(-scores, axis=None, kind="stable")[:k]
    return [(int(i // scores.shape[1]), int(i % scores.shape[1]), float(scores.flat[i])) for i in order]


# ---------------------------------------------------------------- where the answer settles (logit lens)
@dataclass
class Settling:
    """The logit lens's view of one answer token after a prompt, row by row (row 0: the embeddings; row r: after
    block r - 1; the last row is the model's own prediction)."""
    prompt: str
    answer: str               # the answer token's label
    rank: np.ndarray          # int64 (R,): rank of the answer in each row (0 = top-1)
    prob: np.ndarray          # float32 (R,): its probability in each row
    top_last: list[str]       # the last row's top-k tokens, most likely first
    top1_from: int | None     # first row from which on the answer stays top-1 up to the last row (None: never)
    top5_from: int | None     # the same for "in the top 5"

    @staticmethod
    def block_of(row: int | None) -> int | None:
        """The block after which row `row` reads the residual stream (None for the embeddings or no row)."""
        return None if row is None or row == 0 else row - 1


def _settles_from(holds: np.ndarray) -> int | None:
    """The first row from which on every row holds (up to the last), None if the last does not."""
    if not holds[-1]:
        return None
    failing = np.flatnonzero(~holds)
    return int(failing[-1]) + 1 if failing.size else 0


def answer_settling(m: "LoadedModel", prompt: str = LENS_PROMPT, answer: str = LENS_ANSWER) -> Settling:
    """Where the logit lens settles on `answer` after `prompt`: the lens of prompt + answer, read at the prompt's last
    position, whose "actual next token" is the answer (its rank and probability in every row come with the lens).
    ValueError when the answer does not follow the prompt as tokens of its own."""
    from .lens import logit_lens_for
    prompt_ids = m.tokenize(prompt, add_special_tokens=True)["input_ids"]
    full_ids = m.tokenize(prompt + answer, add_special_tokens=True)["input_ids"]
    if full_ids[: len(prompt_ids)] != prompt_ids or len(full_ids) == len(prompt_ids):
        raise ValueError(f"{answer!r} does not tokenize as tokens following {prompt!r}")
    lens = logit_lens_for(m, prompt + answer, k=5)
    pos = len(prompt_ids) - 1  # the prompt's last position predicts the answer's first token
    rank, prob = lens.next_rank[:, pos], lens.next_prob[:, pos]  # (R,) each
    return Settling(prompt=prompt, answer=lens.next_labels[pos], rank=rank.astype(np.int64),
                    prob=prob.astype(np.float32), top_last=[str(s) for s in lens.top_tokens[-1, pos]],
                    top1_from=_settles_from(rank == 0), top5_from=_settles_from(rank < 5))
