"""Print docs/ops.md from the op registry (its ops, their Python spellings,
the decomposed names and the nn.Module classes; src/graph/ops.c):
``python3 -m tcjit.tools.gen_ops_doc > docs/ops.md`` (``make docs-ops``).
tests/test_docs.py fails when the committed file is stale."""
import collections

from tcjit import _C

HEADER = """# Supported operations

Generated from the op registry (`src/graph/ops.c`: each op's entry carries
its Python spellings) by `make docs-ops`; do not edit.

Fused ops and extern ops: the ops of the first table below are compiled
into tcjit's own kernels, where chains of them fuse.  The ops of the second
table are *extern ops*: torch computes them (as Inductor's extern kernels),
as nodes of the same graph, and tcjit fuses the work around them.  Every
other torch op stays in the graph too, as a *generic extern node* (the
registry's default entry, `extern`): a call of `torch.*`, a `Tensor` method
(`Tensor.__getitem__` called as a function too), `torch.nn.functional` /
`torch._C._nn`, `torch.special`, `torch.linalg`, `torch.fft` or a
`torch.ops.aten` packet or overload whose arguments are tensors of the
graph and constants (numbers, bools, None, strings, slices, dtypes, memory
formats, layouts, tuples/lists of those; a memory format or device the
frame was given is guarded) becomes one node that torch computes at run
time, between tcjit's kernels.  Its result's dtype, sizes and strides (and,
for `torch.sort`, `topk`, `max(dim)` ..., each item of the tuple) come from
running the op once on meta tensors at trace time, cached per signature
(median 0.15 ms a meta run over OpInfo, 0.007 ms a node when cached);
where a new result has a dim of size 1, whose stride torch's meta
functions and kernels lay out differently (sort: the kernel keeps a dense
operand's, meta renumbers it) and eager's later strides follow, the op
also runs once for real on zeros on the CPU (operands of at most 64K
elements, the random state kept) and that stride is the kernel's; a
result that is a view of an operand (`Tensor.diagonal`, `unfold`) is a
view in the graph too, so it aliases as in eager.  A `device=` argument
stays in the graph when it is the graph's device (the meta run gets
"meta" in its place).  Tensor factories (`torch.randn`, `linspace`, `eye`,
`empty_strided`, ...: what a device context changes) are generic extern
nodes without any tensor argument; their meta run makes meta tensors, so
tracing draws nothing from the random stream.  Generic extern nodes are
never merged or dropped and run in program order, so RNG ops (`randn`,
`rand_like`, `bernoulli`, dropout in training) keep eager's random stream.
See "What still breaks" at the end.

Anything else still works: tcjit ends the compiled segment before
it, runs that one instruction in Python (a *graph break*, see
[graph_breaks.md](graph_breaks.md)) and goes on compiling after it.
Python operators (`+ - * / ** & | ^ ~ < <= > >= == !=`, unary `-`) on tensors
map to the ops of the same meaning.  `float16`/`bfloat16` tensors compile
like the others: values are loaded as float32, computed in float32 and
rounded to the tensor's dtype when stored or cast (as Inductor does), so a
chain of ops rounds once where eager rounds after every op; casts are
bit-exact with eager.  A float converted to an integer gives eager's answer
on the device: on the CPU, x86's (truncation toward zero, the lowest int32
or int64 for NaN, infinities and values out of range, int8 and int16
wrapped from int32, uint8 from int64); on CUDA, PTX's conversion to int32
or int64, which saturates and gives 0 for NaN (int8 and int16 wrap from
int32, uint8 from int64).

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


BREAKS = """## What still breaks, and why

PyTorch's OpInfo database (`tests/test_opinfo.py`, 2 samples an entry, on
the CPU) when this was written: float32, 611 of the 672 entries with
samples captured whole (90.9%; 11 of them have no op to compile: the frame
returns its input, `x.contiguous()`); bfloat16 493 of 546 (90.3%); int64
433 of 463 (93.5%); no wrong answer, no crash.  The 61 float32 entries
that break, by reason (`make sweep-opinfo` prints today's list):

* OpInfo's random-op harness (29): `randn`, `rand_like`, `randint`,
  `bernoulli`, `multinomial`, `normal`, the dropouts, `rrelu`,
  `fractional_max_pool*`, `scaled_dot_product_attention`,
  `multi_head_attention_forward`, `svd_lowrank` / `pca_lowrank`, `item`
  and the in-place random ops (`Tensor.cauchy_`, `exponential_`,
  `geometric_`, `log_normal_`, `normal_`, `uniform_`, read off
  `torch.Tensor`) are called through OpInfo's `wrapper_set_seed`, which
  saves and restores the random state in a `@contextlib.contextmanager`
  (`freeze_rng_state`): the tracer does not run generators ("generators
  are not inlined"; a frame without tensor arguments is then left to
  Python whole: "frame skipped").  The ops themselves are generic extern
  nodes and keep eager's random stream (`tests/test_extern_generic.py`);
* output shape (or a Python result) depends on the data (16): `nonzero`,
  `argwhere`, `masked_select`, `unique`, `unique_consecutive`,
  `combinations`, `equal`, `corrcoef` / `cov` (which call `aten::equal`),
  `ctc_loss`, `linalg.lstsq` (2) -- torch's own verdict
  (`DynamicOutputShapeException`, `DataDependentOutputException`) --,
  `histogramdd`, `to_sparse` (no meta kernel, and the fake run fails too):
  "no meta kernel (output shape may depend on data)", and `allclose` (a
  bool made from the data), `gaussian_nll_loss` (a branch on a tensor's
  value);
* mutation (3): `resize_`, `resize_as_`, `instance_norm` with running
  statistics: "mutates an input: see issue 12";
* others (13): `native_batch_norm`, `_native_batch_norm_legit`,
  `_batch_norm_with_update` (their meta result differs from the CPU
  kernel's), sparse inputs (2), `narrow` / `tensor_split` with a tensor as
  the position (the meta run cannot read it), `view_as_complex` (a view as
  another dtype), `hash_tensor` (a uint64 result), `linear_cross_entropy`
  (2: unpacking an object of its options class), `broadcast_shapes` (sizes
  only, through `torch._refs`) and `empty_strided` (no tensor traced: the
  frame is left to Python).

Complex tensors are graph values that only generic extern nodes make and
take (`fft.*`, `polar`, `complex`, `Tensor.cfloat`, `linalg.eig`, `stft`):
tcjit's kernels never compute them, and a complex operand of a fused op
(`torch.fft.fft(x) + 1`) is a break with a reason.  Python constructs the
torch libraries use around their ops are traced: class statements whose
body only defines (torch.masked's `_combine_input_and_mask` defines an
autograd Function; the class is made at the exit if it is still live
there), sets of dtypes, `frozenset` constants, dicts read from the frame
with tuple keys, calls of up to 32 arguments, and dtype queries
(`torch.is_floating_point`, `Tensor.is_signed`) fold to constants.

In general, a torch call that reaches the generic extern node breaks the
graph (with this reason in `tcjit.explain()` and
`TCJIT_LOGS=graph_breaks`) when:

* it mutates an input (a name ending in `_`, `out=`, or an input whose
  version counter the meta run moved): "mutates an input: see issue 12";
* its output shape depends on the data (`nonzero`, `unique`,
  `masked_select`, boolean-mask indexing, `torch.equal`): torch has no meta
  kernel for it, and its fake-tensor run raises torch's
  `DynamicOutputShapeException` or `DataDependentOutputException`, "no
  meta kernel (output shape may depend on data)" (an op without a meta
  kernel whose output shape does not depend on the data, `geqrf`,
  `histogram`, gets its metadata from that fake run: torch's kernel on
  zeros of the operands' sizes, on the graph's device, the random state
  kept);
* the meta run raises: either torch would raise the same error eagerly (the
  frame then runs in Python and raises it), or the op has no meta kernel;
  the reason quotes torch's message;
* it returns something other than dense tensors (a Python number or bool:
  `allclose`, `item`; a sparse tensor; a dtype tcjit has no name for,
  `uint64`), a tensor that requires grad (`requires_grad=True`), or a view
  of an input as another dtype (`view_as_complex`);
* an argument is neither a tensor of the graph nor a constant of the kinds
  above (a `torch.Generator`, a Python object), or tensors are nested deeper
  than one list argument; a `device=` other than the graph's, or a bare
  `"cuda"` (the current device, which tcjit does not guard);
* its meta result differs from the kernel's: `native_batch_norm` and its
  variants (empty saved statistics in eval mode on the CPU), and
  `native_layer_norm` on float16 / bfloat16 CPU tensors (the CPU kernel
  returns mean and rstd in the input's dtype, the meta function float32);
* the call has no tensor argument and is no tensor factory
  (`torch.manual_seed(0)`: a meta run would run it for real while tracing).
"""


# Traced names that are not registry ops: graph builders that decompose
# them into registry ops (src/graph/graph.h); rows of the registry's
# tc_decomps table.
DECOMPOSED = dict(_C.decomposed())


# torch.nn modules src/tracer/inline.c handles itself (the others are
# registry rows: the "nn.*" spellings).
NN_SPECIAL = ["GELU", "Identity", "Sequential"]


# Registry ops reached through Python syntax rather than a binding.
SYNTAX = {"index": ["x[idx]", "x[:, i, j]"]}


def render():
    spellings = collections.defaultdict(list, {k: list(v) for k, v in SYNTAX.items()})
    extras = []
    modules = []
    for path, op in _C.bindings():
        if op.startswith(("float", "bfloat", "int", "uint", "bool")):
            extras.append(f"{path} (to {op})")
            continue
        spellings[op].append(path)
        if path.startswith("nn."):
            modules.append(path[3:])
    rows = list(_C.op_table())
    out = [HEADER]
    for title, extern in (("Fused ops", False),
                          ("Extern ops (computed by torch, in the graph)",
                           True)):
        out += [f"## {title}", "",
                "| op | operands | dtypes | Python spellings | notes |",
                "|---|---|---|---|---|"]
        for row in rows:
            if row["doc"].startswith("extern") != extern:
                continue
            names = ", ".join(f"`{p}`"
                              for p in spellings.get(row["name"], []))
            names = names or "internal (reached through a decomposition only)"
            doc = row["doc"].replace("|", "\\|")
            out.append(f"| `{row['name']}` | {row['arity']} | "
                       f"{', '.join(row['dtypes'])} | {names} | {doc} |")
        out.append("")
    out += ["## Decomposed ops and views", "",
            "| name | Python spellings | how |", "|---|---|---|"]
    for name, how in DECOMPOSED.items():
        names = ", ".join(f"`{p}`" for p in spellings.get(name, []))
        out.append(f"| `{name}` | {names} | {how} |")
    out += ["", "Also traced: basic indexing `x[i, a:b:s, None, ...]` "
            "(views; `Ellipsis` and `slice(...)` spelled out as FX prints "
            "them too); `F.hardtanh` / `F.relu6` (clamp in the input's "
            "dtype; `inplace=True` writes the input); `a // b`, `a % b`, "
            "`a << b`, `a >> b` on tensors (either side) as "
            "`torch.floor_divide`, `torch.remainder` and the shifts.  Creation "
            "ops take `dtype=` and `device=` (None, 'cpu', 'cuda:N'; a graph "
            "runs on one CUDA device, and CPU tensors in it run on the CPU "
            "first, a 0-d one copied over where a CUDA kernel reads it).", "",
            "Extern ops (`extern:` above) are computed by torch itself, as "
            "Inductor's extern kernels are; tcjit fuses the pointwise and "
            "reduction work around them into its own kernels.", "",
            "## nn.Module", "",
            "Calling a module inlines it: "
            + ", ".join(f"`{m}`" for m in modules + NN_SPECIAL[:-1])
            + f" and `{NN_SPECIAL[-1]}` map to the functional ops above; a "
            "user module's `forward` is traced into the caller's graph. "
            "`ModuleList` / `ModuleDict` / `Sequential` indexing with "
            "constants is traced. Parameters and buffers are graph inputs "
            "read from the module on every call; modules are guarded by "
            "type and by having no hooks (a module with hooks is called in "
            "Python, so its hooks run).", ""]
    out += ["", "## Other traced calls", ""]
    out += [f"* `{e}`" for e in sorted(extras)]
    out += ["* `x.shape`, `x.dtype`, `x.ndim`, `x.layout` (constants under the "
            "tensor's guard); `x.T`, `x.mT`, `x.H`, `x.mH` (views)",
            "* builtins `abs`, `min`, `max`, `float`, `int`, `bool`, `round`, "
            "`len`, `pow` on Python numbers (folded)", ""]
    out += [BREAKS]
    return "\n".join(out)


if __name__ == "__main__":
    print(render(), end="")
