"""Streamlit Community Cloud's entrypoint (Main file path: cloud/streamlit_app.py). It runs app.py, unchanged.

Why a second entrypoint: Community Cloud installs the first dependency file it finds in the entrypoint's folder, then
in the repository's root. This folder's requirements.txt has the pins of the root's with torch's CPU-only build from
PyTorch's index (PyPI's Linux wheel brings several GB of CUDA libraries), while the root's requirements.txt stays
installable offline and on every platform. docs/deploy.md "Deploying to Streamlit Community Cloud".

What runs is app.py's own st.App: its script (every visitor's run is app.py's, so its pages, `static/` and the
router resolve against the repository's root as with `streamlit run app.py`), its lifespan and its middleware.
`streamlit run` finds the App by reading this file for an `app = st.App(...)` assignment, so it is spelled out here.
Community Cloud runs from the repository's root, where `.streamlit/config.toml` is read.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's root: app.py, app_pages, viz_core

import streamlit as st  # noqa: E402

import app as main  # noqa: E402 - app.py as a module: its environment settings (OPENBLAS_NUM_THREADS) and its App

app = st.App(main.app.script_path, lifespan=main.serving.lifespan, middleware=main.serving.middleware())
