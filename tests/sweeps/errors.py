"""Which (op, dtypes, arguments) raise eagerly and which through tcjit.

    python -m tests.sweeps.errors [--backend eager] [--only NAME ...]
                                  [--all-spellings]

Every traced spelling of every registry op and decomposed name (the
bindings tcjit._C.bindings() lists) is called on tensors of each dtype (and
pairs of dtypes, Python numbers, bad dims) as a small function, eagerly and
through tcjit.compile with each backend.  A row is printed where tcjit's
outcome differs from eager's: eager raises and tcjit does not, or raises
another type or message, or tcjit raises where eager does not.  The sweep
compares exceptions only; values are the fuzzer's and the tests' job.
"""
import argparse
import itertools
import sys

import torch
import torch.nn.functional as F

import tcjit

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32,
          torch.int64, torch.float16, torch.bfloat16, torch.float32,
          torch.float64]
SHORT = {torch.bool: "b8", torch.uint8: "u8", torch.int8: "i8",
         torch.int16: "i16", torch.int32: "i32", torch.int64: "i64",
         torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32",
         torch.float64: "f64"}
PAIR_DTYPES = [torch.bool, torch.uint8, torch.int64, torch.float16,
               torch.float32]


def tensor(dtype, shape=(3, 4), seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if not dtype.is_floating_point:
        lo = 0 if dtype == torch.uint8 else -3
        return torch.randint(lo, 4, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g).to(dtype)


def spell(path, args):
    """Python source of a call of binding path with argument sources."""
    mod, name = path.split(".", 1)
    if mod == "Tensor":
        return f"{args[0]}.{name}({', '.join(args[1:])})"
    if mod == "builtins":
        return f"{name}({', '.join(args)})"
    return f"{path}({', '.join(args)})"


UNARY = {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh",
         "sigmoid", "silu", "gelu", "erf", "sinc", "softplus", "leaky_relu",
         "elu", "mish", "relu", "square", "reciprocal", "logical_not",
         "bitwise_not", "contiguous", "float32", "float64", "int32", "int64",
         "bool", "int16", "int8", "uint8", "float16", "bfloat16", "tril",
         "triu", "clone", "t", "flatten", "dropout"}
BINARY = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "lt",
          "le", "gt", "ge", "eq", "ne", "logical_and", "logical_or",
          "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
          "clamp_min", "clamp_max"}
REDUCE = {"sum", "prod", "amax", "amin", "argmax", "argmin", "any", "all",
          "mean", "var", "std", "logsumexp", "norm"}
# dim arguments: the ones every reduction takes, then the bad ones
DIM_ARGS = ["", "0", "-1", "1, True", "(0, 1)", "None", "dim=None",
            "(0, 0)", "2", "-3", "(0, 2)", "0, 1", "0, keepdim=1",
            "0, keepdim=None", "dim=[]", "()", "1.0", "(1.0,)", "[0, -2]"]


def cases(path, op):
    """(source of the body, {param: value}) for one spelling."""
    x = lambda d: {"x": tensor(d)}  # noqa: E731
    if op in UNARY:
        extra = {"F.hardtanh": [], "F.leaky_relu": ["0.2"]}.get(path, [])
        for d in DTYPES:
            yield spell(path, ["x"] + extra), x(d)
    elif op == "clamp":
        argsets = (["x"], ["x", "-1.0, 1.0"], ["x", "-1, 1"], ["x", "y, y"],
                   ["x", "None, None"], ["x", "min=0"])
        if path == "F.relu6":
            argsets = (["x"],)
        elif path == "F.hardtanh":
            argsets = (["x"], ["x", "-2, 2"], ["x", "0.5, 1.5"], ["x", "2, 1"],
                       ["x", "-0.5, 2"], ["x", "True, 2"])
        for d, a in itertools.product(DTYPES, argsets):
            yield spell(path, a), {"x": tensor(d), "y": tensor(d, seed=1)}
    elif op in BINARY:
        for d1, d2 in itertools.product(PAIR_DTYPES, PAIR_DTYPES):
            yield spell(path, ["x", "y"]), {"x": tensor(d1),
                                            "y": tensor(d2, seed=1)}
        for d, s in itertools.product(DTYPES, ["2", "2.5", "True", "-1"]):
            yield spell(path, ["x", s]), x(d)
        if op in ("add", "sub"):
            for (d1, d2), a in itertools.product(
                    itertools.product(PAIR_DTYPES, PAIR_DTYPES),
                    ["alpha=0.5", "alpha=2", "alpha=True"]):
                yield spell(path, ["x", "y", a]), {"x": tensor(d1),
                                                   "y": tensor(d2, seed=1)}
    elif op in REDUCE:
        for d in DTYPES:
            yield spell(path, ["x"]), x(d)
        for d, a in itertools.product([torch.bool, torch.int64,
                                       torch.float32], DIM_ARGS[1:]):
            yield spell(path, ["x", a]), x(d)
    elif op in ("max", "min"):
        for d in DTYPES:
            for a in (["x"], ["x", "0"], ["x", "y"], ["x", "dim=-1"],
                      ["x", "None"], ["x", "2"]):
                yield spell(path, a), {"x": tensor(d), "y": tensor(d, seed=1)}
    elif op in ("softmax", "log_softmax"):
        for d in DTYPES:
            for a in (["x", "0"], ["x", "-1"], ["x", "2"],
                      ["x", "1, dtype=torch.float64"]):
                yield spell(path, a), x(d)
    elif op == "where":
        for d1, d2 in itertools.product(PAIR_DTYPES, PAIR_DTYPES):
            a = ["c", "x", "y"] if path == "torch.where" else ["x", "c", "y"]
            yield spell(path, a), {"c": tensor(d1) if d1 != torch.bool
                                   else tensor(d1, seed=2),
                                   "x": tensor(d2), "y": tensor(d2, seed=1)}
    elif op == "masked_fill":
        for d, m in itertools.product(DTYPES, PAIR_DTYPES):
            yield spell(path, ["x", "m", "1.5"]), {"x": tensor(d),
                                                   "m": tensor(m, seed=3)}
    elif op in ("mm", "matmul"):
        for d1, d2 in itertools.product(DTYPES, PAIR_DTYPES):
            yield spell(path, ["x", "y"]), {"x": tensor(d1),
                                            "y": tensor(d2, (4, 2))}
    elif op in ("layer_norm", "rms_norm", "normalize", "group_norm"):
        arg = {"layer_norm": "(4,)", "rms_norm": "(4,)", "normalize": "",
               "group_norm": "1"}[op]
        for d in DTYPES:
            yield spell(path, ["x"] + ([arg] if arg else [])), x(d)
    elif op in ("cat", "stack"):
        for d1, d2 in itertools.product(DTYPES, PAIR_DTYPES):
            yield spell(path, ["[x, y]"]), {"x": tensor(d1),
                                            "y": tensor(d2, seed=1)}
    elif op == "embedding":
        for d1, d2 in itertools.product(DTYPES, PAIR_DTYPES):
            yield spell(path, ["i", "w"]), {"i": tensor(d1).abs().to(d1)
                                            if d1 != torch.bool else tensor(d1),
                                            "w": tensor(d2, (5, 3))}


# bodies over x (float32 [3, 4]), i (int64 [0, 2]), b (bool [3, 4])
MISC = """x[5]
x[:, 4]
x[-4]
x[1, 2, 3]
x[None, 5]
x[..., ...]
x[i + 5]
x[i]
x[b]
x[b[0]]
x[0.5]
x[:, ::-1]
x[:, ::0]
x.select(0, 5)
x.select(2, 0)
x.narrow(0, 2, 5)
x.narrow(0, -1, 1)
x.narrow(3, 0, 1)
x.view(7)
x.view(-1, -1)
x.view(5, -1)
x.reshape(5)
x.reshape(-1, 5)
x.expand(2, 3)
x.expand(2, 3, 5)
x.expand(-1, 4)
x.expand(3, -1, 4)
x.permute(0, 0)
x.permute(0)
x.permute(0, 2)
x.transpose(0, 5)
x.unsqueeze(5)
x.unsqueeze(-4)
x.squeeze(5)
x.squeeze((0, 0))
x.split(0)
x.split(-1)
x.split([1, 1])
x.chunk(0)
x.chunk(-1)
x.unbind(2)
x.unflatten(1, (3, 2))
x.unflatten(1, (-1, -1))
x.flatten(1, 0)
x.flatten(2)
x.t().t().unsqueeze(0).t()
x.softmax(2)
x.log_softmax(-3)
F.softmax(x, 2)
torch.cat([x, x], 2)
torch.cat([x, x.t()])
torch.cat([x, i])
torch.cat([])
torch.stack([x, x.t()])
torch.stack([x, x], 3)
torch.mm(x, x)
x @ x
torch.matmul(x, i)
torch.bmm(x, x)
F.linear(x, x)
F.embedding(x, x)
F.embedding(i.float(), x)
F.embedding(i, x[0])
F.layer_norm(x, (3,))
F.layer_norm(x, (5, 4))
F.group_norm(x, 5)
F.group_norm(x, 0)
F.normalize(x, 2, 5)
x.sum(5)
x.sum((0, 0))
x.amax((1, -1))
x.argmax(5)
x.mean((0, 5))
x.var(3)
x.logsumexp(3)
x.max(3)
x.tril(1.5)
i.tril()
x.masked_fill(b[0], 1.0)
x.masked_fill(b, x)
x.masked_fill(i, 1.0)
torch.where(b, x, i)
torch.where(x, x, x)
torch.where(b[:2], x, x)
x + x[:2]
x.add(x, alpha=1.5)
i.add(i, alpha=1.5)
i.sub(b)
b - b
-b
x.pow(i)
i ** -1
i.pow(-2)
torch.pow(2, i - 5)
i // 0
i % 0
x.to(torch.complex64)
x.new_zeros(-1)
torch.zeros(-2)
torch.full((2,), 1.5, dtype=torch.int64)
torch.arange(0, 5, 0)
torch.arange(5, 0)
torch.arange(0, 5, -1)
torch.ones(3, dtype=torch.float32, device="meta")
x.clamp()
x.clamp(min=None)
i.clamp(0.5, 1.5)
b.clamp(min=True)
x.type(torch.int64)
x.size(5)
x.size(-3)
x.expand_as(i)
x.view_as(i)
x.reshape_as(i)
F.dropout(x, 1.5, False)
F.dropout(x, -0.5, False)
F.cross_entropy(x, i)
F.cross_entropy(x, torch.tensor([0, 1, 2.0]))
F.nll_loss(x, torch.tensor([0, 1]))
F.scaled_dot_product_attention(x, x, x[:, :2])
F.conv1d(x, x)
F.rms_norm(x, (5,))
x.all(5)
x.any((0, 0))
x.prod(3)
x.norm(3)
x.norm(2, 5)
x.std((0, 0))""".split("\n")


def misc_cases():
    x = torch.randn(3, 4)
    params = {"x": x, "i": torch.tensor([0, 2]), "b": x > 0}
    for body in MISC:
        yield body, params


def run(fn, args):
    try:
        r = fn(*args)
        return ("ok", tuple(getattr(t, "dtype", None) for t in
                            (r if isinstance(r, tuple) else (r,))))
    except Exception as e:  # noqa: BLE001 - compared with eager's
        return ("raise", type(e).__name__, str(e).split("\n")[0])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", action="append",
                    help="auto, eager (default: both)")
    ap.add_argument("--only", nargs="*", help="op names")
    ap.add_argument("--all-spellings", action="store_true",
                    help="every spelling, not the first torch.* one per op")
    opts = ap.parse_args(argv)
    backends = opts.backend or ["eager", "auto"]
    seen, nrun, nbad = set(), 0, 0
    todo = []
    for path, op in tcjit._C.bindings():
        if path.startswith("nn.") or (opts.only and op not in opts.only):
            continue
        if not opts.all_spellings and (op, path.split(".")[0]) in seen:
            continue
        seen.add((op, path.split(".")[0]))
        todo.append(cases(path, op))
    if not opts.only:
        todo.append(misc_cases())
    for body, params in itertools.chain.from_iterable(todo):
        names = list(params)
        src = f"def f({', '.join(names)}):\n    return {body}\n"
        scope = {"torch": torch, "F": F}
        exec(compile(src, f"<{body}>", "exec"), scope)
        fn = scope["f"]
        args = [params[n] for n in names]
        want = run(fn, args)
        for be in backends:
            tcjit.reset()
            got = [run(tcjit.compile(fn, backend=be), args)
                   for _ in range(2)]
            nrun += 1
            for i, g in enumerate(got):
                if g[0] == want[0] == "ok" or g == want:
                    continue
                nbad += 1
                dts = ",".join(f"{n}:{SHORT[v.dtype]}" for n, v in
                               params.items())
                print(f"{be:5} call{i} {body:40} {dts:22} eager "
                      f"{want[1:] if want[0] == 'raise' else 'ok'} | "
                      f"tcjit {g[1:] if g[0] == 'raise' else 'ok'}")
                break
        sys.stdout.flush()
    print(f"{nrun} compiled runs, {nbad} differ from eager")
    return 1 if nbad else 0


if __name__ == "__main__":
    sys.exit(main())
