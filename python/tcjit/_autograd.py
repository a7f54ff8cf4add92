"""Training: a traced graph whose results require grad runs as an autograd
node (docs/training.md).

The C runtime (src/frame_eval/autograd.c) calls ``plan(desc)`` with the
graph of a segment in which some node requires grad.  The plan

* decides which nodes really require grad (floating dtypes only; a generic
  extern asks torch on meta tensors) and which graph outputs are
  differentiable;
* builds the backward from the derivative rules of the op registry
  (src/graph/ops.c ``.grad``; views use their affine index map): Python
  source over registry ops, compiled by tcjit like any function, so its
  kernels are fused by the same scheduler;
* names the values the backward reads: graph inputs, and computed nodes
  that the compiled forward returns as extra outputs (``plan.saved``);
* keeps the autograd graph of each extern whose backward is torch's own
  (rule "vjp"): the compiled forward calls it under grad mode
  (``plan.keep``), the backward runs torch.autograd.grad on that graph;
* ``finish(runner)`` gets the compiled forward and returns the callable
  the runtime calls: ``_Node.apply`` (a torch.autograd.Function).

What the rules do not cover (an op without a rule, a double backward) runs
the backward through torch's own autograd on an eager replay of the graph
(tcjit.Graph), so a gradient is never wrong; the reason is logged on the
``graph_breaks`` channel.  The forward, and the cost of a forward that is
never backpropagated, stay those of the compiled kernels plus the saved
tensors.
"""
import ast
import itertools
import logging
import math
import os
import re
import threading
import types

import torch
import torch.nn.functional as F

from . import _C, _autofn
from .graph import Graph

_OPS = {row["name"]: row for row in _C.op_table()}
# TCJIT_RECOMPUTE=0: save every value the backward reads instead of
# recomputing cheap pointwise ones (docs/training.md, the partition)
_RECOMPUTE = os.environ.get("TCJIT_RECOMPUTE", "1") != "0"
# ops that may draw random numbers: the generic externs (extern.h)
_GENERIC = ("extern", "extern_item")


def _log(channel, message):
    log = logging.getLogger(f"tcjit.{channel}")
    if log.isEnabledFor(logging.INFO):
        log.info(message, extra={"channel": channel})


# ---- which nodes require grad ---------------------------------------------

def _meta(n, requires_grad):
    t = torch.empty_strided(n.shape, n.stride, dtype=n.dtype, device="meta")
    return t.requires_grad_(requires_grad and t.is_floating_point())


def _generic_requires_grad(n, rg):
    """torch's answer for a generic extern: its call on meta tensors that
    require grad as the operands do (detach, rand_like, ... do not); a
    list of answers, one per item, for a call that returns a sequence
    (torch.sort's values do, its indices do not; a custom Function's
    outputs marked non-differentiable do not)."""
    try:
        args = [_meta(a, rg[a.index]) if a.kind != "scalar" else a.value
                for a in n.args]
        with torch.enable_grad():
            r = n.call(*args)
    except Exception:        # no meta kernel: as the C flag says
        return True
    if isinstance(r, (tuple, list)):
        return [isinstance(t, torch.Tensor) and t.requires_grad for t in r]
    return isinstance(r, torch.Tensor) and r.requires_grad


def _requires_grad(graph):
    rg, items = {}, {}
    for n in graph.nodes:
        if n.kind == "input":
            rg[n.index] = n.requires_grad
        elif n.kind == "scalar":
            rg[n.index] = False
        else:
            flows = n.requires_grad and any(rg[a.index] for a in n.args)
            r = flows and (n.dtype.is_floating_point or n.dtype.is_complex)
            if flows and n.op == "extern":
                got = _generic_requires_grad(n, rg)
                if isinstance(got, list):   # per item (its dtype is item 0's)
                    items[n.index] = got
                    r = any(got)
                else:
                    r = r and got
            elif r and n.op == "extern_item":
                got = items.get(n.args[0].index)
                r = got is None or got[n.xattr[0]]
            rg[n.index] = r
    return rg


# ---- rule text -> backward source ------------------------------------------

def _rules(op):
    """The op's per-operand rule expressions, or None (no rule)."""
    text = _OPS[op]["grad"]
    if text is None:
        return None
    return [r.strip() for r in text.split(";")]


class _Fold(ast.NodeTransformer):
    """What is known when the backward is generated becomes a literal:
    operands' shapes and dims, the node's attributes (n.dims), keep(t, n)
    (a reshape), and a conditional on those (a rule's case split, such as
    matmul's 1-d operands).  What a rule then reads of an operand is its
    value only, so a rule that reads a shape saves nothing."""

    def __init__(self, node):
        self.node = node
        self.metas = {f"x{i}": a for i, a in enumerate(node.args)
                      if a.kind != "scalar"}
        self.metas["y"] = self.metas["g"] = node

    def visit_Attribute(self, e):
        e = self.generic_visit(e)
        if (isinstance(e.value, ast.Name) and e.value.id in self.metas
                and e.attr == "shape"):
            return _const(tuple(self.metas[e.value.id].shape), e)
        if isinstance(e.value, ast.Name) and e.value.id == "n":
            v = (len(self.node.args) if e.attr == "nin"
                 else getattr(self.node, e.attr))
            return _const(tuple(v) if isinstance(v, torch.Size) else v, e)
        return e

    def visit_Call(self, e):
        if (isinstance(e.func, ast.Attribute) and e.func.attr == "dim"
                and not e.args and isinstance(e.func.value, ast.Name)
                and e.func.value.id in self.metas):
            return _const(len(self.metas[e.func.value.id].shape), e)
        e = self.generic_visit(e)
        # keep(t, n): t with the reduced dims of n kept (size 1)
        if isinstance(e.func, ast.Name) and e.func.id == "keep":
            n = self.node
            if n.keepdim:
                return e.args[0]
            shape = tuple(1 if d in n.dims else s
                          for d, s in enumerate(n.args[0].shape))
            return ast.copy_location(ast.parse(
                f"({ast.unparse(e.args[0])}).reshape({shape!r})",
                mode="eval").body, e)
        return e

    def visit_IfExp(self, e):
        e = self.generic_visit(e)
        try:
            test = eval(compile(ast.Expression(e.test), "<rule>", "eval"),
                        {"__builtins__": {}})
        except Exception:
            return e
        return e.body if test else e.orelse


def _const(v, at):
    return ast.copy_location(ast.parse(_literal(v), mode="eval").body, at)


class _Holes(ast.NodeTransformer):
    """x0.., y, g -> placeholders of the backward's variables (a scalar
    operand -> its literal), in the order the visit meets them first."""

    def __init__(self, n, names):
        self.scalars = {f"x{i}": _literal(a.value)
                        for i, a in enumerate(n.args) if a.kind == "scalar"}
        self.names = names
        self.order = []

    def visit_Name(self, e):
        if e.id in self.scalars:
            return ast.copy_location(
                ast.parse(self.scalars[e.id], mode="eval").body, e)
        if e.id in self.names:
            if e.id not in self.order:
                self.order.append(e.id)
            return ast.copy_location(
                ast.Name(f"__tcjit_{e.id}__", ast.Load()), e)
        return e


_HOLE = re.compile(r"__tcjit_(\w+?)__")


class _Folded:
    """A rule (or an eager expression) folded for one structure of its node
    (_structure: what _Fold and _meta_result read of it), made once per
    process (_folded) and expanded for every node of that structure: the
    ast work is done once per rule, not once per node and compile.

    ``vjp``: the rule folded to torch's own backward.  ``parts``: the
    expression's text, placeholders at the odd indices; ``order``: the
    placeholders in the order the expression reads them, which is the
    order the builder reads the values (reading one may recompute it:
    lines of the backward, so the same lines in the same order)."""
    __slots__ = ("tree", "vjp", "parts", "order")

    def __init__(self, tree):
        self.tree = tree
        self.vjp = isinstance(tree.body, ast.Name) and tree.body.id == "vjp"
        self.parts = None

    def template(self, make):
        """Self with parts and order: make(folded tree) -> (text with
        placeholders, their order), called for the first node only."""
        if self.parts is None:
            text, self.order = make(self.tree.body)
            self.parts = _HOLE.split(text)
            self.tree = None
        return self

    def expand(self, values):
        """The text with the placeholders' values (a dict of variables)."""
        out = list(self.parts)
        out[1::2] = [values[v] for v in out[1::2]]
        return "".join(out)


def _with_holes(n, tree, names):
    holes = _Holes(n, names)
    return ast.unparse(holes.visit(tree)), holes.order


_FOLDED = {}      # (rule or "eager", op, operand, structure) -> _Folded
_FOLDED_MAX = 8192
_READS = {}       # text -> the node's attributes it reads (n.<attr>)


def _reads(text):
    """The node attributes a rule's text reads: n.<attr>, and keep()'s."""
    got = _READS.get(text)
    if got is None:
        got = set()
        for e in ast.walk(ast.parse(text, mode="eval")):
            if (isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name)
                    and e.value.id == "n" and e.attr != "nin"):
                got.add(e.attr)
            elif (isinstance(e, ast.Call) and isinstance(e.func, ast.Name)
                    and e.func.id == "keep"):
                got.update(("dims", "keepdim"))
        got = _READS[text] = tuple(sorted(got))
    return got


def _overlapping(shape, stride):
    """Do two elements of a tensor of this shape and stride share memory?"""
    dims = sorted((abs(st), n) for n, st in zip(shape, stride) if n > 1)
    reach = 0
    for st, n in dims:
        if st <= reach:
            return True
        reach += (n - 1) * st
    return False


def _frozen(v):
    return tuple(map(_frozen, v)) if isinstance(v, (list, tuple)) else v


def _structure(n, text):
    """What folding text for n and its result's shape and dtype depend on:
    the shapes, layouts and dtypes of n and its operands, the scalar
    operands' values, the attributes the text reads."""
    return (tuple(n.shape), n.stride, n.dtype,
            tuple(_frozen(getattr(n, a)) for a in _reads(text)),
            tuple((type(a.value), _literal(a.value)) if a.kind == "scalar"
                  else (tuple(a.shape), a.stride, a.dtype) for a in n.args))


def _folded(use, n, k, text):
    """text (operand k's rule, or use "eager": the op's eager expression)
    folded for n: from the process's table, else folded now (_Fold)."""
    key = (use, n.op, k, text, _structure(n, text))
    f = _FOLDED.get(key)
    if f is None:
        if len(_FOLDED) >= _FOLDED_MAX:     # many shapes (dynamic sizes)
            _FOLDED.clear()
        f = _FOLDED[key] = _Folded(_Fold(n).visit(ast.parse(text,
                                                            mode="eval")))
    return f


def _literal(v):
    if isinstance(v, torch.dtype):
        return str(v)          # "torch.float32"
    if isinstance(v, float) and not math.isfinite(v):
        return f"float({str(v)!r})"
    return repr(v)


def _sum_dims(src, dst):
    """Dims of a src-shaped tensor to sum for a dst-shaped one (the
    reverse of broadcasting)."""
    lead = len(src) - len(dst)
    dims = list(range(lead))
    dims += [lead + i for i, s in enumerate(dst)
             if s == 1 and src[lead + i] != 1]
    return tuple(dims)


def _rule_text(n, k, tree):
    """Operand k's gradient by the folded rule tree, with placeholders:
    summed back where the rule's result broadcast, reshaped and cast to
    the operand's shape and dtype."""
    a = n.args[k]
    shape, dtype = tuple(n.shape), n.dtype
    if _OPS[n.op]["kind"] != "pointwise":
        shape, dtype = _meta_result(n, tree)
    names = {f"x{i}" for i in range(len(n.args))} | {"y", "g"}
    expr, order = _with_holes(n, tree, names)
    dims = _sum_dims(shape, tuple(a.shape))
    if dims:
        expr = f"({expr}).sum({dims!r}, keepdim=True)"
    if dims or shape != tuple(a.shape):
        expr = f"({expr}).reshape({tuple(a.shape)!r})"
    if a.dtype != dtype:
        expr = f"({expr}).to({_literal(a.dtype)})"
    return expr, order


def _meta_result(n, tree):
    """Shape and dtype of a rule's result (externs' and reductions'
    rules: what to sum it back to): from _Shape's evaluation of the rule,
    or where a rule uses what _Shape does not model, from running it on
    meta tensors (whose first use in a process imports sympy: a third of
    a second of the first training step)."""
    code = compile(ast.Expression(tree), "<rule>", "eval")
    env = {"torch": _SHAPE_TORCH, "F": _SHAPE_F, "math": math,
           "g": _Shape.of(n), "y": _Shape.of(n)}
    for i, a in enumerate(n.args):
        env[f"x{i}"] = a.value if a.kind == "scalar" else _Shape.of(a)
    try:
        r = eval(code, env)
        if isinstance(r, _Shape):
            return tuple(r.shape), r.dtype
    except Exception:       # _Unmodeled, or a torch function not modeled
        pass
    env = {"torch": torch, "F": F, "math": math, "g": _meta(n, False),
           "y": _meta(n, False)}
    for i, a in enumerate(n.args):
        env[f"x{i}"] = a.value if a.kind == "scalar" else _meta(a, False)
    r = eval(code, env)
    return tuple(r.shape), r.dtype


class _Unmodeled(Exception):
    """A rule uses something _Shape does not model: ask torch."""


def _broadcast(*shapes):
    out = []
    for dims in itertools.zip_longest(*(reversed(s) for s in shapes),
                                      fillvalue=1):
        big = {d for d in dims if d != 1}
        if len(big) > 1:
            raise _Unmodeled("shapes do not broadcast")
        out.append(big.pop() if big else 1)
    return tuple(reversed(out))


def _proto(v):
    """A stand-in for torch's type promotion: a 0-element tensor of v's
    dtype and dimensionality (0-d tensors promote like Python numbers)."""
    if isinstance(v, _Shape):
        return torch.empty((0,) if v.shape else (), dtype=v.dtype)
    if isinstance(v, (bool, int, float)):
        return v
    raise _Unmodeled(type(v).__name__)


class _Shape:
    """A value of a derivative rule, shape and dtype only: the few tensor
    operations the non-pointwise ops' rules use (matmuls, reductions,
    broadcasting arithmetic, views), anything else raises _Unmodeled."""
    __slots__ = ("shape", "dtype")
    device = None

    def __init__(self, shape, dtype):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype

    @staticmethod
    def of(n):
        return _Shape(n.shape, n.dtype)

    def dim(self):
        return len(self.shape)

    def _binary(self, other, op, reverse=False):
        a, b = (other, self) if reverse else (self, other)
        shape = _broadcast(*(v.shape for v in (a, b)
                             if isinstance(v, _Shape)))
        if op == "cmp":
            return _Shape(shape, torch.bool)
        dt = torch.result_type(_proto(a), _proto(b))
        if op == "div" and not (dt.is_floating_point or dt.is_complex):
            dt = torch.get_default_dtype()
        return _Shape(shape, dt)

    def __add__(self, o): return self._binary(o, "arith")
    def __radd__(self, o): return self._binary(o, "arith", True)
    def __sub__(self, o): return self._binary(o, "arith")
    def __rsub__(self, o): return self._binary(o, "arith", True)
    def __mul__(self, o): return self._binary(o, "arith")
    def __rmul__(self, o): return self._binary(o, "arith", True)
    def __truediv__(self, o): return self._binary(o, "div")
    def __rtruediv__(self, o): return self._binary(o, "div", True)
    def __pow__(self, o): return self._binary(o, "arith")
    def __and__(self, o): return self._binary(o, "arith")
    def __or__(self, o): return self._binary(o, "arith")
    def __eq__(self, o): return self._binary(o, "cmp")
    def __ne__(self, o): return self._binary(o, "cmp")
    def __lt__(self, o): return self._binary(o, "cmp")
    def __le__(self, o): return self._binary(o, "cmp")
    def __gt__(self, o): return self._binary(o, "cmp")
    def __ge__(self, o): return self._binary(o, "cmp")
    __hash__ = None

    def __neg__(self):
        return self

    def to(self, dtype):
        if not isinstance(dtype, torch.dtype):
            raise _Unmodeled("to() of a non-dtype")
        return _Shape(self.shape, dtype)

    def t(self):
        if self.dim() > 2:
            raise _Unmodeled("t() of more than 2 dims")
        return _Shape(self.shape[::-1], self.dtype)

    def transpose(self, a, b):
        s = list(self.shape)
        a, b = a % len(s), b % len(s)
        s[a], s[b] = s[b], s[a]
        return _Shape(s, self.dtype)

    def unsqueeze(self, d):
        s = list(self.shape)
        s.insert(d % (len(s) + 1), 1)
        return _Shape(s, self.dtype)

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        numel = math.prod(self.shape)
        known = math.prod(d for d in shape if d != -1)
        shape = tuple(numel // known if d == -1 and known else d
                      for d in shape)
        if math.prod(shape) != numel:
            raise _Unmodeled("reshape to another numel")
        return _Shape(shape, self.dtype)

    def expand(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        lead = len(shape) - self.dim()
        if lead < 0:
            raise _Unmodeled("expand to fewer dims")
        out = list(shape)
        for i, s in enumerate(self.shape):
            if out[lead + i] == -1:
                out[lead + i] = s
            elif s != 1 and s != out[lead + i]:
                raise _Unmodeled("expand of a non-1 dim")
        return _Shape(out, self.dtype)

    def sum(self, dims=None, keepdim=False):
        dt = (torch.int64 if not (self.dtype.is_floating_point
                                  or self.dtype.is_complex)
              else self.dtype)
        if dims is None:
            return _Shape((), dt)
        dims = {d % self.dim() for d in
                (dims if isinstance(dims, (tuple, list)) else (dims,))}
        return _Shape([1 if d in dims else s for d, s in
                       enumerate(self.shape) if keepdim or d not in dims], dt)


def _shape_matmul(a, b):
    if a.dim() < 1 or b.dim() < 1:
        raise _Unmodeled("matmul of a 0-d tensor")
    sa = a.shape if a.dim() > 1 else (1,) + a.shape
    sb = b.shape if b.dim() > 1 else b.shape + (1,)
    if sa[-1] != sb[-2]:
        raise _Unmodeled("matmul sizes")
    out = _broadcast(sa[:-2], sb[:-2]) + (sa[-2], sb[-1])
    out = out[:-2] + out[-2:-1] * (a.dim() > 1) + out[-1:] * (b.dim() > 1)
    return _Shape(out, torch.result_type(_proto(a), _proto(b)))


def _shape_pointwise(x, *rest, **kwargs):
    if not isinstance(x, _Shape) or not x.dtype.is_floating_point:
        raise _Unmodeled("a pointwise function of a non-float")
    return x


def _shape_where(c, a, b):
    shape = _broadcast(*(v.shape for v in (c, a, b) if isinstance(v, _Shape)))
    return _Shape(shape, torch.result_type(_proto(a), _proto(b)))


def _shape_arange(n, device=None):
    if not isinstance(n, int):
        raise _Unmodeled("arange of a non-int")
    return _Shape((n,), torch.int64)


def _shape_embedding_backward(g, idx, num_weights, padding_idx, scale):
    return _Shape((num_weights, g.shape[-1]), g.dtype)


_SHAPE_TORCH = types.SimpleNamespace(
    mm=_shape_matmul, bmm=_shape_matmul, matmul=_shape_matmul,
    outer=lambda a, b: _Shape(a.shape + b.shape, a.dtype),
    where=_shape_where, arange=_shape_arange,
    softmax=_shape_pointwise, exp=_shape_pointwise, tanh=_shape_pointwise,
    sigmoid=_shape_pointwise, cos=_shape_pointwise, sin=_shape_pointwise,
    erf=_shape_pointwise, sgn=_shape_pointwise,
    float32=torch.float32, float64=torch.float64, float16=torch.float16,
    bfloat16=torch.bfloat16, int64=torch.int64, bool=torch.bool,
    ops=types.SimpleNamespace(aten=types.SimpleNamespace(
        embedding_dense_backward=_shape_embedding_backward)))
_SHAPE_F = types.SimpleNamespace(softplus=_shape_pointwise)


# The kept calls of the forward running on this thread (_Keep) and those
# the backward running on it reads (_KEPT)
_TLS = threading.local()


class _Keep:
    """An extern whose backward is torch's own (the op's rule "vjp"),
    called by the compiled forward under grad mode (the runtime calls this
    instead of torch: src/runtime/extern_call.h tc_extern_set_keep).  Its
    autograd graph, kept with the node's saved tensors, is the backward:
    the op is not called again (no second attention forward, the same
    random draw for dropout)."""
    __slots__ = ("call", "need", "slot")

    def __init__(self, call, need, slot):
        self.call, self.need, self.slot = call, need, slot

    def __call__(self, *xs):
        with torch.enable_grad():
            ins = [x.detach().requires_grad_() if i in self.need else x
                   for i, x in enumerate(xs)]
            _autofn.KEEPING.on = True
            try:
                y = self.call(*ins)
            finally:
                _autofn.KEEPING.on = False
        # a sequence (torch.sort, a custom Function's results): its items
        ys = tuple(y) if isinstance(y, (tuple, list)) else (y,)
        _TLS.kept[self.slot] = (*ys, *[ins[i] for i in self.need])
        if ys is not y and not isinstance(y, (tuple, list)):
            return y.detach()
        return tuple(t.detach() for t in ys)


def _kept_grad(slot, *gs):
    """The gradients of a kept call's operands (the backward's step for a
    "vjp" rule) from those of its results gs (one per item of a call
    that returns a sequence, None where an item gets none):
    torch.autograd.grad over the forward's own graph, kept for a second
    backward (retain_graph=True: the node's saved tensors hold it, and
    autograd frees those after a backward that does not retain them)."""
    rec = _TLS.cur[slot]
    ys, ins = rec[:len(gs)], tuple(rec[len(gs):])
    pairs = [(y, g) for y, g in zip(ys, gs)
             if g is not None and y.grad_fn is not None]
    if not pairs:              # torch's result did not depend on them
        return tuple(torch.zeros_like(x) for x in ins)
    ys, gs = tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
    run = getattr(torch.autograd.graph, "_engine_run_backward", None)
    if run is not None and all(isinstance(g, torch.Tensor)
                               and g.shape == y.shape for y, g in pairs):
        # torch.autograd.grad less its check of g against y (g is made
        # with y's shape), whose first call imports torch.fx's symbolic
        # shapes and sympy: a third of a second of the first step
        got = run(ys, gs, True, False, ins, True, accumulate_grad=False)
    else:
        got = torch.autograd.grad(ys, ins, gs, retain_graph=True,
                                  allow_unused=True)
    return tuple(torch.zeros_like(x) if r is None else r
                 for x, r in zip(ins, got))


class _Opaque:
    """A callable the tracer does not inline: it runs as one STEP."""
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args)


class _Item:
    """The gradient var of item k of a call that returns a sequence (an
    extern_item node's, gathered by _Builder.join for the call's node)."""
    __slots__ = ("k", "var")

    def __init__(self, k, var):
        self.k, self.var = k, var


class _Piece:
    """A gradient that is zero outside [start, stop) of dim: var is its
    part there (a slice view's gradient, joined by _Builder.join)."""
    __slots__ = ("var", "dim", "start", "stop")

    def __init__(self, var, dim, start, stop):
        self.var, self.dim, self.start, self.stop = var, dim, start, stop


class _Builder:
    """Generates the backward's source from the rules, or finds the
    reason it cannot."""

    def __init__(self, graph, rg, recompute=None, slots=None, written=()):
        self.graph, self.rg = graph, rg
        # inputs that in-place ops write: their old values are never read
        # to recompute a value (the runtime writes them after the forward)
        self.written = written
        # extern node -> its kept call's slot: a backward for some of the
        # outputs' gradients reads the kept calls of the full one
        self.slots = slots
        self.lines = []
        self.tmp = 0
        self.values = {}      # node index -> variable of its value
        self.recomputed = {}  # node index -> variable, computed again
        self.outputs = {o.index for o in graph.outputs}
        self.kept = []        # (node, operands needed): calls kept (_Keep)
        self.pinned = set()   # their operands: outputs of the forward
        self.recompute = _RECOMPUTE if recompute is None else recompute
        self.leaf_sets = {}
        self.never_cheap = self.stored_anyway(graph) if self.recompute else set()
        self.env = {"torch": torch, "F": F, "math": math}
        self.reason = None
        self.cur = None       # the node whose rule (or replay) reads values
        self.readers = {}     # input node index -> nodes that read it
        self.stale = None     # (op node, the value it read) of the first
                              # rule that reads an overwritten value

    def value(self, n):
        """The variable holding node n's forward value in the backward:
        a saved value (a parameter), or recomputed from its operands."""
        if n.kind == "scalar":
            return _literal(n.value)
        if n.kind == "input":
            self.readers.setdefault(n.index, set()).add(self.cur)
        if n.index in self.values:
            return self.values[n.index]
        if n.index in self.recomputed:
            return self.recomputed[n.index]
        if self.recompute and self.cheap(n):
            expr = self.replay(n)
            name = f"r{n.index}"
            # right before its first use: a value a later segment of
            # the backward uses (after a vjp step) is computed there,
            # not carried across the step
            self.lines.append(f"    {name} = {expr}")
            self.recomputed[n.index] = name
            return name
        self.values[n.index] = f"v{n.index}"
        return self.values[n.index]

    def cheap(self, n):
        """Recompute in the backward instead of saving (the partition's
        rule, Inductor's default in spirit): a pointwise op that is not a
        graph output (an output is kept anyway) and does not make a new
        tensor (full, arange).  Reductions, externs and views are saved:
        recomputing them costs a pass over their input, a view is free to
        keep.  So are, without costing the forward anything, the operands
        of externs (stored for the call); and values that a consumer
        broadcasts (a layer_norm's row statistics: a kernel of their own
        in the backward, or a few bytes saved).  And a value whose
        recomputation reads two or more full-size tensors (the residual
        stream, a sum of every earlier block's outputs): saved, it is one
        read; recomputed, it would be one per tensor."""
        if n.index in self.never_cheap or any(
                a.kind == "input" and a.input_index in self.written
                for a in n.args):
            return False
        row = _OPS[n.op] if n.kind == "op" else None
        return (row is not None and row["kind"] == "pointwise"
                and n.index not in self.outputs
                and "n.device" not in (row["eager"] or "")
                and len(self.leaves(n)) <= 1)

    def leaves(self, n):
        """The full-size tensors (n's numel) that recomputing n reads:
        saved values and graph inputs; recomputed operands bring theirs."""
        got = self.leaf_sets.get(n.index)
        if got is None:
            got = set()
            numel = n.shape.numel()
            for a in n.args:
                if a.kind == "scalar" or a.shape.numel() < numel:
                    continue
                if a.kind == "op" and a.index not in self.values and (
                        a.index in self.recomputed or self.cheap(a)):
                    got |= self.leaves(a)
                else:
                    got.add(a.index)
            self.leaf_sets[n.index] = got
        return got

    @staticmethod
    def stored_anyway(graph):
        """Nodes the partition saves rather than recomputes although
        pointwise (cheap): extern operands (or their view bases) and
        values a consumer broadcasts to 4x their size or more."""
        out = set()
        widest = {}
        for c in graph.nodes:
            if c.kind != "op":
                continue
            extern = _OPS.get(c.op, {}).get("kind") == "extern"
            for a in c.args:
                if a.kind == "scalar":
                    continue
                widest[a.index] = max(widest.get(a.index, 0), c.shape.numel())
                while extern and a.base is not None:
                    a = a.base
                if extern:
                    out.add(a.index)
        for n in graph.nodes:
            if n.kind == "op" and 4 * n.shape.numel() <= widest.get(n.index, 0):
                out.add(n.index)
        return out

    def replay(self, n):
        """n's eager expression (the registry's, as tcjit.Graph replays
        it) over the backward's variables."""
        row = _OPS[n.op]
        src = row["eager"] or (
            f"torch.{n.op}({', '.join(f'x{k}' for k in range(len(n.args)))})")
        names = {f"x{k}" for k in range(len(n.args))}
        f = _folded("eager", n, None, src).template(
            lambda tree: _with_holes(n, tree, names))
        cur, self.cur = self.cur, n
        try:
            return f.expand({v: self.value(n.args[int(v[1:])])
                             for v in f.order})
        finally:
            self.cur = cur

    def fresh(self, expr):
        self.tmp += 1
        name = f"t{self.tmp}"
        self.lines.append(f"    {name} = {expr}")
        return name

    def build(self, grads_in):
        """grads_in: output node index -> list of grad variables.  Returns
        input node index -> grad variable."""
        acc = {k: list(v) for k, v in grads_in.items()}
        result = {}
        for n in reversed(self.graph.nodes):
            parts = acc.pop(n.index, None)
            if not parts:
                continue
            g = self.join(n, parts)
            if n.kind == "input":
                result[n.index] = g
                continue
            for k, expr in self.contributions(n, g):
                acc.setdefault(n.args[k].index, []).append(expr)
            if self.reason:
                return None
        return result

    def join(self, n, parts):
        """The gradient of n: the sum of its parts.  Slices of one dim
        that tile n (the gradients of a split's pieces) are one cat;
        other slices are scattered into zeros first.  A call that returns
        a sequence: a list of its items' gradients (None: no gradient)."""
        if isinstance(parts[0], _Item):
            per = {}
            for p in parts:
                per.setdefault(p.k, []).append(p.var)
            return [None if k not in per else self.sum(per[k])
                    for k in range(n.xattr[1])]
        pieces = sorted((p for p in parts if isinstance(p, _Piece)),
                        key=lambda p: p.start)
        if (len(pieces) == len(parts) > 1
                and len({p.dim for p in pieces}) == 1
                and len(pieces) <= _OPS["cat"]["arity"]
                and pieces[0].start == 0
                and pieces[-1].stop == n.shape[pieces[0].dim]
                and all(a.stop == b.start
                        for a, b in zip(pieces, pieces[1:]))):
            return self.fresh(f"torch.cat([{', '.join(p.var for p in pieces)}"
                              f"], {pieces[0].dim})")
        return self.sum([self.scatter(n, p) if isinstance(p, _Piece) else p
                         for p in parts])

    def sum(self, parts):
        return parts[0] if len(parts) == 1 else self.fresh(" + ".join(parts))

    def scatter(self, n, p):
        z = self.fresh(f"{p.var}.new_zeros({tuple(n.shape)!r})")
        return self.fresh(f"torch.slice_scatter({z}, {p.var}, {p.dim}, "
                          f"{p.start}, {p.stop})")

    def contributions(self, n, g):
        """(operand k, grad variable) for each operand that requires grad."""
        need = [k for k, a in enumerate(n.args) if self.rg[a.index]]
        if not need:
            return []
        if n.op == "extern_item":
            return [(0, _Item(n.xattr[0], g))]
        if n.base is not None or n.op == "as_strided":
            return [(0, self.view_grad(n, g))] if self.reason is None else []
        rules = _rules(n.op)
        if rules is None:
            self.reason = f"no derivative rule for {n.op}"
            return []
        if rules == ["vjp"]:
            return self.vjp(n, need, g)
        folded = {}
        for k in need:
            rule = rules[k] if k < len(rules) else ""
            if not rule:
                self.reason = f"no derivative of {n.op} for its operand {k}"
                return []
            folded[k] = _folded("rule", n, k, rule)
        if any(f.vjp for f in folded.values()):
            return self.vjp(n, need, g)
        return [(k, self.rule(n, k, folded[k], g)) for k in need]

    def rule(self, n, k, folded, g):
        f = folded.template(lambda tree: _rule_text(n, k, tree))
        values = {}
        self.cur = n
        for v in f.order:       # in the expression's order (value())
            if v != "g":
                k = -1 if v == "y" else int(v[1:])
                self.read(n, n if k < 0 else n.args[k], k)
            values[v] = (g if v == "g" else self.value(n) if v == "y"
                         else self.value(n.args[int(v[1:])]))
        return self.fresh(f.expand(values))

    def read(self, n, v, k):
        """Op n's backward reads value v (its operand k, -1: its result),
        which eager's op saved: stale when an in-place op wrote v's
        storage after n was made (graph.h overwritten_at), where eager's
        backward raises.  The in-place op's own nodes read the old value
        as their operand 0 as eager's original self (no error), as another
        operand as eager's saved `other`, which the write itself made
        stale (v.mul_(v) raises in eager's backward).  tcjit's graph is
        functional and would return a gradient: Plan.backward raises
        eager's error instead.  Not for kept extern calls (vjp): what
        torch's own op saves is not known here (clone saves nothing), and
        a raise where eager has none would break a program that runs."""
        if k not in _EAGER_SAVES.get(n.op, ()) or n.first:
            # only what eager's op saves too: a raise where eager has
            # none would break a program that runs (sqrt's rule reads
            # its operand, eager's saves the result: seed 29034;
            # torch.max / min(x, dim)'s values save the indices: 23876)
            return
        root = v.base if v.base is not None else v
        at = root.overwritten_at
        if (self.stale is None and v.kind == "op" and 0 < at
                and (n.index < at or k >= 1)):
            self.stale = (n, v)

    def view_grad(self, n, g):
        """The view's index map run backwards: sum what broadcast, put
        the dims back in the operand's order, scatter into zeros where the
        view is a part of the operand."""
        x = n.args[0]
        if n.op == "view":
            return self.fresh(f"{g}.reshape({tuple(x.shape)!r})")
        if n.vmap is None:
            self.reason = f"no derivative for the view {n.op} (no index map)"
            return None
        vsrc, vcoef, voff = n.vmap
        red = tuple(e for e in range(len(n.shape))
                    if vsrc[e] < 0 or vcoef[e] == 0)
        kept = [e for e in range(len(n.shape)) if e not in red]
        t = g
        if red:
            t = self.fresh(f"{t}.sum({red!r})")
        order = sorted(range(len(kept)), key=lambda i: vsrc[kept[i]])
        if order != list(range(len(kept))):
            t = self.fresh(f"{t}.permute({tuple(order)!r})")
        mapped = {vsrc[kept[i]]: kept[i] for i in order}
        if len(mapped) != len(kept):
            self.reason = (f"no derivative for the view {n.op} (a dim "
                           f"read twice)")
            return None
        # x's dims in order: a slice of a dim is scattered into zeros, a
        # selected dim comes back as the index (slice_scatter and
        # select_scatter: functional, no in-place write in the backward)
        part = [d for d, size in enumerate(x.shape) if d not in mapped
                or (voff[d], vcoef[mapped[d]], n.shape[mapped[d]])
                != (0, 1, size)]
        if (len(part) == 1 and part[0] in mapped
                and vcoef[mapped[part[0]]] == 1):
            # one contiguous slice of one dim: a _Piece, which build()
            # joins with its siblings (split's q, k, v) into one cat
            d = part[0]
            return _Piece(t, d, voff[d], voff[d] + n.shape[mapped[d]])
        shape = [n.shape[mapped[d]] if d in mapped else None
                 for d in range(len(x.shape))]
        for d, size in enumerate(x.shape):
            if d in mapped:
                e = mapped[d]
                start, step, cnt = voff[d], vcoef[e], n.shape[e]
                if start == 0 and step == 1 and cnt == size:
                    continue
                shape[d] = size
                full = [s for s in shape if s is not None]
                z = self.fresh(f"{t}.new_zeros({tuple(full)!r})")
                pos = sum(1 for s in shape[:d] if s is not None)
                t = self.fresh(f"torch.slice_scatter({z}, {t}, {pos}, "
                               f"{start}, {start + step * (cnt - 1) + 1}, "
                               f"{step})")
            else:
                shape[d] = size
                pos = sum(1 for s in shape[:d] if s is not None)
                if size == 1:
                    t = self.fresh(f"{t}.unsqueeze({pos})")
                    continue
                full = [s for s in shape if s is not None]
                z = self.fresh(f"{t}.new_zeros({tuple(full)!r})")
                t = self.fresh(f"torch.select_scatter({z}, {t}, {pos}, "
                               f"{voff[d]})")
        return t

    def vjp(self, n, need, g):
        """The forward keeps this call's autograd graph (_Keep); the
        backward runs it (_KEPT).  Its operands become outputs of the
        forward: torch's graph reads their storage, which an extern
        operand of the compiled forward would otherwise share with later
        buffers (the CPU arena)."""
        self.pinned.update(a.index for a in n.args if a.kind != "scalar")
        self.kept.append((n, tuple(need)))
        self.env["_KEPT"] = _KEPT
        slot = (len(self.kept) - 1 if self.slots is None
                else self.slots[n.index])
        gs = g if isinstance(g, list) else [g]
        r = self.fresh(f"_KEPT({slot}, {', '.join(v or 'None' for v in gs)})")
        return [(k, self.fresh(f"{r}[{i}]")) for i, k in enumerate(need)]


_KEPT = _Opaque(_kept_grad)


def _drop_dead(lines):
    """Drop the temporaries that are dead at each kept step: the step
    ends a compiled segment, whose live locals become its outputs (each a
    stored buffer); a dead one must not be one."""
    temp = re.compile(r"\b[tr]\d+\b")
    last = {}
    for i, line in enumerate(lines):
        for v in temp.findall(line):
            last[v] = i
    out, defined, gone = [], set(), set()
    for i, line in enumerate(lines):
        if "_KEPT(" in line:
            dead = sorted(v for v in defined - gone if last[v] < i)
            if dead:
                # rebound, not `del`: the tracer has no DELETE_FAST (a
                # graph break there ran the rest of the backward eagerly)
                out.append(f"    {' = '.join(dead)} = None")
                gone.update(dead)
        out.append(line)
        defined.add(line.split("=")[0].strip())
    return out


# ---- the plan --------------------------------------------------------------

class Plan:
    """What the C runtime reads: ``reason`` (None, or why the graph runs
    eagerly), ``saved`` (node ids returned after the outputs), ``keep``
    (extern node id -> _Keep: the calls the runner makes under grad mode)
    and ``finish(runner)``."""

    reason = None
    keep = {}
    written = {}
    node_bumps = False
    stale = None
    holdable = ()

    def __init__(self, desc):
        self.graph = graph = Graph(desc)
        self.rg = rg = _requires_grad(graph)
        self.nout = len(graph.outputs)
        # graph inputs that in-place ops write (input index -> the output
        # of its new value): the runtime copies the new values in after
        # the node's forward (writeback.c)
        self.written = written = dict(desc.get("written", ()))
        self.alias_out = self.input_aliases()
        self.view_out = self.intermediate_views()
        # tensors the graph made and wrote in place: (output, eager's
        # version count), set by the node's forward (convert.c
        # node_sets_versions says why)
        self.bumped = [tuple(x) for x in desc.get("bumped", ())]
        self.diff_outputs = [j for j, o in enumerate(graph.outputs)
                             if rg[o.index] and j not in self.alias_out
                             and self.view_out.get(j, (j,))[0] == j]
        self.nondiff = [j for j in range(self.nout)
                        if j not in self.diff_outputs]
        self.grad_inputs = [n.input_index for n in graph.inputs
                            if rg[n.index]]
        self.saved = []
        self.nsaved = 0
        self.kept_sizes = []
        self.kept_out = set()
        self.backward_fn = None
        self.variants = {}   # outputs with a gradient -> backward_for
        self.reads = {}      # ... -> the parameters that one reads
        self.stale_of = {}   # ... -> _Builder.stale of that one
        self.eager_reason = None
        # a replay draws the random numbers the forward drew only from the
        # same RNG state: kept at each forward of a graph that may draw
        self.random = any(n.op in _GENERIC for n in graph.nodes
                          if n.kind == "op")
        # what a replay (torch's autograd over the graph's ops) computes:
        # the differentiable outputs and what they are made of (every node
        # where one may draw random numbers, which must be drawn in
        # order), and the inputs those read, which the node saves with
        # their versions checked as autograd would: not an input only the
        # other nodes read (an int tensor that code after the node writes
        # in place, which no eager op saved: fuzz seed 31421)
        self.replay_nodes = None if self.random else self.made_of(
            [self.grad_node(j) for j in self.diff_outputs])
        self.replay_reads = {n.input_index for n in graph.inputs
                             if self.replay_nodes is None
                             or n.index in self.replay_nodes}
        self.inputs_used = sorted(self.replay_reads)
        # the bases of views returned by the node in their outputs' place
        # (intermediate_views): fetched after the saved values
        self.bases = sorted({r for j, (k, r, _) in self.view_out.items()
                             if k == j})
        self.saved = list(self.bases)
        if not self.diff_outputs:
            return
        self.node_bumps = bool(self.bumped)
        b = _Builder(graph, rg, written=written)
        result = b.build(self.grads_in(self.diff_outputs))
        self.stale = b.stale
        if b.reason and written:
            # the replay would read the inputs after the writes
            self.reason = (f"an in-place write into an input of a graph "
                           f"whose backward runs through torch's autograd "
                           f"({b.reason}; not compiled yet)")
            return
        if b.reason:
            self.eager_reason = b.reason
            _log("graph_breaks", f"tcjit training: the backward of this graph "
                                 f"runs through torch's autograd: {b.reason}")
            return
        self.reason = self.kept_reads_bumped(b.kept)
        if self.reason:
            return
        # what the backward reads: graph inputs from the call, computed
        # nodes as extra outputs of the forward
        inputs_used, saved = [], []
        for idx in sorted(b.values):
            n = graph.nodes[idx]
            if n.kind == "input":
                inputs_used.append(n.input_index)
            else:
                saved.append(idx)
        # an input the graph writes, whose value before the write the
        # backward reads: read by the in-place ops themselves (t.mul_(x)
        # needs t for x's gradient), eager saves original_self.clone(),
        # so the forward saves a copy of it (a negative id asks the C side
        # for it: autograd.c, -1 - the input's node); read by an op whose
        # result is not written (y = x * t; t.add_(1)), eager saves t
        # itself and its backward raises after the write: the node saves
        # the input, and autograd's version check raises as eager's.
        snap = [i for i in inputs_used if i in written
                and self.read_by_write(b, i, written[i])]
        inputs_used = [i for i in inputs_used if i not in snap]
        self.inputs_used = inputs_used
        # the inputs _Node.forward may hold (written, and the value written
        # needs no grad: the write-back gives them no history)
        self.holdable = [i for i in inputs_used if i in written and not
                         rg[graph.outputs[written[i]].index]]
        # the kept calls' operands are returned too (pinned), not saved
        saved_names = [b.values[s] for s in saved] + [
            b.values[graph.inputs[i].index] for i in snap]
        saved = saved + [-1 - graph.inputs[i].index for i in snap]
        self.nsaved = len(saved)
        self.saved = saved + sorted(
            i for i in b.pinned - set(saved)
            if graph.nodes[i].kind != "input")
        self.saved += self.bases
        self.keep = {n.index: _Keep(n.call, need, slot)
                     for slot, (n, need) in enumerate(b.kept)}
        self.slots = {n.index: slot for slot, (n, _) in enumerate(b.kept)}
        self.kept_sizes, self.kept_out = self.kept_layout(b.kept)
        # the backward's parameters: these values, then the gradients
        self.params = ([b.values[graph.inputs[i].index] for i in inputs_used]
                       + saved_names)
        # its function is made when a backward first needs it: a model's
        # logits next to its loss get no gradient, and only the backward
        # for the loss's (backward_for) runs
        self.backward_src = self.source(b, result, self.diff_outputs)
        self.env = b.env
        _log("graph", f"tcjit training: backward of a graph with "
                      f"{len(graph.ops())} ops, {len(saved)} saved "
                      f"values, {len(b.recomputed)} recomputed, "
                      f"{len(b.kept)} kept extern calls:\n"
                      f"{self.backward_src}")

    def kept_reads_bumped(self, kept):
        """Why the graph cannot be compiled, or None: a kept extern call
        (its backward is torch's own) that reads a tensor the graph makes
        and writes in place (``bumped``: the node sets its version counter
        to eager's after the call).  torch saves it at the version it has
        when the call runs, and the node's setting it later makes
        autograd's check raise in the backward (fuzz seed 24606:
        ``v = rsqrt(x); v += 1; v @ w``).  Which version eager's call saw
        depends on where the call is among the writes, which the graph
        does not record."""
        bumped = {self.graph.outputs[j].index for j, _ in self.bumped}
        if not bumped:
            return None

        def root(n):
            while n.base is not None:
                n = n.base
            return n.index
        for n, _ in kept:
            if any(root(a) in bumped for a in n.args):
                return (f"an extern call whose backward is torch's own "
                        f"({n.op}) reads a tensor the graph made and wrote "
                        f"in place, whose version autograd checks against "
                        f"the one the call saw (not compiled yet)")
        return None

    def input_aliases(self):
        """Outputs that are an input or a view of one (x.t(), t.add_(x);
        return t[0]): output j -> (input, (shape, stride, offset) or None
        for the input itself).  The node does not return them: a view
        that a torch.autograd.Function returns is a view of its
        multi-output node, which autograd forbids to write in place or to
        use after its base is written (the write-back writes a written
        input), and a view of such a view fails in the next node's
        apply (HF LED: a node returning query.transpose(1, 2) of a query
        that an earlier node returned as a view).  They are made after the
        node's call as torch's own views of the input (finish): their
        gradient flows to the input as through eager's views, and after a
        write-back into the input autograd rebases them onto its new
        history as it rebases eager's views."""
        out = {}
        for j, o in enumerate(self.graph.outputs):
            r = o.base if o.base is not None else o
            # (not of an input whose elements share memory, an expanded
            # x: as_strided's backward sums its aliases' gradients in
            # storage, where eager's view ops keep them apart, fuzz seed
            # 21061; nothing writes such an input in place)
            if r.kind == "input" and o.dtype == r.dtype \
                    and not _overlapping(r.shape, r.stride):
                # (x.detach(), a view made under no_grad: no gradient)
                out[j] = (r.input_index, None if o is r else (
                    tuple(o.shape), tuple(o.stride), o.offset),
                    self.rg[o.index] or not self.rg[r.index])
        return out

    def intermediate_views(self):
        """Differentiable outputs that are views of a computed tensor
        (return y[:, :2] of y = x * w): output j -> (the output k that
        the node returns their base in, the base's node index, (shape,
        stride, offset)).  A view that a torch.autograd.Function returns
        was "created inside a custom Function": autograd refuses to write
        it in place (eager's y[:, :2].mul_(2) is fine).  As AOTAutograd
        does, the node returns the base instead, once (in the place of the
        base itself when it is an output, else of the first such view),
        and the views are made after the call as torch's own views of it
        (with_views): their in-place writes rebase the base's history as
        eager's do."""
        out, owner = {}, {}
        for j, o in enumerate(self.graph.outputs):
            if o.base is None and self.rg[o.index]:
                owner.setdefault(o.index, j)
        for j, o in enumerate(self.graph.outputs):
            r = o.base
            # (not a piece of split / chunk / unbind: eager forbids its
            # write, and so does autograd for the node's own view)
            if (r is None or r.kind != "op" or j in self.alias_out
                    or not self.rg[o.index] or not self.rg[r.index]
                    or o.dtype != r.dtype or o.multi_view):
                continue
            k = owner.setdefault(r.index, j)
            out[j] = (k, r.index, (tuple(o.shape), tuple(o.stride),
                                   o.offset))
        return out

    def with_views(self, outs):
        bases, outs = outs, list(outs)
        for j, (k, _, (shape, stride, offset)) in self.view_out.items():
            base = bases[k]
            outs[j] = torch.as_strided(base, shape, stride,
                                       base.storage_offset() + offset)
        return outs

    def with_aliases(self, outs, inputs):
        outs = list(outs)
        for j, (i, view, grad) in self.alias_out.items():
            x = inputs[i] if grad else inputs[i].detach()
            outs[j] = x if view is None else torch.as_strided(
                x, view[0], view[1], x.storage_offset() + view[2])
        return outs

    def read_by_write(self, b, i, j):
        """Every node whose backward reads input i's old value computes
        the value written into it (an ancestor of output j): the in-place
        ops themselves, in eager (an approximation: an out-of-place op
        feeding the write, t.add_(x * t), counts as one)."""
        graph = self.graph
        readers = b.readers.get(graph.inputs[i].index, ())
        chain, todo = set(), [graph.outputs[j]]
        while todo:
            n = todo.pop()
            if n.index in chain or n.kind != "op":
                continue
            chain.add(n.index)
            todo.extend(a for a in n.args if a.kind == "op")
        return all(r is not None and r.index in chain for r in readers)

    def kept_layout(self, kept):
        """The kept calls' records (_Keep): per call its size, the call's
        results (its items' nodes, for a call returning a sequence) then
        its operands that require grad; and which (call, place) of them
        the caller has (a graph output or input, or a view of one): such
        a tensor may be written in place between the call and the
        backward, so it is kept as an attribute of the node, not a saved
        tensor (autograd would check its version), and only torch's own
        graph checks what it saved, as in eager."""
        graph = self.graph
        items = {(n.args[0].index, n.xattr[0]): n for n in graph.nodes
                 if n.kind == "op" and n.op == "extern_item"}

        def results(n):
            if n.op != "extern" or not n.xattr[1]:
                return [n]
            return [items.get((n.index, k)) for k in range(n.xattr[1])]

        def root(n):
            if n is None:        # an item no node reads
                return None
            while n.base is not None:
                n = n.base
            return n.index
        seen = {root(o) for o in graph.outputs}
        seen.update(n.index for n in graph.inputs)
        sizes, out = [], set()
        for slot, (n, need) in enumerate(kept):
            ts = results(n) + [n.args[k] for k in need]
            sizes.append(len(ts))
            out.update((slot, i) for i, t in enumerate(ts)
                       if root(t) in seen)
        return sizes, out

    def grads_in(self, present):
        """Output node -> the gradient parameters flowing into it, for
        the differentiable outputs present (go<j>)."""
        grads_in = {}
        for j in present:
            grads_in.setdefault(self.grad_node(j).index, []).append(f"go{j}")
        return grads_in

    def made_of(self, nodes):
        """Indices of nodes and of everything they are computed from
        (operands and view bases)."""
        seen, todo = set(), list(nodes)
        while todo:
            n = todo.pop()
            if n.index in seen:
                continue
            seen.add(n.index)
            todo.extend(n.args)
            if n.base is not None:
                todo.append(n.base)
        return seen

    def grad_node(self, j):
        """The node whose gradient output j's is: its base where the node
        returns the base in its place (intermediate_views)."""
        v = self.view_out.get(j)
        return self.graph.nodes[v[1]] if v else self.graph.outputs[j]

    def source(self, b, result, present):
        """The backward's source (b built for the gradients of the outputs
        present): the parameters self.params, then those gradients; the
        gradient of each input that requires grad."""
        rets = []
        for i in self.grad_inputs:
            v = result.get(self.graph.inputs[i].index)
            rets.append(v if v is not None else "None")
        gos = [f"go{j}" for j in present]
        return (f"def tcjit_backward({', '.join(self.params + gos)}):\n"
                + "\n".join(_drop_dead(
                    b.lines + [f"    return ({', '.join(rets)},)"]))
                + "\n")

    @staticmethod
    def compiled(src, env):
        """The backward's function of src, compiled by tcjit (_AUTO)."""
        exec(compile(src, "<tcjit backward>", "exec"), env)
        from . import _AUTO
        return _C.CompiledFunction(env["tcjit_backward"], _AUTO)

    def backward_for(self, present):
        """The compiled backward when only the outputs present get a
        gradient (a model's logits next to its loss: autograd passes None,
        not a tensor of zeros to read), or None: the full one, with zeros
        for the others."""
        fn = self.variants.get(present)
        if fn is None:
            b = _Builder(self.graph, self.rg, slots=self.slots,
                         written=self.written)
            result = b.build(self.grads_in(present))
            fn = False
            if not b.reason and all(v in self.params
                                    for v in b.values.values()):
                src = self.source(b, result, present)
                _log("graph", f"tcjit training: backward for the gradients "
                              f"of outputs {list(present)}:\n{src}")
                fn = self.compiled(src, b.env)
                self.reads[present] = set(b.values.values())
                self.stale_of[present] = b.stale
            self.variants[present] = fn
        return fn or None

    def finish(self, runner):
        self.runner = runner
        if not self.diff_outputs:
            return runner          # inference: no autograd node
        if self.view_out:
            call = lambda *inputs: self.with_views(_Node.apply(self, *inputs))
        else:
            call = lambda *inputs: _Node.apply(self, *inputs)
        if self.alias_out:
            return lambda *inputs: self.with_aliases(call(*inputs), inputs)
        return call

    # called by _Node.backward
    def backward(self, ctx, gos):
        if self.eager_reason is not None or torch.is_grad_enabled():
            _raise_stale(self.stale)
            return self.replay_backward(ctx, gos)
        present = tuple(j for j in self.diff_outputs if gos[j] is not None)
        if not present:
            return [None] * self.graph_ninputs
        fn, reads, stale = None, None, self.stale
        if present != tuple(self.diff_outputs):
            fn = self.backward_for(present)
            reads = self.reads.get(present)
            stale = self.stale_of.get(present, stale)
        if fn is None:
            if self.backward_fn is None:
                self.backward_fn = self.compiled(self.backward_src, self.env)
            fn, present, reads = self.backward_fn, self.diff_outputs, None
            stale = self.stale
        _raise_stale(stale)
        st = self.saved_args(ctx, reads)
        if ctx.held_saved and not _keep_graph():
            ctx.held_saved = None
        nb = len(self.inputs_used) + self.nsaved
        prev = getattr(_TLS, "cur", None)
        _TLS.cur = self.kept_records(st[nb:], ctx)
        try:
            grads = fn(*st[:nb], *[self.grad_out(gos, j) for j in present])
        finally:
            _TLS.cur = prev
        out = [None] * self.graph_ninputs
        for i, gr in zip(self.grad_inputs, grads):
            out[i] = gr
        return out

    def saved_args(self, ctx, reads=None, values=True):
        """ctx.saved_tensors with the held inputs back in their places
        (_Node.forward): an input the graph writes that needs no grad is
        held outside save_for_backward, whose unpacking checks every
        saved tensor's version, and checked here only where this backward
        reads it (reads: parameter names, None: all).  Eager saves it
        only for the ops that read it, and raises only if the backward
        reaches one of those: a local kept alive across a graph break
        (v0 = a0 @ a2; a0.add_(1)) made the node save a0 for v0's
        gradient, and a backward of the other outputs raised (grad fuzz
        seed 22427).  values=False: the computed values are not checked
        (a replay reads only the inputs)."""
        st = list(ctx.saved_tensors)
        held = getattr(ctx, "held", None) or {}
        for k, i in enumerate(self.inputs_used):
            if i in held:
                x, version = held[i]
                _check_version(x, version, reads is None
                               or self.params[k] in reads)
                st.insert(k, x)
        # the computed values (_Node.forward: held as well; released by
        # a backward that does not retain the graph, as saved tensors are)
        at = len(self.inputs_used)
        got, held_saved = [], getattr(ctx, "held_saved", ())
        if held_saved is None:
            raise RuntimeError(
                "Trying to backward through the graph a second time (or "
                "directly access saved tensors after they have already "
                "been freed). Saved intermediate values of the graph are "
                "freed when you call .backward() or autograd.grad(). "
                "Specify retain_graph=True if you need to backward through "
                "the graph a second time or if you need to access saved "
                "tensors after calling backward.")
        for m, (x, version) in enumerate(held_saved):
            _check_version(x, version, values and version is not None and (
                reads is None or self.params[at + m] in reads))
            got.append(x)
        st[at:at] = got
        return st

    def grad_out(self, gos, j):
        """Output j's gradient; zeros where autograd passed None."""
        if gos[j] is not None:
            return gos[j]
        o = self.grad_node(j)
        return torch.zeros(o.shape, dtype=o.dtype, device=self.graph.device)

    def replay_backward(self, ctx, gos):
        """torch's autograd over an eager replay of the graph: ops without
        a rule, and create_graph=True (double backward)."""
        if len(self.inputs_used) == self.graph_ninputs:
            inputs = self.saved_args(ctx, values=False)
            inputs = inputs[:self.graph_ninputs]
        else:
            # inputs the compiled backward does not read: kept by
            # reference, their versions checked here as autograd would
            inputs = ctx.inputs
            if any(i in self.written for i in range(len(inputs))):
                raise RuntimeError(
                    "tcjit: a double backward (create_graph=True) through "
                    "a compiled graph that writes its inputs in place is "
                    "not supported yet; run this function without tcjit "
                    "for it")
            for i, (x, v) in enumerate(zip(inputs, ctx.versions)):
                _check_version(x, v, i in self.replay_reads
                               and v is not None)
        create = torch.is_grad_enabled()
        cuda = self.graph.device.type == "cuda"
        with torch.enable_grad(), torch.random.fork_rng(
                devices=[self.graph.device] if cuda else [],
                enabled=ctx.rng is not None):
            if ctx.rng is not None:
                torch.set_rng_state(ctx.rng[0])
                if cuda:
                    torch.cuda.set_rng_state(ctx.rng[1], self.graph.device)
            # an input that needs no grad is replayed from a copy: an
            # extern may write it as a side effect the graph does not see
            # (torch.batch_norm's running statistics in training), which
            # the forward already did once
            xs = [None if i not in self.replay_reads
                  else x if not isinstance(x, torch.Tensor)
                  else _replay_copy(x) if not x.requires_grad
                  else x if create
                  else x.detach().requires_grad_()
                  for i, x in enumerate(inputs)]
            env = self.graph._values(xs, self.replay_nodes)
            present = [j for j in self.diff_outputs if gos[j] is not None]
            outs = {j: env[self.grad_node(j).index] for j in present}
            need = [i for i in self.grad_inputs if i in self.replay_reads]
            grads = [None] * len(need)
            if present:
                grads = torch.autograd.grad(
                    [outs[j] for j in present], [xs[i] for i in need],
                    [gos[j] for j in present], allow_unused=True,
                    create_graph=create)
        out = [None] * self.graph_ninputs
        for i, gr in zip(need, grads):
            out[i] = gr
        return out

    def kept_records(self, flat, ctx):
        """The kept calls' (result, operands): from the saved tensors, or
        the node's attribute for those the caller sees (kept_out)."""
        recs, at = [], 0
        for k, size in enumerate(self.kept_sizes):
            rec = []
            for i in range(size):
                if (k, i) in self.kept_out:
                    rec.append(ctx.kept_out[k, i])
                else:
                    rec.append(flat[at])
                    at += 1
            recs.append(rec)
        return recs

    @property
    def graph_ninputs(self):
        return len(self.graph.inputs)


# What eager's op saves for its backward (torch's derivatives.yaml) where
# tcjit's rule reads the same: operand indices, -1 for the result.  A rule
# that reads a value this table lacks for its op is not a stale read
# (_Builder.read): eager's error is missed there, never invented.
_EAGER_SAVES = {
    "mul": (0, 1), "div": (0, 1), "pow": (0, 1), "sin": (0,), "cos": (0,),
    "log": (0,), "abs": (0,), "exp": (-1,), "tanh": (-1,),
    "sigmoid": (-1,), "sqrt": (-1,), "rsqrt": (-1,), "relu": (-1,),
    "reciprocal": (-1,),
}


# whether the running backward retains the graph (retain_graph=True):
# the held values live on for the next one (torch >= 2.1; else kept)
_keep_graph = getattr(torch._C._autograd,
                      "_get_current_graph_task_keep_graph", lambda: True)


def _check_version(x, version, read):
    """Autograd's check of a saved tensor, where the backward reads it."""
    if read and x._version != version:
        raise RuntimeError(
            "one of the variables needed for gradient computation has been "
            f"modified by an inplace operation: [{x.type()} "
            f"{list(x.shape)}] is at version {x._version}; expected "
            f"version {version} instead")


def _raise_stale(stale):
    """Eager's error where its backward reads a saved value that an
    in-place op wrote later (_Builder.read)."""
    if stale is None:
        return
    n, v = stale
    t = torch.empty(0, dtype=v.dtype).type()
    raise RuntimeError(
        "one of the variables needed for gradient computation has been "
        f"modified by an inplace operation: [{t} {list(v.shape)}] was "
        f"written in place after {n.op} saved it for the backward (tcjit: "
        f"graph node {v.name}, read by {n.name}). Hint: eager raises here "
        "too; compute the value again, or write a clone")


_set_versions = torch._C._autograd._unsafe_set_version_counter


def _replay_copy(x):
    """A copy of x with x's strides (the replay's views are as_strided
    with the traced strides); x itself where elements overlap (an
    expanded tensor, which no op may write)."""
    if torch._debug_has_internal_overlap(x) != 0:
        return x
    c = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype,
                            device=x.device)
    return c.copy_(x)


class _Node(torch.autograd.Function):
    """A compiled graph as one autograd node."""

    @staticmethod
    def forward(ctx, plan, *inputs):
        ctx.rng = None
        if plan.random:
            dev = plan.graph.device
            ctx.rng = (torch.get_rng_state(), torch.cuda.get_rng_state(dev)
                       if dev.type == "cuda" else None)
        kept = ()
        if plan.keep:
            prev = getattr(_TLS, "kept", None)
            _TLS.kept = [None] * len(plan.keep)
            try:
                res = plan.runner(*inputs)
            finally:
                kept, _TLS.kept = _TLS.kept, prev
            if None in kept:
                raise RuntimeError("tcjit: an extern call the backward "
                                   "keeps did not run (please report)")
            out = plan.kept_out
            ctx.kept_out = {(k, i): t for k, rec in enumerate(kept)
                            for i, t in enumerate(rec) if (k, i) in out}
            kept = [t for k, rec in enumerate(kept)
                    for i, t in enumerate(rec) if (k, i) not in out]
        else:
            res = plan.runner(*inputs)
        outs = res[:plan.nout]
        if plan.node_bumps:
            _set_versions(tuple(outs[j] for j, _ in plan.bumped),
                          tuple(v for _, v in plan.bumped))
        if plan.alias_out:         # made by with_aliases, after the call
            outs = tuple(None if j in plan.alias_out else o
                         for j, o in enumerate(outs))
        if plan.view_out:          # made by with_views, after the call
            base = dict(zip(plan.bases, res[len(res) - len(plan.bases):]))
            outs = tuple(o if j not in plan.view_out
                         else None if plan.view_out[j][0] != j
                         else base.get(plan.view_out[j][1], o)
                         for j, o in enumerate(outs))
        ctx.plan = plan
        used = plan.inputs_used
        saved = res[plan.nout:plan.nout + plan.nsaved]
        # an input the graph writes that has no autograd history and gets
        # none from the write-back: held, its version checked where a
        # backward reads it (Plan.saved_args; one with a history stays
        # saved: held, its CopyBackwards -> this node -> ctx -> it would
        # be a cycle the garbage collector cannot see)
        ctx.held = {i: (inputs[i], inputs[i]._version)
                    for i in plan.holdable if not inputs[i].requires_grad}
        # the values the graph computed for the backward: held too, as
        # detached aliases (no grad_fn: no reference cycle through ctx)
        # with their versions, checked where a backward reads them
        # (Plan.saved_args).  save_for_backward checks every saved tensor
        # in any backward, and an output written in place after the node
        # (v0.copy_(5); return v0) raised for a value that only the
        # gradient of an output nobody asked for reads (fuzz seed 29034)
        ctx.held_saved = [(t.detach(), t._version)
                          if isinstance(t, torch.Tensor) else (t, None)
                          for t in saved]
        if len(used) == len(inputs) and not ctx.held:
            ctx.save_for_backward(*inputs, *kept)
        else:
            ctx.save_for_backward(*[inputs[i] for i in used
                                    if i not in ctx.held], *kept)
            # for a double backward's replay; not an input the graph
            # writes: the write-back gives it a history through this node
            # (its CopyBackwards), and the node holding it would be a
            # reference cycle through autograd's C++ graph, which the
            # garbage collector cannot see (and the replay would read
            # its value after the write)
            w = plan.written
            ctx.inputs = [None if i in w else x for i, x in enumerate(inputs)]
            ctx.versions = [x._version if isinstance(x, torch.Tensor)
                            else None for x in inputs]
        # an output with no gradient gets None, not zeros (Plan.backward)
        ctx.set_materialize_grads(False)
        nondiff = [outs[j] for j in plan.nondiff
                   if isinstance(outs[j], torch.Tensor)]
        if nondiff:
            ctx.mark_non_differentiable(*nondiff)
        return outs

    @staticmethod
    def backward(ctx, *gos):
        return (None, *ctx.plan.backward(ctx, gos))


def plan(desc):
    """Called by the C runtime for a graph in which a node requires grad."""
    return Plan(desc)
