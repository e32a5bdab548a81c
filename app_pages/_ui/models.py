"""Cached access to pretrained models, shared by every session (read-only: eval mode, inference only).

The packaged model answers in numpy (viz_core.pretrained.bert_numpy, attribution_numpy): its attention, Q / K / V,
queries and keys, position embeddings, head ablation and token attribution. So no page of the default model imports
transformers, and the Attention page never imports torch: together about 340 MB of a server's memory and 3 s of a
first visit. transformers loads a model when a visitor picks another one. Should it load the packaged
one too (a caller of default_model()), the numpy path reads its parameters from then on, so the server holds one
copy of the weights, and the torch path answers (faster on long inputs).
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import TYPE_CHECKING

import numpy as np
import streamlit as st

from viz_core.pretrained import bert_numpy
from viz_core.pretrained.result import AttentionResult
from viz_core.pretrained.policy import ModelPolicy
from viz_core.runtime import budget, cancel, priority
from viz_core.runtime.settings import env_int

from . import memory
from .caches import ByteBoundedCache

if TYPE_CHECKING:
    from viz_core import pretrained
    from viz_core.pretrained import attribution_numpy


def policy() -> ModelPolicy:
    """The operator's model policy: environment variables over the [models] table of .streamlit/secrets.toml."""
    return ModelPolicy.from_settings(os.environ, _secrets_table("models"))


def _secrets_table(name: str) -> dict:
    try:
        if not st.secrets.load_if_toml_exists():  # no secrets.toml: nothing to read (and no warning)
            return {}
        table = st.secrets.get(name)
    except Exception:  # noqa: BLE001 - an unreadable secrets.toml means "no settings": the safe defaults apply
        return {}
    return dict(table) if hasattr(table, "keys") else {}


def hub_online() -> bool:
    """Whether models can download now: HF_HUB_OFFLINE is not set and the hub answers (asked at most once a minute,
    and only where a page needs to know, e.g. to offer a model that reads the text)."""
    from viz_core.pretrained import catalog
    return not catalog.hub_offline_forced() and _hub_answers()


@st.cache_data(ttl=60, show_spinner=False)
def _hub_answers() -> bool:
    from viz_core.pretrained import catalog
    return catalog.hub_reachable(timeout=2.0)


def model(name: str = "") -> "pretrained.LoadedModel":
    """The loaded model for a hub id / folder ("" = the packaged all-MiniLM-L6-v2), as the policy allows.
    Raises InputError."""
    return _model(name, policy() if name else ModelPolicy())


_loaded: set[str] = set()  # names loaded at least once in this process (the cache may have evicted some since)
_packaged: dict = {"transformers": None, "numpy": None}  # the packaged model's two forms, once each is made
_packaged_lock = threading.Lock()


@st.cache_resource(show_spinner=False, max_entries=3)
def _model(name: str, model_policy: ModelPolicy) -> "pretrained.LoadedModel":
    from viz_core import pretrained  # torch and transformers: only when a view needs the model itself

    loaded_model = pretrained.load_model(name or None, policy=model_policy)
    if not name:
        _made("transformers", loaded_model)
    _loaded.add(name)
    return loaded_model


@st.cache_resource(show_spinner=False)
def numpy_default() -> bert_numpy.NumpyBert:
    """The packaged model in numpy: its attention without torch (see the module docstring)."""
    nb = bert_numpy.load_default()
    _made("numpy", nb)
    return nb


def _made(form: str, obj) -> None:
    """Record one form of the packaged model; whichever form comes second makes the numpy one read the
    transformers parameters (under a lock, so two forms made at the same time cannot both miss the other)."""
    with _packaged_lock:
        _packaged[form] = obj
        hf, nb = _packaged["transformers"], _packaged["numpy"]
    if hf is not None and nb is not None:  # only the second of the two calls sees both
        nb.adopt({k: v.detach().numpy() for k, v in hf.model.state_dict().items()})


def numpy_ablation() -> bert_numpy.NumpyAblation | None:
    """Head ablation of the packaged model in numpy while transformers has not loaded it; None once it has (the
    torch path answers then)."""
    return None if _packaged["transformers"] is not None else bert_numpy.NumpyAblation(numpy_default())


def numpy_attribution() -> "attribution_numpy.NumpyAttribution | None":
    """Token attribution of the packaged model in numpy while transformers has not loaded it; None once it has (the
    torch path is faster then: 15 s against 22 s at 500 tokens, 32 steps)."""
    return None if _packaged["transformers"] is not None else _numpy_attribution()


@st.cache_resource(show_spinner=False)
def _numpy_attribution() -> "attribution_numpy.NumpyAttribution":
    from viz_core.pretrained.attribution_numpy import NumpyAttribution
    return NumpyAttribution(numpy_default())


def info(name: str = "") -> "bert_numpy.ModelInfo | pretrained.LoadedModel":
    """Name, kind, layers, heads, token limit and pair support of a model; the packaged one's without torch.
    Raises InputError (as model())."""
    return numpy_default().info if not name else model(name)


def loaded(name: str = "") -> bool:
    """Whether this process can answer for this model without loading it first."""
    return name in _loaded or (not name and _packaged["numpy"] is not None)


def default_model() -> pretrained.LoadedModel:
    return model("")


ATTENTION_CACHE_MB = 400  # ATTN_ATTENTION_CACHE_MB: five 512-token results (75 MB each) or thousands of short ones
QKV_CACHE_BYTES = 32 * 2**20         # Q, K, V and weights of one layer: 15 MB at 512 tokens, 0.2 MB for a sentence
QK_CACHE_BYTES = 48 * 2**20          # the query-key map's sentences: q and k of every layer, 17 MB for MiniLM's 100


@st.cache_resource(show_spinner=False)
def _attention_cache() -> ByteBoundedCache:
    return ByteBoundedCache(env_int("ATTN_ATTENTION_CACHE_MB", ATTENTION_CACHE_MB) * 2**20)


@st.cache_resource(show_spinner=False)
def _qkv_cache() -> ByteBoundedCache:
    return ByteBoundedCache(QKV_CACHE_BYTES)


@st.cache_resource(show_spinner=False)
def _qk_cache() -> ByteBoundedCache:
    return ByteBoundedCache(QK_CACHE_BYTES)


_CORES = os.cpu_count() or 2
_gate = priority.FairGate(env_int("ATTN_MAX_CONCURRENT_FORWARDS", _CORES))
_long_gate = priority.FairGate(max(1, _gate.slots - 1))  # long runs leave one place to the short ones
_active = [0]
_active_lock = threading.Lock()


@contextlib.contextmanager
def heavy(long: bool = False):
    """At most ATTN_MAX_CONCURRENT_FORWARDS (default: one per core) model computations at once, server-wide, served
    in order of arrival (viz_core.runtime.priority.FairGate), each with the cores shared among those running
    (viz_core.runtime.threads.thread_budget). A wait ends with viz_core.runtime.cancel.Cancelled if the visitor leaves.

    long=True marks a computation of seconds (every head's ablation, integrated gradients, the head scores, a
    generation; the head finder's passes are short, each one a sentence): it first takes one of ATTN_MAX_CONCURRENT_FORWARDS - 1 places of its own (at least one), so
    one place always stays for short passes (a new sentence, a layer the cache no longer holds). Without it, a
    class whose visitors opened "Which heads matter" on long texts held every place for tens of seconds at a time,
    and a layer change waited behind them (bench/bench_worst_class.py).

    A forward pass at 512 tokens needs about 100 MB while it runs, and the cores are busy anyway: twenty sessions
    computing at the same moment wait their turn instead of holding 2 GB together and each taking twenty times
    as long. Two passes at once with two threads each would put four threads on two cores: a pass that starts
    while another runs takes one thread (Gemma at 20 tokens: 122 ms of CPU with one thread, 172 ms with two).
    While it runs, trainings wait before their next step (viz_core.runtime.priority). When its turn comes, the server-wide
    memory budget must hold budget.COMPUTATION_BYTES more (LONG_COMPUTATION_BYTES for a long one), else
    viz_core.runtime.budget.ServerBusy (an InputError)."""
    if "torch" in sys.modules:
        cancel.watch_torch()  # a model pass of a visitor who left stops between modules
    lane = _long_gate.turn(cancel.check) if long else contextlib.nullcontext()
    with lane, _gate.turn(cancel.check), priority.foreground():
        cancel.check()
        budget.admit(budget.LONG_COMPUTATION_BYTES if long else budget.COMPUTATION_BYTES,
                     "a model computation")  # the server-wide memory budget
        with _active_lock:
            _active[0] += 1
            threads = max(1, _CORES // _active[0])
        try:
            arenas = memory.computing() if long else contextlib.nullcontext()
            with _thread_budget(threads), arenas, bert_numpy.cores_share(_cores_free):
                yield
        finally:
            with _active_lock:
                _active[0] -= 1


def _cores_free() -> int:
    """The cores a running computation may use now: the server's cores over the computations running."""
    return max(1, _CORES // max(1, _active[0]))


def _thread_budget(threads: int):
    """viz_core.runtime.threads.thread_budget once torch is loaded (it sets torch's OpenMP threads); before that, nothing
    to budget (the page's first paint is torch-free)."""
    if "torch" not in sys.modules:
        return contextlib.nullcontext()
    from viz_core.runtime.threads import thread_budget
    return thread_budget(threads)


def attention(name: str, text: str, text_pair: str = "", target_text: str = "") -> AttentionResult:
    """Attention of one input (shared, read-only arrays: callers never modify them in place). Raises InputError.

    The packaged model ("") answers from its numpy forward pass until transformers has loaded it (equal within
    1e-5, tested), then from transformers, which is faster on long inputs (0.19 s against 0.24 s at 512 tokens)."""
    def compute() -> AttentionResult:
        if not name and _packaged["transformers"] is None:
            nb = numpy_default()
            with heavy():
                return nb.attention(text, text_pair or None)
        from viz_core import pretrained
        loaded = model(name)
        return pretrained.attention_for(loaded, text, text_pair or None, target_text or None, gate=heavy)

    return _attention_cache().get((name, text, text_pair, target_text), compute)


def qkv(text: str, layer: int, name: str = "") -> "pretrained.QKV":
    """Q, K, V (H, N, d_k) of one layer of the model for text (shared and read-only, byte-bounded). The packaged
    model answers in numpy until transformers has loaded it, as attention(). Raises InputError."""
    def compute() -> "pretrained.QKV":
        if not name and _packaged["transformers"] is None:
            with heavy():
                return numpy_default().qkv(text, layer)
        from viz_core import pretrained
        loaded = model(name)
        with heavy():
            return pretrained.qkv_for(loaded, text, layer)

    return _qkv_cache().get((name, text, layer), compute)


def queries_keys(texts: tuple[str, ...], name: str = "") -> list:
    """[(tokens, q, k)] of every layer for each text, q and k (L, H, N, d_k) (shared, read-only, byte-bounded). The
    packaged model answers in numpy until transformers has loaded it, as attention(). Raises InputError."""
    def compute() -> list:
        if not name and _packaged["transformers"] is None:
            with heavy():
                return numpy_default().queries_keys(list(texts))
        from viz_core import pretrained
        loaded = model(name)
        with heavy():
            return pretrained.queries_keys_for(loaded, list(texts))

    return _qk_cache().get((name, texts), compute)


@st.cache_data(show_spinner=False, max_entries=2)
def position_embeddings(name: str = "") -> np.ndarray | None:
    """Learned position embeddings (max_positions, d_model) of the model, or None (the packaged model's from numpy)."""
    if not name:
        return numpy_default().position_embeddings()
    from viz_core import pretrained
    return pretrained.position_embeddings(model(name))


# ---------------------------------------------------------------- the packaged real decoders
def packaged_decoder(name: str):
    """The packaged decoder of a picker id (viz_core.pretrained.packaged), or None for any other model."""
    from viz_core.pretrained import packaged
    return packaged.by_id(name)


def packaged_ready(name: str) -> bool:
    """Whether a model can be loaded now without converting: every model but a packaged decoder whose converted
    cache is not there yet (the conversion runs in the background, started at server start: warmup.py)."""
    from viz_core.pretrained import packaged
    d = packaged.by_id(name)
    return d is None or name in _loaded or packaged.status(d).state == "ready"


def packaged_gate(name: str) -> bool:
    """True when the model can be used in this run. For a packaged decoder still being converted: starts the
    conversion if nothing runs it, draws its progress (a fragment that reruns the page once the model is ready) and
    returns False; the caller draws nothing that needs the model. Never converts inside a script run."""
    from viz_core.pretrained import packaged
    d = packaged.by_id(name)
    if d is None or packaged_ready(name):
        return True
    if not packaged.installed(d):
        st.warning(_t("attention.packaged_missing", name=d.title, package=d.package))
        return False
    if packaged.status(d).state in ("idle", "failed"):
        packaged.start(d)
    st.fragment(_conversion_progress, run_every=1.0)(d.id)
    return False


def _conversion_progress(model_id: str) -> None:
    from viz_core.pretrained import packaged
    d = packaged.by_id(model_id)
    job = packaged.status(d)
    if job.state == "ready":
        st.rerun(scope="app")
    if job.state == "failed":
        st.error(_t("attention.packaged_failed", name=d.title))
        return
    stage = _t(f"attention.packaged_stage_{job.stage or 'assemble'}")
    st.progress(min(job.fraction, 1.0), text=_t("attention.packaged_converting", name=d.title, stage=stage,
                                                 done=job.done, total=job.total or "?"))
    st.caption(_t("attention.packaged_once"))


def _t(key: str, **kw) -> str:
    from . import t
    return t(key, **kw)
