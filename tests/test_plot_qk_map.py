"""The query-key map's drawing (viz_core.plots.qk_map): labels that do not pile up, a title that fits a phone, and the
lines to the heaviest keys drawn above the chosen query's ring."""
import numpy as np

from viz_core.plots.qk_map import TITLE_CHARS, _width, label_places, qk_scatter, wrap_title
from viz_core.pretrained.qk_map import Projection, QKSet


def _boxes(xy, texts, places, span=(10.0, 10.0), size=(640, 440), font_px=11):
    from viz_core.plots.qk_map import LABEL_PLACES
    offsets = dict(LABEL_PLACES)
    per_px = (span[0] / size[0], span[1] / size[1])
    h = 1.3 * font_px * per_px[1]
    out = []
    for (x, y), text, place in zip(xy, texts, places):
        w = _width(text) * 0.6 * font_px * per_px[0]
        dx, dy = offsets[place]
        out.append((x + dx * w, y + dy * h, x + dx * w + w, y + dy * h + h))
    return out


def test_labels_of_a_cluster_take_places_that_do_not_overlap():
    xy = np.array([[5.0, 5.0], [5.02, 5.01], [4.99, 5.03], [5.01, 4.98]])  # four tokens in one spot
    texts = ["the", "cat", "sat", "mat"]
    places = label_places(xy, texts, (10.0, 10.0), (640, 440))
    assert len(set(places)) == 4  # one place for all ("top center") would draw them on top of each other
    boxes = _boxes(xy, texts, places)
    for i in range(4):
        for j in range(i):
            a, b = boxes[i], boxes[j]
            cover = max(0, min(a[2], b[2]) - max(a[0], b[0])) * max(0, min(a[3], b[3]) - max(a[1], b[1]))
            assert cover < 0.1 * (a[2] - a[0]) * (a[3] - a[1]), (i, j)  # at most the points' own offsets


def test_far_apart_labels_keep_the_first_place():
    xy = np.array([[0.0, 0.0], [9.0, 9.0]])
    assert label_places(xy, ["a", "b"], (10.0, 10.0)) == ["top center", "top center"]


def test_a_long_title_is_wrapped_at_spaces_and_escaped():
    title = wrap_title("Layer 2, head 3: queries and keys of 100 sentences <b>")
    lines = title.split("<br>")
    assert len(lines) >= 2 and all(_width(x.replace("&lt;", "<").replace("&gt;", ">")) <= TITLE_CHARS for x in lines)
    assert "&lt;b&gt;" in title and " ".join(lines).replace("&lt;b&gt;", "<b>").split() == \
        "Layer 2, head 3: queries and keys of 100 sentences <b>".split()
    zh = wrap_title("第 2 层，第 3 个头：100 个句子的查询和键")
    assert all(_width(x) <= TITLE_CHARS for x in zh.split("<br>")) and "<br>" in zh
    assert zh.replace("<br>", "").replace(" ", "") == "第 2 层，第 3 个头：100 个句子的查询和键".replace(" ", "")


def test_the_heaviest_keys_lines_and_rings_are_drawn_above_the_querys_ring():
    rng = np.random.default_rng(0)
    n = 6
    s = QKSet(q=np.zeros((1, 1, n, 4), np.float32), k=np.zeros((1, 1, n, 4), np.float32), sentence=np.zeros(n, int),
              position=np.arange(n), tokens=tuple("abcdef"), texts=("a b c d e f",))
    p = Projection(q=rng.normal(size=(n, 2)).astype(np.float32), k=rng.normal(size=(n, 2)).astype(np.float32),
                   kept=np.array([0.5, 0.3]))
    row = np.array([0.05, 0.6, 0.05, 0.2, 0.05, 0.05])
    fig = qk_scatter(s, p, user_sentence=0, chosen=2, row=row, title="t")
    data = fig.to_plotly_json()["data"]
    ring = next(i for i, tr in enumerate(data) if tr.get("marker", {}).get("size") == 22)
    lines = [i for i, tr in enumerate(data) if tr.get("mode") == "lines"]
    assert len(lines) == 3 and all(i > ring for i in lines)
    heaviest = data[lines[-1]]  # drawn last, on top
    assert list(heaviest["x"])[1] == p.k[1, 0] and heaviest["line"]["width"] == 1 + 7 * 0.6
