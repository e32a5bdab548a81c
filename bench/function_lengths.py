"""Function-length statistics of a tree (issue #20): python bench/function_lengths.py viz_core app_pages"""
import ast, pathlib, statistics, sys
lens = []; longest = []
for d in sys.argv[1:]:
    for p in sorted(pathlib.Path(d).rglob("*.py")):
        tree = ast.parse(p.read_text())
        for n in ast.walk(tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                L = n.end_lineno - n.lineno + 1
                lens.append(L); longest.append((L, f"{p}:{n.lineno} {n.name}"))
lines = sum(len(p.read_text().splitlines()) for d in sys.argv[1:] for p in pathlib.Path(d).rglob("*.py"))
lens.sort()
print(f"{len(lens)} functions, {lines} lines; median {statistics.median(lens)}, p90 {lens[int(.9*len(lens))]}, max {lens[-1]}, >40 lines: {sum(l>40 for l in lens)}")
for L, w in sorted(longest, reverse=True)[:5]: print(" ", L, w)
