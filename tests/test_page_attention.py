"""AppTest of the Attention page: every view renders real content, URL state restores it, bad input is a message."""
from __future__ import annotations

import pytest

from tests.conftest import assert_clean, run_page


def _plots(at):
    return at.get("plotly_chart")


def test_default_view_english():
    at = run_page("attention", {"lang": "en"})
    assert_clean(at)
    assert at.title[0].value == "Attention in a pretrained Transformer"
    assert "all-MiniLM-L6-v2" in at.markdown[0].value and "6 layers × 12 heads" in at.markdown[0].value
    assert len(_plots(at)) == 1
    assert not at.error


@pytest.mark.parametrize("view", ["grid", "lines", "aggregate", "stats", "export"])
def test_every_view_in_chinese(view):
    at = run_page("attention", {"lang": "zh", "view": view, "layer": "2", "head": "5"})
    assert_clean(at)
    assert at.title[0].value == "预训练 Transformer 的注意力"
    assert at.radio(key="attention.view").value == view
    assert at.selectbox(key="attention.layer").value == 2 and at.selectbox(key="attention.head").value == 5
    if view in ("grid", "aggregate", "stats"):
        assert len(_plots(at)) == 1
    if view == "export":
        assert len(at.get("download_button")) == 2
    if view == "lines":
        assert len(at.get("iframe")) == 1


def test_url_state_is_written_back():
    at = run_page("attention", {"lang": "en"})
    at.selectbox(key="attention.layer").set_value(4).run()
    at.text_area(key="attention.text").set_value("Colorless green ideas sleep furiously.").run()
    assert_clean(at)
    assert at.query_params["layer"] == ["4"] or at.query_params["layer"] == "4"
    assert "Colorless" in str(at.query_params["text"])


def test_hide_special_and_pair_blocks():
    at = run_page("attention", {"lang": "en", "text": "The cat sat.", "pair": "It purred.", "hide": "1"})
    assert_clean(at)
    assert any("renormalised" in i.value for i in at.info)
    at.radio(key="attention.block").set_value("A->B").run()
    assert_clean(at)
    assert len(_plots(at)) == 1


@pytest.mark.parametrize("text", ["   ", "\x00\x01", "<script>alert('x')</script>", "🙂" * 50, "中文句子测试",
                                  "[SEP] [CLS] [MASK]", "مرحبا"])
def test_bad_or_odd_input_never_raises(text):
    at = run_page("attention", {"lang": "en", "text": text})
    assert_clean(at)
    if not text.strip() or text == "\x00\x01":
        assert at.error and "empty" in at.error[0].value
    else:
        assert not at.error and len(_plots(at)) == 1


def test_long_input_is_truncated_with_note():
    at = run_page("attention", {"lang": "en", "text": " ".join(["token"] * 3000), "view": "grid"})
    assert_clean(at)
    assert at.warning and "512" in at.warning[0].value


def test_unknown_model_falls_back(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = run_page("attention", {"lang": "en", "model": "no-such-org/no-such-model"})
    assert_clean(at)
    assert at.error and "could not be loaded" in at.error[0].value
    assert len(_plots(at)) == 1  # the default model keeps working
