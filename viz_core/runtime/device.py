"""Where training runs: the local GPU when there is one (CUDA, or Apple's MPS), else the CPU; what a run may use
there; mixed precision where it helps; and training data moved to the device in blocks, not step by step.

    device = pick_device()                     # cuda > mps > cpu (force_cpu: cpu)
    info = describe(device)                    # kind, name, why, memory budget of one run
    with autocast(device):                     # bf16 on CUDA, nothing (float32) elsewhere
        logits = model(x)
    batches = DeviceBatches(lambda: sample(rng), device)   # one host-to-device copy per block of steps
    src, tgt = batches.next()
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from .settings import env_float

CPU_RUN_BYTES = 1 << 30  # a run on the CPU may use about 1 GiB: the server's memory is shared by many visitors
GPU_SHARE = env_float("AE_GPU_SHARE", 0.5)  # share of the GPU's memory one run may use (the rest: other runs, the
                                            # allocator's slack and the cached models)
BATCH_BLOCK = 32  # training steps whose batches travel to the device in one copy


def pick_device(force_cpu: bool = False) -> torch.device:
    """cuda if available, else Apple's mps, else cpu; force_cpu skips the accelerators."""
    if not force_cpu and torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if not force_cpu and mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def has_gpu() -> bool:
    """True when a GPU (CUDA or MPS) could train here."""
    return pick_device().type != "cpu"


@dataclass(frozen=True)
class DeviceInfo:
    """What a page says of the device a run trains on."""
    kind: str          # "cuda", "mps" or "cpu"
    name: str          # "NVIDIA H200", "Apple GPU" or "CPU"
    why: str           # "gpu" (an accelerator is there), "forced" (the person chose the CPU), "no_gpu"
    budget: int        # bytes one training run may use on it
    total: int | None  # the accelerator's memory in bytes (None: the CPU's is the server's, shared)
    mixed: bool        # True when training runs in bf16 mixed precision there


def describe(device: torch.device | str, forced: bool = False) -> DeviceInfo:
    """The device's kind, name, the reason it was chosen, and the memory budget of one run (memory_budget)."""
    device = torch.device(device)
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        name, total = props.name, int(props.total_memory)
    elif device.type == "mps":
        name, total = "Apple GPU", None
    else:
        name, total = "CPU", None
    why = "gpu" if device.type != "cpu" else ("forced" if forced and has_gpu() else "no_gpu")
    return DeviceInfo(device.type, name, why, memory_budget(device), total, uses_bf16(device))


def memory_budget(device: torch.device | str) -> int:
    """Bytes one training run may use: GPU_SHARE of a CUDA device's memory, else CPU_RUN_BYTES (also on MPS,
    whose memory is the machine's)."""
    device = torch.device(device)
    if device.type == "cuda":
        return int(GPU_SHARE * torch.cuda.get_device_properties(device).total_memory)
    return CPU_RUN_BYTES


def uses_bf16(device: torch.device | str) -> bool:
    """bf16 autocast on CUDA devices that support it; float32 everywhere else (on a CPU bf16 is slower and
    rounds more)."""
    device = torch.device(device)
    return device.type == "cuda" and torch.cuda.is_bf16_supported()


def precision(device: torch.device | str) -> str:
    """"bf16" (mixed: bf16 products, float32 weights and reductions) or "float32": how a run trains there."""
    return "bf16" if uses_bf16(device) else "float32"


def autocast(device: torch.device | str):
    """Mixed precision for a forward pass: matrix products in bf16 on CUDA, reductions (softmax, losses, norms)
    in float32 by autocast's own rules; on any other device a context that changes nothing."""
    device = torch.device(device)
    if not uses_bf16(device):
        return contextlib.nullcontext()
    return torch.autocast(device_type="cuda", dtype=torch.bfloat16)


def _as_array(x) -> np.ndarray:
    return x.numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


Block = list[tuple[np.ndarray, ...]]  # the arrays of several batches, batch by batch


def pack(block: Block) -> dict[np.dtype, np.ndarray]:
    """The arrays of a block, flattened and joined into one buffer per dtype, in order: {dtype: (total size,)}."""
    parts: dict[np.dtype, list[np.ndarray]] = {}
    for batch in block:
        for a in batch:
            parts.setdefault(a.dtype, []).append(a.ravel())
    return {dt: np.concatenate(p) for dt, p in parts.items()}


def unpack(flat: dict, block: Block) -> list[tuple[torch.Tensor, ...]]:
    """Views of the packed buffers (tensors, on any device) in the shapes of the block's arrays: pack's inverse."""
    offsets = dict.fromkeys(flat, 0)
    out = []
    for batch in block:
        views = []
        for a in batch:
            start = offsets[a.dtype]
            views.append(flat[a.dtype][start: start + a.size].view(a.shape))
            offsets[a.dtype] = start + a.size
        out.append(tuple(views))
    return out


class DeviceBatches:
    """Batches made on the host (numpy arrays or CPU tensors, each of its own shape), moved to the device
    BATCH_BLOCK at a time: the block's arrays are packed into one flat buffer per dtype, copied once, and handed
    out as views. The batches and their order are exactly those of calling make() once per step."""

    def __init__(self, make: Callable[[], tuple], device: torch.device | str, block: int = BATCH_BLOCK):
        self.make, self.device, self.block = make, torch.device(device), max(1, int(block))
        self._ready: list[tuple[torch.Tensor, ...]] = []

    def next(self) -> tuple[torch.Tensor, ...]:
        """The next batch: a tuple of tensors on the device."""
        if not self._ready:
            host = [tuple(map(_as_array, self.make())) for _ in range(self.block)]
            if self.device.type == "cpu":  # nothing to copy: the arrays are shared, not copied
                self._ready = [tuple(torch.from_numpy(a) for a in batch) for batch in host]
            else:
                flat = {dt: torch.from_numpy(buf).to(self.device) for dt, buf in pack(host).items()}
                self._ready = unpack(flat, host)
        return self._ready.pop(0)
