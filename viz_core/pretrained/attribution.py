"""Which input tokens the output depends on: integrated gradients on the input embeddings, next to what raw
attention and attention rollout say about the same sentence.

Integrated gradients (Sundararajan et al., 2017) for token i with embedding x_i and baseline x'_i:

    IG_i = (x_i - x'_i) . (1/S) sum_{k=1..S} grad_{x_i} f(x' + a_k (x - x')),   a_k = (k - 1/2) / S

a midpoint Riemann sum of the path integral. Completeness: sum_i IG_i = f(x) - f(x') up to the sum's error, which
`TokenAttribution.completeness_gap` reports. f is the same scalar that head ablation measures (see
viz_core.pretrained.ablation.Objective), except for a single text on a sentence encoder, where f(x) = e(x) . e_0 / |e_0|
(the length of the mean-pooled embedding along its own direction e_0), since the cosine with itself is constant.
The baseline x' keeps the special tokens ([CLS], [SEP], ...) and gives every other token the word embedding of the
padding token ([PAD]; 0 for a model without one, e.g. GPT-2).
"""
from __future__ import annotations

import logging

import numpy as np
import torch

from .ablation import Objective, objective, row_bytes, score
from .layerwise import LAYERWISE_ERRORS, layer_blocks, value_and_grad
from .head_analysis import attention_received, reading_rows  # noqa: F401 - their old home is here
from .result import MAX_STEPS, METHODS, TokenAttribution, check_attribution  # noqa: F401 - torch-free (shared
# with attribution_numpy, the packaged model's integrated gradients in numpy)
from .token_text import token_labels

# what one chunk of path points may hold for its backward pass, by ablation.row_bytes' estimate (the process grows
# about three times the estimate: see ablation.CHUNK_BYTES). A batch of 34 points of 500 tokens held 5.5 GB.
CHUNK_BYTES = 64 * 2**20
log = logging.getLogger(__name__)


def token_attribution(m, text: str, text_pair: str | None = None, method: str = "integrated_gradients",
                      steps: int = 32, target: str | int | None = None) -> TokenAttribution:
    """Integrated gradients of f (see the module docstring) per input token, plus raw attention and rollout.

    m: what viz_core.pretrained.load_model() returns; target as in viz_core.pretrained.ablation.head_importance.
    """
    check_attribution(method, steps)
    obj = objective(m, text, text_pair, target)
    scores, value, base = integrated_gradients(m, obj, steps)
    tokens, special, segments, attention, rollout = _token_info(m, obj)
    return TokenAttribution(tokens=tokens, scores=scores, attention=attention, rollout=rollout, special=special,
                            segments=segments, value=value, baseline_value=base, metric=_metric(obj),
                            method=method, steps=steps, target_token=obj.target_token,
                            lengths=tuple(int(enc["input_ids"].shape[1]) for enc in obj.inputs))


def _metric(obj: Objective) -> str:
    return "self_projection" if obj.metric == "self_cosine" else obj.metric


# ---------------------------------------------------------------- integrated gradients
def _special(m, ids: torch.Tensor) -> torch.Tensor:
    """bool (N,): the tokenizer's special tokens in ids (1, N)."""
    return torch.tensor(np.isin(ids[0].numpy(), m.tokenizer.all_special_ids))


def _embed_inputs(m, enc: dict) -> tuple[dict, torch.Tensor, torch.Tensor]:
    """(encoding without input_ids, word embeddings x (N, d), baseline x' (N, d): specials kept, others [PAD])."""
    ids = enc["input_ids"]                                        # (1, N)
    table = m.model.get_input_embeddings()
    x = table(ids)[0].detach()                                    # (N, d)
    keep = _special(m, ids)[:, None]                              # (N, 1)
    rest = {k: v for k, v in enc.items() if k != "input_ids"}
    return rest, x, torch.where(keep, x, _baseline_vector(m, table).expand_as(x))


def _baseline_vector(m, table: torch.nn.Embedding) -> torch.Tensor:
    """The padding token's embedding (d,), or 0 for a model without one (GPT-2). Not 0 everywhere: a model whose
    first layer normalises the bare token embedding (T5: RMSNorm, no position embedding) is scale invariant there,
    so f jumps at exactly x = 0 and the path integral would miss the jump."""
    pad = getattr(m.tokenizer, "pad_token_id", None)
    if isinstance(pad, int) and 0 <= pad < table.weight.shape[0]:
        return table(torch.tensor([pad]))[0].detach().float()  # as the model embeds it (Gemma scales by sqrt(d))
    return torch.zeros(table.weight.shape[1])


def integrated_gradients(m, obj: Objective, steps: int, layerwise: bool = True) -> tuple[np.ndarray, float, float]:
    """(IG per token (N,), f(x), f(x')): IG_i = (x_i - x'_i) · mean over the S path points x' + a (x - x') of
    df/dx_i, a = (s + 0.5) / S; forward + backward over the S points and both ends, in chunks of points whose saved
    activations stay under CHUNK_BYTES (the points are independent rows, so the chunks add up to one batch)."""
    alphas = torch.cat([(torch.arange(steps) + 0.5) / steps, torch.tensor([0.0, 1.0])])  # (S + 2,)
    parts = [_embed_inputs(m, enc) for enc in obj.inputs]
    blocks = layer_blocks(m) if layerwise and len(parts) == 1 else None  # a decoder: one layer at a time
    rows = _chunk_points(m, parts, layerwise=blocks is not None)
    sums = [torch.zeros_like(x) for _, x, _ in parts]            # each (N, d): df/dx summed over the path points
    values = []
    for start in range(0, len(alphas), rows):
        a = alphas[start:start + rows]                            # (C,)
        paths = [(base + a[:, None, None] * (x - base)).requires_grad_(True) for _, x, base in parts]  # (C, N, d)
        if blocks is not None:
            try:
                f, grad = value_and_grad(m, blocks, _batched(parts[0][0], len(a)), paths[0],
                                         lambda outs: _score_with_grad(m, obj, outs))
                grads = [grad]                                    # (C, N, d)
            except LAYERWISE_ERRORS as exc:  # a decoder whose layers are not called as layerwise expects
                log.info("integrated gradients: layer by layer not possible for %s (%s); whole passes", m.name, exc)
                return integrated_gradients(m, obj, steps, layerwise=False)
        else:
            with torch.enable_grad():
                outputs = [_forward_embeds(m, rest, path) for (rest, _, _), path in zip(parts, paths)]
                f = _score_with_grad(m, obj, outputs)             # (C,)
                grads = torch.autograd.grad(f.sum(), paths)       # each (C, N, d)
        on_path = start + torch.arange(len(a)) < steps            # (C,): the path points, not the two ends
        for total, g in zip(sums, grads):
            total += g[on_path].sum(0)
        values.append(f.detach().double())
    scores = [((x - base) * total / steps).sum(-1) for (_, x, base), total in zip(parts, sums)]  # (N,) each
    f = torch.cat(values)                                         # (S + 2,)
    return torch.cat(scores).float().numpy(), float(f[-1]), float(f[-2])


def _chunk_points(m, parts, layerwise: bool = False) -> int:
    """Path points per forward + backward under CHUNK_BYTES: what a backward pass keeps of every layer
    (ablation.row_bytes with all L layers kept), or layer by layer (layerwise) one layer's activations and the L
    layer inputs."""
    n = max(x.shape[0] for _, x, _ in parts)
    if layerwise:
        per_point = row_bytes(m, n, 1) + 4 * m.n_layers * n * parts[0][1].shape[1]
    else:
        per_point = row_bytes(m, n, max(1, m.n_layers))
    return int(max(1, CHUNK_BYTES // per_point))


def _forward_embeds(m, rest: dict, embeds: torch.Tensor):
    """The model on word embeddings (B, N, d) instead of ids (position / type embeddings are added inside)."""
    return m.model(inputs_embeds=embeds, **_batched(rest, embeds.shape[0]), return_dict=True)


def _batched(rest: dict, b: int) -> dict:
    """The other inputs (attention mask, ...) of one text (1, N) repeated for b rows (b, N)."""
    return {k: v.expand(b, *v.shape[1:]) for k, v in rest.items()}


def _score_with_grad(m, obj: Objective, outputs: list) -> torch.Tensor:
    """f per row; a single text on an encoder uses the projection on its own direction (the cosine is constant)."""
    if obj.kind == "embedding" and len(outputs) == 1:
        return outputs[0].last_hidden_state.mean(1) @ obj.reference  # (B,)
    return score(m, obj, outputs)


# ---------------------------------------------------------------- what attention says
def _token_info(m, obj: Objective):
    """Tokens, special / segment masks and the attention comparisons of every separately encoded text."""
    tokens, special, segments, raws, rolls = [], [], [], [], []
    for seg, enc in enumerate(obj.inputs):
        ids = enc["input_ids"]
        with torch.inference_mode():
            out = m.model(**enc, output_attentions=True, return_dict=True)
        att = out.encoder_attentions if obj.kind == "seq2seq" else out.attentions
        weights = np.stack([a[0].float().numpy() for a in att])   # (L, H, N, N)
        raw, roll = attention_received(weights, reading_rows(obj.kind, weights.shape[-1]))
        spec = _special(m, ids).numpy()
        tokens += token_labels(m.tokenizer, ids[0].tolist())
        special.append(spec)
        segments.append(np.where(spec, -1, seg).astype(np.int8))
        raws.append(raw)
        rolls.append(roll)
    return tokens, np.concatenate(special), np.concatenate(segments), np.concatenate(raws), np.concatenate(rolls)
