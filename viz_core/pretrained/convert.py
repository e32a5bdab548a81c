"""Convert a packaged GGUF decoder into a folder transformers loads in seconds (see packaged.py). Run as its own process:

    python -m viz_core.pretrained.convert MODEL_ID OUT_DIR [PROGRESS_JSON]
    python -m viz_core.pretrained.convert --all       every installed one, into the cache the app reads

GGUF stores each weight matrix in blocks of 32 or 256 values with a shared scale (Q4_K, Q5_0, Q8_0...):

    w = d * q (- m)     per block, q the stored small integers, d and m the block's scale and offset

gguf's `dequantize` gives w in float32; transformers' own per-family fix-ups are applied (Llama's q/k rows were
permuted for llama.cpp's RoPE, Gemma's norm weights were stored as 1 + w), and each tensor is written as float16
into one safetensors file, one tensor (or one slice of the embedding's rows) at a time. The folder appears in one
rename, so a crash leaves no half-written cache.
"""
from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from . import packaged

ROWS_PER_SLICE = 16384       # embedding rows dequantized at once (262,144 x 640 in float32 would be 671 MB)
STORE = np.float16           # 16-bit storage: 10 mantissa bits hold a 4-8-bit quantized weight exactly enough


class Progress:
    """Writes {"stage", "done", "total"} to a JSON file the server reads (at most ten times a second)."""

    def __init__(self, path: Path | None):
        self.path, self.last = path, 0.0

    def __call__(self, stage: str, done: int = 0, total: int = 0, force: bool = False) -> None:
        now = time.monotonic()
        if self.path is None or (not force and now - self.last < 0.1):
            return
        self.last = now
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"stage": stage, "done": done, "total": total}), "utf-8")
        tmp.replace(self.path)


def source_file(d: packaged.PackagedDecoder, work: Path) -> Path:
    """The GGUF file: inside the package, or assembled from its chunks into work/ (checksum checked either way)."""
    if d.chunked:
        import importlib
        return Path(importlib.import_module(d.module).assemble(work / d.gguf, overwrite=True))
    path = packaged.package_dir(d) / d.gguf
    if packaged.sha256_of(path) != d.sha256:
        raise ValueError(f"{path.name} does not have the expected SHA-256: reinstall {d.package}")
    return path


def convert(d: packaged.PackagedDecoder, out: Path, progress: Progress | None = None) -> Path:
    """Convert decoder d into the folder out (replaced if it exists). Returns out."""
    progress = progress or Progress(None)
    work = out.with_name(out.name + ".tmp")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        progress("assemble", force=True)
        gguf = source_file(d, work)
        progress("tokenizer", force=True)
        config = _config_and_tokenizer(gguf, work)
        _weights(gguf, config, work / packaged.WEIGHTS, progress)
        if d.chunked:
            gguf.unlink()
        _manifest(d, work)
        shutil.rmtree(out, ignore_errors=True)
        work.rename(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def _config_and_tokenizer(gguf: Path, work: Path):
    """transformers' own reading of the GGUF metadata (no tensors): config.json and the fast tokenizer's files."""
    from transformers import AutoConfig, AutoTokenizer
    config = AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    config.dtype = "float16"
    if not getattr(config, "architectures", None):  # GGUF metadata names no class; the causal LM is what it holds
        from transformers import AutoModelForCausalLM
        config.architectures = [AutoModelForCausalLM._model_mapping[type(config)].__name__]
    config.save_pretrained(work)
    AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(work)
    return config


def _name_map(config) -> tuple[dict[str, str], object]:
    """{gguf tensor name: transformers parameter name} and the family's tensor processor, from a model skeleton on
    the meta device (no memory)."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS, TensorProcessor, get_gguf_hf_weights_map
    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(config)
    arch = {"gemma3_text": "gemma3"}.get(config.model_type, config.model_type)
    processor = TENSOR_PROCESSORS.get(arch, TensorProcessor)(config=config.to_dict())
    return get_gguf_hf_weights_map(skeleton, processor), processor


def _weights(gguf: Path, config, target: Path, progress: Progress) -> None:
    """Every tensor dequantized, fixed up and written as float16 into one safetensors file, one at a time."""
    from gguf import GGUFReader
    reader = GGUFReader(str(gguf))
    names, processor = _name_map(config)
    tensors = [t for t in reader.tensors if t.name in names]
    body = target.with_suffix(".body")
    header: dict[str, dict] = {}
    offset = 0
    with body.open("wb") as out:
        for i, tensor in enumerate(tensors):
            progress("weights", i, len(tensors))
            shape = None
            for part in _slices(tensor, processor):
                out.write(np.ascontiguousarray(part, dtype=STORE).tobytes())
                shape = (shape[0] + part.shape[0], *part.shape[1:]) if shape else part.shape
            size = int(np.prod(shape)) * np.dtype(STORE).itemsize
            header[names[tensor.name]] = {"dtype": "F16", "shape": list(shape), "data_offsets": [offset, offset + size]}
            offset += size
    progress("write", len(tensors), len(tensors), force=True)
    _prepend_header(header, body, target)


def _slices(tensor, processor):
    """The tensor dequantized to float32, in slices of rows when it is large, each after the family's fix-up."""
    from gguf import dequantize
    rows = tensor.data.shape[0]
    step = ROWS_PER_SLICE if tensor.data.ndim == 2 and rows > ROWS_PER_SLICE else rows
    for start in range(0, rows, step):
        part = dequantize(tensor.data[start:start + step], tensor.tensor_type)  # (rows, cols) float32
        yield processor.process(weights=part, name=tensor.name).weights


def _prepend_header(header: dict, body: Path, target: Path) -> None:
    """safetensors: 8-byte little-endian header length, the JSON header (padded to 8 bytes), then the data."""
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with target.open("wb") as out, body.open("rb") as data:
        out.write(len(raw).to_bytes(8, "little"))
        out.write(raw)
        shutil.copyfileobj(data, out, 2**22)
    body.unlink()


def _manifest(d: packaged.PackagedDecoder, work: Path) -> None:
    sizes = {p.name: p.stat().st_size for p in sorted(work.iterdir()) if p.is_file()}
    manifest = {"version": packaged.CONVERTER_VERSION, "id": d.id, "source": d.gguf,
                "source_sha256": packaged.source_sha256(d), "quantization": d.quantization, "stored": "float16",
                "sizes": sizes}
    (work / packaged.MANIFEST).write_text(json.dumps(manifest, indent=1), "utf-8")


def main(argv: list[str]) -> int:
    if argv == ["--all"]:  # ahead of time (a container's build step): the server then finds every cache ready
        return max([main([d.id, str(packaged.cache_dir(d))]) for d in packaged.DECODERS if packaged.installed(d)],
                   default=0)
    if len(argv) not in (2, 3):
        print(__doc__.split("\n\n")[1], file=sys.stderr)  # the usage lines
        return 2
    d = packaged.by_id(argv[0])
    if d is None:
        print(f"unknown model {argv[0]!r}; known: {', '.join(x.id for x in packaged.DECODERS)}", file=sys.stderr)
        return 2
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    started = time.monotonic()
    out = Path(argv[1])
    with _exclusive(out):  # two servers (or a server and the tests) sharing one cache convert it once
        if packaged.cache_problem(d, out) is None:
            print(f"{d.id} is already converted in {out}")
            return 0
        convert(d, out, Progress(Path(argv[2]) if len(argv) == 3 else None))
    print(f"converted {d.id} into {out} in {time.monotonic() - started:.1f} s")
    return 0


class _exclusive:
    """An exclusive lock on OUT.lock across processes (flock; released when the process ends, even by a crash)."""

    def __init__(self, out: Path):
        out.parent.mkdir(parents=True, exist_ok=True)
        self.path = out.with_name(out.name + ".lock")

    def __enter__(self):
        import fcntl
        self.file = self.path.open("a")
        fcntl.flock(self.file, fcntl.LOCK_EX)
        return self

    def __exit__(self, *_exc) -> None:
        self.file.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
