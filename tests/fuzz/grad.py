"""The "grad" backend of the fuzzer: a program compiled with its float
inputs requiring grad, under grad mode, against eager -- the training path
(docs/training.md): the autograd node, its backward, saved values, writes
into inputs under grad.

For each call (1: compiles, 2: the cached code on other values) a subset
of the float inputs, chosen from the seed, becomes leaves that require
grad (`x.detach().requires_grad_()`: the same layout); both sides run the
program, then the loss sum(out.double() * w) over the float outputs that
require grad (w fixed per output) and torch.autograd.grad of it.  Compared
with eager:

* exceptions in the forward and in the backward: the same type;
* every output leaf's requires_grad, dtype, shape and value (as check.py);
* which leaves get a gradient (None where eager's is None), and the
  gradients' values: torch.testing's tolerance for the dtype, or against
  the float64 program's gradients: a root-mean-square error at most twice
  eager's (_rmse_close), or each element within check.ERR_RATIO times
  eager's error.

Failure signatures are grad:<kind>:<detail> like the other backends'."""
import random

import torch

import tcjit

from .check import (Checker, Eager, _call, _exc_detail, _leaves, _spread, _unit_roundoff,
                    value_mismatch)


def _chosen(prog, call, inputs):
    """Indices of the float inputs that require grad in this call: each
    with probability 3/4, at least one."""
    floats = [k for k, x in enumerate(inputs)
              if isinstance(x, torch.Tensor) and x.dtype.is_floating_point]
    rng = random.Random(prog.seed * 7 + call)
    pick = [k for k in floats if rng.random() < 0.75]
    return pick or floats[:1]


def _weights(t, k):
    g = torch.Generator().manual_seed(1000 + k)
    return torch.randn(t.shape, generator=g, dtype=torch.float64).to(t.device)


class Run:
    """One side of a call: outputs, the gradients of the chosen leaves, or
    the exception and where (forward / backward)."""

    def __init__(self, fn, make_inputs, variant, device, chosen, upcast=False,
                 perturb=None):
        inputs = make_inputs(variant, device)
        if perturb is not None:     # (seed, u): each float times 1 +- u
            g = torch.Generator().manual_seed(perturb[0])
            inputs = [x * (1 + perturb[1] * (2 * torch.rand(x.shape, generator=g,
                                                            dtype=torch.float64) - 1)
                           ).to(x.device) if isinstance(x, torch.Tensor)
                      and x.dtype.is_floating_point else x for x in inputs]
        self.leaves = []
        for k in chosen:
            x = inputs[k].detach()
            x = (x.double() if upcast else x).requires_grad_()
            inputs[k] = x
            self.leaves.append(x)
        if upcast:
            inputs = [x.double() if isinstance(x, torch.Tensor) and x.dtype.is_floating_point
                      and not x.requires_grad else x for x in inputs]
        self.grads, self.where = None, None
        with torch.enable_grad():
            self.out, self.exc = _call(fn, inputs)
            if self.exc is not None:
                self.where = "forward"
                return
            outs = [t for _, t in _leaves(self.out, "", [])]
            diff = [(i, t) for i, t in enumerate(outs)
                    if t.requires_grad and t.dtype.is_floating_point]
            if not diff:
                self.grads = [None] * len(self.leaves)
                return
            loss = sum((t.double() * _weights(t, i)).sum() for i, t in diff)
            self.grads, self.exc = _call(
                lambda: torch.autograd.grad(loss, self.leaves, allow_unused=True), ())
            if self.exc is not None:
                self.where = "backward"


def _reference(prog, f64, make_inputs, variant, device, chosen):
    """Per chosen leaf, (the float64 program's gradient, its spread): how
    far it moves when the inputs are perturbed by the least precise float
    dtype's rounding error (check.py's spread for values): a gradient that
    sums products of float16 values of 8 moves by 1e-2 (fuzz seed 1221).
    None if the float64 program raises."""
    runs = []
    u = _unit_roundoff(prog, make_inputs(variant, device))
    for k in range(3):
        run = Run(f64, make_inputs, variant, device, chosen, upcast=True,
                  perturb=(k, u) if k else None)
        if run.exc is not None or run.grads is None:
            return None
        runs.append(run.grads)
    out = []
    for j, r in enumerate(runs[0]):
        if r is None:
            out.append((None, None))
            continue
        out.append((r, _spread(r, [run[j] for run in runs[1:] if run[j] is not None])))
    return out


def _rmse_close(ga, ge, r):
    """Inductor's criterion for results against a float64 reference
    (torch._dynamo.utils.same(fp64_ref=...)): the root-mean-square error
    at most twice eager's, plus a rounding of the dtype at the scale of
    the values.  A gradient sums many products in another order; eager is
    closer at some elements by luck (fuzz seed 139: float16, 244 of 40000
    elements, both maximum errors 1.0e-3)."""
    fin = torch.isfinite(r)
    if not bool((torch.isfinite(ga) == fin).all() and (torch.isfinite(ge) == fin).all()):
        return False
    if not bool(fin.any()):
        return True
    a, e, rr = ga.double()[fin], ge.double()[fin], r[fin]
    rmse_a = (a - rr).pow(2).mean().sqrt()
    rmse_e = (e - rr).pow(2).mean().sqrt()
    tol = torch.finfo(ge.dtype).eps * rr.abs().max()
    return bool(rmse_a <= 2 * rmse_e + tol)


def _check_call(prog, f, f64, make_inputs, variant, call, device, cf):
    c = Checker(prog, "grad", call)
    chosen = _chosen(prog, call, make_inputs(variant, device))
    if not chosen:
        return c.failures
    e = Run(f, make_inputs, variant, device, chosen)
    a = Run(cf, make_inputs, variant, device, chosen)
    if e.exc is not None or a.exc is not None:
        if e.exc is None:
            c.fail("raised", _exc_detail(a.exc),
                   f"tcjit raises in the {a.where} {type(a.exc).__name__}: {a.exc}")
        elif a.exc is None:
            c.fail("no-exception", _exc_detail(e.exc),
                   f"eager raises in the {e.where} {type(e.exc).__name__}: {e.exc}; "
                   "tcjit did not")
        elif type(a.exc) is not type(e.exc) or a.where != e.where:
            c.fail("wrong-exception", f"{type(e.exc).__name__}->{type(a.exc).__name__}",
                   f"eager raises in the {e.where} {type(e.exc).__name__}: {e.exc}\n"
                   f"tcjit raises in the {a.where} {type(a.exc).__name__}: {a.exc}")
        return c.failures
    if not c.structure(a.out, e.out):
        return c.failures
    A, E = _leaves(a.out, "", []), _leaves(e.out, "", [])
    R = F = [None] * len(E)
    if any((x.dtype, x.shape) == (y.dtype, y.shape) and x.dtype.is_floating_point
           and value_mismatch(x, y) for (_, x), (_, y) in zip(A, E)):
        eager = Eager(prog, f, make_inputs, variant, device)   # no grad: same values
        R, F = eager.ref()[0] or R, eager.floors()[0] or F
    for ((path, x), (_, y)), r, fl in zip(zip(A, E), R, F):
        if x.requires_grad != y.requires_grad:
            c.fail("requires_grad", c.op(path),
                   f"actual{path}.requires_grad {x.requires_grad} != eager {y.requires_grad}")
        c.tensor(path, x, y, r, fl)
    ref = None
    for j, (ga, ge) in enumerate(zip(a.grads, e.grads)):
        k = chosen[j]
        if (ga is None) != (ge is None):
            c.fail("grad-none", "None" if ga is None else "tensor",
                   f"grad of input {k}: {'None' if ga is None else 'a tensor'}, eager "
                   f"{'None' if ge is None else 'a tensor'}")
            continue
        if ga is None:
            continue
        if (ga.dtype, ga.shape) != (ge.dtype, ge.shape):
            c.fail("grad-meta", str(ge.dtype)[6:], f"grad of input {k}: {ga.dtype} "
                   f"{tuple(ga.shape)} != eager {ge.dtype} {tuple(ge.shape)}")
            continue
        if value_mismatch(ga, ge) is None:
            continue
        if ref is None:
            ref = _reference(prog, f64, make_inputs, variant, device, chosen)
        r, spread = ref[j] if ref is not None else (None, None)
        if r is not None and _rmse_close(ga, ge, r):
            continue
        msg = value_mismatch(ga, ge, (r, spread) if r is not None else None)
        if msg:
            c.fail("grad", str(ge.dtype)[6:],
                   f"grad of input {k} ({ge.dtype}, shape {tuple(ge.shape)}): {msg}")
    return c.failures


def run_grad(prog, device="cpu"):
    """The failures of the program's two calls compiled under grad; value
    failures that pass with emulate_precision_casts (float16 / bfloat16
    rounded once per fused kernel, check.py) are of kind "precision"."""
    found = _run(prog, device)
    if not any(x["kind"] in ("value", "grad") for x in found):
        return found
    with tcjit.config.patch(emulate_precision_casts=1):
        again = _run(prog, device)
    if again:
        return found
    return [dict(x, kind="precision") if x["kind"] in ("value", "grad") else x
            for x in found]


def _run(prog, device):
    f, make_inputs = prog.load()
    f64 = prog.load(float64=True)[0]
    tcjit.reset()
    cf = tcjit.compile(f)
    found = []
    for call, variant in ((1, 0), (2, 1)):
        fs = _check_call(prog, f, f64, make_inputs, variant, call, device, cf)
        if call == 2:
            seen = {(x["kind"], x["detail"]) for x in found}
            fs = [dict(x, only2=True) for x in fs if (x["kind"], x["detail"]) not in seen]
        found += fs
    return found

