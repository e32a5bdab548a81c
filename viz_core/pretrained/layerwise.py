"""The gradient of a decoder's output with respect to its input embeddings, one layer at a time.

A backward pass through all L layers keeps every layer's activations until the gradient is taken: for SmolLM2's 30
layers at 128 tokens, about 280 MB per input row. Here (gradient checkpointing by hand, without touching the shared
model) the forward pass runs without gradients and keeps only what each layer was called with; the backward pass
then walks the layers from the last to the first, running one layer again with gradients at a time:

    h_0 = embed(x),  h_{l+1} = layer_l(h_l),  f = score(norm_f(h_L))
    g_L = df/dh_L;   g_l = (dh_{l+1}/dh_l)^T g_{l+1}   (one layer re-run);   df/dx = (dh_0/dx)^T g_0

Memory: the L layer inputs (L x N x d) and one layer's activations; compute: one forward pass more. The numbers are
those of the full backward pass (tests/pretrained/test_layerwise.py).

The same kept inputs serve head ablation (ablated_from_layer_inputs): knocking out a head of layer l changes nothing
below l, so its row starts at layer l.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

import torch

from ..runtime.hooks import thread_hooks
from .ablation import _layers
from .lens import final_norm


# what a decoder whose layers are not called as this module expects raises (a layer's input not its first argument or
# hidden_states, a layer that does not broadcast a batch of one's masks): the callers fall back to whole passes
LAYERWISE_ERRORS = (RuntimeError, TypeError, KeyError, IndexError, ValueError)


class _StopAtFirstLayer(Exception):
    """Raised by the pre-hook of layer 0 once its input is taken: the rest of that forward pass is not needed."""


def layer_blocks(m) -> list[torch.nn.Module] | None:
    """The decoder's layers in order, or None where this path does not apply (not a decoder-only model, or its
    layers or final norm cannot be found)."""
    if m.kind != "decoder" or final_norm(m.model) is None:
        return None
    try:
        return [block for _, block in _layers(m, "self")]
    except Exception:  # noqa: BLE001 - InputError: heads not found by name; the full backward pass serves
        return None


def _hidden_of(args: tuple, kwargs: dict) -> torch.Tensor:
    return args[0] if args else kwargs["hidden_states"]


def _with_hidden(args: tuple, kwargs: dict, h: torch.Tensor) -> tuple[tuple, dict]:
    return ((h, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": h})


def _first(out) -> torch.Tensor:
    """A layer's output hidden states (layers return a tensor or a tuple that starts with it)."""
    return out[0] if isinstance(out, (tuple, list)) else out


def _calls(m, blocks: list[torch.nn.Module], inputs: dict) -> tuple[list[tuple[tuple, dict]], torch.Tensor]:
    """A forward pass without gradients: each layer's (args, kwargs) as the model called it, and the last layer's
    output h_L."""
    calls: list = [None] * len(blocks)
    last: list = [None]

    def keep(i: int):
        def hook(_module, args, kwargs):
            calls[i] = (args, kwargs)
        return hook

    def keep_last(_module, _args, output):
        last[0] = _first(output)

    with torch.no_grad(), thread_hooks(pre=[(b, keep(i), True) for i, b in enumerate(blocks)],
                                       forward=[(blocks[-1], keep_last)]):
        m.model(**inputs, use_cache=False, return_dict=True)
    if any(c is None for c in calls) or last[0] is None:
        raise RuntimeError("a layer was not called with its hidden states")
    return calls, last[0]


def value_and_grad(m, blocks: list[torch.nn.Module], inputs: dict, embeds: torch.Tensor,
                   score_of: Callable[[list], torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(f (B,), df/d embeds (B, N, d)) of score_of([outputs]) for the model on inputs_embeds=embeds (B, N, d) and the
    other inputs, one layer's activations at a time (module docstring)."""
    calls, h_last = _calls(m, blocks, {**inputs, "inputs_embeds": embeds.detach()})
    norm = final_norm(m.model)
    with torch.enable_grad():
        h = h_last.detach().requires_grad_(True)  # (B, N, d)
        f = score_of([SimpleNamespace(last_hidden_state=norm(h))])  # (B,)
        (g,) = torch.autograd.grad(f.sum(), h)  # (B, N, d)
        for block, (args, kwargs) in zip(reversed(blocks), reversed(calls)):
            h = _hidden_of(args, kwargs).detach().requires_grad_(True)  # (B, N, d): this layer's input
            args2, kwargs2 = _with_hidden(args, kwargs, h)
            (g,) = torch.autograd.grad(_first(block(*args2, **kwargs2)), h, grad_outputs=g)
        return f.detach(), _embedding_grad(m, blocks[0], inputs, embeds, g)


def _embedding_grad(m, first: torch.nn.Module, inputs: dict, embeds: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """(dh_0/d embeds)^T g: the model from its input embeddings to layer 0's input (a scale, position embeddings),
    run with gradients and stopped there."""
    x = embeds.detach().requires_grad_(True)
    taken: list = []

    def stop(_module, args, kwargs):
        taken.append(_hidden_of(args, kwargs))
        raise _StopAtFirstLayer

    with torch.enable_grad(), thread_hooks(pre=[(first, stop, True)]):
        try:
            m.model(**inputs, inputs_embeds=x, use_cache=False, return_dict=True)
        except _StopAtFirstLayer:
            pass
        (gx,) = torch.autograd.grad(taken[0], x, grad_outputs=g)
    return gx


def ablated_from_layer_inputs(m, blocks: list[torch.nn.Module], inputs: dict, plan: list[tuple[int, int]],
                              projections: list[torch.nn.Module], fills, hook_for, chunk: int,
                              score_of: Callable[[list], torch.Tensor]) -> list[float]:
    """f with head plan[b] = (layer, head) knocked out, for every b, each ablated row run from its own layer on.

    Layers below l are the same for every ablation of layer l: one intact pass keeps every layer's input h_l, and
    the ablations of layer l run layers l..L-1 only, from h_l (about half the layer passes of running every
    ablation from the embeddings). hook_for(rows, heads, fill) is the W_O pre-hook that knocks the heads out;
    chunk: rows per pass."""
    calls, _ = _calls(m, blocks, inputs)
    norm = final_norm(m.model)
    out = [0.0] * len(plan)
    by_layer: dict[int, list[int]] = {}
    for b, (layer, _head) in enumerate(plan):
        by_layer.setdefault(layer, []).append(b)
    for layer, rows in sorted(by_layer.items()):
        for start in range(0, len(rows), chunk):
            sub = rows[start:start + chunk]
            hook = hook_for(torch.arange(len(sub)), torch.tensor([plan[b][1] for b in sub]),
                            None if fills is None else fills[layer])
            h = _hidden_of(*calls[layer]).repeat(len(sub), 1, 1)  # (k, N, d): layer l's intact input, k times
            with thread_hooks(pre=[(projections[layer], hook)]), torch.inference_mode():
                for block, (args, kwargs) in zip(blocks[layer:], calls[layer:]):
                    args2, kwargs2 = _with_hidden(args, kwargs, h)
                    h = _first(block(*args2, **kwargs2))  # (k, N, d)
                f = score_of([SimpleNamespace(last_hidden_state=norm(h))])  # (k,)
            for b, value in zip(sub, f.float().tolist()):
                out[b] = value
    return out
