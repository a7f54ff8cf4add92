"""Seeded random programs over what tcjit compiles (docs/ops.md).

A program is built one statement at a time, and every statement is run
eagerly on the inputs' variant-0 values as it is chosen: the generator
learns each value's shape and dtype from torch itself, so it needs no model
of torch's shape and promotion rules.  A statement eager rejects is
dropped, or (rarely) kept as the last one, so that the program tests that
tcjit raises what eager raises.

Values are *exact* when eager and tcjit must agree bit for bit: inputs,
views, casts and selections (max, where, relu, ...) of exact values, and
integer results of exact values.  Comparisons, argmax, casts to int/bool,
branch conditions and masks only take exact operands, so that rounding
differences between eager and tcjit (which computes float16 in float32,
sums in another order, contracts a*b+c) never flip a discrete result.

Everything is drawn from random.Random(seed), so a seed is a program (for
one torch version).
"""
import math
import random
import warnings

import torch
import torch.nn.functional as F

from .program import DTYPES, FLOATS, NAME_RE, Input, Program, Stmt, storage_key

PROFILES = {
    # CI slice: few statements, small shapes (compile time dominates).
    "small": dict(stmts=(1, 5), max_dim=5, max_numel=512, p_error=0.02),
    "full": dict(stmts=(2, 12), max_dim=8, max_numel=8192, p_error=0.03, p_big=0.04),
}
BIG_SHAPES = [(257, 131), (64, 9, 61), (33000,), (3, 128, 97), (2, 20000)]

INPUT_DTYPES = [("float32", 40), ("float64", 8), ("float16", 8), ("bfloat16", 8),
                ("int64", 10), ("int32", 8), ("bool", 8), ("uint8", 1),
                ("int8", 1), ("int16", 1)]
SCALARS_INT = [0, 1, 2, 3, -1, -2, 5]
SCALARS_FLOAT = [0.5, -1.5, 2.0, 1e-3, 3.25, -0.0, 0.0, 1.0, 100.0, -7.5]
SPECIALS = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e30, -1e-30, 65504.0]

EXTERNS = ("matmul", "linear", "addmm", "bmm", "sdpa", "cat", "stack", "index", "embedding")
SELECT_OPS = "sel"      # exact iff every operand is exact
INT_OPS = "int"         # exact iff operands exact and the result is not floating


def _w(choices):
    """Split [(x, weight)] into two lists for rng.choices."""
    return [c for c, _ in choices], [w for _, w in choices]


class Gen:
    def __init__(self, seed, profile="small", device="cpu"):
        self.seed = seed
        # an out-of-range index is a device-side assert on CUDA, which
        # leaves the process unable to use the GPU: CPU programs only
        self.oob_index = device == "cpu"
        # torch 2.11's CUDA memory-efficient attention faults with
        # "misaligned address" on some views (v = randn(3,1,1,5)[..., 1:]),
        # eagerly, and the process loses the GPU: contiguous sdpa inputs there
        self.sdpa_views = device == "cpu"
        self.rng = random.Random(seed)
        self.p = PROFILES[profile]
        self.inputs, self.stmts = [], []
        self.env = {}            # name -> tensor or tuple of tensors (variant 0)
        self.exact = {}          # name -> bool
        self.order = []          # tensor names, oldest first
        self.tuples = []         # names bound to tuples (returned as is)
        self.reduced = []        # (name, dims, dim) of reductions, to reduce again
        self.ns = {"torch": torch, "F": F}
        self.nv = 0
        self.raises = False

    # ---------------------------------------------------------- values

    def new_name(self):
        self.nv += 1
        return f"v{self.nv - 1}"

    def tensors(self, pred=None, exact=False):
        return [n for n in self.order
                if isinstance(self.env.get(n), torch.Tensor)
                and (not exact or self.exact[n])
                and (pred is None or pred(self.env[n]))]

    def pick(self, pred=None, exact=False):
        """A tensor name, recent ones preferred, or None if none fits."""
        names = self.tensors(pred, exact)
        if not names:
            return None
        weights = [1 + 3 * (i + 1) / len(names) for i in range(len(names))]
        return self.rng.choices(names, weights)[0]

    def is_exact(self, names):
        return all(self.exact.get(n, True) for n in names)

    # ---------------------------------------------------------- inputs

    def rand_shape(self, rank=None):
        r = self.rng
        if rank is None:
            rank = r.choices([0, 1, 2, 3, 4], [4, 20, 38, 28, 10])[0]
        dims = list(range(1, self.p["max_dim"] + 1))
        shape = [r.choice(dims) for _ in range(rank)]
        if shape and r.random() < 0.05:
            shape[r.randrange(rank)] = 0
        return tuple(shape)

    def new_input(self, shape=None, dtype=None, kind=None, hi=None, layout=True):
        r = self.rng
        shape = self.rand_shape() if shape is None else tuple(shape)
        if dtype is None:
            dtype = r.choices(*_w(INPUT_DTYPES))[0]
        if kind is None:
            kind = ("randn" if dtype in FLOATS else "bool" if dtype == "bool"
                    else "randint")
        name = f"a{len(self.inputs)}"
        inp = Input(name, kind, dtype, shape, seed=r.randrange(1 << 20))
        if kind == "randint" and dtype == "uint8":
            inp.lo = 0
        if kind == "index":
            inp.lo, inp.hi = 0, hi
        if layout:
            inp.base_shape, inp.layout = self.layout_for(shape)
        else:
            inp.base_shape = shape
        numel = math.prod(inp.base_shape)
        if kind == "randn" and numel and r.random() < 0.12:
            inp.specials = tuple((r.randrange(numel), r.choice(SPECIALS))
                                 for _ in range(r.randint(1, 2)))
        ns = {"torch": torch, "variant": 0, "device": "cpu"}
        exec("\n".join(inp.code()), ns)
        self.inputs.append(inp)
        self.bind(name, ns[name], True)
        return name

    def new_number_input(self):
        r = self.rng
        v = r.choice(SCALARS_FLOAT + SCALARS_INT)
        name = f"a{len(self.inputs)}"
        self.inputs.append(Input(name, "number", values=(v,)))
        self.ns[name] = v
        return name

    def layout_for(self, shape):
        """(base shape, view suffix) giving a tensor of this shape that is
        contiguous, permuted, strided, offset, expanded or selected."""
        r, n = self.rng, len(shape)
        kind = r.choices(["contig", "transpose", "permute", "step", "offset",
                          "expand", "select"], [55, 12, 6, 9, 7, 8, 3])[0]
        if n == 0 or kind == "contig":
            return shape, ""
        base = list(shape)
        if kind == "transpose" and n >= 2:
            i, j = sorted(r.sample(range(n), 2))
            base[i], base[j] = base[j], base[i]
            return tuple(base), (".t()" if n == 2 and r.random() < 0.5
                                 else f".transpose({i}, {j})")
        if kind == "permute" and n >= 2:
            p = list(range(n))
            r.shuffle(p)
            for i in range(n):
                base[p[i]] = shape[i]
            return tuple(base), f".permute({', '.join(map(str, p))})"
        d = r.randrange(n)
        pre = ":, " * d
        if kind == "step":
            s = r.choice([2, 3])
            base[d] = shape[d] * s + r.randrange(s)
            return tuple(base), f"[{pre}::{s}]"
        if kind == "offset":
            k = r.randint(1, 2)
            base[d] = shape[d] + k
            return tuple(base), f"[{pre}{k}:]"
        if kind == "expand":
            lead = r.random() < 0.3 and n >= 2
            for i in range(n):
                if shape[i] > 1 and r.random() < 0.5:
                    base[i] = 1
            if lead:
                base = base[1:]
            if tuple(base) == tuple(shape):
                return shape, ""
            return tuple(base), f".expand({', '.join(map(str, shape))})"
        if kind == "select":
            base.insert(d, r.randint(2, 3))
            return tuple(base), f".select({d}, 1)"
        return shape, ""

    def bcast_input_for(self, shape, dtype=None):
        """A new input whose shape broadcasts with shape."""
        r = self.rng
        s = list(shape)
        c = r.random()
        if c < 0.45:
            pass
        elif c < 0.65 and s:
            s = s[r.randint(1, len(s)):]
        elif c < 0.9:
            s = [1 if r.random() < 0.5 else d for d in s]
        else:
            s = [r.randint(1, 3)] + s
        return self.new_input(s, dtype)

    # ---------------------------------------------------------- emitting

    def run(self, text):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(text, self.ns)

    def too_big(self, v):
        ts = v if isinstance(v, tuple) else (v,)
        return any(isinstance(t, torch.Tensor) and t.numel() > self.p["max_numel"]
                   for t in ts)

    def rejected(self, text, op):
        """Eager rejected text: sometimes keep it as the program's last
        statement (the program must raise), else drop it."""
        if self.rng.random() < self.p["p_error"]:
            self.stmts.append(Stmt(text, op, ()))
            self.raises = True
            return True         # kept, with the inputs it made
        if text.startswith(f"v{self.nv - 1} = "):
            self.nv -= 1        # the name is free again
        return False

    def emit(self, expr, op, exact=SELECT_OPS):
        """Bind a new name to expr (a tuple result to one name per element,
        or to one name)."""
        uses = NAME_RE.findall(expr)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                val = eval(expr, self.ns)
        except Exception:  # noqa: BLE001 - eager's verdict
            return self.rejected(f"{self.new_name()} = {expr}", op)
        if isinstance(val, tuple) and not 1 <= len(val) <= 4:
            return False
        if not isinstance(val, (torch.Tensor, tuple)) or self.too_big(val):
            return False
        ex = self.exact_of(exact, uses, val)
        if isinstance(val, torch.Tensor):
            name = self.new_name()
            self.bind(name, val, ex)
            self.stmts.append(Stmt(f"{name} = {expr}", op, (name,)))
        elif self.rng.random() < 0.3 or not all(isinstance(t, torch.Tensor) for t in val):
            name = self.new_name()
            self.env[name] = val
            self.exact[name] = ex
            self.tuples.append(name)
            self.ns[name] = val
            self.stmts.append(Stmt(f"{name} = {expr}", op, (name,)))
        else:
            names = [self.new_name() for _ in val]
            for n, t in zip(names, val):
                self.bind(n, t, ex)
            lhs = ", ".join(names) + ("," if len(names) == 1 else "")
            self.stmts.append(Stmt(f"{lhs} = {expr}", op, tuple(names)))
        return True

    def exact_of(self, rule, uses, val):
        if rule is True or rule is False:
            return rule
        ok = self.is_exact(uses)
        if rule == INT_OPS:
            ts = val if isinstance(val, tuple) else (val,)
            ok = ok and not any(t.dtype.is_floating_point for t in ts
                                if isinstance(t, torch.Tensor))
        return ok

    def bind(self, name, t, exact):
        self.env[name] = t
        self.exact[name] = exact
        self.ns[name] = t
        self.order.append(name)

    def emit_inplace(self, text, target, op, exact, bind_new=False):
        """A statement that mutates target (and everything sharing its
        storage)."""
        uses = NAME_RE.findall(text)
        name = None
        if bind_new:
            name = self.new_name()
            text = f"{name} = {text}"
        try:
            self.run(text)
        except Exception:  # noqa: BLE001
            return self.rejected(text, op)
        t = self.ns[target]
        if name is not None:
            self.bind(name, self.ns[name], True)
        self.env[target] = t
        ex = self.exact_of(exact, uses, t)
        if not ex:
            key = storage_key(t)
            for n in self.order:
                v = self.env.get(n)
                if isinstance(v, torch.Tensor) and key is not None and storage_key(v) == key:
                    self.exact[n] = False
            self.exact[target] = False
        targets = (name,) if name else ((target,) if text.startswith(f"{target} ") else ())
        self.stmts.append(Stmt(text, op, targets, inplace=True))
        return True

    # ---------------------------------------------------------- helpers

    def scalar(self, kind=None):
        r = self.rng
        kind = kind or r.choices(["int", "float", "bool"], [40, 50, 10])[0]
        if kind == "int":
            return repr(r.choice(SCALARS_INT))
        if kind == "bool":
            return r.choice(["True", "False"])
        v = r.choice(SCALARS_FLOAT)
        return repr(v)

    def operand_for(self, x, exact=False, dtype=None):
        """A second operand for a binary op with x: a Python number, a
        tensor that broadcasts with x, or a new input that does."""
        r = self.rng
        shape = self.env[x].shape
        c = r.random()
        if c < 0.25 and not exact:
            return self.scalar()
        if c < 0.3:
            num = [i.name for i in self.inputs if i.kind == "number"]
            return r.choice(num) if num and not exact else self.new_number_input()
        if c < 0.65:
            def fits(t):
                try:
                    torch.broadcast_shapes(t.shape, shape)
                    return True
                except RuntimeError:
                    return False
            y = self.pick(fits, exact=exact)
            if y is not None:
                return y
        return self.bcast_input_for(shape, dtype)

    def dim(self, t):
        n = t.dim()
        if n == 0:
            return self.rng.choice(["0", "-1"])
        d = self.rng.randrange(-n, n)
        return str(d)

    def dims(self, t):
        """A dim argument: one dim, a tuple of dims, or None for all."""
        r, n = self.rng, t.dim()
        c = r.random()
        if c < 0.15:
            return None
        if n == 0 or c < 0.7:
            return self.dim(t)
        k = r.randint(1, n)
        ds = r.sample(range(n), k)
        ds = [d - n if r.random() < 0.3 else d for d in ds]
        return "(" + ", ".join(map(str, ds)) + ("," if k == 1 else "") + ")"

    def keep(self):
        return self.rng.random() < 0.4

    # ---------------------------------------------------------- op kinds

    def g_unary(self):
        r = self.rng
        ops = [
            ("neg", ["-{x}", "torch.neg({x})", "{x}.neg()"], SELECT_OPS),
            ("abs", ["{x}.abs()", "torch.abs({x})", "abs({x})"], SELECT_OPS),
            ("relu", ["{x}.relu()", "torch.relu({x})", "F.relu({x})"], SELECT_OPS),
            ("exp", ["{x}.exp()", "torch.exp({x})"], False),
            ("log", ["{x}.log()", "torch.log({x}.abs() + 0.5)"], False),
            ("sqrt", ["{x}.sqrt()", "torch.sqrt({x}.abs())"], False),
            ("rsqrt", ["{x}.rsqrt()", "torch.rsqrt({x}.abs() + 1)"], False),
            ("sin", ["{x}.sin()", "torch.sin({x})"], False),
            ("cos", ["{x}.cos()", "torch.cos({x})"], False),
            ("tanh", ["{x}.tanh()", "torch.tanh({x})", "F.tanh({x})"], False),
            ("sigmoid", ["{x}.sigmoid()", "torch.sigmoid({x})", "F.sigmoid({x})"], False),
            ("silu", ["F.silu({x})"], False),
            ("gelu", ["F.gelu({x})", "F.gelu({x}, approximate='tanh')"], False),
            ("erf", ["{x}.erf()", "torch.special.erf({x})"], False),
            ("softplus", ["F.softplus({x})", "F.softplus({x}, beta=2.0, threshold=5.0)"], False),
            ("leaky_relu", ["F.leaky_relu({x})", "F.leaky_relu({x}, 0.2)"], False),
            ("elu", ["F.elu({x})", "F.elu({x}, alpha=0.5)"], False),
            ("mish", ["F.mish({x})"], False),
            ("square", ["{x}.square()", "torch.square({x})"], INT_OPS),
            ("reciprocal", ["{x}.reciprocal()", "torch.reciprocal({x})"], False),
            ("logical_not", ["{x}.logical_not()", "torch.logical_not({x})"], SELECT_OPS),
            ("bitwise_not", ["~{x}", "{x}.bitwise_not()"], SELECT_OPS),
            ("hardtanh", ["F.hardtanh({x})", "F.hardtanh({x}, -0.5, 2.0)", "F.relu6({x})"],
             SELECT_OPS),
            ("pow", ["{x} ** 2", "{x} ** 3", "{x}.abs() ** 0.5", "{x}.pow(-1)",
                     "torch.pow({x}, 2.5)", "2 ** {x}", "{x} ** 0"], INT_OPS),
        ]
        op, forms, ex = r.choice(ops)
        x = self.pick(exact=op in ("logical_not", "bitwise_not"))
        if x is None:
            x = self.new_input()
        return self.emit(r.choice(forms).format(x=x), op, ex)

    def g_clamp(self):
        r = self.rng
        x = self.pick() or self.new_input()
        lo, hi = r.choice([(-1, 1), (-0.5, 2.0), (0, 3), (0.25, 0.25), (2, -1)])
        forms = [f"{x}.clamp({lo}, {hi})", f"torch.clamp({x}, min={lo})",
                 f"{x}.clamp(max={hi})", f"{x}.clip({lo}, {hi})",
                 f"torch.clamp_min({x}, {lo})", f"{x}.clamp_max({hi})"]
        if r.random() < 0.2:
            y = self.operand_for(x)
            if y[0] in "av":
                forms = [f"torch.clamp({x}, min={y})", f"{x}.clamp(None, {y})"]
        return self.emit(r.choice(forms), "clamp", SELECT_OPS)

    def g_binary(self):
        r = self.rng
        arith = [("add", ["{x} + {y}", "torch.add({x}, {y})", "{x}.add({y})",
                          "torch.add({x}, {y}, alpha=2)", "{y} + {x}"]),
                 ("sub", ["{x} - {y}", "torch.sub({x}, {y})", "{y} - {x}",
                          "{x}.sub({y}, alpha=0.5)"]),
                 ("mul", ["{x} * {y}", "torch.mul({x}, {y})", "{y} * {x}"]),
                 ("div", ["{x} / {y}", "torch.div({x}, {y})", "{y} / {x}",
                          "torch.true_divide({x}, {y})"]),
                 ("pow", ["{x} ** {y}", "torch.pow({x}.abs(), {y})"]),
                 ("maximum", ["torch.maximum({x}, {y})", "torch.max({x}, {y})",
                              "{x}.maximum({y})"]),
                 ("minimum", ["torch.minimum({x}, {y})", "torch.min({x}, {y})"])]
        cmp = [("lt", ["{x} < {y}", "torch.lt({x}, {y})"]),
               ("le", ["{x} <= {y}", "{x}.le({y})"]),
               ("gt", ["{x} > {y}", "torch.gt({x}, {y})"]),
               ("ge", ["{x} >= {y}"]),
               ("eq", ["{x} == {y}", "torch.eq({x}, {y})"]),
               ("ne", ["{x} != {y}", "{x}.ne({y})"]),
               ("logical_and", ["torch.logical_and({x}, {y})", "{x}.logical_and({y})"]),
               ("logical_or", ["torch.logical_or({x}, {y})"]),
               ("logical_xor", ["torch.logical_xor({x}, {y})"]),
               ("bitwise_and", ["{x} & {y}", "torch.bitwise_and({x}, {y})"]),
               ("bitwise_or", ["{x} | {y}"]),
               ("bitwise_xor", ["{x} ^ {y}"])]
        if r.random() < 0.65:
            op, forms = r.choice(arith)
            x = self.pick() or self.new_input()
            y = self.operand_for(x)
            ex = SELECT_OPS if op in ("maximum", "minimum") else INT_OPS
        else:
            op, forms = r.choice(cmp)
            x = self.pick(exact=True) or self.new_input()
            y = self.operand_for(x, exact=r.random() < 0.8)
            if y[0] not in "av":
                y = self.scalar()
            ex = SELECT_OPS
        return self.emit(r.choice(forms).format(x=x, y=y), op, ex)

    def cond(self):
        """A bool tensor expression on an exact value."""
        r = self.rng
        c = self.pick(lambda t: t.dtype == torch.bool, exact=True)
        if c is not None and r.random() < 0.5:
            return c
        x = self.pick(exact=True) or self.new_input()
        return f"{x} {r.choice(['>', '<', '>=', '!='])} {self.scalar(r.choice(['int', 'float']))}"

    def g_where(self):
        r = self.rng
        c = self.cond()
        x = self.pick() or self.new_input()
        y = self.operand_for(x) if r.random() < 0.8 else self.scalar()
        if r.random() < 0.3:
            y, x = x, self.scalar()
        forms = [f"torch.where({c}, {x}, {y})"]
        if x[0] in "av":
            forms += [f"{x}.where({c}, {y})", f"{x}.masked_fill({c}, {self.scalar()})",
                      f"torch.masked_fill({x}, {c}, {self.scalar()})"]
        return self.emit(r.choice(forms), "where", SELECT_OPS)

    def g_reduce(self):
        r = self.rng
        x = d = d1 = None
        if self.reduced and r.random() < 0.5:
            # several reductions of one value, often over the same dims
            x, d, d1 = r.choice(self.reduced)
            if not isinstance(self.env.get(x), torch.Tensor):
                x = None
            elif r.random() < 0.4:
                d = d1 = None
        x = x or self.pick() or self.new_input()
        t = self.env[x]
        d = d if d is not None else self.dims(t)
        d1 = d1 if d1 is not None else self.dim(t)
        k = self.keep()
        kw = ", keepdim=True" if k else ""
        # (op, forms, exactness, needs an exact operand)
        table = [
            ("sum", [f"{x}.sum()", f"{x}.sum({d}{kw})", f"torch.sum({x}, dim={d}{kw})",
                     f"{x}.sum({d}, dtype=torch.float64)"], INT_OPS, False),
            ("mean", [f"{x}.mean()", f"{x}.mean({d}{kw})", f"torch.mean({x}, {d})"], False, False),
            ("amax", [f"{x}.amax({d}{kw})", f"torch.amax({x}, {d})", f"{x}.amax()"],
             SELECT_OPS, False),
            ("amin", [f"{x}.amin({d}{kw})", f"torch.amin({x}, dim={d}{kw})"], SELECT_OPS, False),
            ("max", [f"{x}.max({d1}{kw})", f"torch.max({x}, {d1})", f"{x}.max()"],
             SELECT_OPS, True),
            ("min", [f"{x}.min({d1}{kw})", f"torch.min({x}, dim={d1}{kw})", f"{x}.min()"],
             SELECT_OPS, True),
            ("argmax", [f"{x}.argmax()", f"{x}.argmax({d1}{kw})", f"torch.argmax({x}, dim={d1})"],
             SELECT_OPS, True),
            ("argmin", [f"{x}.argmin({d1}{kw})", f"torch.argmin({x})"], SELECT_OPS, True),
            ("prod", [f"{x}.prod()", f"{x}.prod({d1}{kw})", f"torch.prod({x}, {d1})"],
             INT_OPS, False),
            ("var", [f"{x}.var()", f"{x}.var({d}{kw})", f"{x}.var({d}, unbiased=False)",
                     f"torch.var({x}, dim={d}, correction=0{kw})"], False, False),
            ("std", [f"{x}.std()", f"{x}.std({d}{kw})", f"torch.std({x}, {d}, False)"],
             False, False),
            ("logsumexp", [f"{x}.logsumexp({d}{kw})", f"torch.logsumexp({x}, {d1})"],
             False, False),
            ("any", [f"{x}.any()", f"{x}.any({d1}{kw})", f"torch.any({x}, dim={d1})"],
             SELECT_OPS, True),
            ("all", [f"{x}.all()", f"{x}.all({d1}{kw})", f"torch.all({x}, {d1})"],
             SELECT_OPS, True),
            ("norm", [f"{x}.norm()", f"{x}.norm(dim={d1})", f"{x}.norm(p=1, dim={d}{kw})",
                      f"torch.norm({x}, 2, {d1})"], False, False),
        ]
        op, forms, ex, need_exact = r.choice(table)
        if need_exact and not self.exact[x]:
            return False
        self.reduced.append((x, d, d1))
        return self.emit(r.choice(forms), op, ex)

    def g_multireduce(self):
        """Several reductions of one value, often over the same dims with
        and without keepdim."""
        r = self.rng
        x = self.pick(lambda t: t.dim() > 0 and t.dtype.is_floating_point) or \
            self.new_input(self.rand_shape(r.randint(1, 3)), "float32")
        t = self.env[x]
        d = (self.dims(t) if r.random() < 0.4 else None) or self.dim(t)
        ok = False
        for _ in range(r.randint(2, 3)):
            if r.random() < 0.3:
                d = self.dim(t)
            op = r.choice(["sum", "mean", "amax", "amin", "amax", "amin", "var", "logsumexp",
                           "prod", "max", "argmax", "std"])
            if op in ("prod", "max", "argmax") and d.startswith("("):
                continue
            if op in ("max", "argmax") and not self.exact[x]:
                continue
            kw = ", keepdim=True" if self.keep() else ""
            expr = f"{x}.{op}({d}{kw})"
            if op == "max":
                expr += r.choice([".values", ".indices", ""])
            ok |= self.emit(expr, op, SELECT_OPS if op in ("amax", "amin", "max", "argmax")
                            else False)
        return ok

    def g_norm(self):
        r = self.rng
        x = self.pick(lambda t: t.dtype.is_floating_point and t.dim() > 0) \
            or self.new_input(self.rand_shape(r.randint(1, 3)), "float32")
        t = self.env[x]
        d = self.dim(t)
        n = t.dim()
        k = r.randint(1, min(n, 2)) if n else 1
        ns = tuple(t.shape[n - k:])
        opts = [("softmax", [f"torch.softmax({x}, {d})", f"{x}.softmax({d})",
                             f"F.softmax({x}, dim={d})"]),
                ("log_softmax", [f"F.log_softmax({x}, dim={d})", f"{x}.log_softmax({d})"]),
                ("normalize", [f"F.normalize({x}, dim={d})"])]
        if n:
            lshape = f"{x}.shape[-{k}:]" if r.random() < 0.5 else repr(ns)
            opts.append(("layer_norm", [f"F.layer_norm({x}, {lshape})"]))
            opts.append(("rms_norm", [f"F.rms_norm({x}, {lshape})"]))
            if r.random() < 0.5:
                w = self.new_input(ns, r.choice(["float32", "float32", "float64"]))
                b = self.new_input(ns, self.inputs[-1].dtype)
                opts.append(("layer_norm", [f"F.layer_norm({x}, {lshape}, {w}, {b})",
                                            f"F.layer_norm({x}, {lshape}, {w}, eps=1e-3)"]))
                opts.append(("rms_norm", [f"F.rms_norm({x}, {lshape}, {w})"]))
        op, forms = r.choice(opts)
        return self.emit(r.choice(forms), op, False)

    def g_cast(self):
        r = self.rng
        dt = r.choice(list(DTYPES))
        to_discrete = not DTYPES[dt].is_floating_point
        x = self.pick(exact=to_discrete) or self.new_input()
        meth = {"float32": "float", "float64": "double", "float16": "half",
                "bfloat16": "bfloat16", "int32": "int", "int64": "long",
                "bool": "bool"}.get(dt)
        forms = [f"{x}.to(torch.{dt})", f"{x}.to(dtype=torch.{dt})", f"{x}.type(torch.{dt})"]
        if meth:
            forms.append(f"{x}.{meth}()")
        y = self.pick(lambda t: t.dtype == DTYPES[dt])
        if y:
            forms += [f"{x}.to({y}.dtype)", f"{x}.type_as({y})"]
        return self.emit(r.choice(forms), "to", SELECT_OPS)

    def g_view(self):
        r = self.rng
        x = self.pick() or self.new_input()
        t = self.env[x]
        n, shape = t.dim(), tuple(t.shape)
        c = r.choice(["transpose", "permute", "slice", "select", "narrow", "expand",
                      "reshape", "view", "flatten", "unsqueeze", "squeeze",
                      "contiguous", "split", "unflatten"])
        if c == "transpose" and n >= 2:
            i, j = r.sample(range(n), 2)
            forms = [f"{x}.transpose({i}, {j})", f"torch.transpose({x}, {i - n}, {j})"]
            if n == 2:
                forms += [f"{x}.t()", f"{x}.T"]
            return self.emit(r.choice(forms), "transpose")
        if c == "permute" and n >= 1:
            p = list(range(n))
            r.shuffle(p)
            return self.emit(f"{x}.permute({', '.join(map(str, p))})", "permute")
        if c == "slice" and n >= 1:
            parts = []
            for s in shape[: r.randint(1, n)]:
                parts.append(r.choice([":", f"{r.randint(0, max(s - 1, 0))}:",
                                       f":{r.randint(0, s)}", f"::{r.randint(1, 3)}",
                                       f"{r.randint(0, s)}::{r.randint(2, 3)}",
                                       f"-{r.randint(1, max(s, 1))}:",
                                       str(r.randrange(-s, s)) if s else ":", "None"]))
            if r.random() < 0.2:
                parts.insert(r.randrange(len(parts) + 1), "...")
            return self.emit(f"{x}[{', '.join(parts)}]", "slice")
        if c == "select" and n >= 1:
            d = r.randrange(n)
            if shape[d] == 0:
                return False
            i = r.randrange(-shape[d], shape[d])
            forms = [f"{x}.select({d}, {i})", f"torch.select({x}, {d}, {i})"]
            if d == 0:
                forms.append(f"{x}[{i}]")
            return self.emit(r.choice(forms), "select")
        if c == "narrow" and n >= 1:
            d = r.randrange(n)
            st = r.randint(0, shape[d])
            ln = r.randint(0, shape[d] - st)
            return self.emit(f"{x}.narrow({d}, {st}, {ln})", "narrow")
        if c == "expand":
            new = [d if d != 1 or r.random() < 0.4 else r.randint(2, 4) for d in shape]
            if r.random() < 0.3 or not n:
                new = [r.randint(1, 3)] + new
            forms = [f"{x}.expand({', '.join(map(str, new))})",
                     f"{x}.expand({tuple(new)})"]
            if len(new) == n:
                keep = ", ".join("-1" if a == b else str(a) for a, b in zip(new, shape))
                forms.append(f"{x}.expand({keep})")
            return self.emit(r.choice(forms), "expand")
        if c in ("reshape", "view"):
            new = self.factor(t.numel())
            if new and r.random() < 0.3:
                new[r.randrange(len(new))] = -1
            args = ", ".join(map(str, new)) if new else "()"
            forms = [f"{x}.{c}({args})", f"{x}.{c}(-1)"]
            if c == "reshape":
                forms.append(f"torch.reshape({x}, {tuple(new)})")
                if n >= 2:
                    forms.append(f"{x}.reshape({x}.shape[0], -1)")
            return self.emit(r.choice(forms), c)
        if c == "flatten":
            forms = [f"{x}.flatten()", f"torch.flatten({x}, {min(1, max(n - 1, 0))})"]
            if n >= 2:
                s = r.randrange(n - 1)
                forms.append(f"{x}.flatten({s}, {r.randint(s, n - 1)})")
            return self.emit(r.choice(forms), "flatten")
        if c == "unflatten" and n >= 1:
            d = r.randrange(n)
            f = self.factor(shape[d], max_rank=2)
            if len(f) < 1:
                return False
            return self.emit(f"{x}.unflatten({d}, {tuple(f)})", "unflatten")
        if c == "unsqueeze":
            d = r.randint(-n - 1, n)
            forms = [f"{x}.unsqueeze({d})", f"torch.unsqueeze({x}, {d})", f"{x}[None]",
                     f"{x}[..., None]"]
            return self.emit(r.choice(forms), "unsqueeze")
        if c == "squeeze":
            forms = [f"{x}.squeeze()"]
            if n:
                forms += [f"{x}.squeeze({self.dim(t)})", f"torch.squeeze({x}, {self.dim(t)})"]
            return self.emit(r.choice(forms), "squeeze")
        if c == "contiguous":
            return self.emit(f"{x}.contiguous()", "contiguous")
        if c == "split" and n >= 1:
            d = r.randrange(n)
            s = shape[d]
            if s == 0:
                return False
            forms = [f"{x}.chunk({r.randint(1, min(4, s))}, {d})",
                     f"{x}.split({max(1, -(-s // r.randint(1, 4)))}, {d})",
                     f"torch.split({x}, {max(1, -(-s // 2))}, dim={d})"]
            if s <= 4:
                forms.append(f"{x}.unbind({d})")
            return self.emit(r.choice(forms), "split")
        return False

    def factor(self, numel, max_rank=3):
        """A random shape with this many elements."""
        r = self.rng
        if numel == 0:
            return [0, r.randint(1, 3)][: r.randint(1, 2)]
        dims, left = [], numel
        for _ in range(r.randint(1, max_rank) - 1):
            divs = [d for d in range(1, left + 1) if left % d == 0]
            d = r.choice(divs)
            dims.append(d)
            left //= d
        dims.append(left)
        r.shuffle(dims)
        return dims

    def inplace_target(self):
        """A tensor to mutate: a fresh intermediate, an input, or a view
        of either."""
        r = self.rng
        c = r.random()
        if c < 0.45:
            names = [n for n in self.tensors() if n.startswith("v")]
        elif c < 0.8:
            names = [i.name for i in self.inputs if i.kind != "number"]
        else:
            names = self.tensors()
        # writing through a tensor whose elements share memory (an
        # expanded input) is undefined in eager: torch raises for most
        # ops, masked_fill_ only warns and CUDA's answer depends on the
        # kernel's iteration order (fuzz seed 13702)
        names = [n for n in names
                 if not torch._debug_has_internal_overlap(self.env[n])]
        return r.choice(names) if names else None

    def g_inplace(self):
        r = self.rng
        x = self.inplace_target()
        if x is None:
            return False
        t = self.env[x]
        y = self.operand_for(x)
        ops = [("add_", f"{x}.add_({y})", INT_OPS), ("sub_", f"{x}.sub_({y})", INT_OPS),
               ("mul_", f"{x}.mul_({y})", INT_OPS), ("div_", f"{x}.div_({y})", False),
               ("add_", f"{x} += {y}", INT_OPS), ("sub_", f"{x} -= {y}", INT_OPS),
               ("mul_", f"{x} *= {y}", INT_OPS),
               ("add_", f"{x}.add_({y}, alpha=2)", INT_OPS),
               ("clamp_", f"{x}.clamp_(-1, 1)", SELECT_OPS),
               ("clamp_", f"{x}.clamp_min_(0)", SELECT_OPS),
               ("relu_", f"{x}.relu_()", SELECT_OPS), ("neg_", f"{x}.neg_()", SELECT_OPS),
               ("abs_", f"{x}.abs_()", SELECT_OPS), ("exp_", f"{x}.exp_()", False),
               ("sigmoid_", f"{x}.sigmoid_()", False), ("tanh_", f"{x}.tanh_()", False),
               ("copy_", f"{x}.copy_({y})", SELECT_OPS), ("zero_", f"{x}.zero_()", SELECT_OPS),
               ("fill_", f"{x}.fill_({self.scalar()})", SELECT_OPS),
               ("masked_fill_", f"{x}.masked_fill_({self.cond()}, {self.scalar()})",
                SELECT_OPS)]
        ops += [("lerp_", f"{x}.lerp_({y}, 0.3)", False),
                ("addcmul_", f"{x}.addcmul_({y}, {y}, value=0.5)", False),
                ("out=", f"torch.mul({y}, 2, out={x})", INT_OPS),
                ("relu_", f"torch.relu_({x})", SELECT_OPS),
                ("foreach", f"torch._foreach_add_([{x}], [{y}])", INT_OPS)]
        if t.dim() and t.shape[0] > 0:
            # advanced indices: index_put_ through setitem, index_copy_
            n0 = t.shape[0]
            idx = sorted({r.randrange(-n0, n0) % n0 for _ in range(r.randint(1, 2))})
            ops += [("index_put_", f"{x}[torch.tensor({idx})] = {self.scalar()}", SELECT_OPS),
                    ("index_copy_", f"{x}.index_copy_(0, torch.tensor({idx}), "
                                    f"{x}[{idx[0]}:{idx[0] + 1}].expand({len(idx)}, "
                                    f"*{x}.shape[1:]).clone())", SELECT_OPS)]
        if t.dim():
            i = r.randrange(-max(t.shape[0], 1), max(t.shape[0], 1))
            ops.append(("setitem", f"{x}[{i}] = {y if r.random() < 0.5 else self.scalar()}",
                        SELECT_OPS))
            ops.append(("setitem", f"{x}[:, ::2] = {self.scalar()}" if t.dim() >= 2 else
                        f"{x}[::2] = {self.scalar()}", SELECT_OPS))
        op, text, ex = r.choice(ops)
        if "=" in text and not text.startswith(f"{x}."):
            return self.emit_inplace(text, x, op, ex)
        return self.emit_inplace(text, x, op, ex, bind_new=r.random() < 0.35)

    def g_extern(self):
        r = self.rng
        c = r.choices(["matmul", "linear", "cat", "stack", "index", "embedding", "bmm",
                       "addmm", "sdpa"], [30, 15, 15, 8, 14, 5, 5, 4, 4])[0]
        fdt = r.choice(["float32", "float32", "float32", "float64", "float16", "bfloat16"])
        if c in ("matmul", "linear", "addmm"):
            x = self.pick(lambda t: t.dim() >= 1 and t.dtype.is_floating_point) \
                or self.new_input(self.rand_shape(r.randint(1, 3)), fdt)
            t = self.env[x]
            k, m = t.shape[-1], r.randint(1, self.p["max_dim"])
            dt = str(t.dtype).replace("torch.", "")
            if c == "linear":
                w = self.new_input((m, k), dt)
                if r.random() < 0.5:
                    b = self.new_input((m,), dt)
                    return self.emit(f"F.linear({x}, {w}, {b})", "linear", False)
                return self.emit(f"F.linear({x}, {w})", "linear", False)
            if c == "addmm":
                if t.dim() != 2:
                    return False
                w = self.new_input((k, m), dt)
                b = self.new_input(r.choice([(m,), (t.shape[0], m), (1, m)]), dt)
                return self.emit(f"torch.addmm({b}, {x}, {w})", "addmm", False)
            wshape = (k, m) if r.random() < 0.8 else (k,)
            w = self.pick(lambda u: tuple(u.shape) == wshape and u.dtype == t.dtype) \
                if r.random() < 0.3 else None
            w = w or self.new_input(wshape, dt)
            forms = [f"{x} @ {w}", f"torch.matmul({x}, {w})", f"{x}.matmul({w})"]
            if t.dim() == 2 and len(wshape) == 2:
                forms += [f"torch.mm({x}, {w})", f"{x}.mm({w})"]
            if r.random() < 0.2:     # the same product spelled twice
                a, b = r.sample(forms, 2) if len(forms) > 1 else forms * 2
                return self.emit(a, "matmul", False) and self.emit(b, "matmul", False)
            return self.emit(r.choice(forms), "matmul", False)
        if c in ("bmm", "sdpa"):
            b, n, k, m = (r.randint(1, 3) for _ in range(4))
            if c == "bmm":
                x = self.new_input((b, n, k), fdt)
                w = self.new_input((b, k, m), fdt)
                if r.random() < 0.3:
                    bias = self.new_input((b, n, m), fdt)
                    return self.emit(f"torch.baddbmm({bias}, {x}, {w})", "bmm", False)
                return self.emit(r.choice([f"torch.bmm({x}, {w})", f"{x}.bmm({w})"]),
                                 "bmm", False)
            h, L, E = r.randint(1, 2), r.randint(1, 5), r.choice([2, 4, 8])
            q, kk, v = (self.new_input((b, h, L, E), fdt, layout=self.sdpa_views)
                        for _ in range(3))
            extra = r.choice(["", ", is_causal=True", ", scale=0.5"])
            return self.emit(f"F.scaled_dot_product_attention({q}, {kk}, {v}{extra})",
                             "sdpa", False)
        if c in ("cat", "stack"):
            x = self.pick() or self.new_input()
            t = self.env[x]
            parts = [x]
            for _ in range(r.randint(1, 2)):
                if c == "cat" and t.dim() and r.random() < 0.5:
                    d = r.randrange(t.dim())
                    s = list(t.shape)
                    s[d] = r.randint(0, 3)
                    parts.append(self.new_input(s))
                else:
                    y = self.pick(lambda u: u.shape == t.shape)
                    parts.append(y if y and r.random() < 0.6 else
                                 self.new_input(tuple(t.shape)))
            seq = ", ".join(parts)
            if c == "cat":
                d = self.dim(t) if t.dim() else "0"
                form = r.choice([f"torch.cat([{seq}], {d})", f"torch.cat(({seq}), dim={d})",
                                 f"torch.concat([{seq}])"])
            else:
                d = r.randint(-t.dim() - 1, t.dim())
                form = r.choice([f"torch.stack([{seq}], {d})", f"torch.stack(({seq}))"])
            return self.emit(form, c, SELECT_OPS)
        if c == "index":
            x = self.pick(lambda t: t.dim() >= 1 and t.shape[0] > 0) \
                or self.new_input(self.rand_shape(r.randint(1, 3)))
            t = self.env[x]
            s0 = t.shape[0]
            if s0 == 0:    # a new input of a random shape may be empty
                return False
            hi = s0 + (1 if self.oob_index and r.random() < 0.03 else 0)
            idx = self.new_input(self.rand_shape(r.randint(1, 2)), r.choice(["int64", "int32"]),
                                 kind="index", hi=hi, layout=False)
            forms = [f"{x}[{idx}]"]
            if t.dim() >= 2 and t.shape[1] > 0:
                idx1 = self.new_input(tuple(self.env[idx].shape), "int64", kind="index",
                                      hi=t.shape[1], layout=False)
                forms += [f"{x}[{idx}, {idx1}]", f"{x}[:, {idx1}]"]
            if r.random() < 0.3:
                forms.append(f"{x}[torch.arange({s0}, device={x}.device)]")
            return self.emit(r.choice(forms), "index", SELECT_OPS)
        if c == "embedding":
            nv, e = r.randint(1, 6), r.randint(1, 5)
            w = self.new_input((nv, e), fdt)
            idx = self.new_input(self.rand_shape(r.randint(1, 2)), "int64", kind="index",
                                 hi=nv, layout=False)
            return self.emit(f"F.embedding({idx}, {w})", "embedding", SELECT_OPS)
        return False

    def g_create(self):
        r = self.rng
        x = self.pick() or self.new_input()
        t = self.env[x]
        shape = tuple(t.shape) if r.random() < 0.6 else self.rand_shape()
        dev = [i.name for i in self.inputs if i.kind != "number"][0]
        dt = r.choice(list(DTYPES))
        s = self.scalar(r.choice(["int", "float"]))
        forms = [("full", f"torch.zeros_like({x})"), ("full", f"torch.ones_like({x})"),
                 ("full", f"torch.full_like({x}, {s})"),
                 ("full", f"{x}.new_full({shape}, {s})"),
                 ("full", f"{x}.new_zeros({shape})"),
                 ("full", f"torch.zeros({shape}, dtype=torch.{dt}, device={dev}.device)"),
                 ("full", f"torch.ones({shape}, device={dev}.device)"),
                 ("full", f"torch.full({shape}, {s}, device={dev}.device)"),
                 ("arange", f"torch.arange({r.randint(0, 6)}, device={dev}.device)"),
                 ("arange", f"torch.arange({r.randint(-2, 2)}, {r.randint(2, 7)}, "
                            f"{r.choice([1, 2, 0.5])}, device={dev}.device)"),
                 ("arange", f"torch.arange({r.randint(1, 5)}, dtype=torch.{dt}, "
                            f"device={dev}.device)")]
        if t.dim() >= 2:
            k = r.randint(-2, 2)
            forms += [("tril", f"torch.tril({x}, {k})"), ("tril", f"{x}.tril()"),
                      ("triu", f"{x}.triu({k})")]
        op, form = r.choice(forms)
        return self.emit(form, op, SELECT_OPS if op != "arange" or "0.5" not in form else False)

    def g_dup(self):
        """Repeat an earlier expression (common subexpressions)."""
        cands = [s for s in self.stmts if len(s.targets) >= 1 and not s.inplace
                 and " = " in s.text and "\n" not in s.text]
        if not cands:
            return False
        weights = [4 if s.op in EXTERNS else 1 for s in cands]
        s = self.rng.choices(cands, weights)[0]
        expr = s.text.split(" = ", 1)[1]
        return self.emit(expr, s.op, SELECT_OPS)

    def g_break(self):
        """Ops tcjit does not compile (graph breaks): results must still be
        eager's."""
        r = self.rng
        x = self.pick(exact=True) or self.new_input()
        t = self.env[x]
        d = self.dim(t)
        forms = [f"torch.flip({x}, ({d},))", f"{x}.cumsum({d})", f"{x}.floor()",
                 f"{x} // 2", f"{x} % 3", f"torch.sign({x})", f"{x}.round()",
                 f"torch.expm1({x})", f"{x}.sort({d}).values", f"torch.log1p({x}.abs())"]
        return self.emit(r.choice(forms), "break", False)

    def g_branch(self):
        """A data-dependent branch on an exact value (tcjit evaluates the
        condition in Python and goes on compiling the branch taken)."""
        r = self.rng
        c = self.pick(exact=True)
        x = self.pick(lambda t: t.dtype.is_floating_point)
        if c is None or x is None:
            return False
        cond = r.choice([f"{c}.sum() > 0", f"({c} > 0).any()", f"{c}.numel() > 3",
                         f"{c}.max() >= 1" if self.env[c].numel() else f"{c}.numel() > 0"])
        name = self.new_name()
        a, b = r.sample([f"{x} * 2", f"{x}.sin()", f"{x} + 1", f"{x}.abs()"], 2)
        text = f"if {cond}:\n    {name} = {a}\nelse:\n    {name} = {b}"
        try:
            self.run(text)
        except Exception:  # noqa: BLE001
            return False
        self.bind(name, self.ns[name], False)
        self.stmts.append(Stmt(text, "branch", (name,)))
        return True

    def g_loop(self):
        r = self.rng
        x = self.pick(lambda t: t.dtype.is_floating_point)
        if x is None:
            return False
        y = self.operand_for(x)
        name = self.new_name()
        text = (f"{name} = {x}\nfor _ in range({r.randint(1, 3)}):\n"
                f"    {name} = {name} * 0.5 + {y}")
        try:
            self.run(text)
        except Exception:  # noqa: BLE001
            return False
        if self.too_big(self.ns[name]):
            return False
        self.bind(name, self.ns[name], False)
        self.stmts.append(Stmt(text, "loop", (name,)))
        return True

    def g_extract(self):
        if not self.tuples:
            return False
        t = self.rng.choice(self.tuples)
        v = self.env[t]
        i = self.rng.randrange(len(v))
        forms = [f"{t}[{i}]"]
        if hasattr(v, "values"):
            forms.append(f"{t}.{'values' if i == 0 else 'indices'}")
        return self.emit(self.rng.choice(forms), "getitem", self.exact[t])

    KINDS = [("unary", 16), ("clamp", 4), ("binary", 20), ("where", 5), ("reduce", 20),
             ("multireduce", 5), ("norm", 5), ("cast", 5), ("view", 16), ("inplace", 8),
             ("extern", 8),
             ("create", 3), ("dup", 4), ("break", 2), ("branch", 1), ("loop", 1),
             ("extract", 3)]

    # ---------------------------------------------------------- programs

    def program(self):
        r = self.rng
        if r.random() < self.p.get("p_big", 0):
            # big enough for kernels to split their range over threads
            self.p = dict(self.p, max_numel=1 << 18)
            self.new_input(r.choice(BIG_SHAPES), r.choice(["float32", "float32", "float16",
                                                           "int64"]))
        for _ in range(r.choices([1, 2, 3], [50, 35, 15])[0]):
            self.new_input()
        lo, hi = self.p["stmts"]
        want = r.randint(lo, hi)
        kinds, weights = _w(self.KINDS)
        tries = 0
        while len(self.stmts) < want and not self.raises and tries < 20 * want:
            tries += 1
            n_inputs = len(self.inputs)
            if not getattr(self, "g_" + r.choices(kinds, weights)[0])():
                self.drop_inputs(n_inputs)
        return Program(self.seed, self.inputs, self.stmts, self.pick_outputs(),
                       ret=r.choices(["tuple", "single", "list"], [80, 12, 8])[0],
                       raises=self.raises)

    def drop_inputs(self, n):
        """Forget the inputs a rejected statement made."""
        for inp in self.inputs[n:]:
            self.env.pop(inp.name, None)
            self.ns.pop(inp.name, None)
            if inp.name in self.order:
                self.order.remove(inp.name)
        del self.inputs[n:]

    def pick_outputs(self):
        r = self.rng
        defined = [n for n in self.order if n.startswith("v")] + self.tuples
        defined = [n for n in defined if any(n in s.targets for s in self.stmts)]
        used = {u for s in self.stmts for u in s.uses}
        sinks = [n for n in defined if n not in used]
        outs = []
        pool = sinks or defined
        for n in r.sample(pool, min(len(pool), r.randint(1, 3))):
            outs.append(n)
        if defined and r.random() < 0.3:
            outs.append(r.choice(defined))
        tensor_inputs = [i.name for i in self.inputs if i.kind != "number"]
        if r.random() < 0.15 or not outs:
            outs.append(r.choice(tensor_inputs))
        if r.random() < 0.08:
            outs.append(r.choice(outs))
        r.shuffle(outs)
        return outs


def generate(seed, profile="small", device="cpu"):
    return Gen(seed, profile, device).program()
