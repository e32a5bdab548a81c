"""AppTest of the Train page: opens with a shipped model, trains briefly, compares runs, shows errors, EN + ZH."""
import pytest
import torch

from tests.conftest import assert_clean, run_page


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # small models; a shared 2-core box is far faster with one thread
    yield
    torch.set_num_threads(before)


def texts(elements) -> str:
    return " ".join(str(e.value) for e in elements)


def test_opens_with_the_shipped_model_and_its_attention_en():
    at = run_page("train", {"lang": "en"})
    assert_clean(at)
    assert "model shipped with the app" in texts(at.info)
    assert at.code[0].value == "3 5 6 2 9 5 1 4 1 3"  # greedy output of the shipped reverse model
    assert "Correct" in texts(at.success)
    charts = [c.proto.spec for c in at.get("plotly_chart")]
    assert len(charts) >= 5  # curves, probabilities (bars + heatmap), attention, snapshot, schedule
    assert at.tabs[0].label == "Train" and at.tabs[5].label == "Compare runs"


def test_decoding_step_slider_and_attention_kind():
    at = run_page("train", {"lang": "en"})
    at.slider(key="train.step").set_value(3).run()
    assert_clean(at)
    assert "Next-token probabilities at step 3" in " ".join(c.proto.spec for c in at.get("plotly_chart"))
    at.radio(key="train.kind").set_value("dec").run()
    assert_clean(at)
    assert "causal mask" in texts(at.caption)


def test_short_training_run_zh():
    at = run_page("train", {"lang": "zh", "seconds": "2", "preset": "tiny", "task": "copy"})
    assert_clean(at)
    at.button(key="train.go").click().run()
    assert_clean(at)
    model, origin = at.session_state["train.models"]["copy"]
    assert origin == "trained" and model.info["steps"] > 0 and model.history
    assert "你训练的模型" in texts(at.info)
    assert "训练" in texts(at.success)
    assert at.button(key="train.stop").disabled  # no job left running


def test_comparison_runs_side_by_side():
    at = run_page("train", {"lang": "en", "preset": "tiny", "cmp": "norm", "cmp_steps": "20"})
    at.button(key="train.cmp_go").click().run()
    assert_clean(at)
    runs = at.session_state["train.compare_runs"][("reverse", "norm")]
    assert [label for label, _ in runs] == ["Pre-norm", "Post-norm (paper)"]
    assert all(hist[-1]["step"] == 20 for _, hist in runs)


def test_bad_input_shows_an_error_not_an_exception():
    at = run_page("train", {"lang": "en"})
    at.text_input(key="train.src_reverse").set_value("3 x 4").run()
    assert_clean(at)
    assert "does not know the token “x”" in texts(at.error)
    at.radio(key="train.preset").set_value("custom").run()
    at.selectbox(key="train.d_model").set_value(1024).run()
    at.slider(key="train.layers").set_value(8).run()
    at.selectbox(key="train.d_ff").set_value(4096).run()
    at.selectbox(key="train.batch").set_value(4096).run()
    assert_clean(at)
    assert "MiB" in texts(at.error)
    assert at.button(key="train.go").disabled
