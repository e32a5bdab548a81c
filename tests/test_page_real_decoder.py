"""AppTest of the Attention page on the packaged real decoder (Gemma 3 270M): every view, in English and Chinese,
on a Chinese sentence; the model's facts and licence; the progress shown while its cache is being converted."""
from __future__ import annotations

import pytest

from tests.conftest import assert_clean, charts, run_page, widget
from viz_core import i18n
from viz_core.pretrained import packaged

pytestmark = pytest.mark.slow
ZH = "我今天在图书馆学习注意力机制，老师说它很重要。"
VIEWS = ("head", "grid", "lines", "aggregate", "stats", "compare", "qkmap", "sinks", "heads", "lens", "importance",
         "export")


@pytest.fixture(scope="module", autouse=True)
def converted():
    packaged.ensure(packaged.GEMMA)


def page_text(at) -> str:
    return " ".join(e.value for kind in ("markdown", "caption", "info", "warning") for e in at.get(kind)
                    if isinstance(getattr(e, "value", None), str))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_gemma_is_described_with_its_window_scale_and_licence(lang):
    at = run_page("attention", {"lang": lang, "model": "gemma3-270m", "text": ZH})
    assert_clean(at)
    text = page_text(at)
    assert "18" in at.markdown[0].value and "gemma3-270m" in at.markdown[0].value
    assert i18n.t("decoder.variant_mqa", lang) in text
    sep = {"en": ", ", "zh": "、"}[lang]  # the sliding-window layers, and the full ones, listed as the language lists
    assert sep.join(("0–4", "6–10", "12–16")) in text and sep.join(("5", "11", "17")) in text
    assert "1/√256" in text.replace("/ √", "/√") or "√256" in text
    assert "Q4_K_M" in text and "ai.google.dev/gemma/terms" in text
    assert not at.warning  # the Chinese sentence reads with no unknown tokens


@pytest.mark.parametrize("view", VIEWS)
def test_every_view_on_gemma(view):
    at = run_page("attention", {"lang": "zh", "model": "gemma3-270m", "text": ZH, "view": view, "layer": "5"})
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    assert widget(at, "radio", "attention.view").value == view
    if view in ("head", "grid", "aggregate", "stats", "sinks", "heads", "lens", "importance", "compare"):
        assert charts(at), view


def test_the_window_is_explained_on_a_long_text():
    long = " ".join(f"w{i}" for i in range(300))  # more than 512 tokens
    at = run_page("attention", {"lang": "en", "model": "gemma3-270m", "text": long, "layer": "0", "head": "0"})
    assert_clean(at)
    assert "have weight exactly 0" in page_text(at) and "100%" in page_text(at)
    at = run_page("attention", {"lang": "en", "model": "gemma3-270m", "text": long, "layer": "5", "head": "0"})
    assert "have weight exactly 0" not in page_text(at)  # a full-attention layer


def test_a_chinese_sentence_on_the_default_model_is_offered_gemma_in_one_click():
    at = run_page("attention", {"lang": "en", "text": ZH})
    assert at.warning  # MiniLM reads it as [UNK]
    button = next(b for b in at.button if b.key == "attention.use.gemma3-270m")
    button.click().run()
    assert_clean(at)
    assert widget(at, "selectbox", "attention.model").value == "gemma3-270m"
    assert not at.warning and "gemma3-270m" in at.markdown[0].value


def test_progress_while_the_cache_is_converted(tmp_path, monkeypatch):
    """No cache yet: the page shows the conversion's progress and nothing that needs the model (never converts in
    the script run itself)."""
    from app_pages._ui import models
    monkeypatch.setenv("ATTN_MODEL_CACHE", str(tmp_path))
    monkeypatch.setattr(models, "_loaded", set())  # as on a server where nobody has opened it yet
    started = []
    monkeypatch.setattr(packaged, "start", lambda d: started.append(d.id) or packaged.Conversion(state="running"))
    at = run_page("attention", {"lang": "zh", "model": "gemma3-270m"})
    assert_clean(at)
    assert started == ["gemma3-270m"]
    assert "首次使用" in " ".join(p.proto.text for p in at.get("progress")) or at.get("progress")
    assert not charts(at)
