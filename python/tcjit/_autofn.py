"""Custom torch.autograd.Function subclasses under tcjit
(src/tracer/autofn.c).

The tracer inlines ``cls.forward`` (and ``cls.setup_context``) on a ctx
it models (TracedFunctionCtx: its methods only record their arguments,
which the tracer reads afterwards), with grad mode off as
_FunctionBase.apply runs it, so forward's ops fuse into the caller's
graph.

When the call records an autograd graph (grad mode on, a tensor argument
requires grad), the traced forward's tensor results are not what the
caller gets: one extern node of the graph (a Link, called with the
forward's inputs, results and saved tensors) returns them through _Apply,
a torch.autograd.Function whose backward is the user's ``cls.backward``
on a ctx rebuilt from what forward stored.  The training plan keeps the
autograd graph of that call (python/tcjit/_autograd.py _Keep, "vjp"), so
the compiled node's backward runs the user's backward exactly where
eager's would, with eager's ctx.needs_input_grad, saved tensors (version
checks included), non-differentiable outputs and materialized gradients;
a double backward replays it under torch's autograd (once_differentiable
raises as in eager).
"""
import threading

import torch


class TracedFunctionCtx:
    def __init__(self, needs_input_grad):
        # as eager's: one bool per argument, a tensor's requires_grad
        self.needs_input_grad = needs_input_grad
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        self.to_save = tensors

    def save_for_forward(self, *tensors):
        self.saved_for_forward = tensors

    def mark_non_differentiable(self, *args):
        self.non_differentiable = args

    def set_materialize_grads(self, value):
        self.materialize_grads = value

    def mark_dirty(self, *args):
        self.dirty_tensors = args


# set by the training plan while the compiled forward calls a Link whose
# autograd graph it keeps (_autograd._Keep)
KEEPING = threading.local()


class Link:
    """One traced call cls.apply(*args) that records a graph, as the
    extern node's callable: Link(*operands) -> the forward's tensor
    results, through _Apply.

    operands: the graph values the call reads (deduplicated).  inputs:
    per forward argument, its operand or -1 (not a tensor).  outputs: per
    tensor result, (its position in forward's result, its operand).
    nresults: the length of forward's tuple, or -1 (one value).  saved:
    per ctx.save_for_backward argument, ("i", argument) an input, ("o",
    output) a result, ("t", operand) another tensor, or None (empty: never
    called).  attrs:
    (name, value, operand or -1) per other ctx attribute.  nondiff: the
    outputs marked non-differentiable."""
    __slots__ = ("cls", "inputs", "outputs", "nresults", "saved", "attrs",
                 "nondiff", "materialize", "__name__", "_key")

    def __init__(self, cls, inputs, outputs, nresults, saved, attrs,
                 nondiff, materialize):
        self.cls, self.inputs, self.outputs = cls, inputs, outputs
        self.nresults, self.saved, self.attrs = nresults, saved, attrs
        self.nondiff, self.materialize = nondiff, materialize
        self.__name__ = f"{cls.__name__}.apply"
        self._key = (cls, inputs, outputs, nresults, saved,
                     tuple((n, type(v), v, k) for n, v, k in attrs),
                     nondiff, materialize)

    def __eq__(self, other):
        return isinstance(other, Link) and self._key == other._key

    def __hash__(self):
        return hash(self._key)

    def __repr__(self):
        return f"<tcjit Function link {self.__name__}>"

    def __call__(self, *ops):
        outs = _Apply.apply(self, *ops)
        if getattr(KEEPING, "on", False):
            # views of the forward's results, which the plan keeps alive
            # (pinned outputs of the compiled forward)
            return outs
        # otherwise a result must not alias a buffer of the compiled code
        return tuple(o.clone() for o in outs)


class _BackwardCtx:
    """The ctx cls.backward gets: what forward stored on its ctx."""

    def __init__(self, link, ctx):
        for name, value, k in link.attrs:
            setattr(self, name, ctx.tensor_attrs[name] if k >= 0 else value)
        need = ctx.needs_input_grad
        self.needs_input_grad = tuple(k >= 0 and need[1 + k]
                                      for k in link.inputs)
        self.materialize_grads = link.materialize
        self.saved_tensors = self.saved_variables = ctx.saved_tensors

    def set_materialize_grads(self, value):
        self.materialize_grads = value


class _Apply(torch.autograd.Function):
    """The user's Function as tcjit's graph calls it: forward returns the
    already computed results, backward calls cls.backward."""

    @staticmethod
    def forward(ctx, link, *ops):
        # new tensors on the results' memory, not views of them (the
        # caller may write a result in place, as eager allows; through a
        # view, autograd would refuse to reach the custom backward)
        outs = tuple(ops[k].detach() for _, k in link.outputs)
        ctx.save_for_backward(*[
            None if s is None
            else ops[link.inputs[s[1]]] if s[0] == "i"
            else outs[s[1]] if s[0] == "o" else ops[s[1]]
            for s in link.saved])
        ctx.tensor_attrs = {n: ops[k] for n, _, k in link.attrs if k >= 0}
        ctx.link = link
        nondiff = [outs[j] for j in link.nondiff]
        if nondiff:
            ctx.mark_non_differentiable(*nondiff)
        ctx.set_materialize_grads(link.materialize)
        return outs

    @staticmethod
    def backward(ctx, *gs):
        link = ctx.link
        cls = link.cls
        grads = [None] * max(link.nresults, 1)
        for (pos, _), g in zip(link.outputs, gs):
            grads[pos] = g
        res = cls.backward(_BackwardCtx(link, ctx), *grads)
        if not isinstance(res, tuple):
            res = (res,)
        n = len(link.inputs)
        name = f"{cls.__name__}Backward"
        if len(res) < n or any(r is not None for r in res[n:]):
            raise RuntimeError(f"function {name} returned an incorrect "
                               f"number of gradients (expected {n}, got "
                               f"{len(res)})")
        out = [None] * (len(ctx.needs_input_grad) - 1)
        for i, (k, r) in enumerate(zip(link.inputs, res)):
            if r is None:
                continue
            if k < 0:
                raise RuntimeError(f"function {name} returned a gradient "
                                   f"different than None at position "
                                   f"{i + 1}, but the corresponding forward "
                                   f"input was not a Variable")
            out[k] = r if out[k] is None else out[k] + r
        return (None, *out)


def apply_takes_keywords():
    """Whether this torch's Function.apply accepts keyword arguments (torch
    2.13 binds them to forward's signature; 2.11 raises TypeError "apply()
    takes no keyword arguments").  The tracer binds keywords only where
    eager does; elsewhere the call is a graph break and eager raises."""
    global _APPLY_KEYWORDS
    if _APPLY_KEYWORDS is None:
        class _Probe(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, k=0):
                return x

            @staticmethod
            def backward(ctx, g):
                return g, None
        try:
            with torch.no_grad():
                _Probe.apply(torch.zeros(1), k=1)
            _APPLY_KEYWORDS = True
        except TypeError:
            _APPLY_KEYWORDS = False
    return _APPLY_KEYWORDS


_APPLY_KEYWORDS = None
