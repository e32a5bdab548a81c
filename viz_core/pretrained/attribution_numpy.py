"""Integrated gradients of the packaged all-MiniLM-L6-v2 in numpy: a hand-written backward pass, no torch.

The same numbers as viz_core.pretrained.attribution.token_attribution (tests compare them), so "Which heads matter"
answers for the default model without importing torch and transformers, which hold about 340 MB of a server's memory
(issue #25: one visitor of every Attention view under 600 MB).

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

import numpy as np

from ..cancel import check as check_cancelled
from .bert_numpy import NumpyBert, _erf, cosine, in_blocks, softmax
from .head_analysis import attention_received, reading_rows
from .result import TokenAttribution, check_attribution, clean_text

# what one chunk of path points may hold for its backward pass (float32): the saved weights of every layer, their
# gradient and the FFN's activations (see NumpyAttribution._chunks). A sentence runs in 2 chunks; from about 200
# tokens one point at a time, each layer run again in the backward pass.
CHUNK_BYTES = 96 * 2**20


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
                          steps: int = 32) -> TokenAttribution:
        """Integrated gradients per token of text (then text_pair), raw attention and rollout. Raises InputError."""
        check_attribution(method, steps)
        texts = [clean_text(text)] + ([clean_text(text_pair, "text_b")] if text_pair and text_pair.strip() else [])
        encodings = [self.bert.encode_alone(t) for t in texts]  # each text alone, as the ablation encodes it
        ids = [np.array(e.ids, dtype=np.int64) for e in encodings]  # each (N,)
        scores, value, base = self.integrated_gradients(ids, steps)
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

    def integrated_gradients(self, ids: list[np.ndarray], steps: int) -> tuple[np.ndarray, float, float]:
        """(IG per token of every text, concatenated (N_A [+ N_B],), f(x), f(x')); the S path points and both ends
        (a = 0, 1) run in chunks of rows whose saved activations stay under CHUNK_BYTES."""
        b = self.bert
        words = [b.w["embeddings.word_embeddings.weight"][row] for row in ids]            # each (N, d)
        bases = [np.where(np.isin(row, self.special_ids)[:, None], x, self.baseline)
                 for row, x in zip(ids, words)]                                           # each (N, d)
        reference = None
        if len(ids) == 1:  # e_0 / |e_0|: the intact text's direction
            e0 = self._forward(words[0][None], checkpoint=True)[0].mean(1)[0]              # (d,): no cache
            reference = e0 / max(float(np.linalg.norm(e0)), 1e-12)
        alphas = np.concatenate([(np.arange(steps) + 0.5) / steps, [0.0, 1.0]]).astype(np.float32)  # (S + 2,)
        rows, checkpoint = self._chunks(max(len(row) for row in ids))
        sums = [np.zeros_like(x, dtype=np.float64) for x in words]                        # each (N, d)
        values = []
        for start in range(0, len(alphas), rows):
            a = alphas[start:start + rows, None, None]                                    # (C, 1, 1)
            outs = [self._forward(base + a * (x - base), checkpoint)                        # each ((C, N, d), cache)
                    for x, base in zip(words, bases)]
            f, grads_out = _score(outs, reference)                                        # (C,), each (C, N, d)
            on_path = start + np.arange(len(a)) < steps                                   # (C,)
            for total, (_, cache), g in zip(sums, outs, grads_out):
                total += self._backward(cache, g)[on_path].sum(0, dtype=np.float64)
            values.append(f.astype(np.float64))
        scores = [((x - base) * total / steps).sum(-1) for x, base, total in zip(words, bases, sums)]  # (N,) each
        f = np.concatenate(values)                                                        # (S + 2,)
        return np.concatenate(scores).astype(np.float32), float(f[-1]), float(f[-2])

    def _chunks(self, n: int) -> tuple[int, bool]:
        """(path points per forward + backward, whether to recompute each layer in the backward pass instead of
        keeping it). Per point and layer the backward pass reads about 3 (H, N, N) float32 arrays (the weights, their
        gradient, one temporary) and 4 (N, d_ff) ones; when one point's layers together exceed CHUNK_BYTES (from
        about 200 tokens), only each layer's input is kept and the layer runs again when its gradient is due: one
        more forward pass (about a third more time), a sixth of the memory (a long input's peak 170 -> 60 MB)."""
        b = self.bert
        d_ff = b.w["encoder.layer.0.intermediate.dense.weight"].shape[0]
        per_layer = 4 * (3 * b.n_heads * n * n + 4 * n * d_ff)
        per_point = b.n_layers * per_layer
        return int(max(1, CHUNK_BYTES // per_point)), per_point > CHUNK_BYTES

    # ------------------------------------------------------------ forward with what the backward pass reads
    def _forward(self, words: np.ndarray, checkpoint: bool = False) -> tuple[np.ndarray, list]:
        """words (C, N, d) -> (h_L (C, N, d), cache): BERT from word embeddings on, type 0, no padding. The cache
        holds what each layer's backward pass reads, or with checkpoint only each layer's input (C, N, d)."""
        b, w = self.bert, self.bert.w
        n = words.shape[1]
        x = words + w["embeddings.position_embeddings.weight"][:n] + w["embeddings.token_type_embeddings.weight"][0]
        h, norm0 = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], b.eps)
        cache: list = [norm0]
        with b._lock:
            for i in range(b.n_layers):
                h_in = h
                h, saved = self._layer(h, i)
                cache.append(h_in if checkpoint else saved)
                del saved
        return h, cache

    def _layer(self, h: np.ndarray, i: int) -> tuple[np.ndarray, tuple]:
        """One encoder layer (as NumpyBert._layer) keeping what its backward pass needs: q / sqrt(d_k), k, v, the
        weights, both LayerNorms' x_hat and r, the FFN's input to GELU and Phi of it."""
        check_cancelled()  # a visitor who left: stop between layers (viz_core.cancel)
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
    def _backward(self, cache: list, grad: np.ndarray) -> np.ndarray:
        """df/dh_L (C, N, d) -> df/d(word embeddings) (C, N, d), back through every layer and the first LayerNorm.
        Consumes the cache (each layer's arrays are freed, or overwritten, once its gradient has gone through)."""
        b, w = self.bert, self.bert.w
        g = grad
        for i in reversed(range(b.n_layers)):
            saved = cache.pop()
            if isinstance(saved, np.ndarray):  # a checkpoint: the layer's input; run the layer again
                with b._lock:
                    saved = self._layer(saved, i)[1]
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
