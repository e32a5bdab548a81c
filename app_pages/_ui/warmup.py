"""Warm-up once per server process: after the first page has been drawn, a background thread imports torch and
transformers, loads the default model and computes the attention of the Attention page's default sentences, so the
first visit to the Attention page (or to a section of another page that uses the model) finds them in the shared
caches. When the first page was the Attention page itself, everything is cached already and the thread ends at once.

This module is cheap to import (no torch): the heavy imports happen in the thread, never in a script run.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from streamlit.runtime import Runtime

_started = threading.Event()


def start(texts: Sequence[str]) -> None:
    """Start the warm-up thread, once per server process (later calls, and calls outside a server such as AppTest's,
    return at once)."""
    if _started.is_set() or not Runtime.exists():
        return
    _started.set()
    threading.Thread(target=_warm, args=(tuple(texts),), name="attention-warmup", daemon=True).start()


def _warm(texts: tuple[str, ...]) -> None:
    try:
        from . import models  # imports torch and viz_core.pretrained: here, not in a script run

        for text in texts:
            models.attention("", text)
    except Exception:  # noqa: BLE001 - a failed warm-up only means that the first visit loads the model itself
        logging.getLogger(__name__).exception("warm-up of the default model failed")
