"""Which models a visitor may load into a shared server: the operator's policy and the checks made before a download.

Anyone with the app's address types into the model box, so by default it is a small box: the packaged
all-MiniLM-L6-v2 and an allowlist of small Hugging Face models suited to the app, each checked against a size limit
from the hub's metadata BEFORE anything is downloaded. Folders on the server are off unless the operator enables
them (a visitor could otherwise probe the file system). The operator sets the policy with environment variables or
the [models] table of .streamlit/secrets.toml (environment variables win):

    variable                    secrets.toml [models]   default
    ATTN_ALLOW_LOCAL_MODELS     allow_local             false   server folders in the model box
    ATTN_LOCAL_MODELS_DIR       local_dir               (none)  with allow_local: only folders inside this one
    ATTN_ALLOW_ANY_HUB_MODEL    allow_any_hub           false   any hub id, not only the allowlist (size still checked)
    ATTN_MODEL_ALLOWLIST        allowlist               DEFAULT_ALLOWED (comma-separated; replaces the list)
    ATTN_EXTRA_MODELS           extra_models            (none)  added to the allowlist
    ATTN_MAX_MODEL_MB           max_model_mb            800     largest download (weights + tokenizer), in MB

This module makes no network call and never imports streamlit: pages read st.secrets and pass the table in.
"""
from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError

log = logging.getLogger(__name__)

# Small models (at most ~714 MB of safetensors weights) that show the app's views: encoders, a Chinese and three
# multilingual encoders, decoders (SmolLM2: a modern Llama-style decoder with grouped-query attention), an
# encoder-decoder and translation models. Short ids as people type them; the hub's newer organisation ids
# (google-bert/bert-base-uncased, ...) are accepted as the same models. catalog.py describes each (language, kind,
# size) for the model picker.
DEFAULT_ALLOWED = (
    "bert-base-uncased", "gpt2", "t5-small", "bert-base-chinese", "Helsinki-NLP/opus-mt-en-zh",
    "distilbert-base-uncased", "distilgpt2", "bert-base-multilingual-cased", "distilbert-base-multilingual-cased",
    "bert-base-cased", "roberta-base", "Helsinki-NLP/opus-mt-zh-en",
    "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2", "HuggingFaceTB/SmolLM2-135M",
)
CANONICAL = {  # short id -> the hub's current id (both name the same repository)
    "bert-base-uncased": "google-bert/bert-base-uncased", "bert-base-cased": "google-bert/bert-base-cased",
    "bert-base-chinese": "google-bert/bert-base-chinese",
    "bert-base-multilingual-cased": "google-bert/bert-base-multilingual-cased",
    "distilbert-base-uncased": "distilbert/distilbert-base-uncased",
    "distilbert-base-multilingual-cased": "distilbert/distilbert-base-multilingual-cased",
    "distilgpt2": "distilbert/distilgpt2", "gpt2": "openai-community/gpt2", "roberta-base": "FacebookAI/roberta-base",
    "t5-small": "google-t5/t5-small",
}
DEFAULT_MAX_MB = 800
ENV = {"allow_local": "ATTN_ALLOW_LOCAL_MODELS", "local_dir": "ATTN_LOCAL_MODELS_DIR",
       "allow_any_hub": "ATTN_ALLOW_ANY_HUB_MODEL", "allowlist": "ATTN_MODEL_ALLOWLIST",
       "extra_models": "ATTN_EXTRA_MODELS", "max_model_mb": "ATTN_MAX_MODEL_MB"}
SUGGEST_MAX = 20  # models listed in a refusal message (a few where the message only gives examples)

# A hub id: "name" or "org/name", letters, digits, "-", "_", "." (no "..", no "--"); anything else is a path.
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?")
_SAFE_FILE = re.compile(r"[\w.-]+")
_SHARD = re.compile(r"model-\d+-of-\d+\.safetensors")
# Files next to the weights that the config and tokenizer need (vocabularies, sentencepiece models, merges).
_SIDE_SUFFIXES = (".json", ".txt", ".model", ".spm", ".tiktoken", ".codes")
_SKIP_SIDE = ("pytorch_model.bin.index.json", "tf_model.h5", "flax_model.msgpack")


def canonical(repo_id: str) -> str:
    """A hub id in one spelling for comparisons: the hub's current organisation id, lower case."""
    return CANONICAL.get(repo_id.lower(), CANONICAL.get(repo_id, repo_id)).lower()


def is_hub_id(name: str) -> bool:
    """Whether name has the shape of a Hugging Face id ("gpt2", "org/name"), as opposed to a path."""
    return bool(_HUB_ID.fullmatch(name)) and ".." not in name and "--" not in name


@dataclass(frozen=True)
class ModelPolicy:
    """What the model box accepts. The defaults are the safe ones for a server open to the internet."""
    allow_local: bool = False                       # server folders (off: a visitor could probe the file system)
    local_dir: str | None = None                    # with allow_local: only folders inside this one (None: any)
    allow_any_hub: bool = False                     # any hub id, not only the allowlist (the size limit still holds)
    allowlist: tuple[str, ...] = DEFAULT_ALLOWED    # hub ids a visitor may load
    max_model_mb: int = DEFAULT_MAX_MB              # largest download (weights + tokenizer files), MB = 10^6 bytes
    notes: tuple[str, ...] = field(default=(), compare=False)  # settings that were ignored, and why (for the log)

    @property
    def max_bytes(self) -> int:
        return self.max_model_mb * 10 ** 6

    def allows_hub(self, repo_id: str) -> bool:
        return self.allow_any_hub or canonical(repo_id) in {canonical(a) for a in self.allowlist}

    def suggestions(self, n: int = SUGGEST_MAX) -> str:
        """The first n allowed models as a list for messages ("bert-base-uncased, gpt2, ...")."""
        names = list(self.allowlist[:n]) + (["…"] if len(self.allowlist) > n else [])
        return ", ".join(names) if names else "all-MiniLM-L6-v2"

    # ---- settings
    @classmethod
    def from_settings(cls, env: Mapping[str, str] | None = None, secrets: Mapping | None = None) -> "ModelPolicy":
        """The policy from environment variables (ENV names) over a secrets.toml [models] table over the defaults.

        A value that cannot be read keeps the safe default and is recorded in `notes` (and logged).
        """
        env = os.environ if env is None else env
        secrets = secrets or {}
        raw = {key: env[var] if env.get(var, "").strip() else secrets.get(key) for key, var in ENV.items()}
        notes: list[str] = []
        allowlist = _names(raw["allowlist"], notes, "allowlist")
        allowlist = DEFAULT_ALLOWED if allowlist is None else allowlist
        extra = _names(raw["extra_models"], notes, "extra_models") or ()
        local_dir = str(raw["local_dir"] or "").strip() or None
        policy = cls(allow_local=_flag(raw["allow_local"], notes, "allow_local"), local_dir=local_dir,
                     allow_any_hub=_flag(raw["allow_any_hub"], notes, "allow_any_hub"),
                     allowlist=tuple(dict.fromkeys(allowlist + extra)),
                     max_model_mb=_megabytes(raw["max_model_mb"], notes), notes=tuple(notes))
        for note in notes:
            log.warning("model policy: %s", note)
        return policy

    # ---- checks
    def check_local(self, path: Path) -> Path:
        """The resolved folder if folders are allowed and it lies inside local_dir; else InputError (no path in it)."""
        if not self.allow_local:
            raise InputError("attention.model_local_off", "server folders are turned off in the model box",
                             allowed=self.suggestions(3))
        folder = path.expanduser().resolve()
        if self.local_dir and not folder.is_relative_to(Path(self.local_dir).expanduser().resolve()):
            raise InputError("attention.model_local_outside", "this folder is outside the allowed models folder")
        if not folder.is_dir():
            raise InputError("attention.model_not_found", "no such model folder", name=path.name[:80])
        return folder

    def is_allowed_folder(self, path: Path) -> bool:
        """Whether path is an existing folder this policy lets a visitor load (a name like "gpt2" that is also a
        folder on the server means the folder only when folders are allowed and it lies inside local_dir)."""
        try:
            return self.check_local(path) is not None
        except InputError:
            return False

    def check_hub(self, repo_id: str) -> None:
        if not self.allows_hub(repo_id):
            raise InputError("attention.model_not_allowed", f"{repo_id!r} is not on the allowlist",
                             name=repo_id, allowed=self.suggestions())

    def files_to_fetch(self, name: str, files: Mapping[str, int | None]) -> list[str]:
        """The files to download or load (safetensors weights + config and tokenizer files), after the size check.

        files: every file of the repository or folder with its size in bytes (None: unknown). Raises InputError
        when there are no safetensors weights, a size is unknown, or the total is above the limit.
        """
        weights = weight_files(files)
        if not weights:
            raise InputError("attention.model_no_safetensors", f"{name!r} has no safetensors weights", name=name)
        chosen = weights + side_files(files)
        sizes = [files[f] for f in chosen]
        if any(s is None for s in sizes):
            raise InputError("attention.model_size_unknown", f"the size of {name!r} is not known", name=name)
        total = sum(sizes)
        if total > self.max_bytes:
            raise InputError("attention.model_too_big", f"{name!r} needs {total / 1e6:.0f} MB, more than the "
                             f"{self.max_model_mb} MB allowed", name=name, size=f"{total / 1e6:,.0f}",
                             limit=f"{self.max_model_mb:,}", allowed=self.suggestions(3))
        return chosen


def weight_files(files: Mapping[str, int | None]) -> list[str]:
    """The safetensors files transformers loads (use_safetensors=True): model.safetensors, else its shards.

    Only top-level files count (subfolders hold other formats or other components). Shards are named
    model-0000i-of-0000n.safetensors next to model.safetensors.index.json; with an index but unusual shard names,
    every top-level .safetensors file counts (an overestimate is the safe side of a size limit).
    """
    top = [f for f in files if "/" not in f and _SAFE_FILE.fullmatch(f)]
    if "model.safetensors" in top:
        return ["model.safetensors"]
    if "model.safetensors.index.json" not in top:
        return []
    shards = sorted(f for f in top if _SHARD.fullmatch(f)) or sorted(f for f in top if f.endswith(".safetensors"))
    return ["model.safetensors.index.json"] + shards if shards else []


def side_files(files: Mapping[str, int | None]) -> list[str]:
    """Top-level config and tokenizer files (json, txt, sentencepiece models), without other weight formats."""
    return sorted(f for f in files if "/" not in f and _SAFE_FILE.fullmatch(f) and f.endswith(_SIDE_SUFFIXES)
                  and f not in _SKIP_SIDE and f != "model.safetensors.index.json")


def folder_files(folder: Path) -> dict[str, int]:
    """{file name: size in bytes} of a folder's top-level files (symlinks into the hub cache followed)."""
    return {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()}


# ---------------------------------------------------------------- reading settings
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off", ""}


def _flag(value, notes: list[str], key: str) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE | _FALSE:
        return text in _TRUE
    notes.append(f"{key}={value!r} is not true/false; using false")
    return False


def _names(value, notes: list[str], key: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    items = value if isinstance(value, (list, tuple)) else re.split(r"[,\s]+", str(value))
    names = tuple(str(v).strip() for v in items if str(v).strip())
    bad = [n for n in names if not is_hub_id(n)]
    if bad:
        notes.append(f"{key}: {', '.join(bad)} are not hub ids and are ignored")
    return tuple(n for n in names if is_hub_id(n))


def _megabytes(value, notes: list[str]) -> int:
    if value is None:
        return DEFAULT_MAX_MB
    try:
        mb = int(str(value).strip())
        if mb < 0:
            raise ValueError
        return mb
    except ValueError:
        notes.append(f"max_model_mb={value!r} is not a whole number of MB; using {DEFAULT_MAX_MB}")
        return DEFAULT_MAX_MB
