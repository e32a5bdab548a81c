"""The server's numpy runs its matrix products on one OpenBLAS thread unless the environment says otherwise
(app.py sets OPENBLAS_NUM_THREADS before numpy loads; with a class on the server a second thread only waited for a
core: docs/benchmarks.md). Checked in fresh processes that import app.py as `streamlit run app.py` does."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import json, os, sys
seen = {}

class Watch:  # notes the variable at the moment numpy is first imported
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" and "numpy" not in seen:
            seen["numpy"] = os.environ.get("OPENBLAS_NUM_THREADS")
        return None

sys.meta_path.insert(0, Watch())
import app  # noqa: F401 - what `streamlit run app.py` imports at the server's start
import numpy as np
np.ones((64, 64)) @ np.ones((64, 64))  # OpenBLAS has started its threads by now
seen["threads"] = len(os.listdir("/proc/self/task"))
print(json.dumps(seen))
"""


def _run(openblas: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if openblas is not None:
        env["OPENBLAS_NUM_THREADS"] = openblas
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_numpy_loads_with_one_openblas_thread_unless_the_environment_says_otherwise():
    default, told = _run(None), _run("2")
    assert default["numpy"] == "1"          # set before numpy's first import, not after
    assert told["numpy"] == "2"             # an explicit setting is kept
    assert told["threads"] == default["threads"] + 1  # OpenBLAS really started one worker thread fewer
