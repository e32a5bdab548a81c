"""What the house elements drawn by their data share (the formula element, formula.py; the table element,
static_table.py): one element per place in a run."""
from __future__ import annotations

from streamlit.errors import StreamlitDuplicateElementId

MAX_SAME = 50  # the same data at most this many times in one run


def draw_by_data(element, data: dict, what: str) -> None:
    """element(data=data), as wide as its column and as tall as its content.

    An element is known by its data, so the same data shown twice in one run would be the same element twice: the
    second gets its place in the run as well (n = 1, then 2...), the first none, so each keeps its identity from run
    to run. `what` names the element in the error raised past MAX_SAME."""
    for n in range(1, MAX_SAME + 1):
        try:
            element(data=data, width="stretch", height="content")
            return
        except StreamlitDuplicateElementId:
            data = {**data, "n": n}
    raise StreamlitDuplicateElementId(what)  # (more than MAX_SAME times the same data in one run)
