"""The head finder's shared corpus passes (viz_core.pretrained.finder_runs): one registry per server, a pass per
model and corpus started on a visitor's first request and shared with everyone who asks for the same, its progress
drawn by a fragment. Never computed inside a script run."""
from __future__ import annotations

import hashlib

import streamlit as st

from viz_core.pretrained import finder_sources
from viz_core.pretrained.finder_runs import FinderRun, FinderRuns
from viz_core.pretrained.head_finder import run_pass

from . import memory, models


@st.cache_resource(show_spinner=False)
def runs() -> FinderRuns:
    """One pass reads at a time (each of its forward passes also waits for models.heavy, like a visitor's), and
    eight finished results are kept."""
    return FinderRuns(max_running=1, max_results=8)


def source(name: str) -> finder_sources.FinderSource:
    """The packaged MiniLM in numpy (no torch), any other model through transformers. Raises InputError."""
    if not name:
        return finder_sources.of_numpy_bert(models.numpy_default(), gate=models.heavy)
    return finder_sources.of_loaded(models.model(name), gate=models.heavy)


def key(name: str, own: str | None) -> tuple:
    """A run's key: the model and the corpus (the pasted text by its hash)."""
    if own is None:
        return name, "bundled"
    return name, "own", hashlib.sha256(own.encode("utf-8")).hexdigest()


def run(name: str, own: str | None = None) -> FinderRun:
    """The pass over the bundled sentences (own=None) or a pasted text, started if no one has asked before."""
    found = runs().get(key(name, own))
    if found is not None and found.state != "failed":
        return found
    src = source(name)
    corpus = finder_sources.bundled_corpus(src) if own is None else finder_sources.own_corpus(src, own)

    def work(finished):
        yield from run_pass(corpus, src.n_layers, src.n_heads, src.attend_text, src.attend_ids, finished, src.unk)
        memory.release()  # a decoder's pass frees a few hundred MB of activations: hand them back to the system

    return runs().start(key(name, own), work)


def progress(run_key: tuple, label) -> None:
    """The pass's progress, redrawn every half second; the page reruns once it is done (or failed)."""
    st.fragment(_progress, run_every=0.5)(run_key, label)


def _progress(run_key: tuple, label) -> None:
    current = runs().get(run_key)
    if current is None or current.state in ("done", "failed"):
        st.rerun(scope="app")
    st.progress(min(current.fraction, 1.0), text=label(current))
