"""The oracle: a program run eagerly and through tcjit.compile, compared.

For each backend ("auto", "eager") the program is compiled once and called
twice: call 1 compiles (inputs variant 0), call 2 runs the cached code on
inputs with other values (variant 1).  Each call gets fresh inputs and is
compared with an eager run on its own fresh inputs:

* exceptions: if eager raises, tcjit raises the same type; if eager does
  not, tcjit does not;
* the result's structure (tuple / list / torch.return_types), and for
  every tensor in it: dtype, shape, device, strides (when it has elements)
  and values;
* aliasing: out[i] is out[j], out[i] is an input, and which outputs and
  inputs share storage (at which offset), all as in eager (kinds: merged /
  unmerged: tcjit's are / are not one object where eager's are not / are;
  shared / unshared: the same for storage; offset);
* the inputs after the call (in-place ops), values and metadata.

Values: integers and bools exactly; floats with torch.testing's default
tolerances for the dtype (the suite's).  Where that fails, the value may
still be right: tcjit computes float16/bfloat16 in float32 and rounds once
where eager rounds after every op, and sums in another order.  So a float
is also accepted when it is within those tolerances of the reference (the
program computed with every float in float64: inputs upcast, casts and
dtype arguments too), or no more than ERR_RATIO times as far from it as
eager's own value is plus how far the reference moves when its inputs are
perturbed by the least precise dtype's rounding error (so ill-conditioned
values, such as sin(1 / x) of a float16 x, do not count as failures).
Where eager's value is NaN and the reference's finite, eager's error is
unbounded and any finite value is accepted.  Where eager's value is itself
noise (its error of the value's own magnitude, _noise), a NaN or inf is
accepted too.

A failure is a dict with its signature "backend:kind:detail" (detail: the
op that made the output, or the exception), which classifies failures for
the KNOWN list and the minimizer.
"""
import re
import warnings

import torch

import tcjit

from .program import storage_key

BACKENDS = ("auto", "eager")
TOL = {torch.float64: (1e-7, 1e-7), torch.float32: (1.3e-6, 1e-5),
       torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5)}
ERR_RATIO = 8.0
NOISE_FLOOR = 0.01         # _noise: eager's error relative to the tensor's scale
MAX_FAILURES = 6          # per program and backend: the first few say enough


def signature(f):
    return f"{f['backend']}:{f['kind']}{'@2' if f.get('only2') else ''}:{f['detail']}"


def _exc_detail(e):
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    msg = re.sub(r"\d+", "N", msg)
    msg = re.sub(r"'[^']*'|\"[^\"]*\"", "'...'", msg)
    return f"{type(e).__name__}: {msg[:60]}".rstrip(": ")


def _call(fn, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*args), None
        except Exception as e:  # noqa: BLE001 - any error is compared
            return None, e


def _upcast(x):
    if isinstance(x, torch.Tensor) and x.dtype.is_floating_point:
        return x.double()
    return x


def _leaves(out, path, acc):
    if isinstance(out, torch.Tensor):
        acc.append((path, out))
    elif isinstance(out, (tuple, list)):
        for i, o in enumerate(out):
            _leaves(o, f"{path}[{i}]", acc)
    return acc


# dtypes by precision, most precise first
_BY_PRECISION = (torch.float64, torch.float32, torch.float16, torch.bfloat16)


def _least_precise(dts):
    dts = [d for d in dts if d in _BY_PRECISION]
    return max(dts, key=_BY_PRECISION.index) if dts else None


class _Floors(torch.overrides.TorchFunctionMode):
    """Records, for every float tensor a torch function returns, the least
    precise float dtype its value was computed in: a float64 result of a
    float32 layer_norm is only as accurate as float32, and is compared with
    float32's tolerance.  Inputs and integers are exact (None); a view
    inherits its base's floor."""

    def __init__(self):
        super().__init__()
        self.seen = {}    # id -> (tensor, floor); the tensor keeps the id

    def floor(self, t):
        hit = self.seen.get(id(t))
        return hit[1] if hit is not None and hit[0] is t else None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        lows = [self.floor(t) for _, t in _leaves(list(args) + list(kwargs.values()), "", [])]
        fresh = {id(t) for t in _fresh_floats(out, args, kwargs)}
        for _, t in _leaves(out if isinstance(out, (tuple, list)) else (out,), "", []):
            if t.dtype.is_floating_point:
                own = [t.dtype] if id(t) in fresh else []
                self.seen[id(t)] = (t, _least_precise(lows + own + [self.floor(t)]))
        return out


def _fresh_floats(out, args, kwargs):
    """The float tensors among out that are new (no view, no argument)."""
    ins = {id(t) for _, t in _leaves(list(args) + list(kwargs.values()), "", [])}
    return [t for _, t in _leaves(out if isinstance(out, (tuple, list)) else (out,), "", [])
            if t.dtype.is_floating_point and t._base is None and id(t) not in ins]


class _ResultDtypes(torch.overrides.TorchFunctionMode):
    """The dtype of each torch function call's fresh float results, in call
    order (None: no such result)."""

    def __init__(self):
        super().__init__()
        self.dtypes = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        fresh = _fresh_floats(out, args, kwargs)
        self.dtypes.append(fresh[0].dtype if fresh else None)
        return out


_POINTWISE = None


def _pointwise_names():
    """Names of the torch functions, Tensor methods and operators tcjit
    computes as fusible pointwise ops (its registry's bindings)."""
    global _POINTWISE
    if _POINTWISE is None:
        from tcjit import _C
        kinds = {r["name"]: r["kind"] for r in _C.op_table()}
        names = {p.split(".")[-1] for p, op in _C.bindings() if kinds.get(op) == "pointwise"}
        names |= {"truediv", "floordiv", "log1p", "expm1", "log2", "exp2"}
        _POINTWISE = names | {f"__{n}__" for n in names} | {f"__r{n}__" for n in names}
    return _POINTWISE


class _Perturb(torch.overrides.TorchFunctionMode):
    """In the float64 reference, multiplies the fresh float results of each
    torch function call whose result is float32 or narrower in the program
    itself (dtypes: _ResultDtypes of the program, in call order) by
    1 +- u (random signs), u float32's unit roundoff: eager and tcjit may each
    compute an op a float32 ulp differently (their exp, fused or not), and
    what a later op makes of that (exp(exp(x)) multiplies a relative error
    by exp(x)) belongs in the reference's spread.  float64 ops are not
    perturbed: their accuracy is checked at float64's."""

    def __init__(self, dtypes, g, uniform):
        super().__init__()
        self.dtypes, self.g, self.i, self.uniform = dtypes, g, 0, uniform

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        i, self.i = self.i, self.i + 1
        if i >= len(self.dtypes) or self.dtypes[i] in (None, torch.float64):
            return out
        # a float16 / bfloat16 pointwise op's result may stay in float32
        # inside a fused kernel (one rounding per kernel, as Inductor; eager
        # rounds after every op): a whole ulp of its own dtype
        u = 2.0 ** -24
        if (self.dtypes[i] in (torch.float16, torch.bfloat16)
                and getattr(func, "__name__", "") in _pointwise_names()):
            u = torch.finfo(self.dtypes[i]).eps / 2
        for t in _fresh_floats(out, args, kwargs):
            if t.numel():
                # a whole ulp each (random signs), or a uniform fraction of
                # one: equal signs alone can cancel exactly (a sum of
                # 2x + x - 3x stays 0 however x moves)
                if self.uniform:
                    noise = torch.rand(t.shape, generator=self.g, dtype=torch.float64) * 2 - 1
                else:
                    noise = torch.randint(0, 2, t.shape, generator=self.g).double() * 2 - 1
                t.mul_((1 + u * noise).to(t.device, t.dtype))
        return out


class Eager:
    """Eager results of one variant: output, inputs after the call, or the
    exception; on demand, the reference (see ref())."""

    def __init__(self, prog, f, make_inputs, variant, device):
        self.prog, self.make_inputs, self.variant, self.device = prog, make_inputs, variant, device
        self.inputs = make_inputs(variant, device)
        self.out, self.exc = _call(f, self.inputs)
        self._ref = None

    def floors(self):
        """(output leaves, input tensors after the call): each value's
        least precise float dtype on its way (_Floors), from a second run
        of the program on fresh inputs."""
        f = self.prog.load()[0]
        inputs = self.make_inputs(self.variant, self.device)
        mode = _Floors()
        with mode:
            out, exc = _call(f, inputs)
        if exc:
            return None, None
        return ([mode.floor(t) for _, t in _leaves(out, "", [])],
                [mode.floor(x) for x in inputs if isinstance(x, torch.Tensor)])

    def ref(self):
        """(output leaves, input tensors after the call), each a list of
        (value, spread) pairs or None: the program computed with every float
        in float64 (inputs upcast; casts and dtype arguments too), and how
        far that moves when the float inputs are perturbed by the rounding
        error of the least precise float dtype the program uses and each
        float32-or-narrower op's result by a float32 ulp (_Perturb): how
        much rounding differences between eager and tcjit can change a
        value."""
        if self._ref is None:
            f64 = self.prog.load(float64=True)[0]
            mode = _ResultDtypes()
            inputs = self.make_inputs(self.variant, self.device)
            with mode:    # the program's calls only, as _Perturb counts them
                _call(self.prog.load()[0], inputs)
            runs = []
            for perturb in (0, 1, 2, 3, 4):
                inputs = [_upcast(x) for x in self.make_inputs(self.variant, self.device)]
                if perturb:
                    g = torch.Generator().manual_seed(perturb)
                    u = _unit_roundoff(self.prog, self.inputs)
                    inputs = [x * (1 + u * (2 * torch.rand(x.shape, generator=g, dtype=x.dtype)
                                            .to(x.device) - 1))
                              if isinstance(x, torch.Tensor) and x.dtype.is_floating_point
                              else x for x in inputs]
                # ints promoted to float (exp of an int64) too
                default = torch.get_default_dtype()
                torch.set_default_dtype(torch.float64)
                try:
                    if perturb:
                        with _Perturb(mode.dtypes, g, perturb % 2 == 0):
                            out, exc = _call(f64, inputs)
                    else:
                        out, exc = _call(f64, inputs)
                finally:
                    torch.set_default_dtype(default)
                if exc:
                    break
                runs.append(([t for _, t in _leaves(out, "", [])],
                             [x for x in inputs if isinstance(x, torch.Tensor)]))
            if len(runs) < 5:
                self._ref = (None, None)
            else:
                self._ref = tuple([(r, _spread(r, [run[k][i] for run in runs[1:]]))
                                   for i, r in enumerate(runs[0][k])] for k in (0, 1))
        return self._ref


def _unit_roundoff(prog, inputs):
    src = prog.func_source()
    dts = {x.dtype for x in inputs if isinstance(x, torch.Tensor)}
    dts |= {DTYPE for name, DTYPE in (("float16", torch.float16), ("half", torch.float16),
                                      ("bfloat16", torch.bfloat16), ("float32", torch.float32),
                                      ("float", torch.float32)) if name in src}
    return max((torch.finfo(d).eps / 2 for d in dts if d.is_floating_point), default=2.0 ** -24)


def _spread(r, others):
    if not r.dtype.is_floating_point:
        return None
    s = torch.zeros(r.shape, dtype=torch.float64, device=r.device)
    for o in others:
        if o.shape == r.shape:
            d = (o.double() - r.double()).abs()
            s = torch.maximum(s, torch.where(torch.isnan(d), torch.full_like(d, float("inf")), d))
    return s


def value_mismatch(a, e, ref=None, floor=None):
    """None if tensor a matches eager's e, else a description.  ref: the
    reference (value, spread) for a, or None; floor: the least precise
    float dtype e's value went through (Eager.floors), or None."""
    if not e.dtype.is_floating_point:
        if torch.equal(a, e):
            return None
        bad = (a != e).nonzero()
        i = tuple(bad[0].tolist())
        return (f"{int(bad.shape[0])} of {e.numel()} differ, first at {i}: "
                f"{a[i].item()} != eager {e[i].item()}")
    rtol, atol = TOL.get(_least_precise([e.dtype, floor]) or e.dtype, (1e-5, 1e-8))
    ad, ed = a.detach().double(), e.detach().double()
    ok = torch.isclose(ad, ed, rtol, atol, equal_nan=True)
    if bool(ok.all()):
        return None
    r, spread = ref if ref is not None else (None, None)
    if r is not None and r.shape == e.shape and r.dtype.is_floating_point:
        rd = r.detach().double()
        rr = r.detach().to(e.dtype).double()
        err_a, err_e = (ad - rd).abs(), (ed - rd).abs()
        # eager NaN where the reference is finite: eager overflowed inside
        # (float32 layer_norm's Welford of values near 1e30 gives NaN or 0
        # by the row's length and the value's place in it), so it bounds
        # nothing: any finite value is no further from the reference
        err_e = torch.where(torch.isnan(ed) & torch.isfinite(rd),
                            torch.full_like(err_e, float("inf")), err_e)
        ok = (ok | torch.isclose(ad, rd, rtol, atol, equal_nan=True)
              | (torch.isfinite(ad) & (err_a <= atol + rtol * rd.abs()
                                       + ERR_RATIO * (err_e + spread)))
              | (ad == rr) | (torch.isnan(ad) & torch.isnan(rd))
              | (~torch.isfinite(ad) & _noise(ed, rd, err_e)))
        if bool(ok.all()):
            return None
    else:
        r = None
    bad = (~ok).nonzero()
    i = tuple(bad[0].tolist())
    extra = f", float64 reference {r[i].item():.9g}" if r is not None else ""
    return (f"{int(bad.shape[0])} of {e.numel()} differ, first at {i}: "
            f"{ad[i].item():.9g} != eager {ed[i].item():.9g}{extra}")


def _noise(ed, rd, err_e):
    """Where eager's own value is rounding noise: eager and the reference
    finite, eager's error at least half its value's magnitude (or the
    reference's), and not negligible next to the tensor's largest finite
    |value| (a 1e-20 left where the reference is 0 is no noise of note).
    Fuzz seed 140076: F.normalize(F.layer_norm(x, ...)) of a constant
    float16 row: the reference 0, eager -0.706 (its layer_norm leaves
    -1.4e-6, which normalize scales to a unit row), tcjit NaN (its
    x - mean is exactly 0, and normalize's eps 1e-12 is 0 in float16:
    0 / 0, as eager's own normalize gives for a zero row).  Such a value
    says nothing about the program, so (as Inductor's same(...,
    fp64_ref=...) bounds the compiled error by eager's) a non-finite one
    is accepted there; where eager is accurate a NaN still fails."""
    fin = torch.isfinite(ed) & torch.isfinite(rd)
    mag = torch.where(fin, torch.maximum(ed.abs(), rd.abs()), torch.zeros_like(ed))
    scale = mag.max() if mag.numel() else mag.new_zeros(())
    return fin & (err_e > 0) & (err_e >= 0.5 * mag) & (err_e >= NOISE_FLOOR * scale)


class Checker:
    """Compares one compiled call with eager; collects failures."""

    def __init__(self, prog, backend, call):
        self.prog, self.backend, self.call = prog, backend, call
        self.failures = []

    def fail(self, kind, detail, message, where=None):
        self.failures.append(dict(backend=self.backend, kind=kind, detail=detail,
                                  call=self.call, message=message, where=where or {}))

    def out_name(self, path):
        """The output name a leaf path belongs to."""
        if self.prog.ret == "single":
            return self.prog.outputs[0]
        m = re.match(r"\[(\d+)\]", path)
        return self.prog.outputs[int(m.group(1))] if m else "?"

    def op(self, path):
        return self.prog.op_of(self.out_name(path))

    def structure(self, a, e, path=""):
        if type(a) is not type(e):
            self.fail("type", self.op(path) if path else "result",
                      f"actual{path}: {type(a).__name__} != eager {type(e).__name__}",
                      {"a": f"actual{path}", "e": f"expected{path}"})
            return False
        if isinstance(e, (tuple, list)):
            if len(a) != len(e):
                self.fail("type", "result", f"actual{path}: length {len(a)} != eager {len(e)}")
                return False
            return all([self.structure(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, e))])
        if not isinstance(e, torch.Tensor) and a != e:
            self.fail("value", self.op(path), f"actual{path}: {a!r} != eager {e!r}")
            return False
        return True

    def tensor(self, path, a, e, r, floor=None):
        where = {"a": f"actual{path}", "e": f"expected{path}"}
        op = self.op(path)
        if a.dtype != e.dtype:
            return self.fail("dtype", op, f"actual{path}: dtype {a.dtype} != eager {e.dtype}",
                             where)
        if a.shape != e.shape:
            return self.fail("shape", op, f"actual{path}: shape {tuple(a.shape)} != eager "
                             f"{tuple(e.shape)}", where)
        if a.device != e.device:
            return self.fail("device", op, f"actual{path}: device {a.device} != {e.device}", where)
        if e.numel() and a.stride() != e.stride():
            # strides of size-1 dims never change which element is where
            kind = "stride" if any(n > 1 and x != y for n, x, y in
                                   zip(e.shape, a.stride(), e.stride())) else "stride1"
            self.fail(kind, op, f"actual{path}: strides {a.stride()} != eager {e.stride()} "
                      f"(shape {tuple(e.shape)})", where)
        msg = value_mismatch(a, e, r, floor)
        if msg:
            self.fail("value", op, f"actual{path} ({e.dtype}, shape {tuple(e.shape)}): {msg}",
                      where)

    def aliasing(self, A, E, Ia, Ie):
        """A/E: (path, tensor) leaves; Ia/Ie: (index, tensor) inputs."""
        def rel(x, y):
            sx, sy = storage_key(x), storage_key(y)
            return x is y, sx is not None and sx == sy
        pairs = [(pa, a, pe, e, f"actual{pa}", f"expected{pe}", self.op(pa))
                 for (pa, a), (pe, e) in zip(A, E)]
        ins = [(f"[{k}]", a, f"[{k}]", e, f"inputs[{k}]", f"eager_inputs[{k}]", "input")
               for (k, a), (_, e) in zip(Ia, Ie)]
        for i, (pa, a, pe, e, na, ne, opa) in enumerate(pairs):
            for pb, b, qb, eb, nb, neb, opb in pairs[i + 1:] + ins:
                (ia, sa), (ie, se) = rel(a, b), rel(e, eb)
                detail = "+".join(sorted([opa, opb]))
                if ia != ie:
                    self.fail("merged" if ia else "unmerged", detail,
                              f"{na} is {nb}: {ia}, eager: {ie}",
                              {"actual": f"{na} is {nb}", "expected": f"{ne} is {neb}",
                               "show": "identity of outputs / inputs"})
                elif sa != se:
                    self.fail("shared" if sa else "unshared", detail,
                              f"{na} shares storage with {nb}: {sa}, eager: {se}",
                              {"actual": f"_s({na}) == _s({nb})",
                               "expected": f"_s({ne}) == _s({neb})",
                               "show": "storage sharing"})
                elif sa and se and nb.startswith("inputs") and \
                        a.storage_offset() != e.storage_offset():
                    self.fail("offset", detail,
                              f"{na} views {nb} at offset {a.storage_offset()}, eager "
                              f"{e.storage_offset()}",
                              {"actual": f"{na}.storage_offset()",
                               "expected": f"{ne}.storage_offset()",
                               "show": "view offset"})

    def mutation(self, Ia, Ie, Ir, Fl):
        ops = "+".join(sorted({s.op for s in self.prog.stmts if s.inplace})) or "none"
        for (k, a), (_, e), r, fl in zip(Ia, Ie, Ir, Fl):
            where = {"a": f"inputs[{k}]", "e": f"eager_inputs[{k}]"}
            if (a.shape, a.stride(), a.dtype) != (e.shape, e.stride(), e.dtype):
                self.fail("mutation", ops, f"input {k} metadata {tuple(a.shape)} "
                          f"{a.stride()} {a.dtype} != eager {tuple(e.shape)} {e.stride()} "
                          f"{e.dtype}", where)
                continue
            msg = value_mismatch(a, e, r, fl)
            if msg:
                self.fail("mutation", ops, f"input {k} after the call: {msg}", where)


def check_call(prog, backend, call, actual, exc, inputs, eager):
    """Failures of one compiled call against eager's run of that variant."""
    c = Checker(prog, backend, call)
    if eager.exc is not None:
        if exc is None:
            c.fail("no-exception", _exc_detail(eager.exc),
                   f"eager raises {type(eager.exc).__name__}: {eager.exc}; tcjit returned")
        elif type(exc) is not type(eager.exc):
            c.fail("wrong-exception", f"{type(eager.exc).__name__}->{type(exc).__name__}",
                   f"eager raises {type(eager.exc).__name__}: {eager.exc}\n"
                   f"tcjit raises {type(exc).__name__}: {exc}")
        return c.failures
    if exc is not None:
        c.fail("raised", _exc_detail(exc), f"tcjit raises {type(exc).__name__}: {exc}")
        return c.failures
    if not c.structure(actual, eager.out):
        return c.failures
    A, E = _leaves(actual, "", []), _leaves(eager.out, "", [])
    Ia = [(k, x) for k, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
    Ie = [(k, x) for k, x in enumerate(eager.inputs) if isinstance(x, torch.Tensor)]
    R, F = [None] * len(E), [None] * len(E)
    if any((a.dtype, a.shape) == (e.dtype, e.shape) and a.dtype.is_floating_point
           and value_mismatch(a, e) for (_, a), (_, e) in zip(A, E)):
        R = eager.ref()[0] or R
        F = eager.floors()[0] or F
    for ((path, a), (_, e)), r, fl in zip(zip(A, E), R, F):
        c.tensor(path, a, e, r, fl)
    c.aliasing(A, E, Ia, Ie)
    Ir, Fi = [None] * len(Ia), [None] * len(Ia)
    if any(value_mismatch(a, e) for (_, a), (_, e) in zip(Ia, Ie)
           if (a.shape, a.dtype) == (e.shape, e.dtype)):
        Ir = eager.ref()[1] or Ir
        Fi = eager.floors()[1] or Fi
    c.mutation(Ia, Ie, Ir, Fi)
    return c.failures


def _run_backend(prog, f, make_inputs, eager, backend, device):
    """The failures of both calls of f compiled for backend."""
    tcjit.reset()
    # "dynamic": tcjit's kernels, size-generic from the first compile
    # (docs/dynamic.md); the generic kernel cache outlives reset(), so
    # later programs of a worker reuse earlier programs' kernels
    cf = (tcjit.compile(f, dynamic=True) if backend == "dynamic"
          else tcjit.compile(f, backend=backend))
    found = []
    for call, variant in ((1, 0), (2, 1)):
        if variant not in eager:
            eager[variant] = Eager(prog, f, make_inputs, variant, device)
        inputs = make_inputs(variant, device)
        actual, exc = _call(cf, inputs)
        if device != "cpu":
            torch.cuda.synchronize()    # a kernel's fault shows here, as a crash
        fs = check_call(prog, backend, call, actual, exc, inputs, eager[variant])
        if call == 2:
            seen = {(x["kind"], x["detail"]) for x in found}
            fs = [dict(x, only2=True) for x in fs if (x["kind"], x["detail"]) not in seen]
        found += fs
    return found


def _precision_only(prog, f, make_inputs, eager, backend, device, found):
    """found with its value failures reclassified as kind "precision" when
    they are float16 / bfloat16 rounded once per fused kernel: with
    config.emulate_precision_casts (every op's result rounded as eager
    stores it) the program passes."""
    if not any(x["kind"] == "value" for x in found):
        return found
    with tcjit.config.patch(emulate_precision_casts=1):
        again = _run_backend(prog, f, make_inputs, eager, backend, device)
    if again:
        return found
    return [dict(x, kind="precision") if x["kind"] == "value" else x for x in found]


def run_program(prog, backends=BACKENDS, device="cpu", progress=None):
    """All failures of a program (first few per backend), and stats."""
    f, make_inputs = prog.load()
    eager = {}
    failures, stats = [], {}
    for backend in backends:
        if progress:
            progress(backend)
        if backend == "grad":           # the training path (grad.py)
            from .grad import run_grad
            found = run_grad(prog, device)
        else:
            found = _run_backend(prog, f, make_inputs, eager, backend, device)
        if backend in ("auto", "dynamic"):
            found = _precision_only(prog, f, make_inputs, eager, backend, device, found)
        for x in found[:MAX_FAILURES]:
            x["signature"] = signature(x)
            failures.append(x)
        if backend in ("auto", "dynamic", "grad"):
            stats = tcjit.counters()
    tcjit.reset()
    return failures, stats


# ------------------------------------------------------------ dynamic sizes

def _resized(prog, old, new):
    """prog with every input dim of size old made new (base shapes, and
    sizes in expand() layouts); specials past the new end dropped.  The
    statements are unchanged: one that names old (view(15, 2)) may now
    raise, in eager and in tcjit alike."""
    import dataclasses
    import math
    inputs = []
    for i in prog.inputs:
        base = tuple(new if d == old else d for d in i.base_shape)
        layout = re.sub(r"\.expand\(([^)]*)\)",
                        lambda m: ".expand(" + ", ".join(
                            str(new) if x.strip() == str(old) else x.strip()
                            for x in m.group(1).split(",")) + ")",
                        i.layout)
        n = math.prod(base)
        specials = tuple(s for s in i.specials if s[0] < n)
        inputs.append(dataclasses.replace(i, base_shape=base, layout=layout,
                                          specials=specials))
    return dataclasses.replace(prog, inputs=inputs)


def size_variants(prog, count=3):
    """(old, [new sizes]): the most common input size >= 2 and sizes to
    call the program with instead (dynamic-size mode), or None."""
    sizes = [d for i in prog.inputs for d in i.base_shape if d >= 2]
    if not sizes:
        return None
    old = max(sorted(set(sizes)), key=sizes.count)
    return old, [old + 1, old + 3, old + 2, max(2, old - 1)][:count]


def run_program_sizes(prog, device="cpu", count=3):
    """Dynamic-size mode: one compiled f (automatic dynamic shapes) called
    with the inputs at their own sizes, then with one size changed to each
    of size_variants' sizes, every call checked against eager.  Returns
    (failures, counters)."""
    sv = size_variants(prog, count)
    if sv is None:
        return [], {}
    old, news = sv
    f, _ = prog.load()
    tcjit.reset()
    cf = tcjit.compile(f)
    failures = []
    for call, p in enumerate([prog] + [_resized(prog, old, n) for n in news], 1):
        make_inputs = p.load()[1]
        eager = Eager(p, f, make_inputs, 0, device)
        inputs = make_inputs(0, device)
        actual, exc = _call(cf, inputs)
        for x in check_call(p, "dynamic-sizes", call, actual, exc, inputs,
                            eager)[:MAX_FAILURES]:
            x["signature"] = signature(x)
            x["sizes"] = (old, p.inputs and [i.base_shape for i in p.inputs])
            failures.append(x)
    stats = tcjit.counters()
    tcjit.reset()
    return failures, stats
