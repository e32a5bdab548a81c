"""AppTest of the Mechanics page: every section in English and Chinese, widgets driven, real content checked, and bad
input shown as an error element instead of a traceback."""

import numpy as np
import pytest

from tests.conftest import assert_clean, figures, md_tables, plotly_array, markdowns, run_page, widget


def _figures(at) -> list[dict]:
    return figures(at)


def _z(fig: dict) -> np.ndarray:
    """The heatmap values of a figure spec (plotly may ship them as a base64 typed array)."""
    return plotly_array(fig["data"][0]["z"])


def _titles(at) -> list[str]:
    return [f["layout"]["title"]["text"] for f in _figures(at)]


def _text(at) -> str:
    parts = markdowns(at) + [c.value for c in at.caption] + [s.value for s in at.success]
    parts += [i.value for i in at.info] + [e.value for e in at.error]
    return "\n".join(parts)


def test_steps_worked_example_en():
    at = run_page("mechanics", {"lang": "en"})
    assert_clean(at)
    titles = _titles(at)
    assert "Q = X W_q  (3 × 2)" in titles and "softmax, each row sums to 1  (3 × 3)" in titles
    # Q, K, V, QK^T, scaled, softmax, output: no "+ mask" stage without a mask, and the inputs X, W_q, W_k, W_v
    # sit in their editors, in a section drawn only while open
    assert any(t.startswith("Q Kᵀ / √d_k") for t in titles) and len(titles) == 7
    assert "No mask is on" in _text(at) and not at.dataframe
    weights = _z(next(f for f in _figures(at) if f["layout"]["title"]["text"].startswith("softmax")))
    np.testing.assert_allclose(weights[0], [0.804, 0.101, 0.095], atol=6e-4)  # the study notes' numbers
    assert "1.000, 1.000, 1.000" in _text(at)
    at.checkbox(key="mechanics.scale").uncheck().run()
    assert "Q Kᵀ, not scaled  (3 × 3)" in _titles(at)
    at.checkbox(key="mechanics.causal").check().run()
    # no greyed-out p slider while dropout is off (a disabled label fails WCAG contrast), a line instead
    assert not [s for s in at.slider if s.key == "mechanics.p"] and "switch on training mode" in _text(at)
    at.checkbox(key="mechanics.train").check().run()
    assert_clean(at)
    assert at.slider(key="mechanics.p").value == 0.2
    titles = _titles(at)
    assert "+ mask (−∞ where blocked)  (3 × 3)" in titles and any("dropout" in t for t in titles)
    assert at.query_params["causal"] == ["1"] or at.query_params["causal"] == "1"
    assert not md_tables(at) and [e.label for e in at.expander][-1] == "Batched multi-head shapes"  # closed: undrawn
    at = run_page("mechanics", {"lang": "en", "shapes": "1"})
    table = md_tables(at)[-1]  # the batched-shapes walkthrough (a static markdown table: its notes wrap)
    assert "(2, 2, 5, 4)" in table.iloc[:, 1].tolist()
    assert "q = q.view(2, 5, 2, 4)" in table.iloc[:, 0].tolist()  # the code as written, in a code span
    failed = table[table.iloc[:, 1] == "✗"]
    assert len(failed) == 1 and "view size is not compatible" in failed.iloc[0, -1]  # torch's own error, in the note


def test_the_inputs_open_in_their_own_section():
    """Closed (the default), the worked example reads its matrices from their stored cells: an edit in the address
    moves every stage. Open, the four editors and the reset button are drawn; closing draws them no more."""
    at = run_page("mechanics", {"lang": "en", "x": "1,0,0,0;0,1,0,0;0,0,1,0"})
    assert_clean(at)
    figs = {f["layout"]["title"]["text"].split("  (")[0]: f for f in _figures(at)}
    np.testing.assert_allclose(_z(figs["V = X W_v"]), np.eye(3, 4), atol=1e-9)  # W_v = I: V = X, the edited one
    assert not [b for b in at.button if b.key == "mechanics.reset"]
    at = run_page("mechanics", {"lang": "zh", "edit": "1"})
    assert_clean(at)
    assert [b for b in at.button if b.key == "mechanics.reset"] and len(at.expander[0].children) > 0
    assert len(at.dataframe) == 4  # the four editors
    assert "查看并修改 X、W_q、W_k、W_v" == at.expander[0].label
    at = run_page("mechanics", {"lang": "en", "src": "random", "inputs": "1"})
    assert_clean(at)
    titles = _titles(at)
    assert titles[0].startswith("X (embeddings)") and "W_q  (8 × 4)" in titles and len(titles) == 11


def test_steps_random_and_shapes_zh():
    at = run_page("mechanics", {"lang": "zh", "src": "random", "shapes": "1"})
    assert_clean(at)
    at.slider(key="mechanics.rn").set_value(6).run()
    at.slider(key="mechanics.rdk").set_value(3).run()
    assert "Q = X W_q  (6 × 3)" in _titles(at)
    assert "每行之和" in _text(at)
    at.slider(key="mechanics.bdm").set_value(12).run()
    widget(at, "selectbox", "mechanics.bh").set_value(3).run()
    shapes = md_tables(at)[-1].iloc[:, 1].tolist()
    assert "(2, 3, 5, 4)" in shapes and "(2, 3, 5, 5)" in shapes


def test_masks_nan_demo_zh():
    at = run_page("mechanics", {"lang": "zh", "section": "masks", "side": "start", "item": "0"})
    assert_clean(at)
    widget(at, "selectbox", "mechanics.kind").set_value("causal_padding").run()
    summary = at.dataframe[0].value
    assert summary.iloc[1, 1] > 0 and summary.iloc[3, 1] == 0  # masked_fill(-inf) has NaN, ours has none
    assert "NaN" in summary.iloc[:, 3].tolist()
    assert "(4, 1, 5, 5)" in _text(at) and "float16" in _text(at)
    widget(at, "selectbox", "mechanics.kind").set_value("cross").run()
    at.text_input(key="mechanics.mq").input("un deux").run()
    assert_clean(at)
    assert any("(2 × 5)" in t for t in _titles(at))


def test_sliding_window_mask_en_zh():
    """Pick the sliding-window mask, move its window: the mask follows 0 <= i - j < W, the weights are 0 outside
    the window, the window is in the address, and the explanation (with the numbers of W) is on the page."""
    at = run_page("mechanics", {"lang": "en", "section": "masks", "item": "1"})
    assert not [s for s in at.slider if s.key == "mechanics.win"]  # drawn only for the sliding window
    widget(at, "selectbox", "mechanics.kind").set_value("sliding").run()
    assert_clean(at)
    assert at.slider(key="mechanics.win").value == 3
    at.slider(key="mechanics.win").set_value(2).run()
    assert_clean(at)
    assert at.query_params["win"] in (["2"], "2") and at.query_params["kind"] in (["sliding"], "sliding")
    figs = {f["layout"]["title"]["text"].split("  (")[0]: f for f in _figures(at)}
    mask = _z(figs["mask (1 = blocked)"]).astype(bool)  # sentence 1: "a dog ran far away", N = 5
    i, j = np.indices(mask.shape)
    np.testing.assert_array_equal(mask, ~((i - j >= 0) & (i - j < 2)))
    weights = _z(figs["weights (safe softmax)"])
    assert np.all(weights[mask] == 0) and np.allclose(weights.sum(-1), 1.0)
    text = _text(at)
    assert "Sliding window" in text and "O(N·W)" in text and "Gemma 3" in text
    assert "W = 2: 9 of the 25 cells" in text and "5 × (W − 1) = 5" in text and "2555" in text
    assert "(5, 5)" in text
    at.slider(key="mechanics.win").set_value(12).run()  # W >= N: the causal mask
    mask = _z(next(f for f in _figures(at) if f["layout"]["title"]["text"].startswith("mask"))).astype(bool)
    np.testing.assert_array_equal(mask, np.triu(np.ones((5, 5), bool), 1))
    at = run_page("mechanics", {"lang": "zh", "section": "masks", "kind": "sliding", "win": "4"})
    assert_clean(at)
    assert at.slider(key="mechanics.win").value == 4 and "滑动窗口" in _text(at)
    at = run_page("mechanics", {"lang": "en", "section": "masks", "kind": "causal", "win": "4"})
    assert_clean(at)  # the window waits in the address while another mask is shown
    assert not [s for s in at.slider if s.key == "mechanics.win"]


def test_real_decoder_shapes_en():
    """Gemma 3 270M (MQA, 4 query heads over 1 KV head, d_head 256, 18 layers) and SmolLM2-135M (GQA, 9 over 3,
    d_head 64, 30 layers) in the KV-cache part; Gemma's sliding layers capped at W = 512 at 4096 tokens."""
    at = run_page("mechanics", {"lang": "en", "section": "variants", "preset": "gemma3_270m"})
    assert_clean(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Variant"] == "MQA (1/4)"
    assert metrics["KV cache per token"] == "18 KiB"  # 2 x 18 x 1 x 256 x 2 bytes = 18,432
    # 3 full layers x 4096 tokens + 15 sliding layers x 512, 1 KiB per token and layer
    assert metrics["KV cache, 4096 tokens × batch 1"] == "19.5 MiB"
    text = _text(at)
    assert "full layers hold 4096 tokens each, sliding layers 512" in text and "72 MiB" in text
    assert "layers 5, 11, 17" in text and "72 KiB per token" in text  # MHA with 4 KV heads: 4 x 18 KiB
    at.number_input(key="mechanics.ctx").set_value(300).run()  # shorter than W: the window caps nothing
    text = _text(at)
    assert "At 300 tokens" in text and "At 4096 tokens" in text
    widget(at, "selectbox", "mechanics.preset").set_value("smollm2_135m").run()
    assert_clean(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Variant"] == "GQA (3/9)" and metrics["KV cache per token"] == "22.5 KiB"  # 2 x 30 x 3 x 64 x 2
    assert "sliding" not in _text(at)
    widget(at, "select_slider", "mechanics.kv").set_value(9).run()
    assert {m.label: m.value for m in at.metric}["Variant"] == "MHA (9/9)"


def test_variants_kv_slider_en():
    at = run_page("mechanics", {"lang": "en", "section": "variants"})
    assert_clean(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Variant"] == "MHA (32/32)" and metrics["KV cache per token"] == "512 KiB"
    widget(at, "select_slider", "mechanics.kv").set_value(8).run()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Variant"] == "GQA (8/32)" and metrics["KV cache per token"] == "128 KiB"
    widget(at, "select_slider", "mechanics.kv").set_value(1).run()
    assert {m.label: m.value for m in at.metric}["Variant"] == "MQA (1/32)"
    table = at.dataframe[0].value
    assert table.iloc[0, 2] == "0.000" and float(table.iloc[2, 2]) > 0
    assert "largest difference" in _text(at)
    widget(at, "selectbox", "mechanics.preset").set_value("custom").run()
    at.number_input(key="mechanics.ch").set_value(7).run()
    assert_clean(at)
    assert "divisible" in _text(at)  # 4096 is not divisible by 7: a message, not a traceback


def test_cross_and_additive_zh():
    at = run_page("mechanics", {"lang": "zh", "section": "cross"})
    assert_clean(at)
    assert any("(3 × 6)" in t for t in _titles(at))
    weights = _z(_figures(at)[0])
    assert np.all(weights[:, 4:] == 0)  # the two [PAD] keys
    widget(at, "radio", "mechanics.section").set_value("additive").run()
    assert_clean(at)
    assert len(_titles(at)) == 5
    at.slider(key="mechanics.an").set_value(5).run()
    assert any("(5 × 5)" in t for t in _titles(at))


def test_bad_input_shows_errors():
    at = run_page("mechanics", {"lang": "en", "wq": "0.2,abc;0.3,0.5;0.4,0.6;0.1,0.2"})
    assert_clean(at)
    assert any("not a number" in e.value for e in at.error)
    at = run_page("mechanics", {"lang": "zh", "section": "masks", "batch": "   "})
    assert_clean(at)
    assert len(at.error) == 1
    at = run_page("mechanics", {"lang": "en", "section": "cross", "cq": "  "})
    assert_clean(at)
    assert any("empty" in e.value for e in at.error)


@pytest.mark.slow
def test_real_model_reproduces_its_weights():
    at = run_page("mechanics", {"lang": "en", "src": "real", "rlayer": "1", "rhead": "3", "rtext": "A dog barks."})
    assert_clean(at)
    ok = [s.value for s in at.success]
    assert ok and "layer 1, head 3" in ok[0]
    diff = float(ok[0].rsplit(" ", 1)[1].rstrip("."))
    assert diff < 1e-4
    at = run_page("mechanics", {"lang": "en", "src": "real", "rtext": "   "})
    assert_clean(at)
    assert at.error
