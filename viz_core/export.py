"""The files a visitor downloads: CSV text and NPZ archives, written one way for every page.

CSV goes through the csv module (a token such as `a,b` or `"` is quoted, never splits a row); numbers are written with
7 significant digits (float32 keeps about 7), so the file says what the figure shows. No pandas: importing it costs
the server about 65 MB.
"""
from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence

import numpy as np


def cell(value) -> str | int:
    """One CSV cell: floats (numpy ones too) to 7 significant digits, integers and text as they are."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.7g}"
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
