"""The Head finder page (AppTest): the corpus pass in the background, then the table, the map and one head's card;
sorting, choosing a head, the pasted-text corpus, both languages, bad input that never shows a traceback."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import assert_clean, run_page
from viz_core.pretrained.head_finder import SCORES

ONE_HEAD = ("Layer", "Head")


def _finished(at, query: dict, timeout_s: float = 120.0):
    """Run the page until its corpus pass is done (the pass runs in a thread; the browser's fragment would rerun the
    page, AppTest reruns it here once the shared registry says so)."""
    from app_pages._ui import head_finder as finder

    for _ in range(int(timeout_s / 0.2)):
        if any(sb.label.startswith("Score") or sb.label.startswith("分数") for sb in at.selectbox):
            return at
        own = query.get("own") if query.get("corpus") == "own" else None
        run = finder.runs().get(finder.key(query.get("model", ""), own))
        if run is not None:
            finder.runs().wait(run.key, timeout=timeout_s)
        at.run()
    raise AssertionError("the page never showed the scores")


def open_finder(query: dict | None = None):
    query = {"lang": "en", **(query or {})}
    at = run_page("head_finder", query)
    return _finished(at, query)


def _box(at, label: str):
    return next(sb for sb in at.selectbox if sb.label == label)


def _expected(score: str = "previous") -> np.ndarray:
    """The packaged model's scores from the same pass, run here (viz_core, no page)."""
    from app_pages._ui import head_finder as finder
    run = finder.runs().wait(finder.key("", None))
    return run.result.scores[score]


def test_page_opens_on_the_top_head_of_the_default_score():
    at = open_finder()
    assert_clean(at)
    assert at.title[0].value == "Head finder"
    scores = _expected("previous")
    layer, head = np.unravel_index(int(np.nanargmax(scores)), scores.shape)
    assert (_box(at, "Layer").value, _box(at, "Head").value) == (layer, head)
    assert any(h.value == f"Layer {layer} · head {head} of sentence-transformers/all-MiniLM-L6-v2" for h in at.subheader)
    table = at.dataframe[0].value
    assert len(table) == 6 * 12  # every head once
    first = table.iloc[0]
    assert (first["Layer"], first["Head"]) == (layer, head)  # sorted, highest first
    col = table["previous token"].to_numpy()
    assert np.all(np.diff(col) <= 1e-9)
    assert any("English sentences: 50 (" in c.value for c in at.caption)  # what the scores read
    assert any("written twice: 4 (" in c.value for c in at.caption)


def test_sorting_by_another_score_and_order():
    at = open_finder()
    _box(at, "Score (sorts the table, colours the map)").set_value("entropy").run()
    assert_clean(at)
    table = at.dataframe[0].value
    col = table["entropy (bits)"].to_numpy()
    assert np.all(np.diff(col) >= -1e-9), "entropy sorts lowest first by default (a sharp head is the thing)"
    scores = _expected("entropy")
    layer, head = np.unravel_index(int(np.nanargmin(scores)), scores.shape)
    assert (table.iloc[0]["Layer"], table.iloc[0]["Head"]) == (layer, head)
    assert (_box(at, "Layer").value, _box(at, "Head").value) == (layer, head)  # a new score opens its first head
    at.button_group[1].set_value("desc").run()  # Order: highest first
    assert_clean(at)
    table = at.dataframe[0].value
    layer, head = np.unravel_index(int(np.nanargmax(scores)), scores.shape)
    assert (table.iloc[0]["Layer"], table.iloc[0]["Head"]) == (layer, head)
    assert np.all(np.diff(table["entropy (bits)"].to_numpy()) <= 1e-9)


def test_choosing_a_head_opens_its_card_and_names_it_in_the_address():
    at = open_finder({"score": "induction"})
    _box(at, "Layer").set_value(3).run()
    _box(at, "Head").set_value(5).run()
    assert_clean(at)
    assert any(h.value.startswith("Layer 3 · head 5 of ") for h in at.subheader)
    assert at.query_params["layer"] in ("3", ["3"]) and at.query_params["head"] in ("5", ["5"])
    examples = at.dataframe[1].value
    assert len(examples) > 0 and set(examples["corpus"]) == {"random, repeated"}
    vals = examples["value"].astype(float).to_numpy()
    assert np.all(np.diff(vals) <= 1e-9)  # the most active place first


def test_a_shared_address_opens_that_head_in_chinese():
    at = open_finder({"lang": "zh", "score": "first", "layer": "4", "head": "7"})
    assert_clean(at)
    assert any(h.value == "sentence-transformers/all-MiniLM-L6-v2 的第 4 层 · 第 7 个头" for h in at.subheader)
    assert _box(at, "分数（排序表格、给热图着色）").value == "first"


def test_own_text_is_read_as_its_own_corpus():
    text = "The cat sat on the mat. The dog sat on the rug.\nA bird sang. The cat saw the bird! " * 3
    at = open_finder({"corpus": "own", "own": text})
    assert_clean(at)
    assert any("sentences of your text" in c.value for c in at.caption)
    examples = at.dataframe[1].value
    assert set(examples["corpus"]) == {"your text"}


def test_what_was_read_is_written_as_chinese_is_written():
    """The note of what the scores read, in Chinese: its parts follow each other without the spaces English puts
    between sentences and around a list."""
    at = open_finder({"lang": "zh", "corpus": "own", "own": "The cat sat on the mat. The dog sat on the rug. A bird sang."})
    assert_clean(at)
    note = next(c.value for c in at.caption if "分数读取了" in c.value)
    assert "读取了你的文本中的句子 3 句" in note
    assert "个查询。归纳与重复词元分数读取了" in note
    assert "。 " not in note
    # a text the packaged model cannot read (its vocabulary has almost no Chinese): nothing read, said in words
    at = open_finder({"lang": "zh", "corpus": "own", "own": "我昨天在图书馆看见一只猫。那只猫坐在窗边看书。"})
    note = next(c.value for c in at.caption if "分数读取了" in c.value)
    assert "读取了零个句子：共 0 个查询。归纳" in note


def test_markup_in_own_text_and_probe_is_shown_as_typed():
    text = "**pwnbold** [pwnlink](https://evil.example/) <b>x</b>. Second sentence here."
    at = open_finder({"corpus": "own", "own": text, "probe": "**bold** <b>y</b> [a](https://evil.example/)"})
    assert_clean(at)
    for md in at.markdown:
        assert "https://evil.example" not in md.value and "<b>" not in md.value


@pytest.mark.parametrize("query, message", [
    ({"corpus": "own", "own": "   "}, "no sentence to read"),
    ({"probe": "   "}, "empty"),
])
def test_bad_input_says_what_is_wrong(query, message):
    at = run_page("head_finder", {"lang": "en", **query})
    if query.get("corpus") != "own":
        at = _finished(at, {"lang": "en", **query})
    assert_clean(at)
    said = [e.value for e in at.error] + [i.value for i in at.info]
    assert any(message in s for s in said), said


def test_a_model_that_cannot_load_falls_back_with_a_message():
    at = open_finder({"model": "no-such-org/no-such-model"})
    assert_clean(at)
    assert at.error, "the page says why the model is not used"
    assert any(h.value.endswith("of sentence-transformers/all-MiniLM-L6-v2") for h in at.subheader)


def test_every_score_has_its_strings_and_formula():
    import ast
    from pathlib import Path

    from viz_core import i18n
    source = (Path(__file__).resolve().parents[1] / "app_pages" / "head_finder.py").read_text(encoding="utf-8")
    formulas = next(ast.literal_eval(node.value) for node in ast.parse(source).body
                    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "FORMULAS")
    assert set(formulas) == set(SCORES)
    for score in SCORES:
        for key in (f"head_finder.score_{score}", f"head_finder.explain_{score}"):
            assert i18n.t(key, "en") != i18n.t(key, "zh")
