"""Where training runs: the local GPU when there is one (CUDA, or Apple's MPS), else the CPU."""
from __future__ import annotations

import torch


def pick_device(force_cpu: bool = False) -> torch.device:
    """cuda if available, else Apple's mps, else cpu; force_cpu skips the accelerators."""
    if not force_cpu and torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if not force_cpu and mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
