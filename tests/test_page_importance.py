"""AppTest of the Attention page's "Which heads matter" view: both languages, with and without text B, mean
ablation, tiny GPT-2 / T5 through the model box, and the downloads."""
from __future__ import annotations

import io
import threading

import numpy as np
import pytest

import app_pages._ui as ui

from tests.conftest import assert_clean, charts, markdowns, run_page, widget
from tests.test_page_attention import folders_allowed, tiny_folders

__all__ = ["folders_allowed", "tiny_folders"]  # the Attention page's fixtures, shared (pytest finds them here)
TIMEOUT = 60


def _run(query: dict):
    at = run_page("attention", {"view": "importance", **query}, timeout=TIMEOUT)
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    return at


def _markdown(at) -> str:
    return " ".join(markdowns(at))


def test_pair_in_english():
    at = _run({"lang": "en", "text": "The cat sat on the mat.", "pair": "A dog lay on the rug."})
    assert widget(at, "radio", "attention.view").value == "importance"
    assert "cosine similarity of the mean-pooled embeddings of A and B" in _markdown(at)
    assert len(charts(at)) == 4  # importance map, statistics map, scatter, attribution bars
    assert len(at.get("download_button")) == 4
    captions = " ".join(c.value for c in at.caption)
    assert "Completeness check" in captions and "f = cos(A, B)" in captions
    assert not at.warning  # the sum of the attributions is within 5 % of f(x) - f(x')
    assert "Why the three rows differ" in _markdown(at)


def test_single_text_in_chinese_with_mean_ablation():
    at = _run({"lang": "zh", "imethod": "mean", "ipeak": "entropy"})
    assert widget(at, "radio", "attention.imethod").value == "mean"
    assert widget(at, "selectbox", "attention.ipeak").value == "entropy"
    assert "没有文本 B" in _markdown(at) and "三行为什么不同" in _markdown(at)
    assert "完整性检验" in " ".join(c.value for c in at.caption)
    assert len(charts(at)) == 4


def test_language_switch_keeps_the_view_and_method():
    at = _run({"lang": "en", "imethod": "mean", "isteps": "16"})
    at.sidebar.radio(key="lang").set_value("zh").run()
    assert_clean(at)
    assert "三行为什么不同" in _markdown(at)
    assert widget(at, "radio", "attention.view").value == "importance"
    assert widget(at, "radio", "attention.imethod").value == "mean"


def test_importance_csv_download_holds_every_head():
    at = _run({"lang": "en"})
    csv = next(b for b in at.get("download_button") if "importance map (CSV)" in b.proto.label)
    assert csv.proto.label  # the file itself is built by viz_core-backed helpers, checked below
    from app_pages._ui.importance import importance_csv
    from viz_core.pretrained.ablation import head_importance
    from viz_core.pretrained import load_model
    text = importance_csv(head_importance(load_model(), "The cat sat on the mat."))
    assert len(text.strip().splitlines()) == 1 + 6 * 12


def test_bad_next_token_is_a_message_on_gpt2(tiny_folders, folders_allowed):
    at = _run({"lang": "en", "model": tiny_folders["gpt2"], "inext": "dog"})
    assert "log p(next token = dog)" in _markdown(at)
    assert len(charts(at)) == 4


def test_t5_scores_the_target_per_part(tiny_folders, folders_allowed):
    for part in ("encoder", "cross"):
        at = _run({"lang": "zh", "model": tiny_folders["t5"], "part": part})
        assert "log p(目标 | 源)" in _markdown(at)
        assert len(charts(at)) == 4


def test_t5_without_target_says_what_to_do(tiny_folders, folders_allowed):
    at = run_page("attention", {"lang": "en", "view": "importance", "model": tiny_folders["t5"], "target": " "},
                  timeout=TIMEOUT)
    assert_clean(at)
    assert any("needs a target text" in e.value for e in at.error)


def test_npz_bytes_round_trip():
    from viz_core.io import export  # the one writer of the view's downloads
    data = np.load(io.BytesIO(export.npz_bytes(effect=np.ones((2, 3)), metric="pair_cosine")))
    assert data["effect"].shape == (2, 3) and str(data["metric"]) == "pair_cosine"


@pytest.mark.parametrize("steps", ["8", "999"])
def test_steps_from_the_address(steps):
    at = _run({"lang": "en", "isteps": steps})
    assert widget(at, "select_slider", "attention.isteps").value == (8 if steps == "8" else 32)


def test_blank_text_b_is_no_pair():
    at = _run({"lang": "en", "pair": "   "})
    assert "No text B" in _markdown(at) and len(charts(at)) == 4


def test_the_packaged_model_answers_in_numpy_until_transformers_has_it(monkeypatch):
    """The map and the token attribution of the packaged model never ask for the transformers model while it is
    not loaded (numbers equal: tests/pretrained/test_bert_numpy.py, test_attribution_numpy.py); once it is, torch
    answers (faster on long input)."""
    from app_pages._ui import importance as view
    from app_pages._ui import models

    monkeypatch.setitem(models._packaged, "transformers", None)
    assert models.numpy_ablation() is not None and models.numpy_attribution() is not None

    def no_torch(name=""):
        raise AssertionError("the view asked for the transformers model")

    monkeypatch.setattr(models, "model", no_torch)
    progress = []
    r = view.importance_work("", "encoder", "A numpy-only sentence.", "", "", "self", "zero")(progress.append)
    assert r.shape == (6, 12) and r.metric == "self_cosine" and np.isfinite(r.effect).all()
    assert progress and progress[-1] == 1.0
    a = view.attribution_work("", "encoder", "A numpy-only sentence.", "A second one.", "", 8)(progress.append)
    assert a.metric == "pair_cosine" and len(a.tokens) == len(a.scores) == sum(a.lengths)
    monkeypatch.setitem(models._packaged, "transformers", object())
    assert models.numpy_ablation() is None and models.numpy_attribution() is None

def test_waiting_starts_again_a_flight_cancelled_for_a_visitor_who_left():
    """Two visitors share a flight; the one it was started for leaves, so it stops with Cancelled. The one still
    waiting (its own thread unmarked) gets the result of a new flight; a visitor who has left gets Cancelled."""
    from viz_core.runtime import cancel
    from viz_core.runtime.flights import Flights

    flights, runs = Flights(), []

    def work(progress):
        runs.append(1)
        if len(runs) == 1:
            raise cancel.Cancelled("the visitor has gone")
        progress(1.0)
        return "map"

    labels = lambda percent, seconds: f"{percent} % {seconds} s"  # noqa: E731
    assert ui.wait_for(lambda: flights.get("k", work), labels) == "map" and runs == [1, 1]
    runs.clear()
    flights.clear()
    cancel.request(threading.get_ident())
    try:
        with pytest.raises(cancel.Cancelled):
            ui.wait_for(lambda: flights.get("k", work), labels)
    finally:
        cancel.clear()
    assert runs == [1]


def test_a_computation_takes_the_cores_other_computations_leave(monkeypatch):
    """models.heavy gives its block the cores over the computations running, asked again each time (the numpy
    ablation and attribution ask before each round of batches)."""
    from app_pages._ui import models
    from viz_core.pretrained import bert_numpy

    monkeypatch.setattr(models, "_CORES", 4)
    monkeypatch.setattr(bert_numpy.os, "cpu_count", lambda: 4)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    assert bert_numpy.ablation_threads() == 4
    with models.heavy(long=True):
        assert bert_numpy.ablation_threads() == 4  # alone
        with models._active_lock:
            models._active[0] += 1  # another visitor's pass starts
        try:
            assert bert_numpy.ablation_threads() == 2
        finally:
            with models._active_lock:
                models._active[0] -= 1
        assert bert_numpy.ablation_threads() == 4
    assert bert_numpy.ablation_threads() == 4 and models._active[0] == 0


def test_only_long_computations_take_their_arrays_from_the_arenas(monkeypatch):
    """models.heavy(long=True) raises glibc's mapping threshold while it runs (memory.computing) and puts it back
    after; a short pass leaves it (under a class it would go up and down after every pass)."""
    from app_pages._ui import memory, models

    said = []
    monkeypatch.setattr(memory, "_mallopt", [lambda param, value: said.append((param, value)) or 1])
    monkeypatch.delenv("ATTN_MALLOC_MMAP_KB", raising=False)
    monkeypatch.delenv("ATTN_MALLOC_BUSY_MMAP_KB", raising=False)
    with models.heavy():
        pass
    assert said == []
    with models.heavy(long=True):
        assert said == [(memory._M_MMAP_THRESHOLD, memory.BUSY_MMAP_KB * 1024)]
    assert said[1:] == [(memory._M_MMAP_THRESHOLD, memory.MMAP_KB * 1024)] and memory._computing[0] == 0
    monkeypatch.setenv("ATTN_MALLOC_BUSY_MMAP_KB", "0")  # the operator's "off"
    with models.heavy(long=True):
        pass
    assert len(said) == 2
