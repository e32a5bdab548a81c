"""AppTest of the Attention page's "Query–key map" view: the points are the projection of the packaged
model's own queries and keys; the variance kept is stated; a chosen query (from the address, as a click leaves it)
shows its attention row, equal to the model's; options and the chosen query live in the address; a decoder is told
why the map needs an encoder."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import assert_clean, figures, plotly_array, markdowns, run_page, widget
from tests.test_page_attention import folders_allowed, tiny_folders  # noqa: F401  (fixtures)
from viz_core.pretrained import bert_numpy, qk_map

TEXT = "The cat sat on the mat because it was tired."


@pytest.fixture(scope="module")
def nb():
    return bert_numpy.load_default()


def reference(nb, layer: int, head: int, langs=("en", "zh")):
    """The map computed here from the numpy model: the user's text first, then the bundled sentences it reads."""
    texts = [TEXT] + [s for lang in langs for s in qk_map.bundled_sentences()[lang]]
    parts = [(s, toks, q[layer:layer + 1, head:head + 1], k[layer:layer + 1, head:head + 1])
             for s, (toks, q, k) in zip(texts, nb.queries_keys(texts))
             if s == TEXT or qk_map.unknown_share(toks, "[UNK]") <= qk_map.MAX_UNKNOWN_SHARE]
    points = qk_map.stack(parts)
    return points, qk_map.project(points.q[0, 0], points.k[0, 0])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_points_are_the_projection_of_the_models_queries_and_keys(nb, lang):
    at = run_page("attention", {"lang": lang, "view": "qkmap", "layer": "2", "head": "3"})
    assert_clean(at)
    points, proj = reference(nb, 2, 3)
    fig = figures(at)[0]
    mine_q, mine_k, corpus_q, corpus_k = fig["data"][:4]  # yours first: it wins a click on coinciding points
    n_mine = len(nb.attention(TEXT).tokens)
    np.testing.assert_allclose(plotly_array(mine_q["x"]), proj.q[:n_mine, 0], atol=1e-4)
    np.testing.assert_allclose(plotly_array(mine_k["y"]), proj.k[:n_mine, 1], atol=1e-4)
    np.testing.assert_allclose(plotly_array(corpus_q["x"]), proj.q[n_mine:, 0], atol=1e-4)
    assert mine_q["text"] == list(points.tokens[:n_mine]) and corpus_q["marker"]["symbol"] == "circle-open"
    assert corpus_k["marker"]["symbol"] == "triangle-up-open"
    kept = proj.kept * 100
    words = "of the variance" if lang == "en" else "的方差"
    line = next(c.value for c in at.caption if words in c.value)
    assert f"{kept[:2].sum():.0f}" in line and str(2 * len(points.tokens)) in line
    import re
    a, b, total = (int(x) for x in re.findall(r"(\d+) ?%", line)[:3])
    assert a + b == total and abs(a - kept[0]) < 1 and abs(b - kept[1]) < 1  # the shown parts add up
    n_zh = len(qk_map.bundled_sentences()["zh"])
    kept_zh = sum(text in qk_map.bundled_sentences()["zh"] for text in points.texts)
    left = (f"{n_zh - kept_zh} of the {n_zh} Chinese sentences are left out (the map keeps {kept_zh})" if lang == "en"
            else f"{n_zh} 个中文句子中有 {n_zh - kept_zh} 个未纳入（地图保留 {kept_zh} 个）")
    assert any(left in c.value for c in at.caption)  # MiniLM reads most Chinese characters as [UNK]
    # how often near means heavy for this head, computed here from the same queries and keys
    near = qk_map.closeness(points.q[0, 0], points.k[0, 0], points.sentence)
    line = next(c.value for c in at.caption if ("nearest key is the heaviest" in c.value or "最近的键" in c.value))
    assert f"{near.hit * 100:.0f}" in line and f"{near.chance * 100:.0f}" in line and str(near.n) in line
    claim = "a query lands near the keys it gives the most weight" if lang == "en" else "查询会落在它分配权重最多的那些键附近"
    assert claim not in " ".join(markdowns(at))
    assert len(at.get("download_button")) == 1


def test_a_chosen_query_shows_its_row_and_lines_to_its_keys(nb):
    at = run_page("attention", {"lang": "en", "view": "qkmap", "layer": "4", "head": "1", "qk_q": "7"})
    assert_clean(at)
    points, _ = reference(nb, 4, 1)
    row_fig = next(f for f in figures(at) if f["layout"]["title"]["text"].startswith("Query"))
    tokens = nb.attention(TEXT).tokens
    assert tokens[7] in row_fig["layout"]["title"]["text"]
    np.testing.assert_allclose(plotly_array(row_fig["data"][0]["y"]), nb.attention(TEXT).weights[4, 1, 7], atol=1e-5)
    lines = [tr for tr in figures(at)[0]["data"] if tr.get("mode") == "lines"]
    assert len(lines) == 3  # to the three heaviest keys
    assert any("heaviest key" in c.value for c in at.caption)
    at.button(key="qk_clear").click().run()
    assert not [f for f in figures(at) if f["layout"]["title"]["text"].startswith("Query")]
    assert "qk_q" not in at.query_params


def test_options_live_in_the_address_and_english_only_drops_the_chinese_note():
    at = run_page("attention", {"lang": "en", "view": "qkmap"})
    widget(at, "multiselect", "attention.qk_langs").set_value(["en"]).run()
    widget(at, "radio", "attention.qk_colour").set_value("position").run()
    assert_clean(at)
    assert str(at.query_params["qk_langs"]).strip("[]'") == "en" and "position" in str(at.query_params["qk_colour"])
    assert not any("left out" in c.value for c in at.caption)
    scatter = figures(at)[0]["data"][2]  # the bundled sentences' queries (after your sentence's two traces)
    assert scatter["marker"]["colorscale"] and scatter["marker"]["showscale"]  # coloured by position, with a bar


def test_only_your_text_when_no_bundled_sentences():
    at = run_page("attention", {"lang": "en", "view": "qkmap", "qk_langs": ""})
    assert_clean(at)
    assert "queries and keys of 1 sentences" in figures(at)[0]["layout"]["title"]["text"] or \
        "of 1 sentence" in figures(at)[0]["layout"]["title"]["text"]


def test_a_bad_chosen_query_in_the_address_is_ignored():
    at = run_page("attention", {"lang": "en", "view": "qkmap", "qk_q": "99999"})
    assert_clean(at)
    assert any("Click a query" in c.value for c in at.caption)


def test_a_decoder_is_told_the_map_needs_an_encoder(tiny_folders, folders_allowed):  # noqa: F811
    at = run_page("attention", {"lang": "zh", "model": tiny_folders["gpt2"], "view": "qkmap"})
    assert_clean(at)
    assert any("编码器" in i.value for i in at.info) and not figures(at)
