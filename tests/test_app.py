"""The router: language switch in the sidebar and by ?lang=, every page registered and reachable."""
from pathlib import Path

from app_pages._ui.nav import PAGES
from tests.conftest import assert_clean, run_page

ROOT = Path(__file__).resolve().parents[1]


def test_every_registered_page_exists_and_has_strings():
    from viz_core import i18n
    for stem, _ in PAGES:
        assert (ROOT / "app_pages" / f"{stem}.py").exists()
        assert i18n.t(f"common.nav_{stem}", "zh") != i18n.t(f"common.nav_{stem}", "en")
        assert i18n.t(f"{stem}.title", "en") and i18n.t(f"{stem}.title", "zh")


def test_sidebar_switches_language_and_url():
    at = run_page("attention", {})
    assert_clean(at)
    assert at.title[0].value == "Attention in a pretrained Transformer"
    at.sidebar.radio[0].set_value("zh").run()
    assert_clean(at)
    assert at.title[0].value == "预训练 Transformer 的注意力"
    assert at.query_params["lang"] in ("zh", ["zh"])


def test_lang_param_chinese_variants():
    at = run_page("attention", {"lang": "zh-CN"})
    assert at.title[0].value == "预训练 Transformer 的注意力"


def test_deployed_config_shows_visitors_no_traceback():
    """An error that slips past the pages' own handling shows its type only; never a traceback or server path."""
    import tomllib
    config = tomllib.loads((Path(__file__).resolve().parents[1] / ".streamlit" / "config.toml").read_text())
    assert config["client"]["showErrorDetails"] in ("type", "none")
    assert config["browser"]["gatherUsageStats"] is False


def _formula_app():
    from app_pages import _ui as ui
    ui.latex(r"j > i,\ x<y <script>alert(1)</script>")


def test_latex_never_passes_a_tag_into_its_html():
    """ui.latex is the app's only unsafe_allow_html: '<' and '>' in a formula become KaTeX's \\lt / \\gt."""
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_function(_formula_app, default_timeout=30).run()
    body = at.markdown[0].value
    assert "<script>" not in body and "x<y" not in body and "j > i" not in body
    assert r"x\lt y" in body and r"j \gt  i" in body
    assert 'aria-label="j &gt; i' in body          # the readable label is escaped, not dropped
