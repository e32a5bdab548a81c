"""Warm-up once per server process, in a background thread:
1. the packaged model in numpy (viz_core.pretrained.bert_numpy, no torch) and the attention of the Attention page's default
   sentences, so a first visit finds its heatmap computed;
2. plotly's import, the gzipped copy of plotly.js the browsers get (chart.compress, once per plotly version), and
   Streamlit's once-per-process check of whether it runs in a Python shell (it walks the stack
   of whichever thread first writes an element, with `inspect.stack()`: 0.27 s of the first visitor's first run,
   profiled; 0.08 s here, off any visitor's run);
3. the one-time conversion of the packaged real decoders (viz_core.pretrained.packaged: a process of its own, one
   model at a time, at a lower priority than the visitors), if their converted cache is missing;
4. then, once a visitor's first page has run, the garbage collector's freeze of what lives as long as the server.

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

        page_served.wait()  # modules a first page imports live as long as the server too
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


def _freeze_long_lived() -> None:
    """Move everything alive now (modules, the default model: it all lives as long as the server) out of the
    garbage collector's sight, so a full collection only walks what sessions created since: milliseconds instead of
    0.1-0.15 s of holding the GIL (see .streamlit/config.toml, runner.postScriptGC)."""
    gc.collect()
    gc.freeze()
