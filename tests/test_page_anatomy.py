"""AppTest for the Anatomy page: every section in English and Chinese, widgets driven, real content checked, and bad
input shown as an error element instead of an exception."""
import re

import numpy as np

from tests.conftest import (assert_clean, charts, figure_text, figures, markdowns, plotly_array, run_page,
                            widget)


def _text(at) -> str:
    """Every markdown, caption and metric on the page, as one string."""
    parts = markdowns(at) + [c.value for c in at.caption]
    parts += [f"{m.label} {m.value}" for m in at.metric]
    return "\n".join(parts)


def _metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def _check(at, label: str) -> float:
    """A number of the norms' list of checks: the line "- **label** = `value`. meaning"."""
    found = re.search(r"^- \*\*" + re.escape(label) + r"\*\* = `([^`]+)`", _text(at), re.M)
    assert found, f"no check named {label!r}"
    return float(found[1])


def test_norms_en_matches_torch_and_reports_std_gap():
    at = run_page("anatomy", {"lang": "en"})
    assert_clean(at)
    assert at.title[0].value == "Anatomy of a Transformer block"
    assert len(charts(at)) == 4  # the four grids; two more parts open on demand
    assert [e.label for e in at.expander] == [
        "Where the pads sit, γ and β (the norms' scale and shift)",
        "Mean and spread of every token and every feature, before and after each norm",
        "The notes' LayerNorm: unbiased std, ε added to the std"]
    assert _check(at, "ours vs nn.LayerNorm") < 1e-10
    assert _check(at, "BatchNorm shift from pads") > 0
    assert _check(at, "BatchNorm: effect of batch mates") > 0  # three sentences: each moves the others
    assert "Largest absolute difference between our LayerNorm and torch.nn.LayerNorm" in _text(at)
    at.slider(key="anatomy.nd").set_value(4).run()
    at.slider(key="anatomy.pads").set_value(0).run()
    assert_clean(at)
    assert "0.8660" in _text(at) and "13.4% smaller" in _text(at)  # sqrt(3/4) at D = 4
    assert _check(at, "BatchNorm shift from pads") == 0
    at.slider(key="anatomy.nb").set_value(1).run()
    at.slider(key="anatomy.nn").set_value(1).run()
    assert_clean(at)
    assert any("collapses to β" in w.value for w in at.warning)


def test_pad_side_gamma_and_beta_hold_while_their_section_is_closed():
    """Closed, the section draws no control and its values (from the address) still decide the grids; opened, its
    three controls show those values."""
    held = {"lang": "en", "side": "start", "gamma": "2.0", "beta": "0.5", "nb": "2", "nn": "3", "nd": "4", "pads": "1"}
    at = run_page("anatomy", held)
    assert_clean(at)
    assert [s.key for s in at.slider] == ["anatomy.nb", "anatomy.nn", "anatomy.nd", "anatomy.pads"]
    assert [r.key for r in at.radio] == ["anatomy.section.en", "lang"]  # the part picker, the language
    layer = figures(at)[1]  # the LayerNorm grid: rows s0·t0.. s1·t2, columns f0..f3
    z, rows = plotly_array(layer["data"][0]["z"]).reshape(6, 4), layer["layout"]["yaxis"]["ticktext"]
    assert rows[3] == "s1·t0 (pad)" and rows[5] == "s1·t2"  # pads at the start of the second sentence
    real = z[[0, 1, 2, 4, 5]]
    np.testing.assert_allclose(real.mean(axis=1), 0.5, atol=1e-9)  # mean β on every real token
    np.testing.assert_allclose(real.std(axis=1), 2.0, atol=1e-3)  # std |γ| (ε = 1e-5 shaves a little)
    assert {k: at.query_params[k] for k in ("side", "gamma", "beta")} in (
        {"side": "start", "gamma": "2.0", "beta": "0.5"}, {"side": ["start"], "gamma": ["2.0"], "beta": ["0.5"]})
    opened = run_page("anatomy", held | {"nmore": "1", "lang": "zh"})
    assert_clean(opened)
    assert widget(opened, "slider", "anatomy.gamma").value == 2.0
    assert widget(opened, "slider", "anatomy.beta").value == 0.5
    side = widget(opened, "radio", "anatomy.side")
    assert side.value == "start" and side.options[side.index] == "句首"  # shown in the visitor's language


def test_norms_parts_that_open_hold_in_the_address():
    at = run_page("anatomy", {"lang": "zh", "nstats": "1", "nstd": "1"})
    assert_clean(at)
    assert len(figures(at)) == 6  # + the statistics panels, + the ε curve
    assert "笔记变体" in figure_text(at)  # the ε curve of the notes' variant
    assert _check(at, "我们的实现 vs nn.LayerNorm") < 1e-10
    assert at.query_params["nstats"] in ("1", ["1"]) and at.query_params["nstd"] in ("1", ["1"])


def test_placement_zh():
    at = run_page("anatomy", {"lang": "zh", "section": "placement", "depth": "4"})
    assert_clean(at)
    assert at.title[0].value == "Transformer 模块解剖"
    assert "看点" in _text(at) and len(charts(at)) == 1
    shallow = float(_metric(at, "最后一层的梯度（pre-norm）"))
    at.slider(key="anatomy.depth").set_value(24).run()
    assert_clean(at)
    assert float(_metric(at, "最后一层的梯度（pre-norm）")) < shallow  # deeper pre-norm stack: smaller top gradient
    assert float(_metric(at, "pre-norm：最后一层之后的均方根")) > 2


def test_ffn_and_dropout_en():
    at = run_page("anatomy", {"lang": "en", "section": "ffn"})
    assert_clean(at)
    assert _metric(at, "hidden units exactly 0") != "0%"
    widget(at, "radio", "anatomy.act").set_value("gelu").run()
    assert _metric(at, "hidden units exactly 0") == "0%"
    assert "FFN" in at.dataframe[0].value.columns
    widget(at, "radio", "anatomy.section").set_value("dropout").run()
    at.slider(key="anatomy.p").set_value(0.5).run()
    assert_clean(at)
    assert "1/(1 − p) = 2.000" in _text(at) and "torch.nn.Dropout" in _text(at)
    at.toggle(key="anatomy.train").set_value(False).run()
    assert "Eval mode" in _text(at)


def test_smoothing_zh():
    at = run_page("anatomy", {"lang": "zh", "section": "smoothing", "eps": "0.1", "k": "10"})
    assert_clean(at)
    text = _text(at)
    assert "0.910" in text and "F.cross_entropy" in text and "标签平滑" in text
    assert "104" in text or "103" in text  # float32 softmax underflows near m = 104
    at.slider(key="anatomy.eps").set_value(0.3).run()
    assert "0.730" in _text(at)  # 1 - 0.3 + 0.3 / 10


def test_path_shapes_sampling_and_parameters_zh():
    at = run_page("anatomy", {"lang": "zh", "section": "path"})
    assert_clean(at)
    table = at.dataframe[0].value
    shapes = list(table.iloc[:, 2])
    assert "(2, 1000)" in shapes and "(2, 4)" in shapes and "(1000,)" in shapes
    assert _metric(at, "参数总量") == "63,084,544" == _metric(at, "torch 模块（meta 设备）")
    widget(at, "selectbox", "anatomy.vocab").set_value(200).run()
    at.number_input(key="anatomy.top_k").set_value(1).run()
    assert_clean(at)
    assert "(2, 200)" in list(at.dataframe[0].value.iloc[:, 2])
    assert "200 个词元中有 1 个" in _text(at)
    widget(at, "radio", "anatomy.share").set_value("none").run()
    assert _metric(at, "参数总量") == "100,972,544"


def test_bad_input_is_explained_en():
    at = run_page("anatomy", {"lang": "en", "section": "path", "prompt": " "})
    assert_clean(at)
    assert any("at least one word" in e.value for e in at.error)
    at.number_input(key="anatomy.ph").set_value(7).run()  # 512 is not divisible by 7
    assert_clean(at)
    assert any("divisible" in e.value for e in at.error)
    at.text_input(key="anatomy.prompt").input("the cat sat").run()
    assert_clean(at)
    assert "(3, 1000)" in list(at.dataframe[0].value.iloc[:, 2])
