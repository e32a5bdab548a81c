"""Downloads in headless Chromium, as a visitor gets them: click the button, open the file. Every page writes its
files with viz_core.export, so a token with a comma or a quote stays in its cell and the numbers read back to the
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
    from viz_core import scaling

    page = open_page("/scaling?lang=en&part=dist")
    rows = list(csv.reader(io.StringIO(_download(page, "Download the variance curve (CSV)"))))
    assert_no_exception(page)
    sweep = scaling.variance_sweep(scaling.DK_GRID, 10_000, 0)
    assert rows[0] == ["d_k", "var_unscaled", "var_scaled"]
    table = np.array([[float(v) for v in row] for row in rows[1:]])
    assert np.array_equal(table[:, 0], sweep.d_ks)
    assert np.array_equal(table[:, 1], sweep.var_unscaled) and np.array_equal(table[:, 2], sweep.var_scaled)
