"""viz_core.io.export: CSV read back with the csv module (quoting, numbers, labels) and NPZ read back with numpy."""
import csv
import io

import numpy as np
import pytest

from viz_core.io import export


def read(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_csv_quotes_what_would_split_a_row():
    text = export.csv_text(["token", "p"], [['a,b', 0.5], ['say "hi"', 1], ["line\nbreak", None]])
    assert read(text) == [["token", "p"], ["a,b", "0.5"], ['say "hi"', "1"], ["line\nbreak", ""]]


def test_numbers_read_back_exactly_and_integers_stay_integers():
    values = [np.float32(1 / 3), 1 / 3, 2.0e-12, np.float64(0.1), np.int64(7), np.bool_(True)]
    row = read(export.csv_text(list("abcdef"), [values]))[1]
    assert row == ["0.33333334", "0.3333333333333333", "2e-12", "0.1", "7", "1"]
    assert np.float32(row[0]) == values[0] and float(row[1]) == values[1]
    assert read(export.csv_text(["x", "y", "z"], [[np.nan, np.float32("nan"), float("inf")]]))[1] == ["", "", "inf"]


def test_columns_and_records_give_the_same_file():
    cols = export.columns_csv({"step": [1, 2], "loss": [0.5, 0.25]})
    recs = export.records_csv([{"step": 1, "loss": 0.5}, {"step": 2, "loss": 0.25}])
    assert cols == recs == "step,loss\n1,0.5\n2,0.25\n"
    assert read(export.records_csv([{"a": 1}, {"b": 2}], header=["a", "b"])) == [["a", "b"], ["1", ""], ["", "2"]]
    with pytest.raises(ValueError):
        export.columns_csv({"a": [1, 2], "b": [1]})


def test_matrix_rows_are_queries_with_unique_labels():
    m = np.array([[0.25, 0.75], [1.0, 0.0]], dtype=np.float32)
    rows = read(export.matrix_csv(m, ["the", "the"], ["the", "<b>"]))
    assert rows[0] == ["query \\ key", "0:the", "1:<b>"]
    assert [r[0] for r in rows[1:]] == ["0:the", "1:the"]
    assert np.allclose(np.array([[float(v) for v in r[1:]] for r in rows[1:]]), m)


def test_npz_round_trip_keeps_arrays_and_strings():
    data = export.npz_bytes(weights=np.arange(6, dtype=np.float32).reshape(2, 3), tokens=["a", "中"])
    with np.load(io.BytesIO(data)) as z:
        assert z["weights"].dtype == np.float32 and z["weights"].tolist() == [[0, 1, 2], [3, 4, 5]]
        assert z["tokens"].tolist() == ["a", "中"]


def test_checkpoint_files_as_a_zip_and_a_folder(tmp_path):
    import zipfile

    files = {"config.json": b'{"a": 1}', "model.safetensors": bytes(range(256)) * 4}
    with zipfile.ZipFile(io.BytesIO(export.zip_bytes(files))) as zf:
        assert {n: zf.read(n) for n in zf.namelist()} == files
        assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in zf.infolist())
    out = export.write_files(files, tmp_path / "new" / "ckpt")
    assert out == tmp_path / "new" / "ckpt" and {p.name: p.read_bytes() for p in out.iterdir()} == files
