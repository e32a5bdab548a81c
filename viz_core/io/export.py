"""The files a visitor downloads: CSV text, NPZ archives and checkpoint files, written one way for every page.

CSV goes through the csv module (a token such as `a,b` or `"` is quoted, never splits a row); a number is written with
the fewest digits that read back to exactly the same value (float32 as float32: 0.33333334, not 0.3333333432674408),
so the file holds what the app computed, to the last digit.
"""
from __future__ import annotations

import csv
import io
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np


def cell(value) -> str | int:
    """One CSV cell: a float as the shortest text that reads back to the same value (in its own precision), booleans
    as 0 / 1, integers and text as they are; None and NaN (a missing number) as an empty cell."""
    if isinstance(value, (float, np.floating)) and value != value:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, np.floating):
        return str(value)         # numpy's shortest round-trip text of that precision
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, np.integer):
        return int(value)
    return "" if value is None else value


def csv_text(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    """A header and rows of cells as CSV text (see `cell` for how each value is written)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([cell(v) for v in row] for row in rows)
    return buf.getvalue()


def columns_csv(columns: Mapping[str, Sequence]) -> str:
    """Equal-length columns, name -> values, as CSV (one row per index)."""
    lengths = {len(v) for v in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"columns of different lengths: {sorted(lengths)}")
    return csv_text(list(columns), zip(*columns.values()))


def records_csv(records: Sequence[Mapping], header: Sequence[str] | None = None) -> str:
    """Rows given as dicts (missing keys are empty cells); the header is the first record's keys unless given."""
    header = list(header if header is not None else (records[0] if records else []))
    return csv_text(header, ([r.get(k) for k in header] for r in records))


def matrix_csv(matrix: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str],
               corner: str = "query \\ key") -> str:
    """A 2-D matrix with labelled rows and columns, each label prefixed by its index ('3:cat'), so that it stays
    unique when tokens repeat. matrix (R, C) -> R + 1 lines."""
    matrix = np.asarray(matrix)
    header = [corner] + [f"{j}:{label}" for j, label in enumerate(col_labels)]
    return csv_text(header, ([f"{i}:{label}", *row] for i, (label, row) in enumerate(zip(row_labels, matrix))))


def npz_bytes(**arrays) -> bytes:
    """Arrays (numpy, lists of numbers or of strings) as one compressed .npz file in memory."""
    buf = io.BytesIO()
    np.savez_compressed(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    return buf.getvalue()


def zip_bytes(files: Mapping[str, bytes]) -> bytes:
    """Named files (a checkpoint: name -> bytes) as one deflated zip archive in memory."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def write_files(files: Mapping[str, bytes], out_dir: str | Path) -> Path:
    """Named files written into out_dir (made if missing); returns the folder."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (out / name).write_bytes(data)
    return out
