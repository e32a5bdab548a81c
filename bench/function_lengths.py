"""Function-length statistics of folders of Python code:

    python bench/function_lengths.py viz_core app_pages

Prints the number of functions and lines, the median, 90th percentile and longest function length (def line to last
line, nested functions counted on their own), how many are over 40 lines, and the five longest.
"""
from __future__ import annotations

import ast
import statistics
import sys
from pathlib import Path

LONG = 40  # a function over this many lines is counted as long


def functions(folder: str) -> list[tuple[int, str]]:
    """(length in lines, 'path:line name') of every function under folder."""
    found = []
    for path in sorted(Path(folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((node.end_lineno - node.lineno + 1, f"{path}:{node.lineno} {node.name}"))
    return found


def main(folders: list[str]) -> None:
    found = sorted((f for folder in folders for f in functions(folder)), reverse=True)
    lengths = sorted(n for n, _ in found)
    lines = sum(len(p.read_text().splitlines()) for folder in folders for p in Path(folder).rglob("*.py"))
    print(f"{len(lengths)} functions, {lines} lines; median {statistics.median(lengths)}, "
          f"p90 {lengths[int(0.9 * len(lengths))]}, max {lengths[-1]}, >{LONG} lines: {sum(n > LONG for n in lengths)}")
    for n, where in found[:5]:
        print(f"  {n:3d} {where}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["viz_core", "app_pages"])
