"""What a corpus pass of the head finder reads from a model: its attention for a text and for a row of token ids,
the ordinary token ids to draw repeated random sequences from, and the bundled corpus.

Two kinds of model: the packaged MiniLM in numpy (bert_numpy, no torch) and any model transformers loaded
(LoadedModel). Both give (tokens (N,), weights float32 (L, H, N, N)) for one input; the model is only read.
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from typing import Callable, ContextManager

import numpy as np

from .head_finder import Corpus, repeated_ids

Gate = Callable[[], ContextManager]


@dataclass
class FinderSource:
    """A model as the head finder reads it."""
    n_layers: int
    n_heads: int
    kind: str                                                   # "encoder", "decoder" or "encoder-decoder"
    attend_text: Callable[[str], tuple[list[str], np.ndarray]]
    attend_ids: Callable[[np.ndarray], tuple[list[str], np.ndarray]] | None   # None: no raw ids (encoder-decoder)
    pool: np.ndarray | None                                     # ordinary token ids for repeated sequences
    start: int | None                                           # written before r r ([CLS], <bos>)
    end: int | None                                             # written after r r ([SEP]); decoders: none
    unk: str | None                                             # the unknown token's label

    def repeats(self, seed: int = 0) -> np.ndarray | None:
        """The repeated random sequences of the finder's corpus (head_finder.repeated_ids), None without ids."""
        if self.attend_ids is None or self.pool is None:
            return None
        return repeated_ids(self.pool, start=self.start, end=self.end, seed=seed)


def of_numpy_bert(nb, gate: Gate = contextlib.nullcontext) -> FinderSource:
    """The packaged MiniLM in numpy (bert_numpy.NumpyBert)."""
    vocab = nb._tok.get_vocab()

    def attend_text(text: str):
        with gate():
            r = nb.attention(text)
        return r.tokens, r.weights

    def attend_ids(ids: np.ndarray):
        ids = [int(i) for i in ids]
        with gate():
            weights = nb.attention_weights(ids, [0] * len(ids))  # (L, H, N, N)
        return [nb._tok.id_to_token(i) for i in ids], weights

    pool = np.array(sorted(i for tok, i in vocab.items() if not re.fullmatch(r"\[.*\]", tok)), dtype=np.int64)
    return FinderSource(nb.n_layers, nb.n_heads, "encoder", attend_text, attend_ids, pool, vocab.get("[CLS]"),
                        vocab.get("[SEP]"), nb.unk_token)


def of_loaded(m, gate: Gate = contextlib.nullcontext) -> FinderSource:
    """A model transformers loaded (load.LoadedModel): an encoder-decoder's encoder self-attention, without repeats."""
    from .heads import attention_of_ids, ordinary_ids, start_id
    from .load import attention_for
    from .token_text import token_labels

    def attend_text(text: str):
        r = attention_for(m, text, gate=gate)
        return r.tokens, r.weights

    def attend_ids(ids: np.ndarray):
        with gate():
            weights = attention_of_ids(m, np.asarray(ids, dtype=np.int64)[None])[0]  # (L, H, N, N)
        return token_labels(m.tokenizer, [int(i) for i in ids]), weights

    tok = m.tokenizer
    if m.kind == "decoder":
        start, end = start_id(tok), None
    else:
        start = next((v for v in (getattr(tok, "cls_token_id", None), getattr(tok, "bos_token_id", None))
                      if isinstance(v, int)), None)
        end = next((v for v in (getattr(tok, "sep_token_id", None), getattr(tok, "eos_token_id", None))
                    if isinstance(v, int)), None)
    pool = ordinary_ids(tok, int(getattr(m.model.config, "vocab_size", None) or len(tok)))
    usable = m.kind != "encoder-decoder"
    return FinderSource(m.n_layers, m.n_heads, m.kind, attend_text, attend_ids if usable else None,
                        pool if usable else None, start, end, str(getattr(tok, "unk_token", "") or "") or None)


def bundled_corpus(source: FinderSource, langs: tuple[str, ...] = ("en", "zh")) -> Corpus:
    """The app's bundled sentences (English and Chinese, written by this project) and the repeated sequences."""
    from .qk_map import bundled_sentences
    bundled = bundled_sentences()
    return Corpus([(lang, s) for lang in langs for s in bundled[lang]], source.repeats())


def own_corpus(source: FinderSource, text: str) -> Corpus:
    """A visitor's pasted text, split into sentences (head_finder.split_sentences), and the repeated sequences."""
    from .head_finder import split_sentences
    return Corpus([("own", s) for s in split_sentences(text)], source.repeats())
