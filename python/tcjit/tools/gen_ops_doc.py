"""Print docs/ops.md from the op registry and the tracer's binding table:
``python3 -m tcjit.tools.gen_ops_doc > docs/ops.md`` (``make docs-ops``).
tests/test_docs.py fails when the committed file is stale."""
import collections

from tcjit import _C

HEADER = """# Supported operations

Generated from the op registry (`src/graph/ops.c`) and the tracer's table of
Python spellings (`src/tracer/bindings.c`) by `make docs-ops`; do not edit.

Anything not listed here still works: tcjit ends the compiled segment before
it, runs that one instruction in Python (a *graph break*, see
[graph_breaks.md](graph_breaks.md)) and goes on compiling after it.
Python operators (`+ - * / ** & | ^ ~ < <= > >= == !=`, unary `-`) on tensors
map to the ops of the same meaning.  `float16`/`bfloat16` tensors compile
like the others: values are loaded as float32, computed in float32 and
rounded to the tensor's dtype when stored or cast (as Inductor does), so a
chain of ops rounds once where eager rounds after every op; casts are
bit-exact with eager.

Accuracy of transcendentals: float32 `exp`/`log`/`sin`/`cos`/`tanh` are
within a few float32 ulp of the exact value for every input, far inside
`torch.testing`'s float32 tolerances (CUDA: at most 2.7 ulp, measured over
every float32).  Those tolerances (`torch.testing.assert_close`'s defaults
for the dtype) are the bound the tests and `make bench` check every result
against eager's with (`tests/tolerance.py`).  On CUDA, a kernel whose floats are all `float16`/`bfloat16`
computes `sin`/`cos` with the GPU's approximate instructions after an exact
range reduction: absolute error below 1e-6, far inside those dtypes'
tolerances and below the rounding eager applies after each op.
"""


# Traced names that are not registry entries: graph builders that
# decompose them into registry ops (src/graph/graph.h).
DECOMPOSED = {
    "mean": "sum / n", "var": "two-pass: mean, sum of squared deviations",
    "std": "sqrt(var)", "logsumexp": "amax, exp, sum, log (inf-safe)",
    "norm": "p=1: sum(abs); p=2: sqrt(sum(x*x))",
    "softmax": "amax, sub, exp, sum, div; one kernel per row",
    "log_softmax": "amax, sub, exp, sum, log, sub; one kernel per row",
    "transpose": "view", "t": "view", "unsqueeze": "view", "squeeze": "view",
    "flatten": "view (or a copy, like reshape)", "reshape": "view or copy",
    "split": "narrow views (a tuple)", "chunk": "narrow views (a tuple)",
    "unbind": "select views (a tuple)",
    "expand_as": "view (expand)", "view_as": "view", "reshape_as": "view or copy",
    "narrow": "view (slice)", "select": "view", "unflatten": "view",
    "is_contiguous": "a Python bool from the traced layout",
    "max": "all dims: amax; with dim: (amax, argmax) as torch.return_types.max; "
           "of two tensors: maximum",
    "min": "all dims: amin; with dim: (amin, argmin) as torch.return_types.min; "
           "of two tensors: minimum",
    "tril": "where(col - row <= k, x, 0), positions from arange nodes",
    "triu": "where(col - row >= k, x, 0), positions from arange nodes",
    "zeros": "full(0) (`empty` is zero-filled too)", "ones": "full(1)",
    "empty": "full(0): uninitialized memory in eager",
}


# Registry ops reached through Python syntax rather than a binding.
SYNTAX = {"index": ["x[idx]", "x[:, i, j]"]}


def render():
    spellings = collections.defaultdict(list, {k: list(v) for k, v in SYNTAX.items()})
    extras = []
    for path, op in _C.bindings():
        if op is None or op.startswith(("float", "bfloat", "int", "uint", "bool")):
            extras.append(path if op is None else f"{path} (to {op})")
        else:
            spellings[op].append(path)
    out = [HEADER, "## Ops", "",
           "| op | operands | dtypes | Python spellings | notes |",
           "|---|---|---|---|---|"]
    for row in _C.op_table():
        names = ", ".join(f"`{p}`" for p in spellings.get(row["name"], []))
        names = names or "internal (reached through a decomposition only)"
        doc = row["doc"].replace("|", "\\|")
        out.append(f"| `{row['name']}` | {row['arity']} | "
                   f"{', '.join(row['dtypes'])} | {names} | {doc} |")
    out += ["", "## Decomposed ops and views", "",
            "| name | Python spellings | how |", "|---|---|---|"]
    for name, how in DECOMPOSED.items():
        names = ", ".join(f"`{p}`" for p in spellings.get(name, []))
        out.append(f"| `{name}` | {names} | {how} |")
    out += ["", "Also traced: `F.layer_norm` and `F.rms_norm` (mean / var / rsqrt "
            "with weight and bias, one kernel per row); `F.dropout` (the "
            "identity with training=False or p=0); basic indexing `x[i, a:b:s, "
            "None, ...]` (views); `F.normalize` (norm, clamp_min, div); "
            "`F.hardtanh` / `F.relu6` (clamp in the input's dtype).  Creation "
            "ops take `dtype=` and `device=` (None, 'cpu', 'cuda:N': the "
            "graph's device; a graph runs on one device).", "",
            "Extern ops (`extern:` above) are computed by torch itself, as "
            "Inductor's extern kernels are; tcjit fuses the pointwise and "
            "reduction work around them into its own kernels.", "",
            "## nn.Module", "",
            "Calling a module inlines it: `nn.Linear`, `LayerNorm`, `RMSNorm`, "
            "`Embedding`, `Dropout`, `GELU`, `ReLU`, `SiLU`, `Tanh`, `Sigmoid`, "
            "`Softmax`, `LogSoftmax`, `Conv1d`, `Conv2d`, `GroupNorm`, "
            "`Identity` and `Sequential` map to the functional ops above; a "
            "user module's `forward` is traced into the caller's graph. "
            "`ModuleList` / `ModuleDict` / `Sequential` indexing with "
            "constants is traced. Parameters and buffers are graph inputs "
            "read from the module on every call; modules are guarded by "
            "type and by having no hooks (a module with hooks is called in "
            "Python, so its hooks run).", ""]
    out += ["", "## Other traced calls", ""]
    out += [f"* `{e}`" for e in sorted(extras)]
    out += ["* `x.shape`, `x.dtype`, `x.ndim` (constants under the tensor's guard)",
            "* builtins `abs`, `min`, `max`, `float`, `int`, `bool`, `round`, "
            "`len`, `pow` on Python numbers (folded)", ""]
    return "\n".join(out)


if __name__ == "__main__":
    print(render(), end="")
