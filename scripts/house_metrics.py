"""Prints figures of the house's layout: viz_core's top-level rooms and the import arrows between them, the files
that make up each page, function lengths, and "issue #N" references left in product code.

Usage: python scripts/house_metrics.py
"""
from __future__ import annotations

import ast
import re
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("viz_core", "app_pages", "app.py")


def _python_files(*roots: str) -> list[Path]:
    files = []
    for root in roots:
        path = ROOT / root
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return files


def _room(module: str) -> str | None:
    """viz_core.a.b -> "a" (the top-level room of viz_core a module lives in)."""
    parts = module.split(".")
    return parts[1] if parts[0] == "viz_core" and len(parts) > 1 else None


def _imports(path: Path) -> set[str]:
    """Absolute module names path imports (relative imports resolved against its package)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            names.add(module)
            names |= {f"{module}.{alias.name}" for alias in node.names}
    return names


def rooms_and_arrows() -> tuple[list[str], set[tuple[str, str]]]:
    core = ROOT / "viz_core"
    rooms = sorted(p.stem if p.is_file() else p.name for p in core.iterdir()
                   if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists())
    arrows = set()
    for path in _python_files("viz_core"):
        parts = path.relative_to(core).parts
        source = parts[0].removesuffix(".py")
        if source == "__init__":
            continue
        for name in _imports(path):
            target = _room(name)
            if target in rooms and target != source:
                arrows.add((source, target))
    return rooms, arrows


def _module_file(name: str) -> Path | None:
    path = ROOT / name.replace(".", "/")
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


PLUMBING = ("viz_core.errors", "viz_core.i18n", "viz_core.rounding", "viz_core.runtime", "viz_core.io",
            "viz_core.learning")


def page_files() -> dict[str, list[str]]:
    """A page's own files: its script, its _ui module, the viz_core modules (plumbing aside) either imports, and its
    locale file."""
    pages = {}
    for page in sorted((ROOT / "app_pages").glob("*.py")):
        files = {page}
        ui_module = ROOT / "app_pages/_ui" / page.name
        if ui_module.exists():
            files.add(ui_module)
        for source in list(files):
            for name in _imports(source):
                if name.startswith("viz_core.") and not name.startswith(PLUMBING):
                    found = _module_file(name)
                    if found and found.name != "__init__.py":
                        files.add(found)
        locale = ROOT / "viz_core/locales" / f"{page.stem}.json"
        if locale.exists():
            files.add(locale)
        pages[page.stem] = sorted(str(f.relative_to(ROOT)) for f in files)
    return pages


def function_lengths() -> list[int]:
    lengths = []
    for path in _python_files(*PRODUCT):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lengths.append(node.end_lineno - node.lineno + 1)
    return lengths


def issue_references() -> list[str]:
    found = []
    for path in _python_files(*PRODUCT):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"issue #?\d+|#\d{2}\b(?!\w)", line, re.IGNORECASE) and "issue" in line.lower():
                found.append(f"{path.relative_to(ROOT)}:{number}")
    return found


def main() -> None:
    rooms, arrows = rooms_and_arrows()
    print(f"viz_core top level: {len(rooms)} rooms, {len(arrows)} arrows")
    print("  rooms:", ", ".join(rooms))
    pages = page_files()
    counts = [len(files) for files in pages.values()]
    print(f"pages: {len(pages)}, files per page (script, _ui, viz_core, locale): median {statistics.median(counts)}, "
          f"max {max(counts)}")
    for page, files in pages.items():
        folders = sorted({str(Path(f).parent) for f in files})
        print(f"  {page}: {len(files)} files in {len(folders)} folders")
    lengths = sorted(function_lengths())
    print(f"functions in product code: {len(lengths)}, lines median {statistics.median(lengths)}, "
          f"p90 {lengths[int(0.9 * len(lengths))]}, max {lengths[-1]}, over 40 lines {sum(n > 40 for n in lengths)}")
    print(f"product lines naming an issue: {len(issue_references())}")
    ui_init = ROOT / "app_pages/_ui/__init__.py"
    print(f"app_pages/_ui/__init__.py: {len(ui_init.read_text().splitlines())} lines")


if __name__ == "__main__":
    main()
