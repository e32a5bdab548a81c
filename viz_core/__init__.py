"""Attention Explorer's model package: math, model loading and figure builders. Never imports streamlit.

The public API (docs/api.md) is re-exported lazily so that `import viz_core` stays cheap:
torch and transformers are imported only by the modules that need them.
"""
from __future__ import annotations

import importlib
from pathlib import Path

CHECKPOINTS_DIR = Path(__file__).parent / "checkpoints"  # the shipped checkpoints (seq2seq tasks, lm_*)

_EXPORTS = {
    "scaled_dot_product_attention": "attention",
    "MultiHeadAttention": "attention",
    "AdditiveAttention": "attention",
    "additive_scores": "attention",
    "combine_masks": "masks",
    "causal_mask": "masks",
    "padding_mask": "masks",
    "sinusoidal_encoding": "lessons.positional",
    "dot_product_variance": "lessons.scaling",
    "SGD": "lessons.optimizers",
    "Momentum": "lessons.optimizers",
    "AdaGrad": "lessons.optimizers",
    "RMSProp": "lessons.optimizers",
    "Adam": "lessons.optimizers",
    "load_model": "pretrained",
    "attention_for": "pretrained",
    "head_importance": "pretrained.ablation",
    "HeadImportance": "pretrained.ablation",
    "token_attribution": "pretrained.attribution",
    "TokenAttribution": "pretrained.attribution",
    "load_checkpoint": "seq2seq.checkpoint",
    "ModelPolicy": "pretrained.policy",
    "thread_budget": "runtime.threads",
    "load_lm": "lm.training",
}

__all__ = sorted(_EXPORTS)


def lazy_exports(package: str, exports: dict[str, str]):
    """A module-level __getattr__ (PEP 562) for package: name -> the attribute of its submodule exports[name], which
    is imported on first use only."""
    def __getattr__(name: str):
        if name in exports:
            return getattr(importlib.import_module(f".{exports[name]}", package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return __getattr__


__getattr__ = lazy_exports(__name__, _EXPORTS)
