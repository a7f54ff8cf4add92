"""tcjit.explain(fn)(*args): what tcjit made of one call of fn.

Like torch._dynamo.explain: the graphs, the graph breaks with their reasons
and user code locations, the ops of each graph, the guards and the compile
times.  The call runs for real (its side effects happen once).
"""
from . import _C
from ._backends import Backend
from .graph import Graph
from ._wrap import CompiledMethod, CompiledModule, wrap


class BreakReason:
    """One graph break: what was unsupported, where, and what tcjit did."""

    def __init__(self, d):
        self.reason = d["reason"]
        self.filename = d["filename"]
        self.lineno = d["lineno"]
        self.hint = d["hint"]
        self.user_stack = [f'File "{d["filename"]}", line {d["lineno"]}, '
                           f'in {d["name"]}']

    def __repr__(self):
        return (f"BreakReason({self.reason!r}, {self.filename}:"
                f"{self.lineno})")


class ExplainOutput:
    def __init__(self, graphs, breaks, guards, compile_times, result,
                 skipped=()):
        self.graphs = graphs
        # frames left to Python whose trace stopped at something
        # unsupported before any tensor work (no graph, so no break)
        self.skipped_frames = list(skipped)
        self.graph_count = len(graphs)
        self.break_reasons = breaks
        self.graph_break_count = len(breaks)
        self.ops_per_graph = [g.ops() for g in graphs]
        self.op_count = sum(len(ops) for ops in self.ops_per_graph)
        self.guards = guards
        self.compile_times = compile_times
        self.result = result

    def __str__(self):
        out = [f"Graph Count: {self.graph_count}",
               f"Graph Break Count: {self.graph_break_count}",
               f"Op Count: {self.op_count}",
               "Break Reasons:"]
        for i, b in enumerate(self.break_reasons, 1):
            out.append(f"  Break Reason {i}:")
            out.append(f"    Reason: {b.reason}")
            out.append("    User Stack:")
            out.extend(f"      {s}" for s in b.user_stack)
        if self.skipped_frames:
            out.append("Skipped Frames (no tensor work before):")
            for b in self.skipped_frames:
                out.append(f"    Reason: {b.reason}")
                out.extend(f"      {s}" for s in b.user_stack)
        out.append("Ops per Graph:")
        for i, ops in enumerate(self.ops_per_graph, 1):
            out.append(f"  Ops {i}:")
            out.extend(f"    {op}" for op in ops)
        out.append("Out Guards:")
        for lines in self.guards:
            out.extend(f"  {line}" for line in lines)
        out.append("Compile Times: " + ", ".join(f"{t * 1e3:.1f} ms"
                                                 for t in self.compile_times))
        return "\n".join(out)


def _unwrapped(fn):
    """What a tcjit.compile result compiles (explain(tcjit.compile(m))
    explains m, as torch._dynamo.explain accepts compiled callables)."""
    if isinstance(fn, CompiledModule):
        return fn._orig_mod
    if isinstance(fn, (_C.CompiledFunction, CompiledMethod)):
        return fn.__wrapped__
    return fn


def explain(fn):
    """``tcjit.explain(fn)(*args, **kwargs)`` -> ExplainOutput."""
    def run(*args, **kwargs):
        graphs, breaks, guards, times, skipped = [], [], [], [], []

        def record(event, data):
            if event == "graph":
                graphs.append(Graph(*data))
            elif event == "break":
                breaks.append(BreakReason(data))
            elif event == "skip":
                skipped.append(BreakReason(dict(data, hint="")))
            elif event == "guards":
                guards.append(list(data))
            elif event == "compile_time":
                times.append(data)

        # tcjit's own code generators run it: the result is the real one
        compiled = wrap(_unwrapped(fn), Backend("auto"))
        _C.set_recorder(record)
        try:
            result = compiled(*args, **kwargs)
        finally:
            _C.set_recorder(None)
        return ExplainOutput(graphs, breaks, guards, times, result, skipped)
    return run
