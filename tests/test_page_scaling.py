"""AppTest of the Scaling page: the four parts in English and Chinese, widgets driven, bad input shown as errors."""
import pytest

from app_pages._ui import scaling as data
from tests.conftest import assert_clean, charts, markdowns, run_page, widget
from viz_core.lessons import scaling


def _charts(at) -> int:
    return len(charts(at))


def _metric(at, start: str) -> str:
    return next(m.value for m in at.metric if m.label.startswith(start))


def test_distribution_english_slider_and_url():
    at = run_page("scaling", {"lang": "en", "part": "dist", "dk": "16"})
    assert_clean(at)
    assert at.title[0].value.startswith("Scaling")
    assert widget(at, "select_slider", "scaling.dk").value == 16
    assert _metric(at, "Var(q·k):").endswith("/ 16")
    assert _charts(at) == 3                                            # two histograms and the variance curve
    widget(at, "select_slider", "scaling.dk").set_value(4096).run()
    assert_clean(at)
    measured, theory = _metric(at, "Var(q·k):").split(" / ")
    assert theory == "4096" and abs(float(measured) / 4096 - 1) < 0.05
    measured_scaled = float(_metric(at, "Var(q·k/√d_k)").split(" / ")[0])
    assert abs(measured_scaled - 1) < 0.05
    assert at.query_params["dk"] == ["4096"] or at.query_params["dk"] == "4096"
    assert len(at.get("download_button")) == 2


def test_softmax_chinese_temperature_and_n():
    at = run_page("scaling", {"lang": "zh", "part": "softmax", "dk": "4096"})
    assert_clean(at)
    assert at.title[0].value.startswith("缩放")
    assert any(m.label.startswith("最大权重") for m in at.metric)
    unscaled, scaled = (float(x) for x in _metric(at, "最大权重").split(" / "))
    assert unscaled > 0.95 and scaled < 0.4                           # N = 16, T = 1: saturated vs not
    text = " ".join(markdowns(at))
    assert "d_k = 256" in text and "不缩放时" in text                  # the onset of saturation, in Chinese
    assert _charts(at) == 6                                            # 3 curves, bars, 2 Jacobians (N <= 32)
    widget(at, "select_slider", "scaling.temp").set_value(10.0).run()
    assert_clean(at)
    assert "直到 d_k = 4096" in " ".join(markdowns(at))  # a hot softmax never saturates here
    at.slider(key="scaling.n").set_value(200).run()
    assert_clean(at)
    assert _charts(at) == 4 and any("N ≤ 32" in c.value for c in at.caption)  # Jacobians too big to draw


def test_model_part_english_and_layer_head():
    at = run_page("scaling", {"lang": "en", "part": "model"})
    assert_clean(at)
    raw_var, scaled_var = (float(x) for x in _metric(at, "Var of the scores").split(" / "))
    assert scaled_var == pytest.approx(raw_var / 32, rel=1e-3)         # d_k = 32 in MiniLM
    assert any("reproduces the model's own attention" in c.value for c in at.caption)
    assert _charts(at) == 4
    at.slider(key="scaling.layer").set_value(5).run()
    at.slider(key="scaling.head").set_value(11).run()
    assert_clean(at)
    assert at.query_params["layer"] in ("5", ["5"]) and at.query_params["head"] in ("11", ["11"])
    assert any("reproduces" in c.value for c in at.caption)


def test_model_part_bad_text_shows_error_in_chinese():
    at = run_page("scaling", {"lang": "zh", "part": "model", "text": "   "})
    assert_clean(at)
    assert at.error and "空" in at.error[0].value                      # "the text is empty", translated
    assert _charts(at) == 0


def test_bad_url_values_fall_back_to_defaults():
    at = run_page("scaling", {"lang": "en", "part": "softmax", "dk": "3", "n": "0", "temp": "abc"})
    assert_clean(at)
    assert widget(at, "select_slider", "scaling.dk").value == 256
    assert at.slider(key="scaling.n").value == 16
    assert widget(at, "select_slider", "scaling.temp").value == 1.0


def test_training_runs_on_button_once_and_is_cached(monkeypatch):
    calls = []
    real = scaling.train_experiment

    def counting(cfg, device="cpu"):
        calls.append(cfg)
        return real(cfg, device)

    monkeypatch.setattr(scaling, "train_experiment", counting)
    data.experiment.clear()
    at = run_page("scaling", {"lang": "en", "part": "train", "exp_dk": "16", "exp_steps": "100"})
    assert_clean(at)
    assert at.info and not at.metric and not calls                     # nothing trains before the button
    at.button(key="scaling.train").click().run()
    assert_clean(at)
    assert len(calls) == 1 and calls[0].d_k == 16 and calls[0].steps == 100
    assert _charts(at) == 1
    assert _metric(at, "held-out accuracy").count("%") == 2
    widget(at, "select_slider", "scaling.exp_steps").set_value(200).run()   # other settings: asks for the button again
    assert at.info and len(calls) == 1
    widget(at, "select_slider", "scaling.exp_steps").set_value(100).run()   # back: shown again without retraining
    assert_clean(at)
    assert _charts(at) == 1 and len(calls) == 1
