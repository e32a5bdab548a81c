"""Integrated gradients of the packaged all-MiniLM-L6-v2 in numpy: a hand-written backward pass, no torch.

The same numbers as viz_core.pretrained.attribution.token_attribution (tests compare them), so "Which heads matter"
answers for the default model without importing torch and transformers, which hold about 340 MB of a server's memory
(the goal: one visitor of every Attention view under 600 MB; bench/bench_attention.py measures it).

f as there: a single text scores f(x) = mean_n h_L(x)_n . e_0 / |e_0| (e_0 the intact text's mean-pooled embedding),
a pair f = cos(mean_n h_L(A)_n, mean_n h_L(B)_n), each text encoded alone. The path runs over the word embeddings
x (before position / type embeddings and the first LayerNorm), from the baseline x' (special tokens kept, every other
token the [PAD] embedding):

    IG_i = (x_i - x'_i) . (1/S) sum_k df/dx_i (x' + a_k (x - x')),   a_k = (k + 1/2) / S,  k = 0..S-1

The gradient goes back through BERT's layers (see bert_numpy for the forward pass) with, for y = x W^T + b,
dx = dy W; softmax: ds = a * (da - sum_j da_j a_j); LayerNorm y = x_hat g + b, x_hat = (x - mu) r:
dx = r (dx_hat - mean(dx_hat) - x_hat mean(dx_hat x_hat)), dx_hat = dy g; GELU'(x) = Phi(x) + x phi(x).
"""
from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..runtime import cancel
from ..runtime.cancel import check as check_cancelled
from .bert_numpy import NumpyBert, Progress, _erf, ablation_threads, cosine, in_blocks, softmax
from .head_analysis import attention_received, reading_rows
from .result import TokenAttribution, check_attribution, clean_text

# what one chunk of path points may hold for its backward pass (float32): the saved weights of every layer, their
# gradient and the FFN's activations (see NumpyAttribution._chunks). A sentence runs in 2 chunks; from about 200
# tokens one point at a time; from about 270 its attention weights are computed again in the backward pass, past
# about 470 each layer is run again.
CHUNK_BYTES = 96 * 2**20
KEEP_ALL, KEEP_NO_WEIGHTS, KEEP_INPUTS = "all", "no weights", "inputs"  # what a forward pass keeps for its backward


class NumpyAttribution:
    """Token attribution (integrated gradients) of a NumpyBert, as token_attribution for a sentence encoder."""

    def __init__(self, bert: NumpyBert):
        self.bert = bert
        added = bert._tok.get_added_tokens_decoder()
        self.special_ids = np.array(sorted(i for i, tok in added.items() if tok.special), dtype=np.int64)
        pad = bert._tok.token_to_id("[PAD]")
        table = bert.w["embeddings.word_embeddings.weight"]  # (V, d); the baseline is a copy of one row, so a
        # later adopt() of the transformers weights frees this table
        self.baseline = table[pad].copy() if pad is not None else np.zeros(table.shape[1], dtype=table.dtype)  # (d,)

    # ------------------------------------------------------------ the whole attribution
    def token_attribution(self, text: str, text_pair: str | None = None, method: str = "integrated_gradients",
                          steps: int = 32, progress: Progress | None = None) -> TokenAttribution:
        """Integrated gradients per token of text (then text_pair), raw attention and rollout; progress(share) as
        the path advances. Raises InputError."""
        check_attribution(method, steps)
        texts = [clean_text(text)] + ([clean_text(text_pair, "text_b")] if text_pair and text_pair.strip() else [])
        encodings = [self.bert.encode_alone(t) for t in texts]  # each text alone, as the ablation encodes it
        ids = [np.array(e.ids, dtype=np.int64) for e in encodings]  # each (N,)
        scores, value, base = self.integrated_gradients(ids, steps, progress)
        tokens, special, segments, raws, rolls = [], [], [], [], []
        for seg, (enc, row) in enumerate(zip(encodings, ids)):
            spec = np.isin(row, self.special_ids)
            head_mean = self.bert.attention_weights(list(row), [0] * len(row), mean_heads=True)  # (L, 1, N, N)
            raw, roll = attention_received(head_mean, reading_rows("embedding", len(row)))  # both read head means
            tokens += enc.tokens
            special.append(spec)
            segments.append(np.where(spec, -1, seg).astype(np.int8))
            raws.append(raw)
            rolls.append(roll)
        return TokenAttribution(tokens=tokens, scores=scores, attention=np.concatenate(raws),
                                rollout=np.concatenate(rolls), special=np.concatenate(special),
                                segments=np.concatenate(segments), value=value, baseline_value=base,
                                metric="self_projection" if len(texts) == 1 else "pair_cosine", method=method,
                                steps=steps, lengths=tuple(len(row) for row in ids))

    def integrated_gradients(self, ids: list[np.ndarray], steps: int,
                             progress: Progress | None = None) -> tuple[np.ndarray, float, float]:
        """(IG per token of every text, concatenated (N_A [+ N_B],), f(x), f(x')). Both ends (a = 0, 1) run forward
        only, as one batch of two rows (a single text's a = 1 row gives e_0 too); the S path points run forward and
        backward in chunks of rows whose saved activations stay under CHUNK_BYTES, ablation_threads() chunks side by
        side, progress(share) after each round."""
        b = self.bert
        words = [b.w["embeddings.word_embeddings.weight"][row] for row in ids]            # each (N, d)
        bases = [np.where(np.isin(row, self.special_ids)[:, None], x, self.baseline)
                 for row, x in zip(ids, words)]                                           # each (N, d)
        ends = [(self._forward(np.stack([base, x]), KEEP_INPUTS)[0], None)                 # each ((2, N, d), -)
                for x, base in zip(words, bases)]
        reference = None
        if len(ids) == 1:  # e_0 / |e_0|: the intact text's direction
            e0 = ends[0][0][1].mean(0)                                                    # (d,)
            reference = e0 / max(float(np.linalg.norm(e0)), 1e-12)
        f_ends = _score(ends, reference)[0]                                               # (2,): f(x'), f(x)
        alphas = ((np.arange(steps) + 0.5) / steps).astype(np.float32)                     # (S,)
        rows, keep = self._chunks(max(len(row) for row in ids))
        sums = [np.zeros_like(x, dtype=np.float64) for x in words]                        # each (N, d)
        owner = cancel.owner()

        def chunk(start: int) -> list[np.ndarray]:
            """The gradient summed over this chunk's path points, per text (N, d)."""
            with cancel.acting_for(owner):  # a worker stops when the page thread's visitor has gone
                a = alphas[start:start + rows, None, None]                                # (C, 1, 1)
                outs = [self._forward(base + a * (x - base), keep, lock=False)              # each ((C, N, d), cache)
                        for x, base in zip(words, bases)]
                _, grads_out = _score(outs, reference)                                    # each (C, N, d)
                return [self._backward(cache, g, lock=False).sum(0, dtype=np.float64)
                        for (_, cache), g in zip(outs, grads_out)]

        starts = list(range(0, len(alphas), rows))
        threads, r = min(ablation_threads(), len(starts)), 0
        with ThreadPoolExecutor(threads, thread_name_prefix="attribution") as pool:
            while r < len(starts):  # a round at a time under the model's lock: other visitors' passes get their
                batch = starts[r:r + min(threads, ablation_threads())]  # turn in between; the cores free now
                with b._lock:
                    parts = list(pool.map(chunk, batch)) if len(batch) > 1 else [chunk(batch[0])]
                for grads in parts:
                    for total, g in zip(sums, grads):
                        total += g
                r += len(batch)
                if progress is not None:
                    progress(r / len(starts))
        scores = [((x - base) * total / steps).sum(-1) for x, base, total in zip(words, bases, sums)]  # (N,) each
        return np.concatenate(scores).astype(np.float32), float(f_ends[1]), float(f_ends[0])

    def _chunks(self, n: int) -> tuple[int, str]:
        """(path points per forward + backward, what the forward keeps). Per point and layer the backward pass reads
        about 3 (H, N, N) float32 arrays (the weights, their gradient, one temporary) and 4 (N, d_ff) ones. When one
        point's layers together exceed CHUNK_BYTES (from about 200 tokens), one point at a time, and what it keeps
        shrinks: first the attention weights, computed again from q and k when their gradient is due (a product and
        a softmax: the weights were most of the memory; 400 tokens: 10 -> 8 s); past that (about 470 tokens), only
        each layer's input, the layer run again (one more forward pass, about a third more time; a long input's peak
        170 -> 60 MB)."""
        b = self.bert
        d_ff, d = b.w["encoder.layer.0.intermediate.dense.weight"].shape
        one_layer = 4 * (3 * b.n_heads * n * n + 4 * n * d_ff)  # what a layer's backward pass holds while it runs
        per_point = b.n_layers * one_layer
        if per_point <= CHUNK_BYTES:
            return int(CHUNK_BYTES // per_point), KEEP_ALL
        kept = b.n_layers * 4 * (5 * n * d + 2 * n * d_ff)  # q, k, v, both LayerNorms' x_hat; the FFN's two arrays
        return 1, KEEP_NO_WEIGHTS if kept + one_layer <= CHUNK_BYTES else KEEP_INPUTS

    # ------------------------------------------------------------ forward with what the backward pass reads
    def _forward(self, words: np.ndarray, keep: str = KEEP_ALL, lock: bool = True) -> tuple[np.ndarray, list]:
        """words (C, N, d) -> (h_L (C, N, d), cache): BERT from word embeddings on, type 0, no padding. The cache
        holds what each layer's backward pass reads (KEEP_ALL), that without the attention weights (KEEP_NO_WEIGHTS),
        or only each layer's input (C, N, d) (KEEP_INPUTS). lock=False: the caller holds the model's lock."""
        b, w = self.bert, self.bert.w
        n = words.shape[1]
        x = words + w["embeddings.position_embeddings.weight"][:n] + w["embeddings.token_type_embeddings.weight"][0]
        h, norm0 = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], b.eps)
        cache: list = [norm0]
        with b._lock if lock else contextlib.nullcontext():
            for i in range(b.n_layers):
                h_in = h
                h, saved = self._layer(h, i)
                if keep == KEEP_NO_WEIGHTS:
                    saved = saved[:3] + (None,) + saved[4:]  # (C, H, N, N) freed: softmax(q k^T) again later
                cache.append(h_in if keep == KEEP_INPUTS else saved)
                del saved
        return h, cache

    def _layer(self, h: np.ndarray, i: int) -> tuple[np.ndarray, tuple]:
        """One encoder layer (as NumpyBert._layer) keeping what its backward pass needs: q / sqrt(d_k), k, v, the
        weights, both LayerNorms' x_hat and r, the FFN's input to GELU and Phi of it."""
        check_cancelled()  # a visitor who left: stop between layers (viz_core.runtime.cancel)
        b, w, p = self.bert, self.bert.w, f"encoder.layer.{i}."
        c, n, d = h.shape
        heads, dk = b.n_heads, d // b.n_heads

        def split(y: np.ndarray) -> np.ndarray:  # (C, N, d) -> (C, H, N, d_k)
            return np.ascontiguousarray(y.reshape(c, n, heads, dk).transpose(0, 2, 1, 3))

        scale = np.float32(1.0 / np.sqrt(dk))
        q, k, v = (split(_linear(h, w, p + f"attention.self.{name}")) for name in ("query", "key", "value"))
        q *= scale                                                                         # q / sqrt(d_k)
        a = softmax(q @ k.transpose(0, 1, 3, 2), in_place=True)                            # (C, H, N, N)
        ctx = (a @ v).transpose(0, 2, 1, 3).reshape(c, n, d)                               # (C, N, d)
        u, norm1 = _layer_norm(h + _linear(ctx, w, p + "attention.output.dense"),
                               w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"],
                               b.eps)
        pre = _linear(u, w, p + "intermediate.dense")                                      # (C, N, d_ff)
        cdf = in_blocks(_phi, pre)                                                         # Phi(pre)
        out, norm2 = _layer_norm(u + _linear(pre * cdf, w, p + "output.dense"), w[p + "output.LayerNorm.weight"],
                                 w[p + "output.LayerNorm.bias"], b.eps)
        return out, (q, k, v, a, norm1, pre, cdf, norm2)

    # ------------------------------------------------------------ backward
    def _backward(self, cache: list, grad: np.ndarray, lock: bool = True) -> np.ndarray:
        """df/dh_L (C, N, d) -> df/d(word embeddings) (C, N, d), back through every layer and the first LayerNorm.
        Consumes the cache (each layer's arrays are freed, or overwritten, once its gradient has gone through).
        lock=False: the caller holds the model's lock."""
        b, w = self.bert, self.bert.w
        g = grad
        for i in reversed(range(b.n_layers)):
            saved = cache.pop()
            if isinstance(saved, np.ndarray):  # a checkpoint: the layer's input; run the layer again
                with b._lock if lock else contextlib.nullcontext():
                    saved = self._layer(saved, i)[1]
            elif saved[3] is None:  # the weights were not kept: softmax(q k^T), q already / sqrt(d_k)
                q, k = saved[0], saved[1]
                saved = saved[:3] + (softmax(q @ k.transpose(0, 1, 3, 2), in_place=True),) + saved[4:]
            g = self._layer_backward(i, saved, g)
            del saved
        return _layer_norm_backward(g, cache.pop(), w["embeddings.LayerNorm.weight"])

    def _layer_backward(self, i: int, saved: tuple, g_out: np.ndarray) -> np.ndarray:
        """d(layer output) (C, N, d) -> d(layer input) (C, N, d). Overwrites the saved weights a."""
        check_cancelled()
        b, w, p = self.bert, self.bert.w, f"encoder.layer.{i}."
        q, k, v, a, norm1, pre, cdf, norm2 = saved                                         # q already / sqrt(d_k)
        c, heads, n, dk = q.shape
        g_z2 = _layer_norm_backward(g_out, norm2, w[p + "output.LayerNorm.weight"])        # z2 = u + FFN(u)
        gelu_grad = _gelu_grad(pre, cdf)                                                   # GELU'(pre)
        g_pre = _linear_back(g_z2, w, p + "output.dense") * gelu_grad                      # (C, N, d_ff)
        g_u = g_z2 + _linear_back(g_pre, w, p + "intermediate.dense")                      # (C, N, d)
        g_z1 = _layer_norm_backward(g_u, norm1, w[p + "attention.output.LayerNorm.weight"])  # z1 = h + attn(h)
        g_ctx = _linear_back(g_z1, w, p + "attention.output.dense")                        # (C, N, d)
        g_ctx = np.ascontiguousarray(g_ctx.reshape(c, n, heads, dk).transpose(0, 2, 1, 3))  # (C, H, N, d_k)
        g_v = a.transpose(0, 1, 3, 2) @ g_ctx                                              # (C, H, N, d_k)
        g_s = g_ctx @ v.transpose(0, 1, 3, 2)                                              # (C, H, N, N): dL/da
        g_s *= a                                                                           # softmax backward:
        a *= g_s.sum(-1, keepdims=True)                                                    # a (da - sum da a)
        g_s -= a
        scale = np.float32(1.0 / np.sqrt(dk))
        g_q, g_k = (g_s @ k) * scale, g_s.transpose(0, 1, 3, 2) @ q                        # (C, H, N, d_k) each

        def merge(y: np.ndarray) -> np.ndarray:  # (C, H, N, d_k) -> (C, N, d)
            return y.transpose(0, 2, 1, 3).reshape(c, n, heads * dk)

        return (g_z1 + _linear_back(merge(g_q), w, p + "attention.self.query")
                + _linear_back(merge(g_k), w, p + "attention.self.key")
                + _linear_back(merge(g_v), w, p + "attention.self.value"))


def _phi(pre: np.ndarray) -> np.ndarray:
    """Phi(x) = (1 + erf(x / sqrt 2)) / 2, the standard normal CDF (GELU(x) = x Phi(x))."""
    return 0.5 * (1.0 + _erf(pre * np.float32(1.0 / np.sqrt(2.0))))


def _gelu_grad(pre: np.ndarray, cdf: np.ndarray) -> np.ndarray:
    """GELU'(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi)."""
    return cdf + pre * np.exp(-0.5 * pre * pre) * np.float32(1.0 / np.sqrt(2.0 * np.pi))


def _linear(x: np.ndarray, w: dict, name: str) -> np.ndarray:
    """y = x W^T + b: (C, N, d_in) -> (C, N, d_out), as one GEMM."""
    y = x.reshape(-1, x.shape[-1]) @ w[name + ".weight"].T + w[name + ".bias"]
    return y.reshape(*x.shape[:-1], -1)


def _linear_back(g: np.ndarray, w: dict, name: str) -> np.ndarray:
    """dx = dy W: (C, N, d_out) -> (C, N, d_in)."""
    return (g.reshape(-1, g.shape[-1]) @ w[name + ".weight"]).reshape(*g.shape[:-1], -1)


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> tuple[np.ndarray, tuple]:
    """(x_hat gamma + beta, (x_hat, r)): x_hat = (x - mean) r, r = 1 / sqrt(var + eps) over the last axis."""
    mu = x.mean(-1, keepdims=True)
    r = 1.0 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    x_hat = (x - mu) * r
    return x_hat * gamma + beta, (x_hat, r)


def _layer_norm_backward(g: np.ndarray, saved: tuple, gamma: np.ndarray) -> np.ndarray:
    """dx = r (dx_hat - mean(dx_hat) - x_hat mean(dx_hat x_hat)), dx_hat = dy gamma."""
    x_hat, r = saved
    gh = g * gamma
    return r * (gh - gh.mean(-1, keepdims=True) - x_hat * (gh * x_hat).mean(-1, keepdims=True))


def _score(outs: list[tuple[np.ndarray, list]], reference: np.ndarray | None) -> tuple[np.ndarray, list[np.ndarray]]:
    """(f per row (C,), df/dh_L of every text (C, N, d)): the projection on e_0 for one text, the cosine for two."""
    hs = [h for h, _ in outs]
    if reference is not None:
        h = hs[0]
        f = h.mean(1) @ reference                                                          # (C,)
        return f, [np.broadcast_to(reference / h.shape[1], h.shape).astype(h.dtype)]
    (ha, hb) = hs
    ea, eb = ha.mean(1), hb.mean(1)                                                        # (C, d) each
    na, nb = np.linalg.norm(ea, axis=-1)[:, None], np.linalg.norm(eb, axis=-1)[:, None]     # (C, 1) each
    f = cosine(ea, eb)                                                                     # (C,)
    ga = eb / (na * nb) - f[:, None] * ea / na ** 2                                        # (C, d): df/de_A
    gb = ea / (na * nb) - f[:, None] * eb / nb ** 2
    return f, [np.repeat((ga / ha.shape[1])[:, None, :], ha.shape[1], 1).astype(ha.dtype),
               np.repeat((gb / hb.shape[1])[:, None, :], hb.shape[1], 1).astype(hb.dtype)]
