"""AppTest of the Train page's checkpoint upload: a checkpoint whose info or history holds a value of the wrong kind,
size or text is refused with a message that names the value, the page keeps working on every tab, and nothing of
the upload is read as markdown; a checkpoint the app wrote loads."""
from __future__ import annotations

import json

import pytest

from app_pages._ui.training_job import shipped_path
from tests.conftest import APP_TIMEOUT_S, assert_clean, figures, run_page
from viz_core.io.export import zip_bytes
from viz_core.seq2seq.checkpoint import checkpoint_files
from viz_core.seq2seq.training import load_checkpoint

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # small models: one torch thread

TIMEOUT_S = 2 * APP_TIMEOUT_S  # an upload loads a model, and the Train tab then draws its curves: on a busy machine
LINK, BOLD = "[pwnlink](https://evil.example/)", "**pwnbold**"


@pytest.fixture(scope="module")
def files() -> dict[str, bytes]:
    """The shipped reverse checkpoint as the page's download gives it."""
    return checkpoint_files(load_checkpoint(shipped_path("reverse")))


def upload_zip(files: dict, edit=None) -> bytes:
    config = json.loads(files["config.json"])
    if edit is not None:
        edit(config)
    return zip_bytes(dict(files, **{"config.json": json.dumps(config).encode()}))


def without_lengths(c: dict) -> None:
    """No per-length table: the page then shows info's val_exact (where a text broke it)."""
    c["info"] = {k: v for k, v in c["info"].items() if not k.startswith(("exact_len_", "worst_", "by_length"))}


PROBES = {  # what a hostile visitor uploaded, and the value the page must name
    "val_exact": (lambda c: (without_lengths(c), c["info"].update(val_exact="high")), "info.val_exact"),
    "step": (lambda c: c["history"][0].update(step=10**300), "history[0].step"),
    "markdown": (lambda c: c["info"].update(steps=BOLD, device=LINK), "info.steps"),
    "link": (lambda c: c["info"].update(device=LINK), "info.device"),
}


def uploaded(data: bytes):
    at = run_page("train", {"lang": "en", "tab": "save"}, timeout=TIMEOUT_S)
    at.file_uploader(key="train.upload").set_value(("checkpoint.zip", data, "application/zip")).run()
    return at


def open_tab(at, label: str):
    """Open a tab as a click would: its widget state holds the label (ui.tabs keys it per language)."""
    at.session_state["train.tab.en"] = label
    return at.run()


def shown_markdown(at) -> list[str]:
    """The markdown source of every text element of the page (what Streamlit renders as markdown)."""
    kinds = ("markdown", "caption", "info", "warning", "error", "success", "title", "header", "subheader")
    return [str(e.value) for kind in kinds for e in getattr(at, kind)]


def unescaped(text: str) -> str:
    return text.replace("\\", "")


@pytest.mark.parametrize("probe", list(PROBES))
def test_a_hostile_checkpoint_is_refused_by_name_and_the_page_keeps_working(files, probe):
    edit, field = PROBES[probe]
    at = uploaded(upload_zip(files, edit))
    assert_clean(at)
    errors = [unescaped(e.value) for e in at.error]
    assert any(f"“{field}”" in e for e in errors), errors
    for label, n_figures in (("Train", 1), ("Snapshots", 2), ("Save / load", 0)):  # curves, snapshots: all drawn
        open_tab(at, label)
        assert_clean(at)
        assert "model shipped with the app" in " ".join(i.value for i in at.info)  # the model it keeps showing
        assert len(figures(at)) == n_figures
        texts = " ".join(shown_markdown(at))
        assert "pwnbold" not in texts and "evil.example" not in texts


def test_a_checkpoint_the_app_wrote_loads_and_its_text_stays_text(files):
    at = uploaded(upload_zip(files))
    assert_clean(at)
    assert not at.error and "checkpoint you uploaded" in " ".join(i.value for i in at.info)
    open_tab(at, "Train")
    assert_clean(at)
    assert figures(at)  # its training curves
    # the page's second guard: a value of the loaded model is shown as written even if it held markup
    model, origin = at.session_state["train.models"]["reverse"]
    assert origin == "uploaded"
    model.info["device"] = LINK
    at.run()
    assert_clean(at)
    shown = [i.value for i in at.info if "checkpoint you uploaded" in i.value]
    assert shown and LINK not in shown[0] and unescaped(shown[0]).endswith(f"on {LINK}).")
