"""The address names this session's waiting or running training job (app_pages/_ui/training_job.py: MARKER), so that a
browser whose session is gone (a restarted server, a move to another server, an expired session) opens a new session
that says the run was lost instead of showing the page as if nothing had run. AppTest of both training pages."""
import pytest

from app_pages._ui.training_job import MARKER, MARKER_FORMAT
from tests.conftest import assert_clean, run_page
from viz_core.i18n import t

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # small models: one torch thread

TIMEOUT = 240  # a first run of the Language-model page loads torch and two checkpoints on a busy 2-core machine
JOB = {"train": "train", "language_model": "lm"}  # page -> its TrainingJob's name (its texts' namespace)
LOST_RUN = "0123abcd"  # a well-formed marker no session here gave: a run of a session that is gone


def warnings(at) -> str:
    return " ".join(str(w.value) for w in at.warning)


def lost_said(at, page: str, lang: str) -> bool:
    return t(f"{JOB[page]}.lost", lang) in warnings(at)


# (page, query, Train button, Stop button): a run long enough to be seen running, stopped by its Stop
RUNS = [
    ("train", {"seconds": "60", "preset": "tiny"}, "train.go", "train.live_stop"),
    ("language_model", {"tab": "generate", "chars_seconds": "120"}, "lm.go_chars", "lm.live_stop"),
]


@pytest.mark.parametrize("page, query, go, stop", RUNS)
def test_the_address_names_the_running_job_until_it_is_collected(page, query, go, stop):
    """Opened on a lost run's marker: said, and the marker goes. Train: the address names the new job (a marker of
    its own) and the lost run is no longer said; reruns keep it, unsaid; once the job is collected, it goes."""
    at = run_page(page, {"lang": "en", **query, MARKER: LOST_RUN}, timeout=TIMEOUT)
    assert_clean(at)
    assert lost_said(at, page, "en") and MARKER not in at.query_params
    at.button(key=go).click().run()
    assert_clean(at)
    job = at.session_state[f"_jobs.{JOB[page]}"]
    marker = at.query_params.get(MARKER)
    assert marker == job.info["marker"] and MARKER_FORMAT.fullmatch(marker) and marker != LOST_RUN
    assert not lost_said(at, page, "en")  # a new run: the lost one is no longer news
    at.run()  # the session's own marker: nothing said, and the address keeps it
    assert at.query_params.get(MARKER) == marker and not warnings(at)
    at.button(key=stop).click().run()
    assert job.join(60), "the job did not stop"
    at.run()
    assert_clean(at)
    assert MARKER not in at.query_params and f"_jobs.{JOB[page]}" not in at.session_state  # collected, unmarked
    assert not lost_said(at, page, "en")  # its own (finished) marker is not a lost run


@pytest.mark.parametrize("page", list(JOB))
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_marker_this_session_never_gave_is_said_lost_once_and_dropped(page, lang):
    at = run_page(page, {"lang": lang, "tab": "sequence" if page == "language_model" else "decode", MARKER: LOST_RUN},
                  timeout=TIMEOUT)
    assert_clean(at)
    assert lost_said(at, page, lang), warnings(at)
    assert MARKER not in at.query_params  # a reload does not say it again
    assert at.query_params.get("lang", "en") == lang and at.query_params.get("tab")  # the rest of the address stays
    at.run()  # still said in this session (until a run starts), and the address stays without it
    assert lost_said(at, page, lang) and MARKER not in at.query_params
    reloaded = run_page(page, dict(at.query_params), timeout=TIMEOUT)  # the address as left: a reload
    assert_clean(reloaded)
    assert not lost_said(reloaded, page, lang) and MARKER not in reloaded.query_params


@pytest.mark.parametrize("value", ["", "xyz", "0123ABCD", "0123abcd0", "0123abc", "<b>x</b>", "../../etc/passwd",
                                   "0123abcd,0123abcd", "🙂" * 8])
def test_a_malformed_marker_is_dropped_without_a_word(value):
    at = run_page("train", {"lang": "en", MARKER: value})
    assert_clean(at)
    assert not lost_said(at, "train", "en") and MARKER not in at.query_params
    assert "model shipped with the app" in " ".join(str(i.value) for i in at.info)  # the page as it opens
