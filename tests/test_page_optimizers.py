"""AppTest of the Optimizers page: English and Chinese, widgets driven, divergence, fair race, bad input, URL state."""

import pytest

from tests.conftest import assert_clean, chart_spec, charts, md_tables, run_page, widget

pytestmark = pytest.mark.slow


def _race_spec(at) -> dict:
    return chart_spec(charts(at)[0])


def _texts(at) -> str:
    return " ".join(str(e.value) for kind in (at.markdown, at.caption, at.info, at.warning, at.error) for e in kind)


def test_english_race_inside_and_schedules():
    at = run_page("optimizers", {"lang": "en", "numbers": "1"})
    assert_clean(at)
    assert at.title[0].value == "Optimizers"
    assert [t.label for t in at.tabs] == ["Race", "Inside the optimizers", "Learning-rate schedules"]
    assert len(charts(at)) == 2          # only the open tab is drawn: the race, the loss and distance curves
    spec = _race_spec(at)
    # the frames follow from the faint paths: the browser makes them (meta.trail_frames), none are sent
    recipe = spec["layout"]["meta"]["trail_frames"]
    assert "frames" not in spec and len(recipe["steps"]) > 10 and recipe["steps"][-1] == 300
    assert spec["layout"]["sliders"][0]["steps"][-1]["label"] == "300"
    # the legend and the colour bar come just after the first paint (the chart element), in the room the margins keep
    assert spec["layout"]["meta"]["after_paint"] == ["legend", "colorbars"]
    assert [tr["marker"]["showscale"] for tr in spec["data"] if tr.get("marker", {}).get("showscale")] == [True]
    names = {tr.get("name") for tr in spec["data"]}
    assert {"SGD", "Momentum", "AdaGrad", "RMSProp", "Adam"} <= names
    table = md_tables(at)[0]
    assert list(table["optimizer"]) == ["SGD", "Momentum", "AdaGrad", "RMSProp", "Adam"]
    assert table.loc[table["optimizer"] == "Adam", "final loss − minimum"].astype(float).iloc[0] < 1e-6
    when = md_tables(at)[1]  # (two tables of 4 and 3 columns, not one of 6: each fits a phone)
    assert list(when.columns) == ["optimizer", "step reaching loss − min < 0.001", "diverged at step"]
    assert list(when["optimizer"]) == list(table["optimizer"]) and set(when["diverged at step"]) == {"—"}
    assert not at.error and not at.warning
    for tab, count in (("inside", 2), ("schedules", 2)):   # step sizes + state; schedules + the paper's
        at = run_page("optimizers", {"lang": "en", "tab": tab})
        assert_clean(at)
        assert len(charts(at)) == count and not at.error


def test_chinese_page():
    at = run_page("optimizers", {"lang": "zh", "surface": "saddle", "x0": "-1.5", "y0": "0.01", "numbers": "1"})
    assert_clean(at)
    assert at.title[0].value == "优化器"
    assert "鞍点" in widget(at, "selectbox", "optimizers.surface").format_func("saddle")
    assert "优化器" in md_tables(at)[0].columns[0]
    assert at.number_input(key="optimizers.x0").value == -1.5
    spec = _race_spec(at)
    assert spec["layout"]["updatemenus"][0]["buttons"][0]["label"].endswith("播放")
    # each optimizer's name leads its explanation with a Chinese colon (no ASCII ": " in a Chinese sentence)
    inside = run_page("optimizers", {"lang": "zh", "tab": "inside"})
    lines = [m.value for m in inside.markdown if m.value.startswith("**Adam**")]
    assert len(lines) == 1 and lines[0].startswith("**Adam**：") and ": " not in lines[0]


def test_surface_change_resets_start_and_lr_then_divergence_message():
    at = run_page("optimizers", {"lang": "en", "numbers": "1"})
    widget(at, "selectbox", "optimizers.surface").set_value("rosenbrock").run()
    assert_clean(at)
    assert at.number_input(key="optimizers.x0").value == -1.2
    assert at.number_input(key="optimizers.lr").value == 0.001
    assert at.query_params["surface"] == ["rosenbrock"] or at.query_params["surface"] == "rosenbrock"
    at.number_input(key="optimizers.lr").set_value(0.01).run()
    assert_clean(at)
    assert any("Momentum diverged at step" in w.value for w in at.warning)
    assert "diverged" in set(md_tables(at)[0]["final loss − minimum"])


def test_fair_race_schedule_extras_and_inspect():
    at = run_page("optimizers", {"lang": "en", "surface": "line_fit", "steps": "100", "sched_open": "1", "hyper": "1",
                                  "numbers": "1"})
    racers = widget(at, "button_group", "optimizers.racers")
    assert racers.value == ["sgd", "momentum", "adagrad", "rmsprop", "adam"]  # the five classics by default
    racers.set_value(["sgd", "momentum", "adagrad", "rmsprop", "adam", "adamw"])
    at.toggle(key="optimizers.fair").set_value(True)
    widget(at, "selectbox", "optimizers.sched").set_value("cosine").run()
    assert_clean(at)
    assert any("grid search" in i.value for i in at.info)
    table = md_tables(at)[0]
    assert "learning rate (tuned)" in table.columns and "AdamW" in set(table["optimizer"])
    at.session_state["optimizers.tab.en"] = "Inside the optimizers"   # open the tab, as a click would
    at.run()
    widget(at, "selectbox", "optimizers.inspect").set_value("adagrad").run()
    assert at.query_params["tab"] in ("inside", ["inside"])
    state = chart_spec(charts(at)[1])
    assert "Inside AdaGrad" in state["layout"]["title"]["text"]


def test_closed_sections_are_not_drawn_and_their_values_hold():
    """The hyperparameter and schedule sections are drawn only while open, and a value set in them (or
    given by a link) decides the race whether they are open or closed."""
    moved = {"lang": "en", "steps": "60", "beta1": "0.5", "own_adam": "1", "lr_adam": "0.02", "sched": "cosine"}
    closed = run_page("optimizers", moved)
    assert_clean(closed)
    labels = {w.proto.label for kind in ("slider", "selectbox", "number_input") for w in closed.get(kind)}
    assert "β₁" not in labels and "Schedule" not in labels  # neither section drawn
    assert closed.query_params["beta1"] in ("0.5", ["0.5"]) and closed.query_params["lr_adam"] in ("0.02", ["0.02"])
    opened = run_page("optimizers", moved | {"hyper": "1", "sched_open": "1"})
    assert_clean(opened)
    assert {"β₁", "Schedule"} <= {w.proto.label for kind in ("slider", "selectbox") for w in opened.get(kind)}
    assert widget(opened, "slider", "optimizers.beta1").value == 0.5
    assert widget(opened, "number_input", "optimizers.lr_adam").value == 0.02
    assert widget(opened, "selectbox", "optimizers.sched").value == "cosine"
    race = chart_spec(charts(closed)[0])["data"]
    assert race == chart_spec(charts(opened)[0])["data"]
    plain = chart_spec(charts(run_page("optimizers", {"lang": "en", "steps": "60"}))[0])
    assert race != plain["data"]  # the held values changed the race


def test_the_race_in_numbers_is_a_section_drawn_only_while_open():
    """The results tables and the two downloads are in a closed section by default (the charts above show the same
    race); opening it draws them and the address keeps it open (numbers=1), in either language."""
    closed = run_page("optimizers", {"lang": "en"})
    assert_clean(closed)
    assert md_tables(closed) == [] and not closed.get("download_button")
    section = [e for e in closed.expander if "The race in numbers" in e.label]
    assert len(section) == 1
    opened = run_page("optimizers", {"lang": "zh", "numbers": "1"})
    assert_clean(opened)
    assert len(md_tables(opened)) == 2 and len(opened.get("download_button")) == 2
    assert opened.query_params["numbers"] in ("1", ["1"])


def test_click_on_the_contour_sets_the_start():
    at = run_page("optimizers", {"lang": "en"})
    at.session_state["optimizers.race_chart"] = {"selection": {"points": [{"curve_number": 1, "x": 2.5, "y": -1.25}]}}
    at.run()
    assert at.number_input(key="optimizers.x0").value == 2.5
    assert at.number_input(key="optimizers.y0").value == -1.25


@pytest.mark.parametrize("kind, key, value, expected", [
    ("number_input", "optimizers.lr", 0.0, "learning rate must be a positive number"),
    ("number_input", "optimizers.steps", 0, "Steps must be between 1 and 2000 (you typed 0)"),
])
def test_bad_input_shows_a_message(kind, key, value, expected):
    at = run_page("optimizers", {"lang": "en"})
    getattr(at, kind)(key=key).set_value(value).run()
    assert_clean(at)
    assert at.error and expected in at.error[0].value
    at.session_state["optimizers.tab.en"] = "Learning-rate schedules"
    at.run()
    assert len(charts(at)) == 2          # the schedules tab still works


STEPS = "optimizers.steps"


@pytest.mark.parametrize("lang, message", [
    ("en", "Steps must be between 1 and 2000 (you typed 100000); it stays at 300."),
    ("zh", "步数必须在 1 到 2000 之间（你输入的是 100000），仍保持为 300。"),
])
def test_steps_out_of_range_are_named_as_typed(lang, message):
    """100000 typed after an earlier refused 0 gave "(got 0)", a value of the earlier entry (the
    browser never sent 100000). The message names what was typed and the range, in the page's language; the box
    goes back to the steps in use and the race still runs."""
    at = run_page("optimizers", {"lang": lang, "numbers": "1"})
    at.number_input(key=STEPS).set_value(0).run()
    at.number_input(key=STEPS).set_value(100000).run()
    assert_clean(at)
    assert [e.value for e in at.error] == [message]
    assert at.number_input(key=STEPS).value == 300
    assert len(md_tables(at)[0]) == 5 and "steps" not in at.query_params  # the race of 300 steps, as before


def test_the_steps_box_refuses_0():
    """A race needs at least one step, so the box's minimum is 1 (a 0 would leave the page with
    no race). 0 typed, or in a link, leaves the steps as they were; 1 is taken."""
    at = run_page("optimizers", {"lang": "en", "steps": "40", "numbers": "1"})
    at.number_input(key=STEPS).set_value(0).run()
    assert_clean(at)
    assert at.number_input(key=STEPS).value == 40
    assert [e.value for e in at.error] == ["Steps must be between 1 and 2000 (you typed 0); it stays at 40."]
    assert len(md_tables(at)[0]) == 5 and at.query_params["steps"] in ("40", ["40"])
    at.number_input(key=STEPS).set_value(1).run()
    assert_clean(at)
    assert at.number_input(key=STEPS).value == 1 and not at.error and len(md_tables(at)[0]) == 5
    link = run_page("optimizers", {"lang": "en", "steps": "0"})
    assert_clean(link)
    assert link.number_input(key=STEPS).value == 300 and not link.error  # a bad address falls back to the default


def test_the_racers_are_one_row_of_pills_that_the_address_holds():
    """The racers are one st.pills, not a checkbox each (fewer elements for a page switch to draw); the address
    names them, in the race's own order whatever the order picked, and a name the page does not know is dropped."""
    at = run_page("optimizers", {"lang": "en", "racers": "adam,sgd", "steps": "40", "numbers": "1"})
    assert_clean(at)
    assert not at.checkbox or not [c for c in at.checkbox if c.key and c.key.startswith("optimizers.r_")]
    assert md_tables(at)[0].iloc[:, 0].tolist() == ["SGD", "Adam"]
    widget(at, "button_group", "optimizers.racers").set_value(["nadam", "sgd", "adam"]).run()
    assert_clean(at)
    assert md_tables(at)[0].iloc[:, 0].tolist() == ["SGD", "Adam", "NAdam"]
    assert at.query_params["racers"] in ("sgd,adam,nadam", ["sgd,adam,nadam"])
    odd = run_page("optimizers", {"lang": "zh", "racers": "sgd,lion", "numbers": "1"})
    assert_clean(odd)
    assert len(md_tables(odd)[0]) == 5  # an unknown name: the address is not valid, the default five race


def test_no_racer_and_bad_url():
    at = run_page("optimizers", {"lang": "zh", "lr": "-3", "x0": "99", "surface": "moon"})
    assert_clean(at)
    assert at.number_input(key="optimizers.lr").value == 0.1        # bad URL values fall back to defaults
    assert at.number_input(key="optimizers.x0").value == -4.5
    widget(at, "button_group", "optimizers.racers").set_value([]).run()
    assert_clean(at)
    assert at.error and "至少选一个参赛者" in at.error[0].value
