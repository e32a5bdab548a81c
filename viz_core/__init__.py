"""Attention Explorer's model package: math, model loading and figure builders. Never imports streamlit.

The public API (docs/api.md) is re-exported lazily so that `import viz_core` stays cheap:
torch and transformers are imported only by the modules that need them.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "scaled_dot_product_attention": "attention",
    "MultiHeadAttention": "attention",
    "AdditiveAttention": "attention",
    "additive_scores": "attention",
    "combine_masks": "masks",
    "causal_mask": "masks",
    "padding_mask": "masks",
    "sinusoidal_encoding": "positional",
    "dot_product_variance": "scaling",
    "SGD": "optimizers",
    "Momentum": "optimizers",
    "AdaGrad": "optimizers",
    "RMSProp": "optimizers",
    "Adam": "optimizers",
    "load_model": "pretrained",
    "attention_for": "pretrained",
    "head_importance": "pretrained.ablation",
    "HeadImportance": "pretrained.ablation",
    "token_attribution": "pretrained.attribution",
    "TokenAttribution": "pretrained.attribution",
    "load_checkpoint": "seq2seq.training",
    "ModelPolicy": "pretrained.policy",
    "thread_budget": "threads",
    "load_lm": "lm.training",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'viz_core' has no attribute {name!r}")
