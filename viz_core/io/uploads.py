"""Reading what a visitor uploads, with every size bounded before it is read.

A zip archive says how big its members are, but it may lie: `ZipFile.read` trusts the header and inflated 2 GiB
from a small upload. JSON may nest deeper than Python's recursion limit. A safetensors file says in its header which
tensors it holds and how big they are; a model built from an uploaded config can be asked to be any size. So:

- `zip_members` reads only the wanted members of an archive with few members, each with a byte limit enforced
  while it inflates;
- `parse_json` refuses a document that is too long or nests too deep, before json.loads sees it;
- `safetensors_header` reads the header (names, dtypes, shapes) of a safetensors file, and checks that the
  offsets it declares fit the file, without loading a tensor.

Every refusal is an InputError whose code names what to tell the visitor.
"""
from __future__ import annotations

import io
import json
import math
import struct
import zipfile
from pathlib import PurePosixPath

from ..runtime import budget
from ..errors import InputError

MAX_ZIP_MEMBERS = 16           # a checkpoint zip holds 2 or 3 files
MAX_JSON_BYTES = 4 * 2**20     # a checkpoint's config.json is a few KB to a few hundred KB
MAX_JSON_DEPTH = 16            # our configs nest 3 levels deep
MAX_HEADER_BYTES = 2**20       # a safetensors header of a few hundred tensors is a few KB
SAFETENSORS_DTYPES = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                      "BOOL": 1}
_READ_CHUNK = 2**20
CENTRAL_HEADER_BYTES = 46      # a central directory entry's fixed part (its name and extras come on top)
ZIP64_COUNT = 0xFFFF           # what a Zip64 record's member count reads as: at least this many


# ---------------------------------------------------------------- zip archives
def zip_members(name: str, data: bytes, wanted: tuple[str, ...], limit: int) -> dict[str, bytes]:
    """The members of a zip archive whose file name (without folders) is in `wanted`, as {file name: bytes}.

    Refused (InputError): not a zip, more than MAX_ZIP_MEMBERS members, a wanted name twice, or more than `limit`
    bytes once inflated (counted while inflating, whatever the archive claims)."""
    count = _zip_member_count(data)
    if count is None:
        raise InputError("upload.bad_zip", f"{name} is not a readable zip archive", name=name)
    if count > MAX_ZIP_MEMBERS:
        n = f"{count:,}" if count < ZIP64_COUNT else f"≥ {ZIP64_COUNT:,}"
        raise InputError("upload.zip_members", f"{name} holds {n} files; a checkpoint holds at most "
                         f"{MAX_ZIP_MEMBERS}", name=name, n=n, limit=MAX_ZIP_MEMBERS)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = [i for i in zf.infolist() if not i.is_dir() and PurePosixPath(i.filename).name in wanted]
            names = [PurePosixPath(i.filename).name for i in infos]
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise InputError("upload.zip_duplicate", f"{name} holds {twice[0]} more than once", name=name,
                                 file=twice[0])
            budget.admit(limit, "unpacking an upload")  # the server-wide memory budget: all it may inflate to
            out, left = {}, limit
            for info, member in zip(infos, names):
                out[member] = _read_member(zf, info, left, name)
                left -= len(out[member])
            return out
    except InputError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, NotImplementedError, ValueError):
        raise InputError("upload.bad_zip", f"{name} is not a readable zip archive", name=name) from None


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int, name: str) -> bytes:
    """One member, inflated at most limit + 1 bytes (a member that says it is small and is not gets cut there)."""
    if info.file_size > limit:
        raise InputError("upload.too_large", f"{name} unpacks to more than {limit // 2**20} MiB", name=name,
                         limit=limit // 2**20)
    buf = bytearray()
    with zf.open(info) as f:
        while len(buf) <= limit:
            chunk = f.read(min(_READ_CHUNK, limit + 1 - len(buf)))
            if not chunk:
                break
            buf += chunk
    if len(buf) > limit:
        raise InputError("upload.too_large", f"{name} unpacks to more than {limit // 2**20} MiB", name=name,
                         limit=limit // 2**20)
    return bytes(buf)


def _zip_member_count(data: bytes) -> int | None:
    """The number of members an archive declares in its end-of-central-directory record, read before zipfile builds
    one object per member; None when there is no such record or when the directory it describes cannot be in the
    upload (its offset and size past the record, or fewer than CENTRAL_HEADER_BYTES per member it claims). A Zip64
    archive (a count of 0xFFFF: over 65,535 members or 4 GiB) returns ZIP64_COUNT, more than any checkpoint holds."""
    end = data.rfind(b"PK\x05\x06", max(0, len(data) - 65_557))
    if end < 0 or len(data) < end + 22:
        return None
    total, size, offset = struct.unpack_from("<HII", data, end + 10)
    if total == 0xFFFF:
        return ZIP64_COUNT
    if offset + size > end or total * CENTRAL_HEADER_BYTES > size:
        return None
    return total


# ---------------------------------------------------------------- JSON
def parse_json(raw: bytes, what: str, limit: int = MAX_JSON_BYTES, depth: int = MAX_JSON_DEPTH):
    """Parse JSON of at most `limit` bytes that nests at most `depth` levels. Raises InputError(upload.bad_json)."""
    if len(raw) > limit:
        raise InputError("upload.bad_json", f"{what} is larger than {limit // 2**20} MiB", what=what,
                         detail=f"> {limit // 2**20} MiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("upload.bad_json", f"{what} is not UTF-8 text", what=what, detail="not UTF-8") from None
    if _nesting(text) > depth:
        raise InputError("upload.bad_json", f"{what} nests deeper than {depth} levels", what=what,
                         detail=f"> {depth} levels")
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        raise InputError("upload.bad_json", f"{what} is not JSON ({type(exc).__name__})", what=what,
                         detail=type(exc).__name__) from None


def _nesting(text: str) -> int:
    """The deepest nesting of [ and { outside strings (an upper bound of what json.loads would recurse into)."""
    deepest = level = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            level += 1
            deepest = max(deepest, level)
        elif ch in "]}":
            level -= 1
    return deepest


# ---------------------------------------------------------------- safetensors
def safetensors_header(raw: bytes, name: str) -> dict[str, tuple[str, tuple[int, ...]]]:
    """{tensor name: (dtype, shape)} from a safetensors file's header, after checking that the header is small,
    that every tensor's byte range matches its dtype and shape, and that the ranges fit the file. No tensor is
    read. Raises InputError(upload.bad_safetensors)."""
    def bad(detail: str) -> InputError:
        return InputError("upload.bad_safetensors", f"{name} is damaged or not a safetensors file: {detail}",
                          name=name, detail=detail)

    if len(raw) < 8:
        raise bad("too short")
    (n,) = struct.unpack_from("<Q", raw, 0)
    if n > MAX_HEADER_BYTES or 8 + n > len(raw):
        raise bad("header size")
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise bad("header is not JSON") from None
    if not isinstance(header, dict):
        raise bad("header is not a table")
    body = len(raw) - 8 - n
    out = {}
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        if not (isinstance(entry, dict) and entry.get("dtype") in SAFETENSORS_DTYPES
                and _ints(entry.get("shape")) and _ints(entry.get("data_offsets")) and len(entry["data_offsets"]) == 2):
            raise bad(f"entry {str(key)[:40]!r}")
        start, stop = entry["data_offsets"]
        expected = math.prod(entry["shape"]) * SAFETENSORS_DTYPES[entry["dtype"]]
        if not 0 <= start <= stop <= body or stop - start != expected:
            raise bad(f"entry {str(key)[:40]!r} does not fit the file")
        out[key] = (entry["dtype"], tuple(entry["shape"]))
    return out


def _ints(value) -> bool:
    return isinstance(value, list) and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in value)
