"""Fixtures of the tests on the packaged real decoders: each model loaded once per test module (load_model
converts its cache first if this machine has none), skipped where its package is not installed."""
from __future__ import annotations

import pytest

from viz_core.pretrained import packaged


def load_packaged(d: packaged.PackagedDecoder):
    if not packaged.installed(d):
        pytest.skip(f"{d.package} is not installed (scripts/test.sh installs it)")
    from viz_core.pretrained import load_model
    return load_model(d.id)


@pytest.fixture(scope="module")
def gemma():
    return load_packaged(packaged.GEMMA)


@pytest.fixture(scope="module")
def smollm2():
    return load_packaged(packaged.SMOLLM2)
