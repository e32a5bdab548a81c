"""The house's walls: viz_core never imports streamlit (it runs in scripts, notebooks and the CLIs without a server),
and the figure builders in viz_core/plots never import torch or transformers (they take arrays, never a model)."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _imported_roots(path: Path) -> set[str]:
    """The top-level package of every absolute import in path, wherever it stands (inside functions too)."""
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def _offenders(folder: str, forbidden: set[str]) -> list[str]:
    return [f"{path.relative_to(ROOT)} imports {sorted(_imported_roots(path) & forbidden)}"
            for path in sorted((ROOT / folder).rglob("*.py")) if _imported_roots(path) & forbidden]


def test_no_viz_core_file_imports_streamlit():
    assert _offenders("viz_core", {"streamlit"}) == []


def test_no_figure_builder_imports_a_model_library():
    assert _offenders("viz_core/plots", {"torch", "transformers"}) == []


def test_the_scan_sees_imports_inside_functions(tmp_path):
    """The static check above must fail on an import hidden in a function body."""
    hidden = tmp_path / "hidden.py"
    hidden.write_text("def f():\n    import streamlit as st\n    return st\n")
    assert _imported_roots(hidden) == {"streamlit"}


def test_importing_every_viz_core_module_leaves_streamlit_unloaded():
    """Dynamically too: a module can reach streamlit through a third-party import the scan above does not follow."""
    script = (
        "import importlib, pkgutil, sys, viz_core\n"
        "for m in pkgutil.walk_packages(viz_core.__path__, 'viz_core.'):\n"
        "    if not m.name.endswith('__main__'):\n"
        "        importlib.import_module(m.name)\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'streamlit'))\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"
