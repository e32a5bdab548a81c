"""Hooks on a shared model that act only in the thread that asked for them.

A pretrained model is loaded once and shared by every visitor's session, each running in its own thread. A forward
hook registered with `module.register_forward_hook` fires for *every* thread's forward pass: while one session
copies its attention out of a layer, another session's pass would fill the first one's buffer (same sentence length)
or another session's ablation hooks would knock heads out of an ordinary pass; with many sessions each pass would
also run everyone's hooks. Here each hooked module gets one permanent dispatcher, added the first time the
module is hooked (under a lock), that calls only what the *current thread* registered for it:

    with thread_hooks(forward=[(module, fn)], pre=[(module, fn, with_kwargs)]):
        model(**inputs)        # fn sees this thread's pass only; other threads' passes run untouched

fn has torch's hook signatures: forward fn(module, args, output) -> output or None; pre fn(module, args) -> args or
None, or with_kwargs fn(module, args, kwargs) -> (args, kwargs) or None. After the first use, registering a hook
never touches the model again: only this thread's own table.
"""
from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator

import torch

_local = threading.local()
_install_lock = threading.Lock()
_ready: "weakref.WeakKeyDictionary[torch.nn.Module, bool]" = weakref.WeakKeyDictionary()


def _table(kind: str) -> dict[int, list[Callable]]:
    tables = getattr(_local, "tables", None)
    if tables is None:
        tables = _local.tables = {"forward": {}, "pre": {}}
    return tables[kind]


def _forward_dispatch(module: torch.nn.Module, args: tuple, output):
    for fn in _table("forward").get(id(module), ()):
        result = fn(module, args, output)
        output = output if result is None else result
    return output


def _pre_dispatch(module: torch.nn.Module, args: tuple, kwargs: dict):
    hooks = _table("pre").get(id(module))
    if not hooks:
        return None
    for fn in hooks:
        result = fn(module, args, kwargs)
        if result is not None:
            args, kwargs = result
    return args, kwargs


def _install(module: torch.nn.Module) -> None:
    """Give a module its two dispatchers, once per module in this process."""
    if module in _ready:
        return
    with _install_lock:
        if module not in _ready:
            module.register_forward_pre_hook(_pre_dispatch, with_kwargs=True)
            module.register_forward_hook(_forward_dispatch)
            _ready[module] = True


def _with_kwargs(fn: Callable, with_kwargs: bool) -> Callable:
    """A pre-hook as fn(module, args, kwargs) -> (args, kwargs) | None, whichever form it was written in."""
    if with_kwargs:
        return fn

    def adapted(module, args, kwargs):
        result = fn(module, args)
        if result is None:
            return None
        return (result if isinstance(result, tuple) else (result,)), kwargs
    return adapted


@contextlib.contextmanager
def thread_hooks(forward: Iterable[tuple[torch.nn.Module, Callable]] = (),
                 pre: Iterable[tuple] = ()) -> Iterator[None]:
    """Hooks for the forward passes of this thread only, removed when the block ends (see the module docstring).
    pre items are (module, fn) or (module, fn, with_kwargs)."""
    added: list[tuple[str, int, Callable]] = []
    try:
        for module, fn in forward:
            _install(module)
            _table("forward").setdefault(id(module), []).append(fn)
            added.append(("forward", id(module), fn))
        for item in pre:
            module, fn, kw = (*item, False) if len(item) == 2 else item
            _install(module)
            wrapped = _with_kwargs(fn, kw)
            _table("pre").setdefault(id(module), []).append(wrapped)
            added.append(("pre", id(module), wrapped))
        yield
    finally:
        for kind, key, fn in reversed(added):
            hooks = _table(kind).get(key)
            if hooks:
                hooks.remove(fn)
                if not hooks:
                    del _table(kind)[key]
