"""What tcjit.compile / tcjit.explain wrap: a function, a bound method or
an nn.Module, always through the C CompiledFunction of a plain function."""
import types

import torch

from . import _C


def _has_hooks(module):
    from torch.nn.modules import module as m
    return bool(module._forward_hooks or module._forward_pre_hooks
                or module._backward_hooks or module._backward_pre_hooks
                or m._global_forward_hooks or m._global_forward_pre_hooks
                or m._global_backward_hooks or m._global_backward_pre_hooks)


class CompiledModule:
    """``tcjit.compile(module)``: calls run ``type(module).forward`` compiled
    (so every instance of a class shares its compiled code, keyed by guards)
    on the very module, whose parameters and buffers are read on each call.
    A module with hooks (or an instance-level ``forward``) is called as
    usual, eagerly, so the hooks run."""

    def __init__(self, module, backend):
        self.__dict__["_orig_mod"] = module
        forward = type(module).forward
        self.__dict__["_forward"] = _C.CompiledFunction(forward, backend)

    def __call__(self, *args, **kwargs):
        m = self._orig_mod
        if _has_hooks(m) or "forward" in m.__dict__:
            return m(*args, **kwargs)
        return self._forward(m, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._orig_mod, name)

    def __setattr__(self, name, value):
        setattr(self._orig_mod, name, value)

    def __repr__(self):
        return f"tcjit.CompiledModule({self._orig_mod!r})"


class CompiledMethod:
    """A bound method compiled: its function compiled, self bound."""

    def __init__(self, method, backend):
        self.__self__ = method.__self__
        self.__func__ = _C.CompiledFunction(method.__func__, backend)

    def __call__(self, *args, **kwargs):
        return self.__func__(self.__self__, *args, **kwargs)


def wrap(fn, backend):
    if isinstance(fn, torch.nn.Module):
        return CompiledModule(fn, backend)
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__,
                                                        types.FunctionType):
        return CompiledMethod(fn, backend)
    return _C.CompiledFunction(fn, backend)
