"""Every UI string exists in English and Chinese, with the same placeholders, and every key a page uses exists."""
import re
import string
from pathlib import Path

import pytest

from viz_core import i18n

ROOT = Path(__file__).resolve().parents[1]


def _fields(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f}


@pytest.mark.parametrize("ns", i18n.namespaces())
def test_every_string_has_both_languages(ns):
    for key, entry in i18n.namespace(ns).items():
        assert set(entry) == set(i18n.LANGUAGES), f"{ns}.{key} must have exactly {i18n.LANGUAGES}"
        assert all(entry[lang].strip() for lang in i18n.LANGUAGES), f"{ns}.{key} has an empty translation"
        assert _fields(entry["en"]) == _fields(entry["zh"]), f"{ns}.{key}: placeholders differ"


def test_keys_used_in_code_exist():
    pattern = re.compile(r"""\bt\(\s*f?["']([a-z_]+\.[A-Za-z0-9_]+)["']""")
    files = list((ROOT / "app_pages").rglob("*.py")) + [ROOT / "app.py"]
    used = {m for f in files for m in pattern.findall(f.read_text(encoding="utf-8")) if "{" not in m}
    assert used, "no translated strings found in pages: the scan is broken"
    missing = [k for k in sorted(used) if k.split(".", 1)[1] not in i18n.namespace(k.split(".")[0])]
    assert not missing, f"keys used by pages but missing from locales: {missing}"


def test_lookup_and_fallbacks():
    assert i18n.t("common.nav_attention", "zh") == "注意力"
    assert i18n.t("common.nav_attention", "zh-CN") == "注意力"
    assert i18n.t("common.nav_attention", "fr") == "Attention"
    assert "ab12cd34" in i18n.t("common.unexpected_error", "zh", error_id="ab12cd34")
    with pytest.raises(KeyError, match="locales"):
        i18n.t("common.no_such_key", "en")


def test_sentences_are_joined_as_each_language_writes_them():
    """A space between English sentences; none after a Chinese full stop ("。 归纳" is a typo to a Chinese reader)."""
    assert i18n.sentences(["One.", "Two."], "en") == "One. Two."
    assert i18n.sentences(["一。", "二。"], "zh") == "一。二。"
    assert i18n.sentences(["一。", "", "二。"], "zh-CN") == "一。二。"  # an empty part adds nothing, not a gap
    assert i18n.sentences(["One.", ""], "en") == "One."


def test_no_chinese_string_leaves_a_space_after_its_punctuation():
    """Chinese punctuation carries its own room: a space after 。：；，！？ (often left to let a bold mark close, as in
    "**填充。** 填充") reads as a typo. Close the bold before the mark instead: "**填充**。填充"."""
    gap = re.compile(r"[。：；，！？][*_]*\s+(?=[\u4e00-\u9fff])")
    found = [f"{ns}.{key}: {entry['zh'][max(0, m.start() - 12):m.end() + 6]!r}"
             for ns in i18n.namespaces() for key, entry in i18n.namespace(ns).items()
             for m in gap.finditer(entry["zh"])]
    assert not found, found


def test_a_page_is_called_by_its_sidebar_name_everywhere():
    """Text that sends the reader to another page names it exactly as the sidebar does (“计算步骤”页, not “机制”页)."""
    import re

    from viz_core import i18n
    from app_pages._ui.nav import PAGES
    names = {lang: {i18n.t(f"common.nav_{stem}", lang) for stem, _ in PAGES} for lang in ("en", "zh")}
    zh_ref = re.compile(r"“([^”]{1,10})”页|（([^（）]{1,8})页）")  # not “生成”标签页: a tab, not a page
    en_ref = re.compile(r"\b(?:the|on|in|to) ([A-Z][a-z]+(?: [a-z]+)?) page\b")
    wrong = []
    for ns in i18n.namespaces():
        for key, entry in i18n.namespace(ns).items():
            wrong += [f"{ns}.{key}: {m.group(0)}" for m in zh_ref.finditer(entry.get("zh", ""))
                      if next(g for g in m.groups() if g) not in names["zh"] and "标签" not in m.group(0)]
            wrong += [f"{ns}.{key}: {m.group(0)}" for m in en_ref.finditer(entry.get("en", ""))
                      if m.group(1) not in names["en"]]
    assert wrong == []
