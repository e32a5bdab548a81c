"""Warm-up once per server process, in a background thread:
1. the packaged model in numpy (viz_core.pretrained.bert_numpy, no torch) and the attention of the Attention page's default
   sentences, so a first visit finds its heatmap computed;
2. plotly's import, the gzipped copy of plotly.js the browsers get (chart.compress, once per plotly version), and
   Streamlit's once-per-process check of whether it runs in a Python shell (it walks the stack
   of whichever thread first writes an element, with `inspect.stack()`: 0.27 s of the first visitor's first run,
   profiled; 0.08 s here, off any visitor's run);
3. the one-time conversion of the packaged real decoders (viz_core.pretrained.packaged: a process of its own, one
   model at a time, at a lower priority than the visitors), if their converted cache is missing;
4. every page's code compiled, and kept compiled (keep_compiled);
5. then, once a visitor's first page has run, the garbage collector's freeze of what lives as long as the server.

Neither torch nor transformers is imported here: every view of the packaged model answers in numpy (models.py), and
together they would hold about 340 MB of a small server's memory for nothing. A page that trains a model
imports torch when it is opened.

It starts as the server starts (serving.lifespan, the st.App hook that `streamlit run app.py` and `uvicorn app:app` use),
while the first visitor's browser is still loading the page; AppTest has no server and no warm-up. A visit that needs
a model before the thread is done waits for the same load (st.cache_resource computes a key once), it never loads a
second copy.

This module is cheap to import (no torch): the heavy imports happen in the thread, never in a script run.
"""
from __future__ import annotations

import gc
import logging
import threading
from pathlib import Path

from . import memory

_started = threading.Event()
page_served = threading.Event()  # set by app.py after a visitor's script run


def start() -> None:
    """Start the warm-up thread (once per process): the texts are the Attention page's default sentences."""
    from viz_core.i18n import LANGUAGES, t

    _start(tuple(dict.fromkeys(t("attention.default_text", lang) for lang in LANGUAGES)))


def _start(texts: tuple[str, ...]) -> None:
    if _started.is_set():  # once per process, whatever the number of lifespans
        return
    _started.set()
    threading.Thread(target=_warm, args=(texts,), name="attention-warmup", daemon=True).start()


def _warm(texts: tuple[str, ...]) -> None:
    try:
        import pandas  # noqa: F401 - whole, before a page needs it (see app.py)

        from . import models

        from viz_core.runtime.budget import ServerBusy
        try:
            for text in texts:  # the packaged model in numpy: the Attention page's first heatmap needs no torch
                models.attention("", text)
        except ServerBusy as exc:  # a budget smaller than the server itself: every visitor will read "busy"
            logging.getLogger(__name__).warning("warm-up: %s (ATTN_MEMORY_BUDGET_MB)", exc)
        from viz_core.pretrained import packaged
        packaged.start_all()  # the packaged decoders' one-time conversion, each in a process of its own
        from viz_core.plots import attention as _plots  # noqa: F401 - plotly's import, before the first figure
        _shell_check()
        from . import chart
        chart.compress()  # plotly.js gzipped once per plotly version (chart.PlotlyAsset sends it)
        kept = _keep_pages_compiled()

        page_served.wait()  # modules a first page imports live as long as the server too
        if not kept:  # (the runtime did not exist yet)
            _keep_pages_compiled()
        _freeze_long_lived()
        memory.arm()  # collections are cheap from now on (memory.py)
    except Exception:  # noqa: BLE001 - a failed warm-up only means that the first visit loads the model itself
        logging.getLogger(__name__).exception("warm-up of the default model failed")


def _shell_check() -> None:
    """Streamlit's check, made once per process when the first element is written (see the module's docstring)."""
    from streamlit import delta_generator
    check = getattr(delta_generator, "_maybe_print_use_warning", None)  # private: skipped if it goes away
    if check is not None:
        check()


APP_ROOT = Path(__file__).resolve().parents[2]


def keep_compiled(cache, paths, watched: bool) -> bool:
    """Compile each script of `paths` into Streamlit's script cache, and keep them there: whether that was done.

    Streamlit compiles a page the first time a session runs it and empties its cache whenever the last session has
    left, so on a quiet server every first visit of a page compiled it again (3-7 ms of our 300-900-line pages, on
    every page switch of a new visitor). With no file watcher (.streamlit/config.toml) a page cannot change while the
    server runs, so the cache is never emptied; with one (`streamlit run` while editing), nothing changes here."""
    if watched or not callable(getattr(cache, "get_bytecode", None)):
        return False
    cache.clear = lambda: None  # (an attribute of this cache only: the class is untouched)
    for path in paths:
        try:
            cache.get_bytecode(str(path))
        except Exception:  # noqa: BLE001 - a page that fails to compile fails in its own run, with its message
            continue
    return True


def _keep_pages_compiled() -> bool:
    """keep_compiled for app.py and every page, in the running server's script cache; False while there is none."""
    from streamlit import config
    from streamlit.runtime import Runtime

    if not Runtime.exists():
        return False
    cache = getattr(Runtime.instance(), "_script_cache", None)  # private: skipped if it goes away
    watched = config.get_option("server.fileWatcherType") != "none" or config.get_option("server.runOnSave")
    pages = [APP_ROOT / "app.py", *sorted((APP_ROOT / "app_pages").glob("*.py"))]
    return keep_compiled(cache, pages, bool(watched)) if cache is not None else True


def _freeze_long_lived() -> None:
    """Move everything alive now (modules, the default model: it all lives as long as the server) out of the
    garbage collector's sight, so a full collection only walks what sessions created since: milliseconds instead of
    0.1-0.15 s of holding the GIL (see .streamlit/config.toml, runner.postScriptGC)."""
    gc.collect()
    gc.freeze()
