"""Which heads matter: knock out one attention head at a time and measure how the model's own output changes.

Ablating head h of layer l replaces its output o_{l,h} (N, d_head) - the h-th slice of the input of the layer's
attention output projection W_O - before W_O mixes the heads:

    zero ablation:  o_{l,h} <- 0          mean ablation:  o_{l,h} <- mean_i o_{l,h}(i)  (over this input's tokens)

    effect_{l,h} = f(model with o_{l,h} replaced) - f(model)

f is what the model produces (see `Objective`): for a sentence encoder (all-MiniLM-L6-v2) the cosine similarity of the
mean-pooled embeddings of text A and text B (with no B, the cosine between A's embedding and its unablated
embedding); for a decoder-only model log p(target | text) of the next token; for an encoder-decoder model
log p(target text | source) under teacher forcing.

All L x H ablations run as one batched forward pass: batch row b has its own (layer, head) knocked out by forward
pre-hooks on every layer's output projection (BertSelfOutput.dense, GPT-2 attn.c_proj, T5 `o`), so MiniLM's 72
ablations cost about one forward pass of a 72-row batch.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import InputError
from ..runtime.hooks import thread_hooks
from .load import LoadedModel, _decoder_inputs, _encode, clean_text
from .result import HeadImportance  # noqa: F401 - torch-free (bert_numpy makes it too); its old home is here
from .token_text import token_labels

METHODS = ("zero", "mean")
PARTS = ("self", "encoder", "decoder", "cross")
log = logging.getLogger(__name__)
CHUNK_BYTES = 64 * 2**20   # one batched chunk's temporaries by row_bytes' estimate; the process grows about three times
#                           that (allocator, kernels' workspaces): Gemma at 128 tokens peaked +190 MB at 64 MB and
#                           +530 MB at 256 MB, in the same time (fewer rows per pass cost nothing measurable)

# the attention output projection W_O of each layer, by model family: (part, regex whose group 1 is the layer index)
_PROJECTIONS = (
    ("self", r"(?:^|\.)layer\.(\d+)\.attention\.output\.dense$"),            # BERT, RoBERTa, MiniLM, ...
    ("self", r"(?:^|\.)h\.(\d+)\.attn\.c_proj$"),                            # GPT-2
    ("self", r"^(?:model\.)?layers\.(\d+)\.self_attn\.o_proj$"),             # LLaMA-style decoders
    ("encoder", r"^encoder\.block\.(\d+)\.layer\.0\.SelfAttention\.o$"),     # T5
    ("decoder", r"^decoder\.block\.(\d+)\.layer\.0\.SelfAttention\.o$"),
    ("cross", r"^decoder\.block\.(\d+)\.layer\.1\.EncDecAttention\.o$"),
    ("encoder", r"^encoder\.layers\.(\d+)\.self_attn\.out_proj$"),           # BART, Marian
    ("decoder", r"^decoder\.layers\.(\d+)\.self_attn\.out_proj$"),
    ("cross", r"^decoder\.layers\.(\d+)\.encoder_attn\.out_proj$"),
)


@dataclass
class Objective:
    """The inputs of one model call and how to read the scalar f from its output (one value per batch row)."""
    kind: str                                   # "embedding", "next" or "seq2seq"
    inputs: list[dict]                          # one encoding per separately encoded text (A, then B if any)
    target_id: int = -1                         # next-token id ("next")
    labels: torch.Tensor | None = None          # (1, T) target ids ("seq2seq")
    target_token: str = ""
    reference: torch.Tensor | None = field(default=None, repr=False)  # (d,) unit embedding of A (single text)

    @property
    def metric(self) -> str:
        if self.kind == "embedding":
            return "pair_cosine" if len(self.inputs) == 2 else "self_cosine"
        return "next_logprob" if self.kind == "next" else "target_logprob"


# ---------------------------------------------------------------- where the heads are
def output_projections(m: LoadedModel, part: str = "self") -> list[torch.nn.Module]:
    """Each layer's attention output projection W_O (whose input is the heads' outputs side by side), layer order."""
    return [proj for proj, _ in _layers(m, part)]


def _layers(m: LoadedModel, part: str) -> list[tuple[torch.nn.Module, torch.nn.Module]]:
    """(W_O, the whole layer holding it) per layer, in layer order."""
    part = _check_part(m, part)
    modules = dict(m.model.named_modules())
    found: dict[int, tuple] = {}
    for name, module in modules.items():
        for p, pattern in _PROJECTIONS:
            match = re.search(pattern, name) if p == part else None
            if match:
                found[int(match.group(1))] = (module, modules.get(name[:match.end(1)]))
    if not found or sorted(found) != list(range(len(found))):
        raise InputError("importance.unsupported", f"cannot find the attention heads of {m.name}", name=m.name)
    return [found[i] for i in range(len(found))]


def _check_part(m: LoadedModel, part: str) -> str:
    """'self' for encoder / decoder-only models; 'encoder' (also for 'self'), 'decoder' or 'cross' otherwise."""
    if m.kind != "encoder-decoder":
        allowed, part = ("self",), "self" if part == "encoder" else part
    else:
        allowed, part = ("encoder", "decoder", "cross"), "encoder" if part == "self" else part
    if part not in allowed:
        raise InputError("importance.bad_part", f"part must be one of {allowed}", part=str(part)[:20])
    return part


# ---------------------------------------------------------------- the scalar f
def objective(m: LoadedModel, text: str, text_pair: str | None = None, target: str | int | None = None) -> Objective:
    """Tokenise the input and decide what f is for this kind of model (see the module docstring)."""
    text = clean_text(text)
    if m.kind == "encoder-decoder":
        return _seq2seq_objective(m, text, target)
    if m.kind == "decoder":
        return _next_objective(m, text, target)
    texts = [text] + ([clean_text(text_pair, "text_b")] if text_pair and text_pair.strip() else [])
    obj = Objective("embedding", [_encoding(m, t) for t in texts])
    if len(texts) == 1:
        with torch.no_grad():  # not inference_mode: attribution's backward pass reads this tensor
            pooled = _pooled(m.model(**obj.inputs[0], return_dict=True))[0]  # (d,)
        obj.reference = pooled / pooled.norm().clamp_min(1e-12)
    return obj


def _encoding(m: LoadedModel, text: str) -> dict:
    enc, _ = _encode(m, text, None)
    enc.pop("special_tokens_mask", None)
    return dict(enc)


def _next_objective(m: LoadedModel, text: str, target: str | int | None) -> Objective:
    enc = _encoding(m, text)
    if target is None or (isinstance(target, str) and not target.strip()):
        with torch.inference_mode():
            target = int(_logits(m, m.model(**enc, return_dict=True).last_hidden_state[:, -1]).argmax(-1)[0])
    elif isinstance(target, str):
        ids = m.tokenize(target, add_special_tokens=False)["input_ids"]
        if not ids:
            raise InputError("importance.bad_target", "the target token is empty")
        target = ids[0]
    if not 0 <= int(target) < _vocab(m).shape[0]:
        raise InputError("importance.bad_target", "the target token is not in the vocabulary")
    token = token_labels(m.tokenizer, [int(target)])[0]
    return Objective("next", [enc], target_id=int(target), target_token=str(token))


def _seq2seq_objective(m: LoadedModel, text: str, target: str | int | None) -> Objective:
    if not isinstance(target, str) or not target.strip():
        raise InputError("importance.need_target", "an encoder-decoder model needs a target text to score")
    enc = _encoding(m, text)
    dec_ids, _ = _decoder_inputs(m, target)                      # (1, T): [start] + target[:-1]
    target_ids = m.tokenize(text_target=clean_text(target, "target"), add_special_tokens=True)["input_ids"]
    labels = torch.tensor([target_ids[: dec_ids.shape[1]]])      # (1, T): the token each position predicts
    enc["decoder_input_ids"] = dec_ids
    return Objective("seq2seq", [enc], labels=labels)


def _vocab(m: LoadedModel) -> torch.Tensor:
    """The output embedding (V, d): the decoder's own head where it was loaded with one, else (AutoModel has no LM
    head) a tied head, i.e. the input embedding."""
    if m.kind == "decoder" and m.lm_head is not None and isinstance(getattr(m.lm_head, "weight", None), torch.Tensor):
        return m.lm_head.weight
    if not getattr(m.model.config, "tie_word_embeddings", True):
        raise InputError("importance.no_lm_head", f"{m.name} has no tied output head to read probabilities from",
                         name=m.name)
    return m.model.get_input_embeddings().weight


def _logits(m: LoadedModel, hidden: torch.Tensor) -> torch.Tensor:
    """(..., d) last hidden states -> (..., V) logits through the decoder's head (with what the model does after
    it, e.g. Gemma 2's soft cap), or the tied head (T5 rescales by d_model^-1/2 first)."""
    if m.kind == "decoder" and m.lm_head is not None:
        from .lens import finish_logits
        return finish_logits(m.model.config, m.lm_head(hidden))
    if m.kind == "encoder-decoder" and getattr(m.model.config, "scale_decoder_outputs",
                                               getattr(m.model.config, "tie_word_embeddings", False)):
        hidden = hidden * m.model.config.d_model ** -0.5
    return hidden @ _vocab(m).T


def _pooled(out) -> torch.Tensor:
    """Mean pooling over tokens, as sentence-transformers does (no padding here): (B, N, d) -> (B, d)."""
    return out.last_hidden_state.mean(dim=1)


def score(m: LoadedModel, obj: Objective, outputs: list) -> torch.Tensor:
    """f per batch row, from the model outputs of each of obj.inputs (same batch size each): (B,)."""
    if obj.kind == "embedding":
        a = _pooled(outputs[0])                                  # (B, d)
        if len(outputs) == 2:
            return torch.nn.functional.cosine_similarity(a, _pooled(outputs[1]), dim=-1)
        return torch.nn.functional.cosine_similarity(a, obj.reference[None], dim=-1)
    hidden = outputs[0].last_hidden_state                        # (B, T, d)
    if obj.kind == "next":
        return torch.log_softmax(_logits(m, hidden[:, -1]).float(), -1)[:, obj.target_id]
    logp = torch.log_softmax(_logits(m, hidden).float(), -1)     # (B, T, V)
    labels = obj.labels.expand(hidden.shape[0], -1)              # (B, T)
    return logp.gather(-1, labels[..., None])[..., 0].sum(-1)    # (B,)


# ---------------------------------------------------------------- knocking heads out
def ablation_hook(rows: torch.Tensor, heads: torch.Tensor, n_heads: int, fill: torch.Tensor | str | None):
    """Forward pre-hook for W_O: in batch row rows[k], replace head heads[k]'s slice of the input by 0 or fill.

    fill: (H, d_head) per-head replacement (mean ablation), "row0" (the mean over positions of batch row 0, the
    intact row, in this very call) or None (zero ablation).
    """
    def hook(_module, args):
        x = args[0]                                              # (B, N, H * d_head)
        b, n, width = x.shape
        x = x.reshape(b, n, n_heads, width // n_heads).clone()   # (B, N, H, d_head)
        value = x[0].mean(0) if isinstance(fill, str) else fill  # (H, d_head) or None
        x[rows, :, heads, :] = 0.0 if value is None else value[heads][:, None, :].to(x.dtype)  # (k, N, d_head)
        return (x.reshape(b, n, width),) + tuple(args[1:])
    return hook


def grow_hook(n_new: int):
    """Forward pre-hook for a layer: append n_new copies of batch row 0 (the intact row) to its hidden states.

    Layers below l are the same for every ablation of layer l, so they run once, not once per head.
    """
    def hook(_module, args, kwargs):
        h = args[0] if args else kwargs["hidden_states"]         # (B, N, d)
        h = torch.cat([h, h[:1].expand(n_new, *h.shape[1:])])   # (B + n_new, N, d)
        return ((h,) + tuple(args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": h})
    return hook


def _run(m: LoadedModel, enc: dict, batch: int, hooks: list) -> object:
    """One forward of enc repeated batch times, with (module, pre-hook) pairs attached."""
    inputs = {k: v.expand(batch, *v.shape[1:]) if isinstance(v, torch.Tensor) else v for k, v in enc.items()}
    with thread_hooks(pre=hooks), torch.inference_mode():  # this thread's pass only: the model is shared
        return m.model(**inputs, return_dict=True)


def head_means(m: LoadedModel, enc: dict, projections: list[torch.nn.Module]) -> list[torch.Tensor]:
    """Each layer's per-head output averaged over this input's positions: L tensors (H, d_head), intact model."""
    means: list[torch.Tensor | None] = [None] * len(projections)

    def capture(layer: int):
        def hook(_module, args):
            x = args[0][0]                                       # (N, H * d_head)
            means[layer] = x.reshape(x.shape[0], m.n_heads, -1).mean(0)  # (H, d_head)
        return hook

    _run(m, enc, 1, [(p, capture(i)) for i, p in enumerate(projections)])
    return means


def ablated_scores(m: LoadedModel, obj: Objective, plan: list[tuple[int, int]], part: str = "self",
                   method: str = "zero") -> np.ndarray:
    """f with head plan[b] = (layer, head) knocked out, for every b: (len(plan),). Chunked to bound memory."""
    if method not in METHODS:
        raise InputError("importance.bad_method", f"method must be one of {METHODS}", method=str(method)[:20])
    projections = output_projections(m, part)
    fills = [head_means(m, enc, projections) if method == "mean" else None for enc in obj.inputs]
    chunk = _chunk_rows(m, obj, len(plan))
    from .layerwise import LAYERWISE_ERRORS, ablated_from_layer_inputs, layer_blocks
    blocks = layer_blocks(m) if part == "self" and len(obj.inputs) == 1 else None
    if blocks is not None and len(blocks) == len(projections):  # a decoder: each row from its own layer on
        try:
            return np.asarray(ablated_from_layer_inputs(
                m, blocks, obj.inputs[0], plan, projections, fills[0],
                lambda rows, heads, fill: ablation_hook(rows, heads, m.n_heads, fill), chunk,
                lambda outputs: score(m, obj, outputs)), dtype=np.float32)
        except LAYERWISE_ERRORS as exc:  # a decoder whose layers are not called as layerwise expects
            log.info("head importance: rows from their own layer not possible for %s (%s); whole passes", m.name, exc)
    out = []
    for start in range(0, len(plan), chunk):
        sub = plan[start:start + chunk]
        outputs = [_run(m, enc, len(sub), _hooks(m, projections, sub, fill)) for enc, fill in zip(obj.inputs, fills)]
        out.append(score(m, obj, outputs).float().numpy())
    return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)


def _hooks(m: LoadedModel, projections: list, plan: list[tuple[int, int]], fills) -> list:
    hooks = []
    for layer, module in enumerate(projections):
        rows = [b for b, (l_, _) in enumerate(plan) if l_ == layer]
        if rows:
            heads = torch.tensor([plan[b][1] for b in rows])
            hooks.append((module, ablation_hook(torch.tensor(rows), heads, m.n_heads,
                                                None if fills is None else fills[layer])))
    return hooks


def _chunk_rows(m: LoadedModel, obj: Objective, n_rows: int) -> int:
    """Rows per batched forward so that one layer's temporaries and the logits of every row fit CHUNK_BYTES."""
    n = max(max(v.shape[-1] for k, v in enc.items() if k.endswith("input_ids")) for enc in obj.inputs)
    return int(max(1, min(n_rows, CHUNK_BYTES // row_bytes(m, n))))


def row_bytes(m: LoadedModel, n: int, layers_kept: int = 1) -> int:
    """Float32 bytes one batch row of n tokens needs: per layer about 4 copies of its attention scores (H x N x N),
    8 of its residual stream (N x d), 4 of its FFN's hidden layer (N x d_ff) and 3 of its projections
    ((H + 2 H_kv) x d_head per token); times the layers whose activations are kept (1 in inference, L for a
    backward pass); plus two rows of logits for a decoder's vocabulary (Gemma's 262,144: 2 MB a row)."""
    config = m.model.config.get_text_config() if hasattr(m.model.config, "get_text_config") else m.model.config
    d = getattr(config, "hidden_size", None) or getattr(config, "d_model", None) or getattr(config, "n_embd", 0) or 0
    d_ff = getattr(config, "intermediate_size", None) or getattr(config, "d_ff", None) or 4 * d
    arch = m.architecture
    proj = (arch.n_heads + 2 * arch.n_kv_heads) * arch.head_dim if arch is not None and arch.head_dim else 3 * d
    per_layer = 4 * (4 * m.n_heads * n * n + n * (8 * d + 4 * d_ff + 3 * proj))
    vocab = getattr(getattr(m.lm_head, "weight", None), "shape", (0,))[0] if m.kind == "decoder" else 0
    return per_layer * max(1, layers_kept) + 8 * vocab


def head_importance(m: LoadedModel, text: str, text_pair: str | None = None, method: str = "zero",
                    target: str | int | None = None, part: str = "self") -> HeadImportance:
    """Knock out every head in turn (zero or mean ablation) and measure the change of f (module docstring).

    m: what viz_core.pretrained.load_model() returns. text_pair: text B for sentence encoders. target: decoder-only
    models, the next token to score (token id or text; None = the model's own top prediction); encoder-decoder
    models, the target text (required). part: whose heads, for encoder-decoder models "encoder", "decoder" or
    "cross". Returns effect (L, H) = f(ablated) - f(intact).
    """
    part = _check_part(m, part)
    obj = objective(m, text, text_pair, target)
    n_layers = len(output_projections(m, part))
    scores = _growing(m, obj, part, method)
    if scores is None:
        plan = [(layer, head) for layer in range(n_layers) for head in range(m.n_heads)]
        scores = np.concatenate([[_intact(m, obj)], ablated_scores(m, obj, plan, part, method)])
    baseline = float(scores[0])
    ablated = scores[1:].reshape(n_layers, m.n_heads).astype(np.float32)
    return HeadImportance(effect=ablated - np.float32(baseline), ablated=ablated, baseline=baseline,
                          metric=obj.metric, method=method, part=part, target_token=obj.target_token,
                          target_id=obj.target_id)


def growing_scores(m: LoadedModel, obj: Objective, part: str = "self", method: str = "zero") -> np.ndarray:
    """f of the intact model, then of every (layer, head) ablation in layer-major order: (1 + L * H,).

    One forward pass whose batch grows: row 0 stays intact; at layer l's input, H copies of row 0 are appended and
    copy h gets head h of layer l knocked out. Rows 1 + l*H + h are (l, h).
    """
    if method not in METHODS:
        raise InputError("importance.bad_method", f"method must be one of {METHODS}", method=str(method)[:20])
    layers, h = _layers(m, part), m.n_heads
    hooks = []
    for layer, (proj, block) in enumerate(layers):
        rows = torch.arange(1 + layer * h, 1 + (layer + 1) * h)
        hooks += [(block, grow_hook(h), True),
                  (proj, ablation_hook(rows, torch.arange(h), h, "row0" if method == "mean" else None))]
    outputs = [_run(m, enc, 1, hooks) for enc in obj.inputs]
    return score(m, obj, outputs).float().numpy()


def _growing(m: LoadedModel, obj: Objective, part: str, method: str) -> np.ndarray | None:
    """growing_scores where it applies: encoders (BERT family) on short input; None otherwise (plain batches).

    Decoder-only models reshape to the input's batch size after the last layer (GPT-2), so they take the plain path;
    long input takes it too, as its chunks bound the memory.
    """
    if m.kind != "encoder" or _chunk_rows(m, obj, 1 + m.n_layers * m.n_heads) < 1 + m.n_layers * m.n_heads:
        return None
    try:
        return growing_scores(m, obj, part, method)
    except (RuntimeError, ValueError, KeyError, IndexError) as exc:  # an encoder that does not broadcast batch 1
        log.info("head importance: growing batch not possible for %s (%s); plain batches", m.name, exc)
        return None


def _intact(m: LoadedModel, obj: Objective) -> float:
    """f of the intact model."""
    return float(score(m, obj, [_run(m, enc, 1, []) for enc in obj.inputs])[0])
