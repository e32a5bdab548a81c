"""Replicas behind a real load balancer, as visitors' browsers meet them: two copies of the app behind HAProxy
(deploy/haproxy.cfg, started by deploy/replicas.py), Chromium going through HAProxy.

- every browser keeps to its replica: its page, its upload and its download all reach the session that holds them
  (Streamlit keeps a session's uploaded files and download links in that process only);
- new browsers spread over the replicas;
- when a replica dies, its visitors' tabs reconnect by themselves to the other one and show the view their address
  names, in their language; a training that ran there is reported as lost; the other replica's visitors notice
  nothing; the restarted replica rejoins.
"""
from __future__ import annotations

import io
import sys
import zipfile

import pytest

from tests.browser.conftest import (CHART, ROOT, _unavailable, assert_no_exception, choose, chosen,
                                    open_tab, screenshot, wait_done)
from viz_core.i18n import t

sys.path.insert(0, str(ROOT / "deploy"))
from replicas import COOKIE, HAPROXY, Replicas, free_base_port  # noqa: E402

ATTENTION = "/?lang=zh&view=grid&layer=3"      # a visitor's own view, in Chinese
TRAIN = "/train?lang=en&task=reverse&seconds=120"


@pytest.fixture(scope="module")
def lb(browser):
    if HAPROXY is None:
        _unavailable("HAProxy is not installed; the README's test command installs Debian's haproxy")
    with Replicas(2, port=free_base_port(2), env={"HF_HUB_OFFLINE": "1", "STREAMLIT_CLIENT_SHOW_ERROR_DETAILS": "full"},
                  timeout_s=120) as replicas:
        yield replicas


def replica_of(ctx, lb) -> str:
    """The replica HAProxy's cookie in this browser names."""
    return next(c["value"] for c in ctx.cookies(lb.url) if c["name"] == COOKIE)


def open_through(browser, lb, path: str, replica: str | None = None, width: int = 1400):
    """A new browser (context) opening `path` through HAProxy; with replica, one that already holds that replica's
    cookie (a visitor who came earlier)."""
    ctx = browser.new_context(viewport={"width": width, "height": 1600})
    if replica:
        ctx.add_cookies([{"name": COOKIE, "value": replica, "url": lb.url}])
    page = ctx.new_page()
    sockets = []  # [frames received] per websocket this tab opened, in order

    def opened(ws):
        if "_stcore/stream" in ws.url:
            frames = [0]
            sockets.append(frames)
            ws.on("framereceived", lambda _: frames.__setitem__(0, frames[0] + 1))

    page.on("websocket", opened)
    page.goto(lb.url + path, wait_until="domcontentloaded")
    wait_done(page)
    return ctx, page, sockets


def test_each_browser_keeps_to_its_replica_for_uploads_and_downloads(browser, lb):
    from app_pages._ui.training_job import CHECKPOINTS
    from viz_core.seq2seq.checkpoint import checkpoint_zip, load_checkpoint
    data = checkpoint_zip(load_checkpoint(CHECKPOINTS / "copy"))
    assert zipfile.ZipFile(io.BytesIO(data)).namelist()
    seen = []
    for _ in range(3):
        ctx, page, _ = open_through(browser, lb, "/train?lang=en&task=reverse")
        replica = replica_of(ctx, lb)
        seen.append(replica)
        open_tab(page, "Save / load")
        page.locator("[data-testid='stFileUploader'] input[type='file']").set_input_files(
            [{"name": "copy.zip", "mimeType": "application/zip", "buffer": data}])
        page.get_by_text("checkpoint you uploaded").first.wait_for(timeout=60_000)
        wait_done(page)
        assert_no_exception(page)
        page.goto(lb.url + "/mechanics?lang=en&section=masks&kind=causal_padding", wait_until="domcontentloaded")
        wait_done(page)
        with page.expect_download(timeout=60_000) as info:
            page.get_by_role("button", name="Download the numbers (.npz)").click()
        with open(info.value.path(), "rb") as f:
            assert zipfile.ZipFile(f).namelist()  # an .npz is a zip: the file came, not an error page
        assert replica_of(ctx, lb) == replica  # every request of this browser went to one replica
        ctx.close()
    assert set(seen) == {"r1", "r2"}, f"new browsers should spread over both replicas: {seen}"


def test_a_dead_replicas_visitors_get_their_view_back_and_a_lost_training_is_said(browser, lb):
    victim, other = "r1", "r2"
    if not lb.replica(victim).alive:
        lb.start(lb.replica(victim))
        lb.wait_in_pool(2)
    ctx_a, viewer, viewer_sockets = open_through(browser, lb, ATTENTION, replica=victim)
    viewer.locator(".st-key-grid_fig").locator(CHART).first.wait_for(timeout=60_000)
    ctx_t, trainer, _ = open_through(browser, lb, TRAIN, replica=victim)
    trainer.locator(".st-key-train-go button").click()
    trainer.wait_for_selector("[data-testid='stProgress']", timeout=60_000)
    assert "training=" in trainer.url
    ctx_b, bystander, bystander_sockets = open_through(browser, lb, "/?lang=en", replica=other)
    assert (replica_of(ctx_a, lb), replica_of(ctx_t, lb), replica_of(ctx_b, lb)) == (victim, victim, other)

    # The viewer's idle tab reconnects by itself (a second websocket, to the other replica, which has never seen it)
    # and keeps showing its page. Its next action is the new session's first run there: the page opens from the
    # address (grid, layer 3, Chinese), as after a reload, and what it shows agrees with the address; the action after
    # that applies as usual.
    layer = t("attention.layer", "zh")
    lb.kill(victim)
    until(viewer, lambda: len(viewer_sockets) >= 2, "the viewer's tab to reconnect")
    choose(viewer, layer, "4")
    until(viewer, lambda: any(frames[0] for frames in viewer_sockets[1:]), "the other replica to answer the tab")
    wait_done(viewer)
    viewer.locator(".st-key-grid_fig").locator(CHART).first.wait_for(timeout=60_000)
    assert "view=grid" in viewer.url and "lang=zh" in viewer.url
    assert f"layer={chosen(viewer, layer)}" in viewer.url
    choose(viewer, layer, "5")
    assert "view=grid" in viewer.url and "layer=5" in viewer.url and chosen(viewer, layer) == "5"
    assert replica_of(ctx_a, lb) == other
    assert t("attention.title", "zh") in main_text(viewer)
    assert_no_exception(viewer)
    screenshot(viewer, "replicas-view-back-zh")

    # the trainer's tab (its progress fragment asks for reruns) reconnects and says its run is gone; the address
    # forgets it
    trainer.get_by_text(t("train.lost", "en")[:60]).first.wait_for(timeout=60_000)
    wait_done(trainer)
    assert "training=" not in trainer.url
    assert_no_exception(trainer)
    screenshot(trainer, "replicas-training-lost-en")

    # the other replica's visitor noticed nothing: same connection, and the page still answers
    assert len(bystander_sockets) == 1
    bystander.reload(wait_until="domcontentloaded")
    wait_done(bystander)
    assert_no_exception(bystander)
    assert replica_of(ctx_b, lb) == other

    # the replica comes back and HAProxy puts it in the pool again
    lb.start(lb.replica(victim))
    lb.wait_in_pool(2)
    for ctx in (ctx_a, ctx_t, ctx_b):
        ctx.close()


def until(page, condition, what: str, timeout_s: float = 60) -> None:
    """Wait for a condition on what the browser reported (its websocket events), letting its events run."""
    for _ in range(int(timeout_s * 20)):
        if condition():
            return
        page.wait_for_timeout(50)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def main_text(page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()
