"""AppTest of the Attention page's "Compare two texts" view: the maps, the difference and the ranking are
viz_core.pretrained.compare's numbers for the packaged model; the variant is in the address; odd variants are
messages; other models (a decoder, an encoder-decoder's cross attention) compare too."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import assert_clean, figures, plotly_array, run_page, widget
from tests.test_page_attention import folders_allowed, tiny_folders  # noqa: F401  (fixtures)
from viz_core.plots.compare import RANKED_SHOWN
from viz_core.pretrained import bert_numpy, compare

A = "The cat sat on the mat because it was tired."
B = "The cat sat on the mat because it was warm."


@pytest.fixture(scope="module")
def nb():
    return bert_numpy.load_default()


def by_title(at, start: str) -> dict:
    return next(f for f in figures(at) if f["layout"]["title"]["text"].startswith(start))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_maps_difference_and_ranking_are_the_models_numbers(nb, lang):
    at = run_page("attention", {"lang": lang, "view": "compare", "layer": "5", "head": "4"})
    assert_clean(at)
    assert at.text_area(key="attention.text2").value == B  # the default variant: one word changed
    ra, rb = nb.attention(A), nb.attention(B)
    al = compare.align(ra.tokens, rb.tokens)
    assert al.labels(ra.tokens, rb.tokens)[-3] == "tired→warm"
    diff = by_title(at, "Difference" if lang == "en" else "差异")
    want = compare.difference(ra.weights[5, 4], rb.weights[5, 4], al, al)
    np.testing.assert_allclose(plotly_array(diff["data"][0]["z"]), want, atol=1e-5)
    assert diff["data"][0]["colorscale"][0][1] != diff["data"][0]["colorscale"][-1][1]  # a diverging scale
    assert diff["data"][0]["zmin"] == -diff["data"][0]["zmax"]
    a_map = by_title(at, "Text A ·" if lang == "en" else "文本 A ·")
    b_map = by_title(at, "Text A′" if lang == "en" else "文本 A′")
    np.testing.assert_allclose(plotly_array(a_map["data"][0]["z"]), ra.weights[5, 4], atol=1e-5)
    np.testing.assert_allclose(plotly_array(b_map["data"][0]["z"]), rb.weights[5, 4], atol=1e-5)
    assert a_map["data"][0]["zmax"] == b_map["data"][0]["zmax"]  # one colour scale for both maps
    bars = by_title(at, "Heads whose" if lang == "en" else "注意力变化最大")
    ranked = compare.rank_heads(compare.head_distances(ra.weights, rb.weights, al, al))
    layer, head = ("Layer", "Head") if lang == "en" else ("层", "头")
    assert bars["data"][0]["y"] == [f"{layer} {i} · {head} {j}" for i, j in
                                    zip(ranked.layer[:RANKED_SHOWN], ranked.head[:RANKED_SHOWN])]
    np.testing.assert_allclose(plotly_array(bars["data"][0]["x"]), ranked.distance[:RANKED_SHOWN], atol=1e-5)
    assert len(at.get("download_button")) == 2
    assert not at.error


def test_the_variant_and_the_head_live_in_the_address():
    at = run_page("attention", {"lang": "en", "view": "compare"})
    at.text_area(key="attention.text2").set_value("The mat sat on the cat because it was tired.").run()
    widget(at, "selectbox", "attention.layer").set_value(3).run()
    assert_clean(at)
    assert "The mat sat on the cat" in str(at.query_params["text2"]) and str(at.query_params["layer"]) in ("3", "['3']")
    again = run_page("attention", {"lang": "en", "view": "compare", "layer": "3",
                                   "text2": "The mat sat on the cat because it was tired."})
    assert again.text_area(key="attention.text2").value.startswith("The mat sat")
    ticks = by_title(again, "Text A′")["layout"]["xaxis"]["ticktext"]
    assert "cat→mat" in ticks and "mat→cat" in ticks  # two swapped words: each position marked as changed


def test_an_added_word_is_a_column_only_one_text_has():
    at = run_page("attention", {"lang": "en", "view": "compare", "text": "the cat sat", "text2": "the black cat sat"})
    assert_clean(at)
    a_map = by_title(at, "Text A ·")
    assert "+black" in a_map["layout"]["xaxis"]["ticktext"]
    z = plotly_array(a_map["data"][0]["z"])
    col = a_map["layout"]["xaxis"]["ticktext"].index("+black")
    assert np.isnan(z[:, col]).all() and np.isnan(z[col]).all()  # text A has no "black": an empty row and column


def test_the_same_text_twice_says_so_and_moves_nothing():
    at = run_page("attention", {"lang": "en", "view": "compare", "text": A, "text2": A})
    assert_clean(at)
    assert any("same tokens" in i.value for i in at.info)
    assert np.allclose(plotly_array(by_title(at, "Heads whose")["data"][0]["x"]), 0.0)


@pytest.mark.parametrize("variant, message", [("   ", "The text A′ is empty"), ("<b>x</b> & <i>y</i>", None)])
def test_odd_variants_are_messages_or_plain_text(variant, message):
    at = run_page("attention", {"lang": "en", "view": "compare", "text": "a b", "text2": variant})
    assert_clean(at)
    if message:
        assert at.error and message in at.error[0].value
    else:
        ticks = by_title(at, "Text A′")["layout"]["xaxis"]["ticktext"]
        assert all("<b>" not in tick and "<i>" not in tick for tick in ticks)
        assert any("&lt;" in tick for tick in ticks)


def test_a_decoder_and_cross_attention_compare(tiny_folders, folders_allowed):  # noqa: F811
    at = run_page("attention", {"lang": "en", "model": tiny_folders["gpt2"], "view": "compare",
                                "text": "the cat sat", "text2": "the dog sat"})
    assert_clean(at)
    assert len(figures(at)) == 4
    at = run_page("attention", {"lang": "zh", "model": tiny_folders["t5"], "view": "compare", "part": "cross",
                                "text": "the cat sat", "text2": "the cat sat down"})
    assert_clean(at)
    diff = by_title(at, "差异")
    assert "+down" in diff["layout"]["xaxis"]["ticktext"]  # keys = the encoder's tokens, one added
