"""The floor: what any Streamlit app with a sidebar of pages and one chart per page costs.

bench/bench_browser.py --floor runs this app next to ours, interleaved, and prints our times as ratios to its times.
It has the same eight pages, the same sidebar links and the same page titles as the app, and each page draws one
24 x 24 plotly heatmap (the first page's in a container keyed "head_fig", as the Attention page's is), so the bench
waits for exactly the same things in both. No model, no torch, no viz_core: only Streamlit, plotly and numpy.

    streamlit run bench/floor_app/app.py
"""
import json
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import streamlit as st

LOCALES = Path(__file__).resolve().parents[2] / "viz_core" / "locales"
STEMS = ("attention", "mechanics", "scaling", "positions", "optimizers", "anatomy", "train", "language_model")
TOKENS = [f"t{i}" for i in range(24)]


def english(namespace: str, key: str) -> str:
    """The app's own English string (read from its locale file, so the two apps' titles cannot drift apart)."""
    return json.loads((LOCALES / f"{namespace}.json").read_text(encoding="utf-8"))[key]["en"]


def heatmap(seed: int) -> go.Figure:
    """One row-stochastic 24 x 24 matrix, rows = queries top to bottom, like the app's attention heatmaps."""
    weights = np.random.default_rng(seed).dirichlet(np.ones(len(TOKENS)), size=len(TOKENS))  # (24, 24)
    fig = go.Figure(go.Heatmap(z=weights, x=TOKENS, y=TOKENS, colorscale="Blues", zmin=0, zmax=1))
    fig.update_layout(height=520, xaxis_title="key", yaxis_title="query", yaxis_autorange="reversed")
    return fig


def page_of(i: int, stem: str):
    def draw() -> None:
        st.title(english(stem, "title"))
        with st.container(key="head_fig"):
            st.plotly_chart(heatmap(i))
    draw.__name__ = stem  # st.Page names a callable page after its function
    return draw


pages = [st.Page(page_of(i, stem), title=english("common", f"nav_{stem}"), url_path=stem, default=(i == 0))
         for i, stem in enumerate(STEMS)]
nav = st.navigation(pages, position="hidden")
with st.sidebar:
    for page in pages:
        st.page_link(page, label=page.title)
nav.run()
