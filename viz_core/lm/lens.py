"""The logit lens of our own small decoder (viz_core.lm.model.DecoderLM), and what kind of Transformer it is.

    x_0 = E[tok] + P[pos]                 row 0: the embeddings
    x_l = Block_{l-1}(x_{l-1})            row l: after block l-1
    p_l = softmax(W_out · LN_f(x_l))      the model's own readout applied to every row (nostalgebraist 2020)

The last row is the model's own output, lm.logits(text). The readout and the numbers per row are those of
viz_core.pretrained.lens (lens_from_readout), shared with the Hugging Face decoders.
"""
from __future__ import annotations

import torch

from ..pretrained.architecture import Architecture
from ..pretrained.lens import LogitLens, lens_from_readout
from .induction import typed_symbols
from .model import LMConfig
from .training import LanguageModel


def architecture_of(cfg: LMConfig) -> Architecture:
    """Our decoder: learned positions, LayerNorm before each sublayer (pre-norm), MHA / GQA / MQA by n_kv_heads."""
    return Architecture("lm", cfg.n_heads, cfg.kv_heads, "learned", "layernorm", "pre")


@torch.inference_mode()
def residual_stream(lm: LanguageModel, ids: list[int]) -> list[torch.Tensor]:
    """The residual stream of one sequence before block 0 and after each block: n_layers + 1 tensors (N, d_model),
    computed as DecoderLM.forward does (no cache, no captured maps)."""
    model = lm.model
    x = model.tok(torch.tensor([ids])) + model.pos(torch.arange(len(ids)))  # (1, N, d_model)
    rows = [x[0]]
    for i, block in enumerate(model.blocks):
        x = block(x, i, None, None)  # (1, N, d_model)
        rows.append(x[0])
    return rows  # R x (N, d_model)


def _label_of(lm: LanguageModel, text: str, ids: list[int], labels: list[str]):
    """Labels of predicted ids. The induction model reading words: the word a symbol stood for in this text (its
    first spelling), else the symbol's number; otherwise the tokenizer's labels."""
    if lm.task != "induction" or not typed_symbols(text, lm.config.vocab).as_words:
        return lm.tokenizer.labels
    word_of: dict[int, str] = {}
    for i, word in zip(ids, labels):
        word_of.setdefault(i, word)
    return lambda some: [word_of.get(i, lm.tokenizer.itos[i]) for i in some]


def logit_lens(lm: LanguageModel, text: str, k: int = 5) -> LogitLens:
    """The logit lens of a LanguageModel on text: out(ln_f(x_r)) for every row r (module docstring).
    InputError (from lm.tokenize) for an empty text or one longer than the context."""
    ids, labels = lm.tokenize(text)
    rows = residual_stream(lm, ids)
    model = lm.model

    def readout(r: int) -> torch.Tensor:
        with torch.inference_mode():
            return model.out(model.ln_f(rows[r]))  # (N, V)

    return lens_from_readout(readout, len(rows), ids, labels, _label_of(lm, text, ids, labels), k)
