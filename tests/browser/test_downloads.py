"""Downloads in headless Chromium, as a visitor gets them: click the button, open the file. Every page writes its
files with viz_core.io.export, so a token with a comma or a quote stays in its cell and the numbers read back to the
values the app computed."""
from __future__ import annotations

import csv
import io
from urllib.parse import quote

import numpy as np
import pytest

from tests.browser.conftest import assert_no_exception, wait_done

pytestmark = pytest.mark.browser


def _download(page, label: str) -> str:
    """Click the download button named label and return the file's text."""
    button = page.get_by_role("button", name=label)
    button.wait_for(timeout=120_000)
    with page.expect_download(timeout=60_000) as info:
        button.click()
    with open(info.value.path(), encoding="utf-8") as f:
        return f.read()


def test_attention_csv_keeps_typed_tokens_in_their_cells(open_page):
    from viz_core.pretrained import attention_for, load_model

    text = 'Tom, "the cat", sat.'
    page = open_page(f"/?view=export&lang=en&layer=2&head=3&text={quote(text)}")
    wait_done(page)
    rows = list(csv.reader(io.StringIO(_download(page, "Current head with token labels (.csv)"))))
    assert_no_exception(page)
    r = attention_for(load_model(), text)
    labels = [f"{i}:{tok}" for i, tok in enumerate(r.tokens)]
    assert rows[0][1:] == labels and [row[0] for row in rows[1:]] == labels   # a ',' token is one cell, not two
    values = np.array([[np.float32(v) for v in row[1:]] for row in rows[1:]])
    np.testing.assert_allclose(values, r.weights[2, 3], rtol=1e-5, atol=1e-7)  # query rows (another process's
    #                                                                          forward: not bit for bit)


def test_scaling_csv_reads_back_the_computed_variances(open_page):
    from viz_core.lessons import scaling

    page = open_page("/scaling?lang=en&part=dist")
    rows = list(csv.reader(io.StringIO(_download(page, "Download the variance curve (CSV)"))))
    assert_no_exception(page)
    sweep = scaling.variance_sweep(scaling.DK_GRID, 10_000, 0)
    assert rows[0] == ["d_k", "var_unscaled", "var_scaled"]
    table = np.array([[float(v) for v in row] for row in rows[1:]])
    assert np.array_equal(table[:, 0], sweep.d_ks)
    assert np.array_equal(table[:, 1], sweep.var_unscaled) and np.array_equal(table[:, 2], sweep.var_scaled)


def test_optimizers_files_are_written_when_clicked_and_read_back_the_race(open_page):
    """The race's files are made on the click (a function given to the button, not bytes on every run): the CSV
    holds every racer's path from the start point, as many rows as steps, and the loss of each point."""
    from viz_core.lessons import optimizers as opt
    from viz_core.lessons import surfaces

    page = open_page("/optimizers?lang=en&steps=60")
    # the files are in the section of the race's numbers, closed at first: opened with a click, as a person would
    page.locator("[data-testid='stExpander'] summary").filter(has_text="The race in numbers").click()
    page.wait_for_url(lambda url: "numbers=1" in url)
    wait_done(page)
    rows = list(csv.reader(io.StringIO(_download(page, "Download paths and losses (CSV)"))))
    assert_no_exception(page)
    assert rows[0] == ["step"] + [f"{n}_{c}" for n in opt.CLASSIC for c in ("x", "y", "loss")]
    table = np.array([[float(v) for v in row] for row in rows[1:]])
    assert table.shape == (61, 1 + 3 * len(opt.CLASSIC)) and np.array_equal(table[:, 0], np.arange(61))
    surface = surfaces.get_surface("bowl")
    for i in range(len(opt.CLASSIC)):  # every racer starts at the surface's start point, and loss = f(x, y)
        x, y, loss = table[:, 1 + 3 * i], table[:, 2 + 3 * i], table[:, 3 + 3 * i]
        assert (x[0], y[0]) == surface.start
        np.testing.assert_allclose(loss, surface.f(x, y), rtol=1e-6)
    with page.expect_download(timeout=60_000) as info:
        page.get_by_role("button", name="Download the race (NPZ: paths, losses, gradients, state)").click()
    with np.load(info.value.path()) as npz:
        np.testing.assert_allclose(npz["adam_path"][:, 0], table[:, 1 + 3 * opt.CLASSIC.index("adam")], rtol=1e-6)
        assert npz["lr_multiplier"].shape == (60,)


def test_mechanics_mask_numbers_are_written_when_clicked(open_page):
    """Mechanics' masks file is made on the click too: its weights are 0 wherever the mask blocks a key, and every
    query row that sees a key sums to 1."""
    page = open_page("/mechanics?lang=en&section=masks&kind=causal_padding")
    with page.expect_download(timeout=60_000) as info:
        page.get_by_role("button", name="Download the numbers (.npz)").click()
    assert_no_exception(page)
    with np.load(info.value.path()) as npz:
        assert {"mask", "scores", "weights", "q_tokens", "k_tokens", "is_pad"} <= set(npz.files)
        blocked, weights = npz["mask"].astype(bool), npz["weights"]   # True: the key is blocked for that query
        assert blocked.shape == weights.shape and blocked.any() and (~blocked).any()
        assert np.all(weights[blocked] == 0)                        # blocked keys get nothing
        seen = (~blocked).any(axis=-1)
        np.testing.assert_allclose(weights[seen].sum(-1), 1.0, rtol=1e-6)
