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


def test_latex_never_passes_a_tag_into_its_html(monkeypatch):
    """ui.latex in markdown (where the formula element is not available) is the app's only unsafe_allow_html: '<'
    and '>' in a formula become KaTeX's \\lt / \\gt."""
    from streamlit.testing.v1 import AppTest
    monkeypatch.setenv("ATTN_FORMULA_ELEMENT", "0")
    at = AppTest.from_function(_formula_app, default_timeout=30).run()
    body = at.markdown[0].value
    assert "<script>" not in body and "x<y" not in body and "j > i" not in body
    assert r"x\lt y" in body and r"j \gt  i" in body
    assert 'aria-label="j &gt; i' in body          # the readable label is escaped, not dropped


class _Pages:
    """Streamlit's pages manager as reask_lost_page reads it."""
    main_script_hash = "main"

    def __init__(self, name: str, page_hash: str):
        self.intended_page_name, self.intended_page_script_hash = name, page_hash

    def set_script_intent(self, page_hash: str, name: str) -> None:
        self.intended_page_name, self.intended_page_script_hash = name, page_hash


def _reask(monkeypatch, name: str, page_hash: str, url: str | None):
    import streamlit.runtime.context as context
    import streamlit.runtime.scriptrunner as runner

    from app_pages._ui import nav
    pages = _Pages(name, page_hash)
    monkeypatch.setattr(runner, "get_script_run_ctx", lambda: type("Ctx", (), {"pages_manager": pages})())
    monkeypatch.setattr(context, "_context_info_field", lambda field: url if field == "url" else None)
    return nav.reask_lost_page(), pages.intended_page_name


def test_a_rerun_that_names_no_page_asks_for_the_page_of_the_browsers_url(monkeypatch):
    """A browser that reconnected before it learned its page asks for the main script (tests/browser/test_reconnect
    does it in Chromium): the page of the URL is asked for; a rerun that names its page, or a URL without one, is left
    to st.navigation."""
    assert _reask(monkeypatch, "", "main", "http://localhost:8501/train") == ("train", "train")
    assert _reask(monkeypatch, "", "", "https://x.streamlit.app/base/language_model/") == ("language_model",
                                                                                         "language_model")
    assert _reask(monkeypatch, "", "main", "http://localhost:8501/") == (None, "")
    assert _reask(monkeypatch, "", "main", "http://localhost:8501/nope") == (None, "")
    assert _reask(monkeypatch, "", "main", "http://localhost:8501/attention") == (None, "")  # the default page
    assert _reask(monkeypatch, "", "main", None) == (None, "")
    assert _reask(monkeypatch, "train", "", "http://localhost:8501/train") == (None, "train")
    assert _reask(monkeypatch, "", "a-page-hash", "http://localhost:8501/train") == (None, "")


def test_the_default_page_is_asked_for_by_its_name_and_other_pages_are_left_alone(monkeypatch):
    """/attention opens the default page (served at /, so Streamlit knows no page of that name); unknown names are
    tested in Chromium (tests/browser/test_addresses.py)."""
    import streamlit.runtime.scriptrunner as runner

    from app_pages._ui import nav
    for asked, page_hash, expected in [("attention", "", ("", "")), ("train", "", ("train", "")),
                                       ("", "", ("", "")), ("attention", "a-hash", ("attention", "a-hash"))]:
        pages = _Pages(asked, page_hash)
        monkeypatch.setattr(runner, "get_script_run_ctx", lambda: type("Ctx", (), {"pages_manager": pages})())
        nav.route_by_name()
        assert (pages.intended_page_name, pages.intended_page_script_hash) == expected, asked


def test_streamlit_still_has_what_reask_lost_page_reads():
    from streamlit.runtime.context import _context_info_field  # noqa: F401 - the import is the check
    from streamlit.runtime.pages_manager import PagesManager
    for name in ("intended_page_name", "intended_page_script_hash", "main_script_hash", "set_script_intent"):
        assert hasattr(PagesManager, name), name


def test_a_reopened_run_reads_the_address_again(monkeypatch):
    """After a lost first run the browser shows its widgets' defaults (the seeded values never reached it) and sends
    them back: a reopened run takes the page's state and language from the address instead."""
    from app_pages._ui import nav
    at = run_page("train", {"task": "date", "lang": "zh"})
    assert at.session_state["train.task.zh"] == "date"
    at.selectbox(key="train.task.zh").set_value("reverse")  # what the browser that missed the first run sends
    at.sidebar.radio[0].set_value("en")
    monkeypatch.setattr(nav, "reask_lost_page", lambda: "train")
    at.run()
    assert_clean(at)
    assert at.session_state["lang"] == "zh" and at.session_state["train.task.zh"] == "date"
    assert at.title[0].value == "训练一个 Transformer"
    monkeypatch.setattr(nav, "reask_lost_page", lambda: None)  # a person's own choice is kept as always
    at.selectbox(key="train.task.zh").set_value("reverse").run()
    assert at.session_state["train.task.zh"] == "reverse"


def test_the_server_imports_neither_pandas_nor_torch_before_it_listens():
    """`streamlit run app.py` imports app.py before its server listens, so pandas imported there would delay the cold
    start (bench/bench_browser.py's cold row times it). The router imports it at the top of every run instead (before
    any page: see app.py's docstring)."""
    import subprocess
    import sys

    code = "import sys, app; print(sorted(m for m in ('pandas', 'torch', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    source = (ROOT / "app.py").read_text()
    body = source.split("def main() -> None:", 1)[1]
    assert body.lstrip().startswith("import pandas"), "main() must import pandas before any page runs"


def test_the_language_settled_by_the_radio_holds_for_the_run_and_a_new_run_settles_it_again():
    """lang() answers from the run's context once app.py pins it (ui.pin_lang), not from the session state; the next
    full run unpins it before anything reads it, so a switch back and forth is never one run late."""
    at = run_page("attention", {})
    for lang, title in (("zh", "预训练 Transformer 的注意力"), ("en", "Attention in a pretrained Transformer"),
                        ("zh", "预训练 Transformer 的注意力")):
        at.sidebar.radio[0].set_value(lang).run()
        assert_clean(at)
        assert at.title[0].value == title
        assert at.sidebar.radio[0].value == lang


def test_a_pinned_language_is_what_lang_answers_until_it_is_unpinned():
    from streamlit.testing.v1 import AppTest

    def script():
        import streamlit as st

        from app_pages import _ui as ui
        st.session_state["lang"] = "en"
        seen = [ui.lang()]
        ui.pin_lang("zh")
        seen += [ui.lang(), ui.t("attention.title")]
        ui.pin_lang(None)
        seen += [ui.lang(), ui.t("attention.title")]
        st.text("|".join(seen))

    at = AppTest.from_function(script, default_timeout=30).run()
    assert not at.exception
    assert at.text[0].value == "en|zh|预训练 Transformer 的注意力|en|Attention in a pretrained Transformer"


def test_the_model_pickers_lines_are_cached_per_language_and_state():
    from app_pages._ui.attention import model_line
    from viz_core.pretrained.catalog import PACKAGED
    en = model_line(PACKAGED, "attention.model_packaged", "en")
    zh = model_line(PACKAGED, "attention.model_packaged", "zh")
    assert en.startswith("all-MiniLM-L6-v2 · ") and en != zh
    assert model_line(PACKAGED, "attention.model_packaged", "en") is en  # the cached line, not a new one
    sized = model_line(PACKAGED, "attention.model_size", "en")
    assert sized != en and "90" in sized


def test_the_readme_lists_every_pages_address():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for stem, _ in PAGES:
        assert f"| `/{stem}` |" in readme or f"`/{stem}` |" in readme, stem


def _early_app():
    import time

    import streamlit as st

    from app_pages._ui import state
    state.begin("page")
    state.commit("text", "mine", "default")  # the address asks for text=mine from now on (written by the run's end)
    with state.early_address(0.25):
        time.sleep(0.05)
        quick = st.query_params.to_dict()
    with state.early_address(0.25):
        time.sleep(1.0)
        slow = st.query_params.to_dict()
    st.text(f"{quick}|{slow}")


def test_a_run_that_takes_a_while_writes_the_address_while_it_works():
    """state.early_address (around every page run in app.py): a run that lasts past its time has the address written
    while it still works, so a reload then comes back to the visitor's input; a run that ends sooner writes nothing
    early."""
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_function(_early_app, default_timeout=30).run()
    assert not at.exception
    assert at.text[0].value == "{}|{'text': 'mine'}"
