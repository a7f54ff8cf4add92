"""tcjit.Graph: the traced graph as custom backends and tests see it.

Calling a Graph runs it op by op through torch (backend="eager"): the
reference the compiled kernels are checked against.  How an op runs comes
from its registry entry (src/graph/ops.c, ``tcjit._C.op_table()``): its
``eager`` expression, else ``torch.<name>`` of its operands (pointwise) or
of its operand, dims and keepdim (reductions).  A view is
``torch.as_strided`` of its base node with the layout eager gives it; an
extern node makes the torch call the compiled code makes (``node.call``).
"""
import math

import torch
import torch.nn.functional as F

from . import _C


def _replayer(row):
    """fn(node, *operands) -> the op's value as eager PyTorch computes it."""
    name, kind, arity = row["name"], row["kind"], row["arity"]
    if kind == "extern":
        return lambda n, *xs: n.call(*xs)
    if kind == "view":
        return None   # from the base node, not the operand (Graph._run)
    src = row["eager"]
    if src is None:
        src = (f"torch.{name}({', '.join(f'x{k}' for k in range(arity))})"
               if kind == "pointwise" else
               f"torch.{name}(x0, n.dims, n.keepdim)")
    params = ", ".join(f"x{k}=None" for k in range(arity))
    code = compile(f"lambda n, {params}: {src}", f"<tcjit eager {name}>",
                   "eval")
    return eval(code, {"torch": torch, "F": F})


_REPLAY = {row["name"]: _replayer(row) for row in _C.op_table()}
_POINTWISE = {row["name"] for row in _C.op_table() if row["kind"] == "pointwise"}


class Node:
    """One node: an input, a Python scalar, or an op with its args.

    Every node has ``dtype``, ``shape`` and ``stride`` as eager gives them.
    Op nodes also carry what their kind needs: reductions ``dims`` (the
    reduced dims of the operand), ``keepdim`` and ``first`` (the values of
    ``torch.max(x, dim)``: gradient to the first extreme); views ``base`` (the node
    whose storage they index) and ``offset`` (elements from the base's
    storage offset); casts and creation ops ``to_dtype``; extern ops
    ``xattr`` / ``xfattr`` (src/graph/extern.h) and ``call``."""

    def __init__(self, index, d, nodes, device):
        self.index = index
        self.kind = d["kind"]
        self.op = d["op"] or d["kind"]
        self.dtype = getattr(torch, d["dtype"])
        self.shape = torch.Size(d["shape"])
        self.stride = tuple(d["stride"])
        self.value = d["value"]
        self.input_index = d["input_index"]
        self.to_dtype = getattr(torch, d["to_dtype"])
        self.args = tuple(nodes[i] for i in d["inputs"])
        self.device = device
        self.dims = d.get("dims")
        self.keepdim = d.get("keepdim")
        # amax / amin as the values of torch.max / min(x, dim): gradient
        # to the first extreme, as eager's index selects
        self.first = d.get("first", False)
        self.base = nodes[d["view_base"]] if "view_base" in d else None
        self.offset = d.get("offset")
        self.xattr = d.get("xattr")
        self.xfattr = d.get("xfattr")
        self.call = d.get("call")
        # training (docs/training.md): made with grad mode on from an
        # operand that requires grad; views: their affine index map onto
        # the operand (view dim -> operand dim, step; operand dim ->
        # start), or None
        self.requires_grad = d.get("requires_grad", False)
        self.vmap = d.get("vmap")
        self.multi_view = d.get("multi_view", False)
        self.overwritten_at = d.get("overwritten_at", 0)

    @property
    def name(self):
        return f"%x{self.input_index}" if self.kind == "input" else f"%{self.index}"

    def __repr__(self):
        if self.kind == "scalar":
            return repr(self.value)
        if self.kind == "input":
            return f"{self.name}: input[{self.input_index}]"
        args = ", ".join(a.name if a.kind != "scalar" else repr(a.value)
                         for a in self.args)
        return f"{self.name} = {self.op}({args})"


def _view_of(n, env):
    """View node n's value: torch.as_strided of its base's with the traced
    layout, except where the base's elements overlap (an expanded input).
    as_strided's backward sums the gradients of aliases in storage and
    spreads their mean, where eager's view ops keep each logical
    element's own (fuzz seed 21061: x.expand(7, 8, 1) requiring grad,
    unflattened, then a prod over the size-1 dim).  Storage cannot tell
    which alias eager's view op picked (x[3] of an expanded x reads row 3,
    at row 0's address), so the view is made from its operand's logical
    elements instead: a reshape, or the index map (graph.h vmap) applied
    to a contiguous copy of the operand, whose backward is elementwise.
    Only in a replay under autograd with a base that requires grad: a
    write into a view of an expanded tensor (a[:, 1::2] has no shared
    elements) must reach the base (test_mutation.py), and such a replay
    writes no input (_autograd.py runs those graphs eagerly)."""
    base = env[n.base.index]
    x = env[n.args[0].index] if n.args else None
    logical = (torch.is_grad_enabled() and base.requires_grad
               and torch._debug_has_internal_overlap(base) != 0)
    if logical and n.vmap is not None and n.op != "view":
        vsrc, vcoef, voff = n.vmap
        c = x.contiguous()
        cs = c.stride()
        stride = [vcoef[e] * cs[vsrc[e]] if vsrc[e] >= 0 else 0
                  for e in range(len(n.shape))]
        off = sum(voff[d] * cs[d] for d in range(len(cs)))
        return torch.as_strided(c, tuple(n.shape), stride,
                                c.storage_offset() + off)
    if logical and x.dtype == n.dtype \
            and x.numel() == math.prod(n.shape):
        return x.reshape(tuple(n.shape))
    return torch.as_strided(base, n.shape, n.stride,
                            base.storage_offset() + n.offset)


class Graph:
    """A traced graph: ``nodes``, ``inputs``, ``outputs``, ``op_count``,
    ``device``; ``str(graph)`` prints it; ``graph(*inputs)`` runs it
    eagerly."""

    def __init__(self, desc, text=""):
        self.device = torch.device(desc.get("device", "cpu"))
        nodes = []
        for i, d in enumerate(desc["nodes"]):
            nodes.append(Node(i, d, nodes, self.device))
        self.nodes = nodes
        self.inputs = sorted((n for n in nodes if n.kind == "input"),
                             key=lambda n: n.input_index)
        self.outputs = [nodes[i] for i in desc["outputs"]]
        self._text = text

    @property
    def op_count(self):
        return sum(1 for n in self.nodes if n.kind == "op")

    def ops(self):
        return [n.op for n in self.nodes if n.kind == "op"]

    def __str__(self):
        return self._text or "\n".join(map(repr, self.nodes))

    def __repr__(self):
        return f"<tcjit.Graph {self.op_count} ops: {', '.join(self.ops())}>"

    def __call__(self, *inputs):
        # Graphs have no autograd: an input that requires grad is only
        # ever read under no_grad, and no result requires grad.
        with torch.no_grad():
            return self._run(inputs)

    def _run(self, inputs):
        env = self._values(inputs)
        return tuple(env[o.index] for o in self.outputs)

    def _values(self, inputs, wanted=None):
        """{node index: value} of every node, or of the nodes in wanted
        (closed under operands and view bases: freezing's constants)."""
        env = {}
        for n in self.nodes:
            if wanted is not None and n.index not in wanted:
                continue
            if n.kind == "input":
                env[n.index] = inputs[n.input_index]
            elif n.kind == "scalar":
                env[n.index] = n.value
            elif not n.requires_grad and torch.is_grad_enabled():
                # made under no_grad (or from values that do not require
                # grad, or detached): in a replay under autograd
                # (a training graph's backward), no gradient flows through
                # it, as in eager
                with torch.no_grad():
                    env[n.index] = self._value(n, env)
            else:
                env[n.index] = self._value(n, env)
        return env

    @staticmethod
    def _value(n, env):
        """Op node n's value from its operands' (a view's: its base's) in
        env."""
        if n.base is not None:
            return _view_of(n, env)
        r = _REPLAY[n.op](n, *(env[a.index] for a in n.args))
        if (n.op in _POINTWISE and isinstance(r, torch.Tensor)
                and r.shape == n.shape and r.stride() != n.stride):
            # the op eager writes into a given out= tensor (F.hardtanh:
            # clamp into empty_like(input)): the node's layout is that
            # tensor's
            r = torch.empty_strided(n.shape, n.stride, dtype=r.dtype,
                                    device=r.device).copy_(r)
        return r
