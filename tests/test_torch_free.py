"""The packaged model never needs torch's or transformers' memory (about 340 MB of a small server): every
view of the Attention page runs without importing torch, the other pages that read the packaged model (Q / K / V on
Mechanics and Scaling, learned positions on Positions) without importing transformers, and the server's warm-up
imports neither. Checked in a fresh Python process (this one has imported both for other tests)."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import json, sys
from tests.conftest import run_page

report = {}

def heavy():
    return sorted(m for m in ("torch", "transformers") if m in sys.modules)

from app_pages._ui import warmup
warmup.page_served.set()
warmup._warm(("The cat sat on the mat.",))
report["warm-up"] = heavy()
for view in json.loads(sys.argv[1]):
    at = run_page("attention", {"lang": "en", "view": view, "text": "A cat sat on the warm mat.",
                                "pair": "A dog lay on the rug." if view == "importance" else ""}, timeout=300)
    report["attention " + view] = heavy() + [e.value for e in at.exception] + [e.value for e in at.error]
for page in ("mechanics", "scaling", "positions"):
    at = run_page(page, {"lang": "en"}, timeout=300)
    report[page] = heavy() + [e.value for e in at.exception] + [e.value for e in at.error]
print(json.dumps(report))
"""


def _views() -> list[str]:
    """The Attention page's views of an encoder, read from its source (importing a page would run it)."""
    tree = ast.parse((ROOT / "app_pages" / "attention.py").read_text(encoding="utf-8"))
    found = {t.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name) and t.id in ("VIEWS", "DECODER_VIEWS")}
    return [v for v in found["VIEWS"] if v not in found["DECODER_VIEWS"]]


def test_default_model_pages_import_no_transformers_and_attention_no_torch():
    views = _views()
    assert "importance" in views and "qkmap" in views and len(views) >= 10
    out = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(views)], cwd=ROOT, capture_output=True,
                         text=True, timeout=1200)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["warm-up"] == []
    for view in views:  # cumulative: after every view so far, neither torch nor transformers, and no error
        assert report[f"attention {view}"] == [], view
    for page in ("mechanics", "scaling", "positions"):  # these pages train or run small torch models: torch is fine
        assert "transformers" not in report[page] and all(x in ("torch",) for x in report[page]), (page, report[page])
