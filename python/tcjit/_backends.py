"""Backends: "auto" (tcjit's code generators), "eager", or a callable
``backend(graph, example_inputs) -> callable``, as Dynamo custom backends."""
import torch

from .graph import Graph


class Backend:
    """What a cache entry is compiled for.  The C runtime matches entries to
    calls by the identity of this object and reads is_auto/fullgraph once
    per compile."""

    def __init__(self, backend="auto", fullgraph=False, dynamic=None):
        if isinstance(backend, str):
            if backend not in ("auto", "eager"):
                raise ValueError(f"unknown tcjit backend {backend!r}; use "
                                 f"'auto', 'eager' or a callable")
            self.name, self.fn = backend, None
        elif callable(backend):
            self.name = getattr(backend, "__name__", "custom")
            self.fn = backend
        else:
            raise TypeError(f"backend must be a str or a callable, got "
                            f"{type(backend).__name__}")
        self.is_auto = self.fn is None and self.name == "auto"
        self.fullgraph = bool(fullgraph)
        if dynamic not in (None, True, False):
            raise TypeError(f"dynamic must be None, True or False, got "
                            f"{dynamic!r}")
        # None: automatic dynamic shapes (size-generic kernels after a
        # size change); True: from the first compile; False: never
        self.dynamic = dynamic

    def __repr__(self):
        return (f"tcjit.Backend({self.name!r}, fullgraph={self.fullgraph}, "
                f"dynamic={self.dynamic})")

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
