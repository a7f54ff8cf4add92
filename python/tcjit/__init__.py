"""tcjit: a JIT compiler for PyTorch programs, written in C.

    import tcjit
    tcjit.enable()            # compile every frame that works on tensors
    f = tcjit.compile(f)      # or one function (also a decorator)

See README.md and docs/ for logs (TCJIT_LOGS), config and supported ops.
"""
import functools
import sys
import sysconfig
import warnings

# The free-threaded build (3.13t) changes the object and frame layouts the
# frame hook relies on, and runs frames concurrently: refuse it up front
# rather than fail on a missing or mismatched module.
if sysconfig.get_config_var("Py_GIL_DISABLED"):
    raise ImportError(
        "tcjit does not support the free-threaded CPython build (%s, "
        "python%d.%dt); use the default build of CPython 3.11-3.13"
        % (sys.version.split()[0], *sys.version_info[:2]))
if not (3, 11) <= sys.version_info[:2] <= (3, 13):
    raise ImportError("tcjit supports CPython 3.11, 3.12 and 3.13, not %d.%d"
                      % sys.version_info[:2])

import torch  # noqa: E402,F401  (the C runtime needs torch imported first)

from . import _C  # noqa: E402
# the tracer's custom autograd.Function ctx (src/tracer/autofn.c): imported
# here, so no module body runs under the frame hook while a call is traced
from . import _autofn  # noqa: F401
from . import _modes_cudagraphs
from ._backends import Backend, compile_backend as _compile_backend
from ._logging import init_from_env as _init_logs, set_logs
from .config import config
from ._cache import (clear_cache, load_cache_artifacts, save_cache_artifacts,
                     set_cache_dir as _set_cache_dir)
from .explain import ExplainOutput, explain
from .graph import Graph, Node
from ._wrap import CompiledModule, wrap as _wrap

__all__ = ["enable", "disable", "compile", "reset", "counters", "config",
           "set_logs", "Graph", "Node", "Unsupported", "is_enabled", "explain",
           "ExplainOutput", "CompiledModule", "mark_dynamic", "mark_static",
           "save_cache_artifacts", "load_cache_artifacts", "clear_cache"]


class Unsupported(RuntimeError):
    """Raised under fullgraph=True when a function cannot be compiled whole."""


def _warn(message, filename, lineno):
    """RuntimeWarning from the C runtime, attributed to the user's function
    (there is no Python caller frame to point at)."""
    warnings.warn_explicit(message, RuntimeWarning, filename, lineno)


_AUTO = Backend()
_C.set_hooks(__import__("tcjit._logging", fromlist=["emit"]).emit,
             _compile_backend, _warn, _AUTO, Unsupported)
_init_logs()
_set_cache_dir()


def enable():
    """Compile every Python frame that works on tensors from now on."""
    _C.set_enabled(True)


def disable():
    """Stop compiling new frames under enable(); compile() wrappers keep working."""
    _C.set_enabled(False)


def is_enabled():
    return _C.is_enabled()


def compile(fn=None, *, fullgraph=False, backend=None, dynamic=None,
            mode=None, options=None, template=None):
    """Compile one function: ``tcjit.compile(fn)`` or ``@tcjit.compile(...)``.
    fn may also be a bound method or an nn.Module (tcjit.CompiledModule:
    calls run the module's forward compiled, sharing its parameters).

    backend: "auto" (tcjit's kernels; the default unless a template says
    otherwise), "eager" (run the traced graph op by op through torch) or a
    callable ``backend(graph, example_inputs)`` returning a callable, like a
    Dynamo custom backend.  fullgraph=True raises tcjit.Unsupported instead
    of running unsupported code eagerly.  mode ("default",
    "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
    options (a dict of settings) and template (a name in
    tcjit.config.templates) as in docs/modes.md.
    """
    if fn is None:
        # bad names raise here, at the decorator's call, too
        Backend(backend, fullgraph, dynamic, mode=mode, options=options,
                template=template)
        return functools.partial(compile, fullgraph=fullgraph, backend=backend,
                                 dynamic=dynamic, mode=mode, options=options,
                                 template=template)
    compiled = _wrap(fn, Backend(backend, fullgraph, dynamic, mode=mode,
                                 options=options, template=template))
    if not isinstance(fn, torch.nn.Module):
        functools.update_wrapper(compiled, fn)
    return compiled


def _dims(t, index):
    return [index] if isinstance(index, int) else list(index)


def mark_dynamic(t, index):
    """Declare dim(s) ``index`` of tensor t dynamic, as
    torch._dynamo.mark_dynamic: a function compiled with t as an input
    makes size-generic kernels from its first compile (docs/dynamic.md)."""
    dims = _dims(t, index)
    for d in dims:
        if not -t.dim() <= d < max(t.dim(), 1):
            raise IndexError(f"mark_dynamic: dim {d} out of range for a "
                             f"{t.dim()}-d tensor")
    if not hasattr(t, "_dynamo_dynamic_indices"):
        t._dynamo_dynamic_indices = set()
    t._dynamo_dynamic_indices.update(d % max(t.dim(), 1) for d in dims)


def mark_static(t, index):
    """Keep dim(s) ``index`` of tensor t static, as
    torch._dynamo.mark_static: a change of that size recompiles for the new
    size instead of turning on dynamic shapes."""
    dims = _dims(t, index)
    if not hasattr(t, "_dynamo_static_indices"):
        t._dynamo_static_indices = set()
    t._dynamo_static_indices.update(d % max(t.dim(), 1) for d in dims)


def reset():
    """Forget every compiled entry and zero the counters."""
    _C.reset()
    _modes_cudagraphs.reset()


def counters():
    """Counts since the last reset(): frames_compiled, cache_hits,
    cache_misses, recompiles, graphs, kernels_compiled, eager_fallbacks,
    frames_skipped, dynamic_reuses, extern_meta_*, and the on-disk cache's
    kernel_cache_hits / _misses (kernels found / compiled), _writes,
    _corrupt (invalid entries dropped), _evicted (docs/cache.md)."""
    return _C.counters()
