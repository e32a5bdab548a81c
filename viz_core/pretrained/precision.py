"""Hold a decoder's weight matrices in 16 bits and compute everything in float32.

A large vocabulary makes the embedding most of a small model: Gemma 3 270M's is 262,144 x 640, 671 MB of its
1.07 GB in float32. Kept in float16 (the converted cache stores every weight so), it costs 335 MB. Two places read
the 16-bit matrix E (V, d_model):

    embed(ids) = E[ids] (x the model's scale), cast to float32 as it leaves the embedding
    logits(h)  = h E^T, computed in float32 over slices of the vocabulary (never a float32 copy of all of E)

The blocks' linear layers keep their 16-bit weights too (191 MB instead of 383 MB for Gemma) and cast each one to
float32 as it is used, y = x float32(W)^T + b: every float16 value is exactly a float32 value, so the outputs are
those of a float32 copy of the model. Norms, biases and buffers are float32.
"""
from __future__ import annotations

import ctypes
import mmap
import sys
import threading
from pathlib import Path

import torch
from torch import nn

VOCAB_SLICE = 1024    # rows of E cast to float32 at once (2.6 MB for d = 640: the slice stays in cache; 32768 rows took 3-5x longer)


class SlicedLinear(nn.Module):
    """logits = x W^T for a 16-bit W (V, d), in float32, one slice of W's rows at a time. Keeps `weight` as the
    same Parameter as the input embedding (tied), so the model holds one copy."""

    def __init__(self, weight: nn.Parameter, bias: torch.Tensor | None = None):
        super().__init__()
        self.weight = weight
        self.bias = bias
        self.out_features, self.in_features = weight.shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = _SlicedMatmul.apply(x.float(), self.weight)  # (..., V)
        return out if self.bias is None else out + self.bias.float()


def _sliced(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x W^T (..., d) -> (..., V) in float32, W's rows cast a slice at a time."""
    out = x.new_empty((*x.shape[:-1], weight.shape[0]))  # (..., V)
    for start in range(0, weight.shape[0], VOCAB_SLICE):
        out[..., start:start + VOCAB_SLICE] = x @ _as_float32(weight[start:start + VOCAB_SLICE]).T  # (..., slice)
    return out


class _SlicedMatmul(torch.autograd.Function):
    """y = x W^T with dy/dx = g W, both a slice of W at a time: autograd would keep a float32 copy of all of W for
    the backward pass (671 MB for Gemma) where integrated gradients need only the gradient of x."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(weight)
        return _sliced(x, weight)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (weight,) = ctx.saved_tensors
        gx = grad.new_zeros((*grad.shape[:-1], weight.shape[1]))  # (..., d)
        for start in range(0, weight.shape[0], VOCAB_SLICE):
            gx += grad[..., start:start + VOCAB_SLICE] @ _as_float32(weight[start:start + VOCAB_SLICE])  # (..., d)
        return gx, None


def _file_mappings() -> list[tuple[int, int]]:
    """[start, end) of every file-backed mapping of this process (Linux's /proc/self/maps; [] elsewhere)."""
    try:
        lines = Path("/proc/self/maps").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith("/"):
            start, end = (int(x, 16) for x in fields[0].split("-"))
            found.append((start, end))
    return found


def release_file_pages(tensors: list[torch.Tensor]) -> None:
    """Drop from this process the pages of tensors that lie in a file mapping and are no longer used.

    transformers maps the safetensors file and reads the 16-bit weights from it; once a weight is copied to float32,
    its pages of the file stay resident (190 MB for Gemma) for as long as the embedding keeps the mapping open.
    madvise(MADV_DONTNEED) gives them back; the file is only read, so nothing is lost (a later read would reload
    them). Only whole pages inside a file mapping are touched, never a heap page another tensor might share."""
    if not sys.platform.startswith("linux"):
        return
    maps = _file_mappings()
    page = mmap.PAGESIZE
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    for t in tensors:
        begin, end = t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()
        for m_start, m_end in maps:
            lo, hi = max(begin, m_start), min(end, m_end)
            lo, hi = -(-lo // page) * page, hi // page * page  # whole pages inside the tensor and the mapping
            if hi > lo:
                libc.madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), _MADV_DONTNEED)


_MADV_DONTNEED = 4


class Float32From16Linear(nn.Linear):
    """An nn.Linear whose weight is stored in 16 bits and used in float32 (exactly: see the module docstring).
    Instances of nn.Linear get this class in place, so their names, hooks and submodule paths stay as they were."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.is_grad_enabled():  # nothing to differentiate: skip the autograd Function's own Python work
            return torch.nn.functional.linear(x, _as_float32(self.weight), self.bias)  # (..., out)
        return _Linear16.apply(x, self.weight, self.bias)


class _Linear16(torch.autograd.Function):
    """y = x float32(W)^T + b, with dy/dx = g float32(W): the backward pass keeps the 16-bit W and casts it again,
    where autograd would keep every layer's float32 copy (383 MB for Gemma) until the gradient is taken."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        ctx.save_for_backward(weight)
        return torch.nn.functional.linear(x, _as_float32(weight), bias)  # (..., out)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (weight,) = ctx.saved_tensors
        return grad @ _as_float32(weight), None, None  # (..., in)


_scratch = threading.local()


def _as_float32(weight: torch.Tensor) -> torch.Tensor:
    """weight cast to float32 into this thread's scratch buffer, valid until the thread's next cast. A fresh copy
    per call (2.5-5 MB) left holes in the heap between the activations a backward pass keeps: integrated
    gradients' peak grew by 300 MB."""
    buf = getattr(_scratch, "buf", None)
    if buf is None or buf.numel() < weight.numel():
        with torch.inference_mode(False):  # a normal tensor: written in and out of inference mode
            buf = _scratch.buf = torch.empty(weight.numel())
    return buf[:weight.numel()].view(weight.shape).copy_(weight)


def _to_float32(embedding_out: torch.Tensor) -> torch.Tensor:
    return embedding_out.float()


def float32_compute(causal: nn.Module) -> None:
    """Compute every layer in float32 from 16-bit weights: the input embedding and the blocks' linear layers keep
    their 16-bit weights (Float32From16Linear); norms, biases, buffers and an untied output head become float32; a
    tied head reads the embedding through SlicedLinear."""
    emb = causal.get_input_embeddings()
    head = causal.get_output_embeddings()
    tied = head is not None and getattr(head, "weight", None) is emb.weight
    kept = {id(emb.weight)}
    for module in causal.modules():
        if type(module) is nn.Linear and module is not head:
            module.__class__ = Float32From16Linear
            kept.add(id(module.weight))
    replaced = []
    for p in causal.parameters():
        if id(p) not in kept and p.is_floating_point():
            replaced.append(p.data)
            p.data = p.data.float()
    release_file_pages(replaced)
    for module in causal.modules():
        for name, buf in module.named_buffers(recurse=False):
            if buf.is_floating_point() and buf.dtype != torch.float32:
                setattr(module, name, buf.float())
    emb.register_forward_hook(lambda _m, _i, out: _to_float32(out))
    if tied:
        causal.set_output_embeddings(SlicedLinear(emb.weight, getattr(head, "bias", None)))
    causal.config.dtype = torch.float32
