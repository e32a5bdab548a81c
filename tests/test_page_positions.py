"""AppTest of the Positions page: every part draws real content in English and Chinese, widgets drive the figures,
bad input shows a message instead of a traceback."""

import numpy as np
import pytest

from tests.conftest import assert_clean, chart_spec, charts, plotly_array, run_page, widget
from viz_core.lessons import positional as P


def _figure(at, i: int = 0) -> dict:
    return chart_spec(charts(at)[i])


def _z(trace: dict) -> np.ndarray:
    """A heatmap's z, decoded from plotly's typed-array JSON (or a plain list)."""
    return plotly_array(trace["z"])


def _metric(at, label_start: str) -> str:
    return next(m.value for m in at.metric if m.label.startswith(label_start))


def test_sinusoids_english_sliders_drive_the_heatmap():
    at = run_page("positions", {"lang": "en", "max_len": "7", "d_model": "5"})
    assert_clean(at)
    assert at.title[0].value == "Positional encoding"
    fig = _figure(at)
    np.testing.assert_allclose(_z(fig["data"][0]), P.sinusoidal_encoding(7, 5), atol=1e-12)
    assert fig["layout"]["yaxis"]["autorange"] == "reversed"
    assert fig["layout"]["yaxis"]["title"]["text"] == "position"
    assert fig["layout"]["xaxis"]["title"]["text"] == "dimension"
    at.slider(key="positions.d_model").set_value(16).run()
    assert_clean(at)
    assert _z(_figure(at)["data"][0]).shape == (7, 16)
    assert at.query_params["d_model"] in ("16", ["16"])
    assert len(charts(at)) == 1  # the waves are a part of their own (test_waves_...)


def test_waves_are_a_part_of_their_own_with_the_tables_sizes():
    """Part 2 draws the table's columns as waves, for the same max_len and d_model as part 1 (one setting,
    held in the address); its dimension sliders follow d_model's range."""
    at = run_page("positions", {"lang": "en", "max_len": "7", "d_model": "5"})
    assert [widget(at, "radio", "positions.part").format_func(p) for p in ("heatmap", "waves")] == \
        ["1 · Sinusoids", "2 · Waves"]
    widget(at, "radio", "positions.part").set_value("waves").run()
    assert_clean(at)
    assert at.query_params["part"] in ("waves", ["waves"]) and len(charts(at)) == 2
    assert at.slider(key="positions.d_model").value == 5 and at.slider(key="positions.max_len").value == 7
    names = [t.get("name") for t in _figure(at, 0)["data"] if t.get("name")]
    assert names[1].startswith("dim 2 (sin, pair 1")  # dim_b's default: d_model // 2
    at.slider(key="positions.d_model").set_value(16).run()
    names = [t.get("name") for t in _figure(at, 0)["data"] if t.get("name")]
    assert names[1].startswith("dim 2 (sin, pair 1")  # the chosen dimension survives the new slider range
    at.slider(key="positions.dim_b").set_value(13).run()
    names = [t.get("name") for t in _figure(at, 0)["data"] if t.get("name")]
    assert names[0].startswith("dim 0 (sin, pair 0, λ ≈ 6.283") and names[1].startswith("dim 13 (cos, pair 6")
    empty = run_page("positions", {"lang": "zh", "part": "waves", "max_len": "0"})
    assert_clean(empty)
    assert not charts(empty) and any("max_len 为 0" in i.value for i in empty.info)


def test_big_tables_are_thinned_and_max_len_zero_is_explained():
    at = run_page("positions", {"lang": "en", "max_len": "1024", "d_model": "1024"})
    assert_clean(at)
    assert _z(_figure(at)["data"][0]).shape[0] <= 200
    assert any("1024 × 1024" in c.value for c in at.caption)
    at.slider(key="positions.max_len").set_value(0).run()
    assert_clean(at)
    assert any("max_len is 0" in i.value for i in at.info)
    assert not charts(at)


def test_similarity_chinese_depends_only_on_distance():
    at = run_page("positions", {"lang": "zh", "part": "similarity", "max_len": "40", "d_model": "16"})
    assert_clean(at)
    assert at.title[0].value == "位置编码"
    sim = _z(_figure(at)["data"][0])
    np.testing.assert_allclose(sim, P.similarity(P.sinusoidal_encoding(40, 16)), atol=1e-9)
    assert float(_metric(at, "对角线上的最大差值")) < 1e-10
    widget(at, "radio", "positions.measure").set_value("cosine").run()
    assert np.allclose(np.diag(_z(_figure(at)["data"][0])), 1.0)
    at.slider(key="positions.d_model").set_value(7).run()  # odd width: the lone sine breaks the property a bit
    assert_clean(at)
    assert float(_metric(at, "对角线上的最大差值")) > 1e-6
    assert any("奇数" in i.value for i in at.info)


def test_relative_positions_rotation_is_exact():
    at = run_page("positions", {"lang": "en", "part": "relative", "max_len": "64", "d_model": "32"})
    assert_clean(at)
    at.slider(key="positions.shift").set_value(9).run()
    assert float(_metric(at, "Largest reconstruction error")) < 1e-12
    assert _metric(at, "Rotation angle of pair 0") == f"{np.degrees(9.0):.3f}°"
    corner = _z(_figure(at, 1)["data"][0])
    assert corner.shape == (8, 8)  # four 2x2 blocks
    np.testing.assert_allclose(corner, P.rotation_matrix(32, 9)[:8, :8], atol=1e-12)
    at.slider(key="positions.d_model").set_value(9).run()  # odd: the lone sine cannot be rotated
    assert_clean(at)
    assert any("d_model = 9 is odd" in i.value for i in at.info)
    assert 1e-9 < float(_metric(at, "Largest reconstruction error")) < 9 * 1e-3


def test_worked_example_matches_the_notes_and_bad_vector_is_an_error():
    at = run_page("positions", {"lang": "en", "part": "example"})
    assert_clean(at)
    table = at.dataframe[0].value
    np.testing.assert_allclose(table.iloc[4].to_numpy(dtype=float), [0.2432, -0.1536, 0.84, 1.2992], atol=1e-4)
    np.testing.assert_allclose(table.iloc[2].to_numpy(dtype=float), [1.0, 1.5, 0.8, 1.3], atol=1e-4)
    at.text_input(key="positions.vec").set_value("1.0, banana, 3").run()
    assert_clean(at)
    assert at.error and "banana" in at.error[0].value
    assert not at.dataframe


def test_sqrt_d_model_norms_chinese():
    at = run_page("positions", {"lang": "zh", "part": "scale", "sd": "256"})
    assert_clean(at)
    assert float(_metric(at, "‖PE(pos)‖")) == pytest.approx(np.sqrt(128), abs=0.01)
    before, after = _metric(at, "还能认出原词").split("→")
    assert after.strip() == "100%" and int(before.strip().rstrip("%")) < 60


def test_order_matters_numbers_and_bad_tokens():
    at = run_page("positions", {"lang": "en", "part": "order", "tokens": "the cat sat on the mat"})
    assert_clean(at)
    assert float(_metric(at, "Without PE")) < 1e-12
    assert float(_metric(at, "With PE")) > 1e-3
    assert "mat the on sat cat the" in at.text[0].value
    assert not [n for n in at.number_input if n.key == "positions.seed"]  # the seed only where it counts
    widget(at, "radio", "positions.perm").set_value("shuffle").run()
    at.number_input(key="positions.seed").set_value(7).run()
    widget(at, "radio", "positions.perm").set_value("swap").run()
    assert "cat the sat on the mat" in at.text[0].value
    assert str(at.query_params["seed"]).strip("[]'") == "7"  # kept (and in the address) while it is not drawn
    at.text_input(key="positions.tokens").set_value("lonely").run()
    assert_clean(at)
    assert at.error and "2 to 16 words" in at.error[0].value


@pytest.mark.slow
def test_learned_vs_fixed_vs_rope_uses_minilm():
    at = run_page("positions", {"lang": "en", "part": "learned", "n_pos": "64"})
    assert_clean(at)
    table = at.dataframe[0].value
    dev = dict(zip(table.iloc[:, 0], table.iloc[:, 1].astype(float)))
    assert dev["sinusoidal"] < 1e-9 and dev["rotary (RoPE)"] < 1e-9 and dev["learned (MiniLM)"] > 0.1
    heat = _z(_figure(at, 0)["data"][0])
    assert heat.shape[0] == 64  # 64 positions of MiniLM's (512, 384) table, thinned columns


def test_unexpected_error_shows_an_id_not_the_exception(monkeypatch, caplog):
    """Any exception that is not an InputError: a generic translated message with an error id; the path and the
    library's text go to the server log only."""
    import re

    from app_pages._ui import models

    def broken():
        raise OSError("[Errno 2] No such file or directory: '/srv/secret/weights.bin'")

    monkeypatch.setattr(models, "position_embeddings", broken)
    with caplog.at_level("ERROR", logger="viz_core.errors"):
        at = run_page("positions", {"lang": "zh", "part": "learned"})
    assert not at.exception
    shown = at.error[0].value
    error_id = re.search(r"错误编号 ([0-9a-f]{8})", shown).group(1)
    assert "/srv/secret" not in shown and "Errno" not in shown and "OSError" not in shown
    assert error_id in caplog.text and "/srv/secret/weights.bin" in caplog.text and "Traceback" in caplog.text
