"""A fuzz program: its inputs, statements and outputs, and the Python source
they become.

The source text is the program: the oracle runs exactly the text a
reproducer shows.  It has two functions:

    make_inputs(variant=0, device="cpu")  fresh input tensors (and Python
                                          numbers); variant 1 has other
                                          values of the same shapes, dtypes
                                          and layouts
    f(a0, a1, ...)                        the program under test
"""
import dataclasses
import math
import re

import torch

HEADER = ("import torch\n"
          "import torch.nn.functional as F\n")

DTYPES = {
    "bool": torch.bool, "uint8": torch.uint8, "int8": torch.int8,
    "int16": torch.int16, "int32": torch.int32, "int64": torch.int64,
    "float16": torch.float16, "bfloat16": torch.bfloat16,
    "float32": torch.float32, "float64": torch.float64,
}
FLOATS = ("float16", "bfloat16", "float32", "float64")
NAME_RE = re.compile(r"\b(?:a|v)\d+\b")


def storage_key(t):
    """What identifies t's memory (None for an empty storage, which all
    empty tensors may share)."""
    s = t.untyped_storage()
    return s.data_ptr() if s.nbytes() else None


@dataclasses.dataclass
class Input:
    """One argument of f.

    kind: "randn" (floats), "randint" (ints in [lo, hi)), "bool", "index"
    (int64 or int32 in [0, hi)), "literal" (values given), or "number" (a
    Python int/float argument, given by value).  The tensor is built
    contiguous with base_shape, has specials written into it (flat index,
    value), goes to the device and then gets the layout suffix applied
    (".t()", "[:, ::2]", ".expand(3, 4)"), so inputs can be non-contiguous,
    offset or overlapping.
    """
    name: str
    kind: str
    dtype: str = "float32"
    base_shape: tuple = ()
    layout: str = ""
    seed: int = 0
    lo: int = -4
    hi: int = 5
    specials: tuple = ()
    values: tuple = ()       # "literal": flat values; "number": (value,)

    def code(self):
        """Lines (unindented) that assign the input to its name."""
        n, dt = self.name, f"torch.{self.dtype}"
        if self.kind == "number":
            return [f"{n} = {self.values[0]!r}"]
        shape = tuple(self.base_shape)
        g = f"torch.Generator().manual_seed({self.seed} + 1000 * variant)"
        if self.kind == "randn":
            make = f"torch.randn({shape}, generator={g}).to({dt})"
        elif self.kind in ("randint", "index"):
            make = (f"torch.randint({self.lo}, {self.hi}, {shape}, "
                    f"generator={g}).to({dt})")
        elif self.kind == "bool":
            make = f"torch.randint(0, 2, {shape}, generator={g}).to(torch.bool)"
        elif self.kind == "literal":
            vals = ", ".join(_lit(v) for v in self.values)
            make = f"torch.tensor([{vals}], dtype={dt}).reshape({shape})"
        else:
            raise ValueError(self.kind)
        lines = [f"{n} = {make}"]
        for idx, val in self.specials:
            lines.append(f"{n}.view(-1)[{idx}] = {_lit(val)}")
        lines.append(f"{n} = {n}.to(device){self.layout}")
        return lines


def _lit(v):
    """A Python literal for a number, nan/inf included."""
    if isinstance(v, bool):
        return repr(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "float('nan')"
        if math.isinf(v):
            return "float('inf')" if v > 0 else "-float('inf')"
    return repr(v)


@dataclasses.dataclass
class Stmt:
    """One line of f.  targets: names it (re)binds; op: the op's name for
    signatures; uses: the names it reads; inplace: it mutates a tensor."""
    text: str
    op: str
    targets: tuple = ()
    inplace: bool = False

    @property
    def uses(self):
        rhs = self.text.split("=", 1)[1] if self.targets and " = " in self.text \
            else self.text
        names = NAME_RE.findall(rhs)
        if self.inplace and self.targets:   # "x += y" reads x
            names += NAME_RE.findall(self.text.split("=", 1)[0])
        return names

    def rename(self, old, new):
        return dataclasses.replace(
            self, text=re.sub(rf"\b{old}\b", new, self.text))


@dataclasses.dataclass
class Program:
    seed: int
    inputs: list
    stmts: list
    outputs: list            # names; repeated names are repeated outputs
    ret: str = "tuple"       # "tuple", "list" or "single"
    raises: bool = False     # the generator kept a statement eager rejects

    def func_source(self):
        args = ", ".join(i.name for i in self.inputs)
        lines = [f"def f({args}):"]
        lines += ["    " + line for s in self.stmts for line in s.text.splitlines()]
        outs = ", ".join(self.outputs)
        if self.ret == "single":
            lines.append(f"    return {self.outputs[0]}")
        elif self.ret == "list":
            lines.append(f"    return [{outs}]")
        else:
            lines.append(f"    return ({outs}{',' if len(self.outputs) == 1 else ''})")
        return "\n".join(lines) + "\n"

    def inputs_source(self):
        lines = ['def make_inputs(variant=0, device="cpu"):']
        for i in self.inputs:
            lines += ["    " + line for line in i.code()]
        lines.append(f"    return [{', '.join(i.name for i in self.inputs)}]")
        return "\n".join(lines) + "\n"

    def source(self):
        return (HEADER + "\n\n" + self.inputs_source() + "\n\n"
                + self.func_source())

    def to_json(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d):
        d = dict(d)
        d["inputs"] = [Input(**{k: tuple(v) if isinstance(v, list) else v
                                for k, v in i.items()}) for i in d["inputs"]]
        d["inputs"] = [dataclasses.replace(i, specials=tuple(tuple(x) for x in i.specials))
                       for i in d["inputs"]]
        d["stmts"] = [Stmt(**{k: tuple(v) if isinstance(v, list) else v
                              for k, v in s.items()}) for s in d["stmts"]]
        return cls(**d)

    def op_of(self, name):
        """The op that last defined a name ("input" for an argument)."""
        op = "input"
        for s in self.stmts:
            if name in s.targets:
                op = s.op
        return op

    def ops(self):
        return sorted({s.op for s in self.stmts})

    def load(self, float64=False):
        """(f, make_inputs) from the source text.  float64: f computes every
        float in float64 (explicit casts to other float dtypes too), for a
        reference of the exact value."""
        src = self.source()
        if float64:
            src = re.sub(r"\btorch\.(float16|bfloat16|float32|half|float)\b", "torch.float64", src)
            src = re.sub(r"\.(half|bfloat16|float)\(\)", ".double()", src)
        ns = {}
        exec(compile(src, f"<fuzz seed {self.seed}>", "exec"), ns)
        return ns["f"], ns["make_inputs"]


# ------------------------------------------------------------ reproducers

def reproducer(prog, failure, device="cpu"):
    """A standalone script that shows one failure: inputs, f, and a check of
    just the property that failed, against eager."""
    backend, kind, call = failure["backend"], failure["kind"], failure["call"]
    msg = "\n".join("#   " + line for line in failure["message"].splitlines()[:12])
    head = (f"# tcjit fuzz reproducer: seed {prog.seed}, "
            f"{failure['signature']}\n#\n{msg}\n"
            f"# (call {call}: call 1 compiles, call 2 runs the cached code "
            f"on inputs with other values)\n")
    body = [head + HEADER + "import tcjit\n", prog.inputs_source(), prog.func_source()]
    variants = "(0, 1)" if call == 2 else "(0,)"
    storage = ["_s = lambda t: t.untyped_storage().data_ptr()"] \
        if kind in ("shared", "unshared") else []
    check = [f'device = "{device}"'] + storage + [
             f'cf = tcjit.compile(f, backend="{backend}")',
             f"for variant in {variants}:",
             "    eager_inputs = make_inputs(variant, device)"]
    if kind in ("crash", "hang"):
        check = check[:1] + [
            "for attempt in range(200):     # some crashes need repeated compiles",
            "    tcjit.reset()",
            f'    cf = tcjit.compile(f, backend="{backend}")',
            "    for variant in (0, 1):",
            "        expected = f(*make_inputs(variant, device))",
            "        actual = cf(*make_inputs(variant, device))",
            'print("no crash")']
    elif kind in ("no-exception", "wrong-exception"):
        check += ["    try:",
                  "        f(*eager_inputs)",
                  "    except Exception as e:",
                  "        expected = e",
                  "    try:",
                  "        cf(*make_inputs(variant, device))",
                  "    except Exception as e:",
                  "        assert type(e) is type(expected), (e, expected)",
                  "    else:",
                  "        raise AssertionError(f'eager raises {expected!r}; "
                  "tcjit raised nothing')"]
    elif kind == "raised":
        check += ["    f(*eager_inputs)                        # eager runs",
                  "    cf(*make_inputs(variant, device))   # tcjit must too"]
    else:
        check += ["    expected = f(*eager_inputs)",
                  "    inputs = make_inputs(variant, device)",
                  "    actual = cf(*inputs)"]
        check += ["    " + line for line in _assertion(failure)]
    body.append("\n".join(check) + "\n")
    return "\n\n".join(body)


def _assertion(failure):
    kind, w = failure["kind"], failure.get("where", {})
    a, e = w.get("a", "actual"), w.get("e", "expected")
    if kind == "value":
        return [f"torch.testing.assert_close({a}, {e}, equal_nan=True)"]
    if kind in ("dtype", "shape", "stride", "stride1", "type"):
        attr = {"dtype": ".dtype", "shape": ".shape", "stride": ".stride()",
                "stride1": ".stride()", "type": ""}[kind]
        if kind == "type":
            return [f"assert type({a}) is type({e}), (type({a}), type({e}))"]
        return [f"assert {a}{attr} == {e}{attr}, ({a}{attr}, {e}{attr})"]
    if kind == "mutation":
        return ["for x, y in zip(inputs, eager_inputs):   # inputs after the call",
                "    if isinstance(x, torch.Tensor):",
                "        torch.testing.assert_close(x, y, equal_nan=True)"]
    if kind in ("merged", "unmerged", "shared", "unshared", "offset"):
        return [f"print({w.get('show', '')!r})",
                f"assert ({w['actual']}) == ({w['expected']}), "
                f"({w['actual']}, {w['expected']})"]
    return [f"print(actual, expected)   # {kind}"]
