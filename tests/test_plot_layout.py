"""Figures the browser draws once: margins reserved for the labels, mask strokes as one path, colour bars
only where the cells do not carry their values, the loading placeholder."""
import html

import numpy as np
import plotly.graph_objects as go

from viz_core.plots import lm as lm_plots
from viz_core.plots import mechanics as mech_plots
from viz_core.plots import scaling as scaling_plots
from viz_core.plots.common import fit_margins, label_px, matrix_heatmap, placeholder_figure, reserve_margins

# what Chromium's automargin gave these labels with the Streamlit theme (measured: left margin, 1400 px page)
MEASURED_LEFT = {"a": 67, "abcde": 91, "abcdefghij": 113, "哈基咪": 96, "哈基咪哈基咪": 132,
                 "哈基咪 (133)": 124}
MEASURED_BOTTOM_60 = {"a": 73, "abcde": 94, "abcdefghij": 113, "哈基咪": 98,  # x labels at -60°
                      "哈基咪哈基咪": 130}


def test_reserved_margins_cover_what_the_browser_measured_without_much_slack():
    for label, measured in MEASURED_LEFT.items():
        fig = matrix_heatmap(np.zeros((3, 3)), [label] * 3, ["k"] * 3)
        assert measured <= fig.layout.margin.l <= measured + 20, (label, fig.layout.margin.l)
    for label, measured in MEASURED_BOTTOM_60.items():
        fig = matrix_heatmap(np.zeros((3, 8)), ["q"] * 3, [label] * 8)  # more than 6 columns: labels at -60°
        assert fig.layout.xaxis.tickangle == -60
        assert measured <= fig.layout.margin.b <= measured + 20, (label, fig.layout.margin.b)


def test_reserved_margins_follow_the_colour_bar_and_the_font():
    fig = matrix_heatmap(np.zeros((2, 2)), ["a", "b"], ["c", "d"])
    assert fig.layout.margin.r == 100  # its colour bar and title
    fig.data[0].showscale = False
    assert reserve_margins(fig).layout.margin.r == 10
    assert label_px("哈", 12) > label_px("W", 12) > label_px("a", 12)
    assert label_px("abc", 9) < label_px("abc", 12)


def _line(y, **layout) -> go.Figure:
    fig = go.Figure(go.Scatter(x=np.arange(len(y)), y=y, mode="lines"))
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(title_text="loss")
    fig.update_layout(**{"margin": dict(l=10, r=10, t=30, b=10), **layout})
    return fig


def test_fit_margins_widen_a_line_chart_for_its_numeric_labels():
    small = fit_margins(_line(np.linspace(0, 1, 50)))          # labels such as 0.4: about 3 characters
    wide = fit_margins(_line(np.linspace(-12345.5, 3, 50)))    # such as −12000: 6
    assert 64 + label_px("0.4") <= small.layout.margin.l < wide.layout.margin.l
    assert wide.layout.margin.l >= 64 + label_px("\u221212000")
    assert small.layout.margin.b >= 64 + 12 and small.layout.margin.r > 10  # the last x label reaches past the plot
    log = go.Figure(go.Scatter(x=[1, 2, 3], y=[1e-6, 1e-3, 1.0]))
    log.update_yaxes(type="log")
    log.update_layout(margin=dict(l=10, r=10, t=30, b=10))
    assert fit_margins(log).layout.margin.l >= 64 + label_px("1e-06")


def test_fit_margins_change_nothing_they_cannot_judge_or_that_already_fits():
    fig = _line(np.linspace(0, 1, 50), margin=dict(l=200, r=50, t=30, b=150))
    assert fit_margins(fig).layout.margin.to_plotly_json() == dict(l=200, r=50, t=30, b=150)
    two = go.Figure([go.Scatter(y=[1, 2], name="a"), go.Scatter(y=[2, 1], name="b")])  # a legend right of the plot
    two.update_layout(margin=dict(l=10, r=10, t=30, b=10))
    assert fit_margins(two).layout.margin.l == 10
    from plotly.subplots import make_subplots
    panels = make_subplots(rows=1, cols=2)
    panels.update_layout(margin=dict(l=10, r=10, t=30, b=10))
    assert fit_margins(panels).layout.margin.l == 10
    bar = scaling_plots.histogram(np.random.default_rng(0).normal(size=500), name="x", colour="red", x_title="v",
                                  y_title="density", title="t", bins=20)
    assert bar.layout.margin.l > 64 and bar.layout.margin.b >= 76   # the page's builders call it


def test_small_stage_matrices_write_values_and_drop_the_colour_bar():
    small = mech_plots.stage_matrix(np.arange(6.0).reshape(2, 3), "Q", rows=["a", "b"])
    assert small.data[0].showscale is False
    assert any(d.type == "scatter" and d.mode == "text" for d in small.data)
    big = mech_plots.stage_matrix(np.zeros((12, 12)), "S", rows=[str(i) for i in range(12)])
    assert big.data[0].showscale is not False  # too many cells to write: the colour bar stays
    assert big.layout.margin.r == 100


def test_causal_hatch_is_one_path_through_every_masked_cell():
    n = 6
    fig = lm_plots.attention_marked(np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None], [str(i) for i in range(n)],
                                    title="t", x_title="key", y_title="query", value_name="w")
    paths = [s for s in fig.layout.shapes if s.type == "path"]
    assert len(paths) == 1
    assert paths[0].path.count("M") == n * (n - 1) // 2  # one stroke per future cell
    assert not any(d.type == "scatter" and d.mode == "lines" for d in fig.data)


def test_placeholder_is_text_only():
    fig = placeholder_figure("Loading…")
    assert isinstance(fig, go.Figure) and not fig.data
    assert fig.layout.annotations[0].text == "Loading…"
    assert fig.layout.xaxis.visible is False and fig.layout.yaxis.visible is False


def test_eight_heads_name_each_axis_once_under_the_bottom_left_panel():
    """In a 2 x 4 grid the key title sits under the bottom-left panel only: under the bottom row it ran into the head
    titles below it, and under each panel of a row into its neighbours' on a phone. The query title: left column."""
    from viz_core.plots import train as train_plots
    maps = np.full((8, 5, 5), 0.2)
    fig = train_plots.attention_heads(maps, list("abcde"), list("abcde"), [f"head {h}" for h in range(8)],
                                      x_title="key (input token)", y_title="query")
    titled = {name: fig.layout[name].title.text for name in fig.layout if name.startswith("xaxis")}
    assert sorted(k for k, v in titled.items() if v) == ["xaxis5"]  # row 2, column 1
    assert sorted(k for k in fig.layout if k.startswith("yaxis") and fig.layout[k].title.text) == ["yaxis", "yaxis5"]
    seven = train_plots.attention_heads(maps[:7], list("abcde"), list("abcde"), [f"head {h}" for h in range(7)],
                                        x_title="key")
    named = sorted(k for k in seven.layout if k.startswith("xaxis") and seven.layout[k].title.text)
    assert named == ["xaxis5"]


def test_a_played_history_has_a_frame_per_moment_and_opens_on_the_chosen_one():
    from viz_core.plots.common import PlayLabels, animated
    base = matrix_heatmap(np.zeros((2, 2)), ["a", "b"], ["a", "b"], title="step 0")
    frames = [{"data": [dict(type="heatmap", z=np.full((2, 2), s / 3))], "traces": [0],
               "layout": {"title": {"text": f"step {s}"}}} for s in range(4)]
    fig = animated(base, frames, ["0", "10", "20", "30"], 2, PlayLabels(play="Go", pause="Halt", prefix="step"))
    assert [f.name for f in fig.frames] == ["0", "10", "20", "30"] and fig.layout.sliders[0].active == 2
    assert [b.label for b in fig.layout.updatemenus[0].buttons] == ["▶ Go", "❚❚ Halt"]
    assert fig.layout.updatemenus[0].buttons[0].args[1]["frame"]["redraw"]  # heatmaps redraw each frame
    np.testing.assert_allclose(fig.frames[3].data[0].z, np.full((2, 2), 1.0))
    assert base.layout.sliders == () and not base.frames  # the shared figure is left as it was
    assert fig.layout.sliders[0].currentvalue.prefix == "step: "
    # in Chinese the slider reads "步：20" (the language's colon, not ": ")
    zh = animated(base, frames, ["0", "10", "20", "30"], 2, PlayLabels(play="播放", pause="暂停", prefix="步", colon="："))
    assert zh.layout.sliders[0].currentvalue.prefix == "步："


def test_head_heatmap_sets_the_margins_fit_margins_finds():
    """head_heatmap computes its margins from the labels it knows (label_margins) instead of walking its figure with
    fit_margins afterwards (a layer change then costs the server less); both must give the same margins, for short
    input (every token named, x labels turned past 6 columns), long numbered input and wide CJK labels."""
    from viz_core.plots.attention import head_heatmap

    rng = np.random.default_rng(3)
    for n_q, n_k, word in [(1, 1, "a"), (4, 4, "哈基咪哈基咪"), (7, 9, "<b>wide label</b>"), (40, 40, "tok"),
                           (300, 300, "x" * 18), (5, 400, "猫")]:
        q = [f"{word}{i % 3}" for i in range(n_q)]
        k = [f"{word}{i % 5}" for i in range(n_k)]
        fig = head_heatmap(rng.random((n_q, n_k)), q, k, "t", query="Query", key="Key", value="Weight")
        again = go.Figure(fig).update_layout(margin=dict(l=10, r=10, t=50, b=10))  # as built before fitting
        assert fit_margins(again).layout.margin == fig.layout.margin, (n_q, n_k, word)
        assert fig.layout.margin.l > 10 and fig.layout.margin.r == 100 and fig.layout.margin.t == 50


def test_widened_raises_only_the_sides_that_are_too_small():
    from viz_core.plots.common import label_margins, widened

    need = label_margins(["abcdefghij"], ["a"] * 3, x_angle=-60, colour_bar=True)
    assert need["r"] == 100 and need["l"] > 100 and need["b"] > 64
    out = widened(dict(l=10, r=120, t=50, b=200), need)
    assert out == dict(l=int(np.ceil(need["l"])), r=120, t=50, b=200)


def test_legend_rows_follow_plotlys_rule():
    """One row where every entry fits the plot's width; past that, every entry takes the widest one's width (plotly's
    rule: 4 names of 100-163 px took 4 rows of a 242 px plot on a phone, where packing them would make 3)."""
    from viz_core.plots.common import PHONE_FIGURE_PX, legend_rows

    def legend(*names, **layout):
        return go.Figure([go.Scatter(x=[1, 2], y=[1, 2], name=n) for n in names]).update_layout(**layout)

    # 40 px symbol and gap + 8 px a letter + 5 px between: 69, 109, 101, 101, 77
    racers = legend("SGD", "Momentum", "AdaGrad", "RMSProp", "Adam")
    assert legend_rows(racers, width=460) == 1                # 452 px in all
    assert legend_rows(racers, width=440) == 2                # 109 px each: 4 a row
    assert legend_rows(racers, width=260) == 3                # 2 a row
    assert legend_rows(racers, width=200) == 5                # 1 a row
    scaling = legend("measured Var(q·k)", "measured Var(q·k/√d_k)", "theory: d_k", "theory: 1",
                     margin=dict(l=97, r=27))
    assert legend_rows(scaling) == legend_rows(scaling, width=PHONE_FIGURE_PX - 97 - 27) == 4
    wide = legend("第 0 维（正弦，第 0 对，λ ≈ 6.283）", "第 64 维（正弦，第 32 对，λ ≈ 628.3）",
                  margin=dict(l=91, r=17))
    assert legend_rows(wide) == 2
    assert legend_rows(legend("only")) == 0 and legend_rows(legend("a", "b", showlegend=False)) == 0


def test_a_legend_below_gets_the_room_it_takes_on_a_phone():
    """fit_margins_legend_below: the legend at the bottom edge (in pixels), the figure and its bottom margin grown by
    a row's height for each row its names take in a phone's width, and plotly's gap between rows where the legend is
    grouped; none for a figure whose legend plotly does not draw."""
    from viz_core.plots.common import LEGEND_GROUP_GAP_PX, LEGEND_ROW_PX, fit_margins_legend_below, legend_rows
    long = go.Figure([go.Scatter(x=[1, 2], y=[1, 2], name=n)
                      for n in ("SGD", "Momentum", "AdaGrad", "RMSProp", "Adam")])
    long.update_layout(height=300, margin=dict(l=10, r=10, t=50, b=10))
    fit_margins_legend_below(long)
    rows = legend_rows(long)
    assert rows >= 2
    assert long.layout.height == 300 + rows * LEGEND_ROW_PX
    assert long.layout.margin.b >= 10 + rows * LEGEND_ROW_PX
    assert (long.layout.legend.yref, long.layout.legend.y, long.layout.legend.yanchor) == ("container", 0, "bottom")
    grouped = go.Figure([go.Scatter(x=[1, 2], y=[1, 2], name=n, legendgroup=n)
                         for n in ("SGD", "Momentum", "AdaGrad", "RMSProp", "Adam")])
    grouped.update_layout(height=300, margin=dict(l=10, r=10, t=50, b=10))
    fit_margins_legend_below(grouped)
    assert grouped.layout.height == 300 + rows * LEGEND_ROW_PX + (rows - 1) * LEGEND_GROUP_GAP_PX
    alone = go.Figure(go.Scatter(x=[1, 2], y=[1, 2], name="only")).update_layout(height=300, margin=dict(b=10))
    assert fit_margins_legend_below(alone).layout.height == 300


def test_a_legend_above_gets_a_top_margin_for_the_rows_it_takes_on_a_phone():
    """fit_margins_legend_above: the legend in a row over the plot, the top margin LEGEND_ABOVE_PX + LEGEND_ROW_PX a
    row it takes in a phone's width (measured in Chromium: 41 px for one row, 60 px for two), never narrowed."""
    from viz_core.plots.common import LEGEND_ABOVE_PX, LEGEND_ROW_PX, fit_margins_legend_above

    def legend(*names, top):
        return go.Figure([go.Scatter(x=[1, 2], y=[1, 2], name=n) for n in names]).update_layout(margin=dict(t=top))

    two = fit_margins_legend_above(legend("unpredictable tokens", "in-context (inside a repeat)", top=10))
    assert two.layout.margin.t == LEGEND_ABOVE_PX + 2 * LEGEND_ROW_PX >= 60
    assert (two.layout.legend.orientation, two.layout.legend.y, two.layout.legend.yanchor) == ("h", 1, "bottom")
    assert two.layout.margin.l > 10  # fit_margins ran: the y labels have their room
    assert fit_margins_legend_above(legend("a", "b", top=10)).layout.margin.t == LEGEND_ABOVE_PX + LEGEND_ROW_PX >= 41
    assert fit_margins_legend_above(legend("a", "b", top=90)).layout.margin.t == 90
    assert fit_margins_legend_above(legend("only", top=10)).layout.margin.t == 10  # no legend drawn: no room asked


def _generation(keys: list[str], n_rows: int = 16):
    k_steps = 3
    rows = [np.full((n_rows, len(keys) - k_steps + 1 + k), 0.1, dtype=np.float32) for k in range(k_steps)]
    top = np.tile(np.linspace(0.5, 0.05, 10), (k_steps, 1))
    return lm_plots.generation_steps(top, top, [[f"t{i}" for i in range(10)]] * k_steps, [0] * k_steps, rows,
                                     [f"L{r}" for r in range(n_rows)], keys, 1,
                                     titles=[f"Attention at step {k + 1}\n(one row per head)" for k in range(k_steps)],
                                     bars_title="Next token at step {step}", x_prob="p", y_token="token",
                                     model_name="softmax", sampled_name="sampled", x_key="key", y_head="head",
                                     value_name="weight")


def test_a_generation_step_stacks_its_panels_across_the_whole_width():
    """Side by side on a phone, the two panels' titles ran into each other and the attention rows were a few pixels
    wide: the bars stand above the attention rows, both across the figure's width, each title on at most two
    lines, the colour bar beside the attention rows only, and the legend at the top, under the toolbar."""
    fig = _generation(list("The cat sat on the mat and then it slept."))
    bars, heat = fig.layout.yaxis.domain, fig.layout.yaxis2.domain
    assert bars[0] > heat[1]  # the bars above, with room between them
    assert list(fig.layout.xaxis.domain) == [0, 1] and list(fig.layout.xaxis2.domain) == [0, 1]
    bar = fig.data[2].colorbar
    assert abs(bar.y - sum(heat) / 2) < 1e-9 and abs(bar.len - (heat[1] - heat[0])) < 1e-9
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["Next token at step 2", "Attention at step 2<br>(one row per head)"]
    assert fig.frames[2].layout.annotations[1].text == "Attention at step 3<br>(one row per head)"
    assert fig.layout.legend.yref == "container" and fig.layout.legend.y < 1
    # the height follows the rows: 16 rows of 20 px, ten bars of 24 px and the room around them
    assert fig.layout.height == 115 + 240 + 120 + 320 + 10 + 70


def test_a_generation_step_names_at_most_ten_keys_upright_characters_and_words_on_end():
    chars = _generation(list("The cat sat on the mat and then it slept."))
    assert len(chars.layout.xaxis2.ticktext) <= lm_plots.KEY_TICKS and chars.layout.xaxis2.tickangle == 0
    words = _generation(["<bos>", "▁Once", "▁upon", "▁a", "▁time", "▁there", "▁was", "▁an", "▁extraordinarily",
                         "▁small", "▁robot", "▁named"] * 3, n_rows=18)
    labels = words.layout.xaxis2.ticktext
    assert len(labels) <= lm_plots.KEY_TICKS and words.layout.xaxis2.tickangle == -90
    assert max(len(html.unescape(x)) for x in labels) <= lm_plots.KEY_CHARS and "▁extrao…" in labels
    assert words.data[2].customdata[0][8] == "▁extraordinarily"  # hover names the whole key


def test_panel_margins_hold_the_outer_labels_of_panels_side_by_side():
    """A figure of panels (make_subplots): the left margin holds the leftmost panels' y labels and title, the bottom
    one the lowest panels' x labels and title, the right one a colour bar; inner axes need no margin. Only widens."""
    from plotly.subplots import make_subplots
    from viz_core.plots.common import fit_panel_margins, label_margins
    fig = make_subplots(rows=1, cols=2)
    fig.add_trace(go.Scatter(x=[0, 400], y=[0.5, 2.5]), row=1, col=1)
    fig.add_trace(go.Heatmap(z=np.zeros((3, 3)), y=["a long query label", "b", "c"]), row=1, col=2)
    fig.update_layout(margin=dict(l=10, r=10, t=40, b=200))
    need = fit_panel_margins(fig)
    left = label_margins(["0.0", "0.5", "1.0", "1.5", "2.0", "2.5", "3.0"], [])["l"]
    assert left - 10 < need["l"] <= left + 10   # the left panel's numbers, not the right panel's long label
    assert need["r"] == 100 and fig.layout.margin.r == 100   # the colour bar
    assert fig.layout.margin.b == 200 and fig.layout.margin.l == int(np.ceil(need["l"]))  # never narrowed


def test_every_byte_over_255_is_the_float32_the_server_held():
    """The browser turns a byte k of a played history into k / 255, a double stored in a Float32Array: for every k
    that is the float32 viz_core.lm.training reads back from its 1/255 steps (torch's float32 division)."""
    import torch
    k = np.arange(256)
    browser = (k.astype(np.float64) / 255).astype(np.float32)
    server = (torch.arange(256, dtype=torch.uint8).float() / 255).numpy()
    np.testing.assert_array_equal(browser, server)


def test_byte_steps_takes_only_matrices_stored_in_1_255_steps():
    from viz_core.plots.common import byte_steps
    k = np.random.default_rng(0).integers(0, 256, size=(5, 7)).astype(np.uint8)
    np.testing.assert_array_equal(byte_steps(k.astype(np.float32) / np.float32(255)), k)
    assert byte_steps(np.full((2, 2), 0.3, np.float32)) is None        # not a step of 1/255
    assert byte_steps(k.astype(np.float64) / 255) is None              # float64: not what a snapshot holds
    assert byte_steps(np.array([[np.nan, 0.0]], np.float32)) is None
    assert byte_steps(np.array([[2.0, 0.0]], np.float32)) is None      # past 1
    assert byte_steps(np.zeros((0,), np.float32)) is None


def test_a_played_history_of_snapshots_sends_bytes_and_plotly_chart_gets_floats_back():
    """Frames whose every matrix is in 1/255 steps go as bytes, marked in layout.meta; frames_in_floats (the drawing
    of st.plotly_chart) turns them back into the same float32. One frame of other values: every frame stays float."""
    from viz_core.plots.common import PlayLabels, animated, frames_in_floats
    rng = np.random.default_rng(1)
    maps = [rng.integers(0, 256, size=(3, 3)).astype(np.float32) / np.float32(255) for _ in range(4)]
    base = matrix_heatmap(maps[0], list("abc"), list("abc"), title="step 0")
    frames = [{"data": [dict(type="heatmap", z=m)], "traces": [0]} for m in maps]
    fig = animated(base, frames, ["0", "1", "2", "3"], 0, PlayLabels())
    assert fig.layout.meta["frame_bytes"] == 255
    drawn = fig.to_dict()
    assert [f["data"][0]["z"]["dtype"] for f in drawn["frames"]] == ["u1"] * 4
    back = frames_in_floats(drawn)
    for f, m in zip(back["frames"], maps):
        np.testing.assert_array_equal(f["data"][0]["z"], m)
    unmarked = base.to_dict()
    assert frames_in_floats(unmarked) is unmarked  # no frames in bytes: as it was
    mixed = frames + [{"data": [dict(type="heatmap", z=np.full((3, 3), 0.3, np.float32))], "traces": [0]}]
    plain = animated(base, mixed, ["0", "1", "2", "3", "4"], 0, PlayLabels())
    assert not (plain.layout.meta or {}).get("frame_bytes")
    assert all(f["data"][0]["z"]["dtype"] == "f4" for f in plain.to_dict()["frames"])
