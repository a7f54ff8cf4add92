"""Backends: "auto" (tcjit's code generators), "eager", or a callable
``backend(graph, example_inputs) -> callable``, as Dynamo custom backends."""
import torch

from . import _modes
from .graph import Graph


class Backend:
    """What a cache entry is compiled for.  The C runtime matches entries to
    calls by the identity of this object and reads is_auto/fullgraph and
    the options (option()) once per compile.

    backend None: "auto" unless a template says otherwise.  mode, options
    and template are tcjit.compile's (docs/modes.md); they are checked
    here, at the compile() call."""

    def __init__(self, backend=None, fullgraph=False, dynamic=None, *,
                 mode=None, options=None, template=None):
        from .config import config
        t_backend, self.options = _modes.per_compile(mode, options, template,
                                                     config.templates)
        self.fn = None
        if backend is None:
            self.name = t_backend
        elif isinstance(backend, str):
            if backend not in _modes.BACKENDS:
                raise ValueError(f"unknown tcjit backend {backend!r}; use "
                                 f"'auto', 'eager' or a callable")
            self.name = backend
        elif callable(backend):
            self.name = getattr(backend, "__name__", "custom")
            self.fn = backend
        else:
            raise TypeError(f"backend must be a str or a callable, got "
                            f"{type(backend).__name__}")
        self.fullgraph = bool(fullgraph)
        if dynamic not in (None, True, False):
            raise TypeError(f"dynamic must be None, True or False, got "
                            f"{dynamic!r}")
        # None: automatic dynamic shapes (size-generic kernels after a
        # size change); True: from the first compile; False: never
        self.dynamic = dynamic

    def settings(self):
        """(backend name, {option: value}) in effect for a compile now."""
        from .config import config
        name, values = _modes.effective(config, self.name, self.options)
        return name or "auto", values

    def option(self, name):
        """The effective value of option name for a compile now."""
        values = self.settings()[1]
        if name not in values:
            raise ValueError(f"unknown tcjit option {name!r}; valid: "
                             f"{', '.join(values)}")
        return values[name]

    @property
    def is_auto(self):
        return self.fn is None and self.settings()[0] == "auto"

    def __repr__(self):
        opts = "".join(f", {k}={v}" for k, v in self.options.items())
        return (f"tcjit.Backend({self.name or 'auto'!r}, fullgraph="
                f"{self.fullgraph}, dynamic={self.dynamic}{opts})")

    def compile(self, desc, text, example_inputs):
        graph = Graph(desc, text)
        if self.fn is None:
            return graph
        compiled = self.fn(graph, list(example_inputs))
        if not callable(compiled):
            raise TypeError(f"tcjit backend {self.name!r} returned "
                            f"{type(compiled).__name__}, expected a callable")
        return lambda *args: _as_tuple(compiled(*args))


def _as_tuple(out):
    if isinstance(out, torch.Tensor):
        return (out,)
    return tuple(out)


def compile_backend(backend, desc, text, example_inputs):
    """Called by the C runtime for non-"auto" backends."""
    return backend.compile(desc, text, example_inputs)
