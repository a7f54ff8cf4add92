"""Freezing (docs/freezing.md): module parameters and buffers as constants.

The C compiler (src/frame_eval/freezing.c) calls ``plan`` once per compile
with tcjit.config.freezing on.  It decides which inputs are frozen, folds
batch_norm (eval mode) into the convolution before it, and evaluates once
the ops whose operands are all constants.  The values are computed here
with torch; src/graph/freeze.c rewrites the graph around them.
"""
import torch

from . import _C
from .graph import Graph

# folds (src/graph/freeze.h tc_fold_kind)
CONST, CONV = 0, 1

# extern ops that compute the same value on every call (no random numbers,
# no checks of operand values that eager raises for)
_PURE_EXTERNS = {"mm", "bmm", "matmul", "addmm", "baddbmm", "linear",
                 "conv1d", "conv2d", "cat", "stack", "group_norm"}
_CONVS = {"conv1d", "conv2d"}


def frozen(value, owner, name):
    """Whether graph input `value`, read as attribute `name` of `owner`, is
    a constant: a parameter or buffer of an nn.Module that autograd does
    not need (grad mode off, or it does not require grad)."""
    if not isinstance(owner, torch.nn.Module) or not isinstance(name, str):
        return False
    if name not in owner._parameters and name not in owner._buffers:
        return False
    return not (torch.is_grad_enabled() and value.requires_grad)


def _batch_norm_args(node):
    """(input, weight, bias, mean, var, eps) nodes / values of an eval-mode
    torch.batch_norm extern node, or None."""
    if node.op != "extern" or node.xattr[1] != 0:
        return None
    # the call is recognized where the batch norms freezing leaves are
    # lowered (src/frame_eval/bn_eval.c), so both match the same calls
    call = _C.eval_batch_norm_call(node.xattr[0])
    if call is None:
        return None
    *ops, eps = call
    return tuple(node.args[k] if k >= 0 else None for k in ops) + (eps,)


def _conv_bn(g, const, users, outputs):
    """{bn node index: (conv node, fold args)} for batch_norm nodes whose
    input is a convolution used by nothing else, all parameters const."""
    found = {}
    for n in g.nodes:
        bn = _batch_norm_args(n) if n.kind == "op" else None
        if bn is None:
            continue
        conv, w, b, mean, var, eps = bn
        if (conv.op not in _CONVS or users[conv.index] != 1
                or conv.index in outputs or conv.shape != n.shape
                or conv.dtype != n.dtype):
            continue
        params = [conv.args[1], mean, var] + [
            a for a in (conv.args[2] if len(conv.args) > 2 else None, w, b)
            if a is not None]
        if all(const[p.index] for p in params):
            found[n.index] = (conv, w, b, mean, var, eps)
    return found


def _fold_conv_bn(env, conv, w, b, mean, var, eps):
    """Weight and bias of conv followed by batch_norm, in float64 and
    rounded once to the convolution's dtype."""
    cw = env[conv.args[1].index]
    dt = cw.dtype
    scale = torch.rsqrt(env[var.index].double() + eps)
    if w is not None:
        scale = scale * env[w.index].double()
    shift = -env[mean.index].double() * scale
    if len(conv.args) > 2:
        shift = shift + env[conv.args[2].index].double() * scale
    if b is not None:
        shift = shift + env[b.index].double()
    weight = cw.double() * scale.reshape((-1,) + (1,) * (cw.dim() - 1))
    return (weight.to(dt).contiguous(), shift.to(dt).contiguous())


def plan(desc, inputs, budget):
    """The folds of one graph.  inputs: the graph inputs, None where not
    frozen.  budget: elements a constant may have (folding must not
    materialize a large broadcast).  Returns (folds, used): folds as
    (kind, node, conv node or -1, tensors) by ascending node, used the
    input indices whose values the folds baked in."""
    g = Graph(desc)
    outputs = {o.index for o in g.outputs}
    users = [0] * len(g.nodes)
    for n in g.nodes:
        for a in n.args:
            users[a.index] += 1
        if n.base is not None:
            users[n.base.index] += 1
    # const: computable at compile time from frozen inputs (at least one:
    # factories alone are left alone)
    const = [False] * len(g.nodes)
    derived = [False] * len(g.nodes)
    for n in g.nodes:
        if n.kind == "input":
            const[n.index] = derived[n.index] = inputs[n.input_index] is not None
        elif n.kind == "scalar":
            const[n.index] = True
        elif n.kind == "op" and (n.op not in _C_EXTERN or n.op in _PURE_EXTERNS):
            deps = list(n.args) + ([n.base] if n.base is not None else [])
            const[n.index] = all(const[a.index] for a in deps)
            derived[n.index] = any(derived[a.index] for a in deps)
    const = [c and d or n.kind == "scalar"
             for c, d, n in zip(const, derived, g.nodes)]
    bns = _conv_bn(g, const, users, outputs)
    # needed[i]: node i's value is read at run time (by a node that is not
    # constant, an output, or a replaced batch_norm's new convolution)
    needed = [False] * len(g.nodes)
    for n in g.nodes:
        if n.index in bns:
            needed[bns[n.index][0].args[0].index] = True
            continue
        if const[n.index] and n.index not in outputs:
            continue
        for a in list(n.args) + ([n.base] if n.base is not None else []):
            needed[a.index] = True
    for o in outputs:
        needed[o] = True
    fold = set()
    for n in reversed(g.nodes):
        i = n.index
        if not (const[i] and needed[i]) or n.kind != "op":
            continue
        if (n.base is None and i not in outputs
                and n.shape.numel() <= budget):
            fold.add(i)
            continue
        for a in list(n.args) + ([n.base] if n.base is not None else []):
            needed[a.index] = True
    if not fold and not bns:
        return [], []
    # every constant the folds read, and the frozen inputs under them
    wanted = set()
    stack = list(fold) + [p.index for i, (conv, w, b, mean, var, _e)
                          in bns.items()
                          for p in [conv.args[1], mean, var]
                          + list(conv.args[2:]) + [w, b] if p is not None]
    while stack:
        i = stack.pop()
        if i in wanted:
            continue
        wanted.add(i)
        n = g.nodes[i]
        stack += [a.index for a in n.args]
        if n.base is not None:
            stack.append(n.base.index)
    with torch.no_grad():
        env = g._values(inputs, wanted)
        folds = []
        for i in sorted(fold | set(bns)):
            if i in bns:
                folds.append((CONV, i, bns[i][0].index,
                              _fold_conv_bn(env, *bns[i])))
            else:
                folds.append((CONST, i, -1, (env[i],)))
    used = sorted(g.nodes[i].input_index for i in wanted
                  if g.nodes[i].kind == "input")
    return folds, used


_C_EXTERN = {row["name"] for row in _C.op_table() if row["kind"] == "extern"}
