"""What orjson saves: every page's figures serialised as Streamlit does it (plotly.io.to_json,
validate=False), once with plotly's json engine and once with orjson. Prints a table; asserts nothing.

  python bench/bench_serialise.py            # every page in its default state, English
  python bench/bench_serialise.py --repeat 9

Plotly picks orjson when it is importable (engine "auto"); requirements.txt pins it, so the server always has it.
The figures are the ones each page draws on its first visit (collected with streamlit's AppTest), rebuilt as
plotly figures and serialised --repeat times; the table gives the median per page, summed over its figures.
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from app_pages._ui.nav import PAGES  # noqa: E402
from tests.conftest import figures  # noqa: E402


def page_figures(stem: str) -> list:
    """The plotly figures of one page's first visit (English), as plotly Figure objects."""
    import plotly.graph_objects as go
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params["lang"] = "en"
    at.switch_page(f"app_pages/{stem}.py")
    at.run()
    return [go.Figure({k: v for k, v in spec.items() if k != "config"}, skip_invalid=True) for spec in figures(at)]


def timed(figs: list, engine: str, repeat: int) -> tuple[float, int]:
    """(median seconds to serialise all figures, total bytes)."""
    import plotly.io as pio

    times, size = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        size = sum(len(pio.to_json(fig, validate=False, engine=engine).encode()) for fig in figs)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), size


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    logging.disable(logging.WARNING)  # AppTest's "missing ScriptRunContext" lines
    import orjson

    print(f"orjson {orjson.__version__}; medians of {args.repeat}\n")
    print("| page | figures | json engine | orjson | saved | bytes (json / orjson) |\n|---|---|---|---|---|---|")
    for stem, _icon in PAGES:
        figs = page_figures(stem)
        slow, slow_bytes = timed(figs, "json", args.repeat)
        fast, fast_bytes = timed(figs, "orjson", args.repeat)
        print(f"| {stem} | {len(figs)} | {slow * 1000:.1f} ms | {fast * 1000:.1f} ms | {(slow - fast) * 1000:.1f} ms "
              f"({slow / max(fast, 1e-9):.1f}x) | {slow_bytes / 1024:.0f} / {fast_bytes / 1024:.0f} KiB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
