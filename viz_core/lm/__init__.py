"""The small decoder-only language model (the Language model page): causal attention, a KV cache, induction heads.

    model.py      LMConfig, DecoderLM, KVCache, cache_bytes
    training.py   LMTrainConfig, LMTrainer, LanguageModel (a trained model and its tokenizer), load_lm
    generate.py   generate (temperature, top-k, top-p; with or without the cache), time_per_token
    corpus.py     the bilingual character corpus
    induction.py  repeated-token sequences, previous-token and induction scores per head
    lens.py       logit_lens (each block's residual stream through ln_f and the unembedding), architecture_of
    __main__.py   the command line: python -m viz_core.lm --task induction --max-seconds 60 --out DIR

`from viz_core.lm import LMConfig, DecoderLM, KVCache, cache_bytes` (the public API) reads the model module.
"""
from __future__ import annotations

from .model import DecoderLM, KVCache, LMConfig, cache_bytes, count_parameters  # noqa: F401 - the public API

__all__ = ["DecoderLM", "KVCache", "LMConfig", "cache_bytes", "count_parameters"]
