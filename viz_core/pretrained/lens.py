"""The logit lens (nostalgebraist 2020): what the residual stream after each block would predict as the next token.

A decoder turns its last residual stream h_L into next-token probabilities through its final norm and unembedding,
p = softmax(W_U · norm_f(h_L)). The lens applies the same readout to the stream after every block l:

    p_l = softmax(W_U · norm_f(h_l)),    l = 0 (the embeddings) .. L (after the last block: the model's own output)

Rows that already rank the final answer first show how early the model "knows" it. The readout is computed row by
row (one N x V matrix at a time). `lens_from_readout` is model-agnostic (viz_core.lm.lens uses it for our own small
decoder); `logit_lens_for` is the Hugging Face adapter.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import torch

from ..errors import InputError
from .result import clean_text
from .token_text import token_labels

if TYPE_CHECKING:
    from .load import LoadedModel

LENS_MAX_TOKENS = 64   # positions read by the lens (each row costs an N x V matmul)
FINAL_NORMS = ("norm", "ln_f", "final_layer_norm", "final_layernorm", "norm_f")  # Llama/Qwen2, GPT-2, OPT/NeoX, Phi


@dataclass
class LogitLens:
    """What the residual stream after each block predicts as the next token: softmax(W_U · norm_f(h_l)).

    Row r = 0: the embeddings (before block 0); row r >= 1: after block r-1. R = n_layers + 1; the last row is the
    model's own next-token distribution.
    """
    tokens: list[str]          # (N,) input token labels
    ids: np.ndarray            # int64 (N,) input token ids
    top_ids: np.ndarray        # int64 (R, N, k): the k most likely next tokens per row and position, most likely first
    top_probs: np.ndarray      # float32 (R, N, k)
    top_tokens: np.ndarray     # str array (R, N, k): display labels of top_ids
    next_prob: np.ndarray      # float32 (R, N-1): probability given to the actual next token ids[i+1] at position i
    next_rank: np.ndarray      # int64 (R, N-1): its rank (0 = top-1)
    entropy: np.ndarray        # float32 (R, N): entropy of each row's distribution, in bits
    truncated: bool = False    # the text had more than max_tokens tokens; only the first max_tokens were read
    next_labels: list[str] = field(default_factory=list, repr=False)  # (N-1,) labels of ids[1:], as top_tokens'

    @property
    def n_rows(self) -> int:
        """R = n_blocks + 1."""
        return self.top_ids.shape[0]

    @property
    def n_blocks(self) -> int:
        return self.n_rows - 1

    @property
    def k(self) -> int:
        return self.top_ids.shape[2]

    @property
    def first_top1(self) -> np.ndarray:
        """int64 (N,): per position, the first row r from which on the last row's top-1 token stays top-1 in every
        row up to the last (so the last row always qualifies: first_top1 <= R - 1)."""
        top1 = self.top_ids[:, :, 0]  # (R, N)
        agree = top1 == top1[-1]  # (R, N)
        holds = np.flip(np.cumprod(np.flip(agree, 0), 0), 0)  # (R, N): agree in every row from r to the last
        return (self.n_rows - holds.sum(0)).astype(np.int64)  # (N,)

    def next_tokens(self) -> list[str]:
        """Labels of the actual next tokens ids[1:], labelled as top_tokens are (equal ids, equal labels)."""
        return list(self.next_labels)


def lens_from_readout(readout: Callable[[int], torch.Tensor], n_rows: int, ids: Sequence[int], tokens: list[str],
                      label_of: Callable[[list[int]], list[str]], k: int = 5) -> LogitLens:
    """The lens from readout(r) -> logits (N, V) of row r, one row at a time (memory: one N x V at a time).

    Per row: p = softmax(logits) in float32; top-k ids and probabilities; entropy -sum p log2 p in bits; for each
    position i < N-1 the probability of the actual next token ids[i+1] and its rank, the number of logits strictly
    greater than its logit (0 = top-1; ties share the better rank).
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    n = len(ids)
    nxt = torch.as_tensor(np.asarray(ids[1:], dtype=np.int64))  # (N-1,)
    at = torch.arange(n - 1)  # (N-1,)
    rows = []
    for r in range(n_rows):
        logits = readout(r).detach().float()  # (N, V)
        logp = torch.log_softmax(logits, dim=-1)  # (N, V)
        p = logp.exp()  # (N, V)
        top_p, top_i = torch.topk(p, min(k, p.shape[-1]), dim=-1)  # (N, k) each, most likely first
        plogp = torch.where(p > 0, p * logp, torch.zeros_like(p))  # (N, V): 0 log 0 = 0
        chosen = logits[at, nxt]  # (N-1,)
        rank = (logits[:-1] > chosen[:, None]).sum(-1)  # (N-1,)
        rows.append((top_i, top_p, p[at, nxt], rank, -plogp.sum(-1) / math.log(2)))
    # (R, N, k), (R, N, k), (R, N-1), (R, N-1), (R, N)
    top_ids, top_probs, next_prob, next_rank, entropy = (torch.stack(col).numpy() for col in zip(*rows))
    return LogitLens(tokens=list(tokens), ids=np.asarray(ids, dtype=np.int64), top_ids=top_ids.astype(np.int64),
                     top_probs=top_probs.astype(np.float32), top_tokens=_labels(top_ids, label_of),
                     next_prob=next_prob.astype(np.float32), next_rank=next_rank.astype(np.int64),
                     entropy=entropy.astype(np.float32), next_labels=list(label_of([int(i) for i in ids[1:]])))


def _labels(top_ids: np.ndarray, label_of: Callable[[list[int]], list[str]]) -> np.ndarray:
    """(R, N, k) ids -> (R, N, k) str labels, each distinct id labelled once."""
    distinct, where = np.unique(top_ids, return_inverse=True)  # (U,), (R * N * k,)
    labels = np.array(label_of([int(i) for i in distinct]), dtype=object)  # (U,)
    return labels[where.reshape(top_ids.shape)].astype(str)  # (R, N, k)


# ---------------------------------------------------------------- Hugging Face decoders
def final_norm(base: torch.nn.Module) -> torch.nn.Module | None:
    """The final norm norm_f of a base model, found by name (FINAL_NORMS) outside its numbered blocks: `norm`
    (Llama, Qwen2, Mistral), `ln_f` (GPT-2), `decoder.final_layer_norm` (OPT), ...; None if there is none."""
    found = [(name.count("."), name, module) for name, module in base.named_modules()
             if name.rsplit(".", 1)[-1] in FINAL_NORMS and not any(p.isdigit() for p in name.split("."))]
    return min(found, key=lambda f: f[:2])[2] if found else None


def finish_logits(config, logits: torch.Tensor) -> torch.Tensor:
    """What some causal LMs do to W_U h after the matmul, so the last row equals the model's own logits:
    Cohere's logit_scale (x s), Granite's logits_scaling (/ s), Gemma 2's soft cap c tanh(x / c)."""
    cohere = str(getattr(config, "model_type", "")).startswith("cohere")
    scale = getattr(config, "logit_scale", None) if cohere else None
    if isinstance(scale, (int, float)):
        logits = logits * scale
    divide = getattr(config, "logits_scaling", None)
    if isinstance(divide, (int, float)) and divide:
        logits = logits / divide
    cap = getattr(config, "final_logit_softcapping", None)
    if isinstance(cap, (int, float)) and cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


def _lens_ids(m: "LoadedModel", text: str, max_tokens: int) -> tuple[list[int], bool]:
    """The text's token ids (special tokens added, typed ones kept as text) cut to max_tokens, and whether cut."""
    ids = m.tokenize(clean_text(text), add_special_tokens=True, truncation=False, verbose=False,
                     split_special_tokens=True)["input_ids"]
    if not ids:
        raise InputError("attention.no_tokens", "the tokenizer produced no tokens for this text")
    limit = max(1, min(max_tokens, m.max_tokens))
    return list(ids[:limit]), len(ids) > limit


def _readout_parts(m: "LoadedModel") -> tuple[torch.nn.Module, torch.nn.Module]:
    """(norm_f, W_U) of a decoder; InputError when the lens cannot read this model."""
    if m.kind != "decoder":
        raise InputError("attention.lens_decoder_only", f"the logit lens reads decoder-only models; {m.name} is "
                         f"{m.kind}", name=m.name)
    norm = final_norm(m.model)
    if m.lm_head is None or norm is None:
        raise InputError("attention.lens_no_head", f"{m.name} has no output head (unembedding) with its final norm "
                         "to read the residual stream through", name=m.name)
    return norm, m.lm_head


VOCAB_SLICE = 1024  # vocabulary rows read at once: (R * N) x 1024 logits, 5 MB for 19 rows x 64 positions (small
#                    slices stay in the caches: 2048 rows took 4 % longer, 8192 rows 10 %, 16384 rows 20 %)


EXP_FLOOR = -80.0  # exponents below it are raised to it: e^-80 is still a normal float32 (e^-88 and below are
#                   subnormal, which made the exponentials 9 times slower), and 262,144 terms of e^-80 move a sum
#                   that holds e^0 = 1 by less than 1e-29, far below float32's resolution


@dataclass
class _Running:
    """Per row of (R * N) logits seen slice by slice: the running max m, S0 = sum e^(l - m), S1 = sum e^(l - m) (l - m)
    (relative to m, so a peaked row's entropy is not the small difference of two large numbers), the top k so far,
    and (for positions with a next token) how many logits beat that token's."""
    m: torch.Tensor          # float32 (RN,)
    s0: torch.Tensor         # float64 (RN,)
    s1: torch.Tensor         # float64 (RN,)
    top_v: torch.Tensor      # float32 (RN, k)
    top_i: torch.Tensor      # int64 (RN, k)
    beaten: torch.Tensor     # int64 (RN,)
    chosen: torch.Tensor     # float32 (RN,): the next token's logit (0 where there is none)

    @classmethod
    def start(cls, rn: int, k: int) -> "_Running":
        return cls(m=torch.full((rn,), -math.inf), s0=torch.zeros(rn, dtype=torch.float64),
                   s1=torch.zeros(rn, dtype=torch.float64), top_v=torch.full((rn, k), -math.inf),
                   top_i=torch.zeros((rn, k), dtype=torch.int64), beaten=torch.zeros(rn, dtype=torch.int64),
                   chosen=torch.zeros(rn))

    def rebase(self, m_new: torch.Tensor) -> None:
        """Move the sums to a new running max: e^(l - m') = e^(l - m) e^(m - m'), and l - m' = (l - m) + (m - m')."""
        shift = torch.where(torch.isfinite(self.m), self.m.double() - m_new.double(), 0.0)  # (RN,), <= 0
        keep = torch.exp(shift)
        self.s1 = keep * (self.s1 + shift * self.s0)
        self.s0 = keep * self.s0
        self.m = m_new


def _fold_slice(run: _Running, logits: torch.Tensor, start: int, nxt: torch.Tensor, guess: torch.Tensor,
                k: int, work: tuple[torch.Tensor, torch.Tensor]) -> None:
    """Add one slice of logits (RN, S) for vocabulary ids start..start+S-1 to the running sums (online softmax).
    work: two float32 buffers of at least RN x S (every pass writes into them: a fresh 10-40 MB tensor per pass
    costs more in page faults than the pass itself). The exponentials are float32 (every exponent is <= 0 after
    the running max); the sums are kept in float64."""
    d, e = (w.view(-1)[:logits.numel()].view_as(logits) for w in work)  # (RN, S) each
    top = logits.amax(1)  # (RN,)
    run.rebase(torch.maximum(run.m, top))
    torch.sub(logits, run.m[:, None], out=d)  # (RN, S): l - m, each <= 0
    torch.clamp(d, min=EXP_FLOOR, out=e).exp_()  # (RN, S): e^(l - m), each <= 1
    run.s0 += e.sum(1).double()
    run.s1 += e.mul_(d).sum(1).double()
    _merge_top(run, logits, top, start, k)
    inside = (nxt >= start) & (nxt < start + logits.shape[1])  # (RN,): the next token is in this slice
    col = (nxt - start).clamp(0, logits.shape[1] - 1)  # (RN,)
    own = torch.gather(logits, 1, col[:, None])[:, 0]  # (RN,)
    run.chosen = torch.where(inside, own, run.chosen)
    beaten = torch.gt(logits, guess[:, None], out=e).sum(1).long()  # (RN,); the token itself is not counted:
    run.beaten += beaten - (inside & (own > guess)).long()


def _merge_top(run: _Running, logits: torch.Tensor, top: torch.Tensor, start: int, k: int) -> None:
    """The running top k updated with a slice (RN, S), for the rows whose slice maximum `top` beats their k-th
    (after the first slices, few rows: a full top-k of every row cost as much as the rest of the fold)."""
    rows = torch.nonzero(top > run.top_v[:, -1])[:, 0]  # (r,)
    if rows.numel() == 0:
        return
    v, i = torch.topk(logits.index_select(0, rows), min(k, logits.shape[1]), dim=1)  # (r, k') each
    merged_v, at = torch.topk(torch.cat([run.top_v[rows], v], 1), k, dim=1)  # (r, k)
    run.top_v[rows] = merged_v
    run.top_i[rows] = torch.gather(torch.cat([run.top_i[rows], i + start], 1), 1, at)


def lens_from_states(states: torch.Tensor, weight: torch.Tensor, ids: Sequence[int], tokens: list[str],
                     label_of: Callable[[list[int]], list[str]], k: int = 5,
                     finish: Callable[[torch.Tensor], torch.Tensor] = lambda x: x,
                     bias: torch.Tensor | None = None) -> LogitLens:
    """The lens from the normed residual streams states (R, N, d) and the unembedding W_U (V, d), reading the
    vocabulary in slices: memory (R * N) x VOCAB_SLICE, never (R, N, V). The same numbers as lens_from_readout:

        log p_v = l_v - LSE,  LSE = m + log S0,  S0 = sum_v e^(l_v - m)
        entropy = LSE - sum_v p_v l_v = log S0 - S1 / S0,  S1 = sum_v e^(l_v - m) (l_v - m)   (nats; / ln 2 bits)

    with m, the sums, the top k and the rank of the actual next token (logits strictly greater) kept per slice."""
    n_rows, n, d = states.shape
    flat = states.reshape(n_rows * n, d).float()  # (RN, d)
    nxt = torch.as_tensor(np.asarray(list(ids[1:]) + [0], dtype=np.int64)).repeat(n_rows)  # (RN,)
    guess = finish((flat * weight[nxt].float()).sum(-1) + (bias[nxt].float() if bias is not None else 0))  # (RN,)
    rn, size = n_rows * n, min(VOCAB_SLICE, weight.shape[0])
    run = _Running.start(rn, k)
    out, work = torch.empty(rn * size), (torch.empty(rn * size), torch.empty(rn * size))  # reused by every slice
    for start in range(0, weight.shape[0], size):
        part = weight[start:start + size].float()  # (S, d)
        logits = torch.matmul(flat, part.T, out=out[:rn * part.shape[0]].view(rn, part.shape[0]))  # (RN, S)
        if bias is not None:
            logits += bias[start:start + size].float()
        _fold_slice(run, finish(logits), start, nxt, guess, k, work)
    lse = run.m.double() + torch.log(run.s0)  # (RN,)
    entropy = ((torch.log(run.s0) - run.s1 / run.s0) / math.log(2)).float().view(n_rows, n)  # (R, N) bits
    top_probs = torch.exp(run.top_v.double() - lse[:, None]).float().view(n_rows, n, k)  # (R, N, k)
    top_ids = run.top_i.view(n_rows, n, k).numpy()
    next_prob = torch.exp(run.chosen.double() - lse).float().view(n_rows, n)[:, :-1]  # (R, N-1)
    next_rank = run.beaten.view(n_rows, n)[:, :-1]  # (R, N-1)
    return LogitLens(tokens=list(tokens), ids=np.asarray(ids, dtype=np.int64), top_ids=top_ids.astype(np.int64),
                     top_probs=top_probs.numpy(), top_tokens=_labels(top_ids, label_of),
                     next_prob=next_prob.numpy(), next_rank=next_rank.numpy().astype(np.int64),
                     entropy=entropy.numpy(), next_labels=list(label_of([int(i) for i in ids[1:]])))


def lens_positions(m: "LoadedModel", max_tokens: int = LENS_MAX_TOKENS) -> int:
    """How many positions the lens reads on this model: max_tokens, fewer for a large vocabulary so that the
    readout's (L + 1) x N x V x d multiply-adds stay within LENS_MACS (at least LENS_MIN_TOKENS)."""
    weight = getattr(m.lm_head, "weight", None)
    if not isinstance(weight, torch.Tensor):
        return max_tokens
    per_position = (m.n_layers + 1) * weight.shape[0] * weight.shape[1]
    return max(LENS_MIN_TOKENS, min(max_tokens, LENS_MACS // per_position))


LENS_MACS = 210 * 10**9  # the readout's budget: 64 positions of Gemma 3 270M (19 x 262,144 x 640 each), under 2 s on
#                         2 cores (float32 matmuls at about 150 G multiply-adds/s, then the softmax passes)
LENS_MIN_TOKENS = 16


def logit_lens_for(m: "LoadedModel", text: str, k: int = 5, max_tokens: int | None = None) -> LogitLens:
    """The logit lens of a Hugging Face decoder on text (its first max_tokens tokens; default lens_positions(m)).

    Rows 0..L-1: W_U · norm_f(hidden_states[r]); row L: W_U · last_hidden_state (transformers' last hidden state has
    already been through norm_f), so the last row is exactly the model's own logits.
    """
    norm, head = _readout_parts(m)
    ids, truncated = _lens_ids(m, text, lens_positions(m) if max_tokens is None else max_tokens)
    with torch.inference_mode():
        out = m.model(input_ids=torch.tensor([ids]), output_hidden_states=True, return_dict=True)
        hidden = list(out.hidden_states[:-1]) + [out.last_hidden_state]  # R x (1, N, d_model)
        weight = getattr(head, "weight", None)
        if isinstance(weight, torch.Tensor) and weight.shape[-1] != hidden[-1].shape[-1]:
            raise InputError("attention.lens_no_head", f"{m.name}'s output head does not read its residual stream",
                             name=m.name)
        labels = token_labels(m.tokenizer, ids)

        def label_of(some: list[int]) -> list[str]:
            return token_labels(m.tokenizer, some)

        if isinstance(weight, torch.Tensor) and weight.dim() == 2:
            states = torch.stack([norm(h[0]) for h in hidden[:-1]] + [hidden[-1][0]]).float()  # (R, N, d_model)
            lens = lens_from_states(states, weight, ids, labels, label_of, k,
                                    finish=lambda x: finish_logits(m.model.config, x), bias=getattr(head, "bias", None))
        else:
            def readout(r: int) -> torch.Tensor:
                h = hidden[r][0]  # (N, d_model)
                return finish_logits(m.model.config, head(h if r == len(hidden) - 1 else norm(h)))  # (N, V)

            lens = lens_from_readout(readout, len(hidden), ids, labels, label_of, k)
    lens.truncated = truncated
    from .load import release_memory
    release_memory()  # the slices' temporaries (tens of MB each) go back to the system, not to a growing heap
    return lens
