"""What a visitor uploads: every attack on the checkpoint upload is refused with a clear message, fast,
before the server builds or inflates anything big. Each test keeps the peak of Python-traced memory (numpy and
torch CPU tensors included) far below what the attack asked for."""
from __future__ import annotations

import io
import json
import struct
import time
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from viz_core import i18n
from viz_core.io import uploads
from viz_core.errors import InputError
from viz_core.seq2seq.checkpoint import MAX_CHECKPOINT_BYTES, checkpoint_files, load_checkpoint_files, read_upload
from viz_core.seq2seq.training import load_checkpoint

SHIPPED = Path(__file__).resolve().parents[1] / "viz_core" / "checkpoints" / "reverse"


@pytest.fixture(scope="module")
def files() -> dict[str, bytes]:
    """The shipped reverse checkpoint, as the Train page's download gives it."""
    return checkpoint_files(load_checkpoint(SHIPPED))


def with_config(files: dict, edit) -> dict:
    config = json.loads(files["config.json"])
    edit(config)
    return dict(files, **{"config.json": json.dumps(config).encode()})


def refused(call, *args) -> InputError:
    """Run an upload; it must be refused within 5 s, with < 64 MB traced at the peak, and a message in both
    languages that names no server path."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(InputError) as info:
            call(*args)
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seconds < 5, f"took {seconds:.1f} s"
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MB"
    for lang in i18n.LANGUAGES:
        text = i18n.t(info.value.code, lang, **info.value.params)
        assert text and "/work" not in text and "Traceback" not in text
    return info.value


def model_edit(**changes):
    return lambda c: c["model"].update(changes)


# ---------------------------------------------------------------- absurd configurations
@pytest.mark.parametrize("changes,code", [
    ({"d_model": 16384}, "train.ckpt_range"),           # the kernel killed the server at 21.9 GB
    ({"n_enc_layers": 10_000}, "train.ckpt_range"),     # 29 s and 5 GB
    ({"n_dec_layers": 100_000}, "train.ckpt_range"),    # filled memory
    ({"max_len": 10_000_000}, "train.ckpt_range"),      # 7.6 GB
    ({"d_ff": 10**9}, "train.ckpt_range"),
    ({"n_heads": 10**6}, "train.ckpt_range"),
    ({"d_model": 64.0}, "train.ckpt_field"),            # a bare TypeError before
    ({"d_model": True}, "train.ckpt_field"),
    ({"d_model": "64"}, "train.ckpt_field"),
    ({"scale": "yes"}, "train.ckpt_field"),
    ({"attn_dropout": 1.5}, "train.ckpt_range"),
    ({"surprise": 1}, "train.ckpt_field"),
    ({"d_model": 1024, "n_heads": 16, "n_enc_layers": 8, "n_dec_layers": 8, "d_ff": 4096}, "train.ckpt_too_big"),
    ({"n_heads": 3}, "train.ckpt_bad_config"),          # 64 is not a multiple of 3
])
def test_absurd_model_configs_are_refused_before_building(files, changes, code):
    err = refused(load_checkpoint_files, with_config(files, model_edit(**changes)))
    assert err.code == code


@pytest.mark.parametrize("edit,code", [
    (lambda c: c.update(train="abc"), "train.ckpt_field"),       # AttributeError before
    (lambda c: c.update(info="x"), "train.ckpt_field"),          # AttributeError before
    (lambda c: c.update(history={"a": 1}), "train.ckpt_field"),
    (lambda c: c.update(history=[{"loss": [1, 2]}]), "train.ckpt_field"),
    (lambda c: c.update(info={str(i): i for i in range(1000)}), "train.ckpt_field"),
    (lambda c: c["train"].update(batch_size=10**9), "train.ckpt_range"),
    (lambda c: c["train"].update(eval_per_length="all"), "train.ckpt_field"),
    (lambda c: c["task"].update(max_len=10**9), "train.bad_lengths"),
    (lambda c: c["task"].update(max_len=10.0), "train.ckpt_field"),
    (lambda c: c["task"].update(name=["reverse"]), "train.ckpt_field"),
    (lambda c: c.update(model=[1, 2]), "train.ckpt_field"),
])
def test_badly_typed_sections_are_refused(files, edit, code):
    assert refused(load_checkpoint_files, with_config(files, edit)).code == code


def test_deeply_nested_json_is_refused(files):
    deep = b'{"format": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"  # a RecursionError before
    err = refused(load_checkpoint_files, dict(files, **{"config.json": deep}))
    assert err.code == "upload.bad_json"


def test_config_json_is_size_bounded(files):
    huge = b'{"pad": "' + b"x" * (uploads.MAX_JSON_BYTES + 1) + b'"}'
    assert refused(load_checkpoint_files, dict(files, **{"config.json": huge})).code == "upload.bad_json"


# ---------------------------------------------------------------- safetensors headers
def header_file(header: dict, body: bytes = b"") -> bytes:
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + body


def test_header_must_match_the_config_before_any_weight_is_read(files):
    config = json.loads(files["config.json"])
    config["model"].update(d_model=128, n_heads=4)  # within the limits, but not what the weights hold
    err = refused(load_checkpoint_files, dict(files, **{"config.json": json.dumps(config).encode()}))
    assert err.code == "train.ckpt_shape"


@pytest.mark.parametrize("raw", [
    b"\x00" * 4,                                                        # too short
    struct.pack("<Q", 2**40) + b"{}",                                   # a header of 1 TB
    header_file({"w": {"dtype": "F32", "shape": [10**6, 10**6], "data_offsets": [0, 4 * 10**12]}}),  # not there
    header_file({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}, b"\x00" * 16),      # 16 != 8 bytes
    header_file({"w": {"dtype": "PICKLE", "shape": [1], "data_offsets": [0, 1]}}, b"\x00"),
    header_file({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\x00" * 4),
    header_file(["not", "a", "table"]),
])
def test_damaged_safetensors_headers_are_refused(raw):
    assert refused(uploads.safetensors_header, raw, "model.safetensors").code == "upload.bad_safetensors"


def test_header_reads_names_dtypes_and_shapes(files):
    header = uploads.safetensors_header(files["model.safetensors"], "model.safetensors")
    assert header["decoder.0.cross_attn.k_proj.weight"] == ("F32", (64, 64))
    assert all(dtype == "F32" for dtype, _ in header.values())


def test_snapshots_with_impossible_shapes_are_refused(files):
    from safetensors.torch import save
    import torch
    bad = save({"10/enc.0.self_attn": torch.zeros(4, 5000, 5000, dtype=torch.float16)[:, :1, :1].contiguous(),
                "10/x": torch.zeros(99, 1, 1, dtype=torch.float16)})  # 99 heads in a 4-head model
    assert refused(load_checkpoint_files, dict(files, **{"snapshots.safetensors": bad})).code == "train.ckpt_corrupt"


# ---------------------------------------------------------------- zips and many files
def lying_zip(size: int, claimed: int) -> bytes:
    """A zip whose config.json inflates to `size` bytes while its headers claim `claimed`."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("config.json", b"0" * size)
    data = bytearray(buf.getvalue())
    for sig, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # local header, central directory
        at = data.find(sig)
        struct.pack_into("<I", data, at + offset, claimed)
    return bytes(data)


def test_a_zip_that_lies_about_its_size_is_cut_while_inflating():
    data = lying_zip(size=300 * 2**20, claimed=1000)  # 300 MB of zeros, about 300 KB compressed
    assert len(data) < 2**20
    err = refused(uploads.zip_members, "ckpt.zip", data, ("config.json",), 2**20)
    assert err.code == "upload.bad_zip"  # cut at the claimed size, then its checksum fails


def test_a_zip_bomb_is_cut_at_the_limit():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("model.safetensors", b"\x00" * (200 * 2**20))
    err = refused(read_upload, [("ckpt.zip", buf.getvalue())])
    assert err.code == "upload.too_large"


def test_a_zip_with_many_members_is_refused_before_they_are_listed():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for i in range(2000):
            zf.writestr(f"f{i}", b"")
    err = refused(read_upload, [("ckpt.zip", buf.getvalue())])
    assert err.code == "upload.zip_members" and err.params["n"] == "2,000"


def end_record(count: int, size: int, offset: int) -> bytes:
    """A zip's end-of-central-directory record claiming `count` members in a directory of `size` bytes at `offset`."""
    return b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, count, count, size, offset, 0)


@pytest.mark.parametrize("count, size, offset, code", [
    (60_000, 46 * 60_000, 0, "upload.bad_zip"),     # a directory larger than the whole upload
    (60_000, 100, 0, "upload.bad_zip"),             # 60,000 members cannot fit in 100 bytes of directory
    (0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, "upload.zip_members"),  # Zip64: 65,535 members or more
])
def test_a_zip_whose_directory_cannot_be_in_the_upload_is_refused_before_zipfile_reads_it(monkeypatch, count, size,
                                                                                         offset, code):
    def never(*a, **k):
        raise AssertionError("zipfile was asked to read the directory")
    monkeypatch.setattr(uploads.zipfile, "ZipFile", never)
    data = b"\0" * 4096 + end_record(count, size, offset)
    err = refused(read_upload, [("ckpt.zip", data)])
    assert err.code == code
    if code == "upload.zip_members":
        assert err.params["n"] == "≥ 65,535"


def test_a_zip_with_a_member_twice_is_refused(files):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("a/config.json", files["config.json"])
        zf.writestr("b/config.json", b"{}")
    assert refused(read_upload, [("ckpt.zip", buf.getvalue())]).code == "upload.zip_duplicate"


def test_too_many_files_are_refused(files):
    many = [(f"file{i}.safetensors", b"x") for i in range(10)]
    assert refused(read_upload, many).code == "train.ckpt_too_many"


def test_files_together_are_size_bounded():
    big = b"\x00" * (MAX_CHECKPOINT_BYTES // 2 + 1)
    err = refused(read_upload, [("config.json", big), ("model.safetensors", big)])
    assert err.code == "train.ckpt_too_large"


def test_the_real_checkpoint_still_loads_from_a_zip_and_from_loose_files(files):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(f"folder/{name}", data)
    for upload in ([("ckpt.zip", buf.getvalue())], list(files.items())):
        model = load_checkpoint_files(read_upload(upload))
        assert model.translate("3 1 4 1 5") == "5 1 4 1 3"


def test_json_nesting_counts_brackets_outside_strings():
    assert uploads._nesting('{"a": "[[[[[[", "b": [[1]]}') == 3
    assert uploads.parse_json(b'{"a": "[[[[[[[[[[[[[[[[[[[[[[[["}', "x") == {"a": "[" * 24}
