"""tcjit's CUDA backend (src/gpu) through the Python API.

GPU tests (skipped when torch.cuda.is_available() is False): pointwise
functions over float32 / float64 / int32 / int64 / bool CUDA tensors in
several layouts, compared with eager (values, dtype, device, strides);
ordering with torch work on a non-default stream; a 16M-element chain.

CPU test (runs in CI without a GPU): every PTX module tcjit emits for the
same functions compiled on CPU tensors (tcjit._C.set_config(ptx_dump_dir=)
makes the runtime write gNNNNN_sm80.ptx / _sm90.ptx per CPU graph) must
assemble with ptxas.  Skipped only when ptxas is not installed.
"""
import glob
import math
import os
import re
import shutil
import subprocess

import pytest
import torch

import tcjit
from conftest import check_same, run_both

HAS_CUDA = torch.cuda.is_available()
cuda_only = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")

DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.bool]
DTYPE_IDS = ["f32", "f64", "i32", "i64", "bool"]


def make(shape, dtype, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        t = (torch.randn(shape, generator=g, dtype=torch.float64) * 2).to(dtype)
    elif dtype == torch.bool:
        t = torch.randint(0, 2, shape, generator=g).bool()
    else:
        t = torch.randint(-5, 6, shape, generator=g).to(dtype)
    return t.to(device)


# ---- layouts: builder(dtype, n, device) -> n tensors, compare strides? ------

def _contig(dt, n, dev):
    return [make((37, 64), dt, i, dev) for i in range(n)]


def _transposed(dt, n, dev):
    return [make((64, 37), dt, i, dev).t() for i in range(n)]


def _bcast(dt, n, dev):  # [N, M] with [M]
    return [make((37, 64), dt, i, dev) for i in range(n - 1)] + [make((64,), dt, 9, dev)]


def _zero_d(dt, n, dev):
    return [make((), dt, i, dev) for i in range(n)]


def _empty(dt, n, dev):
    return [make((0, 5), dt, i, dev) for i in range(n)]


def _sliced(dt, n, dev):
    return [make((37, 130), dt, i, dev)[3:, 1::2] for i in range(n)]


def _odd_1d(dt, n, dev):  # vector entry + scalar tail, and an offset view
    return [make((4099 + 1,), dt, i, dev)[1:] for i in range(n)]


LAYOUTS = {
    "contiguous": (_contig, True),
    "transposed": (_transposed, True),
    "bcast": (_bcast, True),
    "0d": (_zero_d, True),
    "empty": (_empty, True),
    "sliced": (_sliced, False),
    "odd_1d": (_odd_1d, True),
}

# Each lambda is its own code object (tcjit caches per code object).
FUNCS = {
    "arith": (2, lambda x, y: x * y + x - y),
    "cmp_where": (2, lambda x, y: torch.where(x > y, x, y) + (x == y)),
    "minmax": (2, lambda x, y: torch.maximum(x, y) - torch.minimum(x, 2 * y)),
    "logic": (2, lambda x, y: (x > 0) & (y <= 1) | (x != y)),
    "div": (2, lambda x, y: x / (y.abs() + 1)),
    "casts": (1, lambda x: (x.to(torch.float64) * 0.5, x.to(torch.int32), x.to(torch.bool))),
    "math": (1, lambda x: torch.exp(x * 0.5).tanh() + torch.log(x.abs() + 1)
             + torch.sin(x) * torch.cos(x)),
    "chain": (2, lambda x, y: (torch.sin(x) + torch.cos(y)).relu() * 2 + 1),
    "sigmoid_sqrt": (1, lambda x: torch.sigmoid(x) * torch.sqrt(x.abs()) - x.neg()),
    "pow": (2, lambda x, y: x.abs() ** (y * 0.5)),
}
FLOAT_ONLY = {"math", "chain", "sigmoid_sqrt", "pow"}


def _cases():
    out = []
    for fname, (nargs, fn) in FUNCS.items():
        for dt, dname in zip(DTYPES, DTYPE_IDS):
            if fname in FLOAT_ONLY and not dt.is_floating_point:
                continue
            for lname in LAYOUTS:
                out.append(pytest.param(fname, dt, lname,
                                        id=f"{fname}-{dname}-{lname}"))
    return out


def _inputs(fname, dt, lname, dev):
    nargs, _ = FUNCS[fname]
    build, strides = LAYOUTS[lname]
    return build(dt, nargs, dev), strides


@cuda_only
@pytest.mark.parametrize("fname, dt, lname", _cases())
def test_pointwise_cuda(fname, dt, lname):
    args, strides = _inputs(fname, dt, lname, "cuda")
    run_both(FUNCS[fname][1], *args, strides=strides)


@cuda_only
@pytest.mark.parametrize("dt", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_math_wide_range_cuda(dt):
    """Transcendentals over wide ranges and special values (the fast and
    the exact sin/cos paths, exp overflow/underflow, log of denormals)."""
    special = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-40,
               105615.0, 105616.0, 3e38, -3e38, 1e20]
    x = torch.cat([torch.linspace(-3e5, 3e5, 100003, dtype=dt),
                   torch.linspace(-120, 120, 10007, dtype=dt),
                   torch.tensor(special, dtype=dt)])
    x = x.cuda()
    fns = [lambda x: torch.sin(x), lambda x: torch.cos(x), lambda x: torch.exp(x),
           lambda x: torch.log(x.abs()), lambda x: torch.tanh(x)]
    for fn in fns:
        run_both(fn, x)


# float64 sin / cos arguments for the exact reduction (transcendental.c,
# reduce_huge64): every exponent band, DBL_MAX, multiples of pi/2, both
# sides of the 1.6e6 switch from the fast path
HUGE_F64 = [1e30, -3e200, 1e6 * math.pi, 1e22, 1.7976931348623157e308,
            -1.7976931348623157e308, 6381956970095103 * 2.0 ** 797, 2.0 ** 1023,
            5.319372648326541e255, 1e300, 1.6e6, -1.6e6, 1.6000000000000002e6,
            2.0 ** 20, 2.0 ** 21, 1e16 * math.pi / 2, 0.0, -0.0, 5e-324,
            float("inf"), -float("inf"), float("nan")]


@cuda_only
def test_sin_cos_f64_huge_cuda():
    """Issue 17: float64 sin / cos of huge arguments on CUDA (sin(1e30 * 1)
    of an expanded tensor gave 6e223 where eager gives 0.9448)."""
    a1 = torch.tensor([1e30], dtype=torch.float64, device="cuda").expand(4)
    a2 = torch.ones(4, dtype=torch.float64, device="cuda")
    run_both(lambda a, b: torch.mul(a, b).sin(), a1, a2, expect_compiled=True)
    g = torch.Generator().manual_seed(17)
    mant = torch.rand(20000, generator=g, dtype=torch.float64) + 1
    expo = torch.randint(-60, 1024, (20000,), generator=g)
    sign = torch.randint(0, 2, (20000,), generator=g) * 2 - 1
    x = torch.cat([torch.tensor(HUGE_F64, dtype=torch.float64),
                   torch.ldexp(mant, expo) * sign]).cuda()
    for fn in [lambda x: x.sin(), lambda x: x.cos(),
               lambda x: (x.sin(), x.cos())]:
        run_both(fn, x, expect_compiled=True)


@cuda_only
def test_non_default_stream():
    """Kernels go to torch's current stream: a producer on stream s (a big
    matmul), tcjit on s, a consumer on s; no synchronization in between."""
    g = tcjit.compile(lambda x, y: (torch.sin(x) + torch.cos(y)).relu() * 2 + 1)
    a = torch.randn(2048, 2048, device="cuda")
    g(a, a)  # compile outside the stream
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        outs = []
        for i in range(4):
            b = (a @ a) * (1.0 / 2048) + i   # slow producer on s
            r = g(b, b)
            outs.append((b, r * 3))          # consumer on s
    s.synchronize()
    for b, r3 in outs:
        e = ((torch.sin(b) + torch.cos(b)).relu() * 2 + 1) * 3
        torch.testing.assert_close(r3, e)
    # and back on the default stream, after work on s
    with torch.cuda.stream(s):
        c = torch.full((1 << 20,), 0.25, device="cuda")
    torch.cuda.current_stream().wait_stream(s)
    torch.testing.assert_close(g(c, c), (torch.sin(c) + torch.cos(c)).relu() * 2 + 1)


@cuda_only
def test_chain_16m_cuda():
    x = torch.randn(1 << 24, device="cuda")
    y = torch.randn(1 << 24, device="cuda")
    run_both(lambda x, y: (torch.sin(x) + torch.cos(y)).relu() * 2 + 1, x, y)


@cuda_only
def test_x_plus_one_cuda():
    x = torch.randn(1, device="cuda")
    run_both(lambda x: x + 1, x)
    c = tcjit.counters()
    assert c["graphs"] >= 1 and c["eager_fallbacks"] == 0, c
    run_both(lambda x: x + 1, torch.randn((), device="cuda"))


# ---- ptxas on every PTX module (CPU only, CI) --------------------------------

def _ptxas():
    for p in (shutil.which("ptxas"), "/usr/local/cuda/bin/ptxas", "/usr/local/bin/ptxas"):
        if p and os.path.exists(p):
            return p
    return None


def dumped_ptx(d, at_least):
    """The PTX modules dumped into d (ptx_dump_dir); none may have failed
    to emit, and there must be at least at_least of them."""
    errors = sorted(glob.glob(os.path.join(d, "*.error")))
    assert not errors, open(errors[0]).read()
    files = sorted(glob.glob(os.path.join(d, "*.ptx")))
    assert len(files) >= at_least, f"only {len(files)} PTX modules dumped"
    return files


def assert_ptxas_accepts(files):
    """ptxas assembles every module for the sm its file name gives."""
    failed = []
    for f in files:
        sm = f.rsplit("_sm", 1)[1].split(".")[0]
        r = subprocess.run([_ptxas(), f"-arch=sm_{sm}", f, "-o", os.devnull],
                           capture_output=True, text=True)
        if r.returncode != 0:
            failed.append(f"{os.path.basename(f)}: {r.stderr.strip()[:500]}")
    assert not failed, (f"{len(failed)}/{len(files)} modules fail ptxas:\n"
                        + "\n".join(failed[:5]))


@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
def test_ptx_assembles(tmp_path):
    """Compile every function of this file on CPU tensors (all dtypes and
    layouts) with ptx_dump_dir set; every dumped module must assemble for
    its sm with ptxas, and none may have failed to emit."""
    ptxas = _ptxas()
    d = str(tmp_path)
    tcjit._C.set_config(ptx_dump_dir=d)
    try:
        for p in _cases():
            fname, dt, lname = p.values
            args, _ = _inputs(fname, dt, lname, "cpu")
            tcjit.reset()
            try:
                tcjit.compile(FUNCS[fname][1])(*args)
            except Exception:  # eager raises too (e.g. sub of bool)
                pass
        x = torch.linspace(-3e5, 3e5, 1001)
        tcjit.compile(lambda x: (x.sin(), x.cos(), x.exp(), x.log(), x.tanh()))(x)
        tcjit.compile(lambda x: (x.double().sin(), x.double().exp()))(x)
        tcjit.compile(lambda x: (x.double() * 1e300).cos())(x)
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)
    assert_ptxas_accepts(dumped_ptx(d, 40))


@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
def test_ptx_optimizer_step_fits_kernel_parameters(tmp_path):
    """An AdamW step over many same-shaped parameters (GPT-2's 74 vectors
    of 768): its kernels' parameters must fit CUDA's 4 KB (one kernel of
    ~700 pointers did not: ptxas 'uses too much parameter space')."""
    d = _dump_adamw_step(tmp_path, [(768,)] * 120)
    assert_ptxas_accepts(dumped_ptx(d, 1))


def _dump_adamw_step(tmp_path, shapes, *more):
    """The PTX of a compiled AdamW (foreach) step over parameters of these
    shapes, dumped into tmp_path (and of the functions more, each called
    on its inputs: (fn, args)); returns the directory."""
    params = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(params, lr=1e-3, foreach=True)
    opt.step()                       # the state, made eagerly
    d = str(tmp_path)
    tcjit._C.set_config(ptx_dump_dir=d)
    try:
        tcjit.reset()
        tcjit.compile(opt.step)()
        for fn, args in more:
            tcjit.compile(fn)(*args)
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)
    return d


def _entries(text):
    return re.findall(r"\.visible \.entry (\w+)\(", text)


@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
def test_ptx_large_module_parts(tmp_path):
    """A large module is also emitted as parts (ptx_emit.c PART_BYTES),
    which the runtime JIT-compiles in parallel: each part a module that
    assembles, every entry of the whole module in exactly one part, the
    same text, and parts cut by size.  A small module has none."""
    d = _dump_adamw_step(
        tmp_path, [(768,)] * 60 + [(64, 48)] * 30 + [(1000,)] * 30 + [(7, 5)] * 20,
        (lambda x: x.sin() * 2, (torch.randn(64),)))
    files = dumped_ptx(d, 3)
    whole = {f: open(f).read() for f in files if not re.search(r"_p\d+_sm", f)}
    parts = {f: open(f).read() for f in files if re.search(r"_p\d+_sm", f)}
    for w, text in whole.items():
        mine = [t for f, t in sorted(parts.items())
                if f.startswith(w.rsplit("_sm", 1)[0] + "_p")
                and f.endswith("_sm" + w.rsplit("_sm", 1)[1])]
        if len(text) < 64 * 1024:
            assert not mine, w
            continue
        assert len(mine) >= 2, w
        got = [e for t in mine for e in _entries(t)]
        assert sorted(got) == sorted(_entries(text)), w
        for t in mine:
            for e in _entries(t):
                body = text[text.index(f".entry {e}("):]
                body = body[: body.index("\n}\n")]
                assert body in t, e
    assert any(len(t) >= 64 * 1024 for t in whole.values())
    assert_ptxas_accepts(list(parts))


@pytest.mark.skipif(_ptxas() is None or shutil.which("gcc") is None,
                    reason="needs ptxas and gcc")
def test_ptx_c_cases(tmp_path):
    """tests/gpu/test_ptx.c (no GPU): the float32 transcendentals' CPU
    mirror vs libm (sampled ulp errors), the float64 KIR math vs libm, and
    ptxas on every case of tests/gpu/cases.c (reductions, split reductions,
    softmax, layer_norm, 64-bit indexing, every dtype)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    exe = str(tmp_path / "test_ptx")
    srcs = ["tests/gpu/test_ptx.c", "tests/gpu/cases.c", "tests/gpu/kir_ref.c",
            "tests/gpu/f32math_ref.c", "src/gpu/ptx_emit.c", "src/gpu/ptx_math.c"]
    # the whole graph stage (plain C, no Python): a new file there needs no
    # edit here
    srcs += sorted(os.path.relpath(p, root)
                   for p in glob.glob(os.path.join(root, "src/graph/*.c")))
    r = subprocess.run(["gcc", "-std=gnu11", "-O1", "-ffp-contract=off", "-Isrc/graph",
                        "-Isrc/gpu", "-o", exe] + srcs + ["-lm"],
                       cwd=root, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run([exe, str(tmp_path / "ptx")], cwd=root, capture_output=True,
                       text=True, env=dict(os.environ, PTXAS=_ptxas()))
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]


# ---- extern ops and models on CUDA --------------------------------------------

@cuda_only
@pytest.mark.parametrize("name", ["matmul_2d", "matmul_batched_broadcast",
                                  "mm_fused_around", "bmm", "addmm",
                                  "linear_bias_gelu", "cat", "stack"])
def test_extern_ops_cuda(name):
    from test_models import EXTERNS
    fn, shapes = EXTERNS[name]
    torch.backends.cuda.matmul.allow_tf32 = False
    run_both(fn, *[torch.randn(*s, device="cuda") for s in shapes],
             expect_compiled=True)


@cuda_only
@pytest.mark.parametrize("name", ["dim0", "dim1", "2d_index", "0d_index",
                                  "int32_index", "adjacent_pair",
                                  "separated_pair", "with_int_first",
                                  "of_an_expanded_view", "arange_targets",
                                  "fused_both_sides"])
def test_advanced_indexing_cuda(name):
    from test_models import ADVANCED, _index
    fn, *idx = ADVANCED[name]
    run_both(fn, torch.randn(4, 6, 5, device="cuda"),
             *[_index(i).cuda() for i in idx], expect_compiled=True)


@cuda_only
def test_list_indexed_by_a_tensor_cuda():
    """items[i] with i a 0-d integer tensor, CUDA items and a CPU or CUDA
    index (its value comes from the GPU through torch, never read by
    tcjit from a device pointer)."""
    from test_graph_breaks import check_list_indexed_by_a_tensor
    check_list_indexed_by_a_tensor("cuda")


@cuda_only
def test_sdpa_flash_layout_cuda():
    """Flash attention returns a non-contiguous result: the runtime copies
    it into the layout the graph assumed before kernels read it."""
    q, k, v = (torch.randn(2, 4, 128, 64, device="cuda", dtype=torch.float32)
               for _ in range(3))

    def f(q, k, v):
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v,
                                                             is_causal=True)
        return y.transpose(1, 2).contiguous().view(2, 128, 256) + 1

    run_both(f, q, k, v, expect_compiled=True)


@cuda_only
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(3, 1, 1, 1, 2), (2, 2, 1, 3, 4), (2, 3, 5, 6, 4),
                                   (1, 2, 3, 3, 16), (2, 2, 4, 4, 3), (2, 3, 5, 6, 8),
                                   (2, 4, 64, 64, 64)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("backend", ["auto", "eager"])
@pytest.mark.parametrize("split", [False, True])
def test_sdpa_result_strides_cuda(dtype, shape, causal, backend, split):
    """The result has eager's strides whichever kernel torch picks (math,
    flash with its last dim padded to 8, memory-efficient's [B, L, H, E],
    cuDNN's empty_like(q)), also where a view of it is returned (fuzzer
    classes).  split: heads split off a projection ([B, L, H, E] memory,
    as in every transformer; cuDNN's result follows it)."""
    B, H, L, S, E = shape

    def make(n):
        if split:
            return torch.randn(B, n, H, E, device="cuda", dtype=dtype).transpose(1, 2)
        return torch.randn(B, H, n, E, device="cuda", dtype=dtype)
    q, k, v = make(L), make(S), make(S)

    def f(q, k, v):
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return y, y.select(1, -1).transpose(-1, 0), y.clamp(0, 3)

    expected = f(q, k, v)
    got = tcjit.compile(f, backend=backend)(q, k, v)
    for e, g in zip(expected, got):
        assert g.stride() == e.stride()
        torch.testing.assert_close(g, e, atol=2e-3, rtol=2e-3)


@cuda_only
@pytest.mark.parametrize("weight", [None, torch.float32, torch.float64])
def test_rms_norm_result_strides_cuda(weight):
    """CUDA's fused rms_norm allocates its result: fresh contiguous strides
    even for a (1, 3) input with strides (1, 1), where the CPU's composite
    keeps (1, 1) (fuzzer class).  A weight of another dtype takes the
    composite on CUDA too (fuzz seeds 19325, 19452)."""
    x = torch.randn(3, 1, device="cuda").t()
    w = None if weight is None else torch.randn(3, device="cuda",
                                                dtype=weight)
    f = lambda x, w: torch.nn.functional.rms_norm(x, (3,), w)
    for backend in ("auto", "eager"):
        got, expected = tcjit.compile(f, backend=backend)(x, w), f(x, w)
        assert got.stride() == expected.stride()
        assert expected.stride() == ((1, 1) if weight == torch.float64
                                     else (3, 1))
        torch.testing.assert_close(got, expected)


@cuda_only
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize("n", [1, 3, 4, 5, 8])
def test_rms_norm_infinite_rows_cuda(dtype, n):
    """Rows with an infinite element: torch's CUDA kernel makes the whole row
    NaN where it does not vectorize (n % 4, double), only that element
    where it does; a square that overflows is no NaN (fuzzer class)."""
    x = torch.rand(4, n, device="cuda", dtype=dtype) + 0.5
    x[0, n // 2] = float("inf")
    x[1, 0] = -float("inf")
    x[2, n - 1] = 60000.0 if dtype == torch.float16 else 1e30
    f = lambda x: torch.nn.functional.rms_norm(x, (n,))
    for backend in ("auto", "eager"):
        torch.testing.assert_close(tcjit.compile(f, backend=backend)(x), f(x),
                                   equal_nan=True)


@cuda_only
def test_rms_norm_of_empty_rows_cuda():
    """Rows of no elements: the fused-kernel path's amax of |x| (NaN for
    rows holding inf) must not be taken of them; amax of an empty dim
    raises (fuzz seed 44826)."""
    x = torch.randn(0, device="cuda")
    f = lambda x, w: torch.nn.functional.rms_norm(x, (0,), w)
    for backend in ("auto", "eager"):
        for w in (None, torch.randn(0, device="cuda")):
            got, expected = tcjit.compile(f, backend=backend)(x, w), f(x, w)
            assert got.shape == expected.shape == (0,)


@cuda_only
@pytest.mark.parametrize("offset", [0, 1, 2, 4])
def test_rms_norm_infinite_rows_of_a_view_cuda(offset):
    """A view of a fresh tensor at an offset that is not a multiple of 4:
    torch's CUDA kernel cannot vectorize it (fuzz seed 14448)."""
    x = torch.rand(40, device="cuda") + 0.5
    x[offset + 5] = float("inf")
    f = lambda x: torch.nn.functional.rms_norm(
        (x * 2)[offset:offset + 16].view(4, 4), (4,))
    for backend in ("auto", "eager"):
        torch.testing.assert_close(tcjit.compile(f, backend=backend)(x), f(x),
                                   equal_nan=True)


@cuda_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("dim", [0, 1])
def test_softmax_half_in_float32_cuda(dtype, dim):
    """torch's CUDA softmax / log_softmax of float16 / bfloat16 compute in
    float32 and round once (fuzz seed 14324: a bfloat16 log(sum) of 1.0036
    was 0 in the eager replay); its CPU kernels keep the sum in bfloat16."""
    x = torch.tensor([[0.0, -5.625, -7.0, -6.5]] * 4, device="cuda")
    x = (x + torch.arange(4.0, device="cuda")[:, None] / 8).to(dtype)
    for fn in (lambda a: a.log_softmax(dim), lambda a: a.softmax(dim)):
        for backend in ("auto", "eager"):
            tcjit.reset()
            got = tcjit.compile(fn, backend=backend)(x)
            torch.testing.assert_close(got, fn(x))


@cuda_only
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_sin_of_tiny_half_cuda(dtype):
    """A half-result kernel's sin keeps its relative accuracy for tiny
    arguments: 1 / sin(2.2e-28) is 4.5e27 in bfloat16, not inf (fuzzer)."""
    x = torch.tensor([2.2e-28, -1e-30, 3e-20, 1e-7, -6e-5, 1e-3, 0.01, 0.3],
                     dtype=dtype, device="cuda")
    f = lambda x: (x.sin(), 1 / x.sin())
    for got, expected in zip(tcjit.compile(f)(x), f(x)):
        torch.testing.assert_close(got, expected)


@cuda_only
@torch.no_grad()
def test_gpt2_block_cuda():
    from test_models import Block
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    blk = Block(64, 4).cuda().eval()
    x = torch.randn(2, 16, 64, device="cuda")
    expected = blk(x)
    cm = tcjit.compile(blk)
    for _ in range(2):
        torch.testing.assert_close(cm(x), expected, atol=1e-4, rtol=1e-4)
    e = tcjit.explain(blk)(x)
    assert e.graph_count == 1 and e.graph_break_count == 0, e.break_reasons


@pytest.mark.skipif(not HAS_CUDA or torch.cuda.device_count() < 2,
                    reason="needs two CUDA devices")
def test_two_devices():
    """A graph runs on its tensors' device; mixing devices raises eager's
    error."""
    f = tcjit.compile(lambda x, y: (x.sin() + y) * 2)
    for dev in ("cuda:0", "cuda:1"):
        x = torch.randn(1000, device=dev)
        r = f(x, x)
        assert r.device == x.device
        torch.testing.assert_close(r, (x.sin() + x) * 2)
    a, b = torch.randn(10, device="cuda:0"), torch.randn(10, device="cuda:1")
    with pytest.raises(RuntimeError) as eager:
        (a.sin() + b) * 2
    with pytest.raises(RuntimeError) as got:
        f(a, b)
    assert str(got.value) == str(eager.value)


@cuda_only
@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_half_cuda(dt):
    """float16 / bfloat16 on the GPU (PTX cvt): casts bit-exact with CUDA
    eager, chains and reductions against float32 references, as
    tests/test_half.py checks them on the CPU."""
    from test_half import (CHAINS, REDUCTIONS, all_bit_patterns,
                           assert_close_to_float32_reference, assert_same_bits,
                           compiled_once, float32_test_values, make)
    x = all_bit_patterns(dt).cuda()
    assert_same_bits(compiled_once(lambda x: x.float(), x), x.float())
    f = float32_test_values().cuda()
    assert_same_bits(compiled_once(lambda x: x.to(dt), f), f.to(dt),
                     nan_any=True)
    a, b = make((33, 4000), dt, 1).cuda(), make((33, 4000), dt, 2).cuda()
    for fn in CHAINS.values():
        assert_close_to_float32_reference(compiled_once(fn, a, b), fn, a, b)
    for name, fn in REDUCTIONS.items():
        got = compiled_once(fn, a)
        if name in ("amax", "amin", "argmax", "argmin"):
            check_same(got, fn(a))
        else:
            assert_close_to_float32_reference(got, fn, a)


@cuda_only
def test_list_subscript_with_a_cpu_0d_tensor_next_to_cuda_tensors():
    # The CPU index tensor and the CUDA list cannot share a graph: that
    # break once crashed the process (an UNSUPPORTED turned into an ERROR).
    def f(a, b):
        items = [a, b, a + 1, b + 1]
        return items[torch.as_tensor(2)]

    a = torch.randn(10, 10, device="cuda")
    b = torch.randn(10, 10, device="cuda")
    run_both(f, a, b)


POW_CASES = [(-0.0, -3), (0.0, -3), (-0.0, 3), (-0.0, 0.5), (-0.0, -2),
             (-2.0, 3), (-2.0, 0.5), (-float("inf"), 3), (-float("inf"), -3),
             (2.0, -1), (float("nan"), 0), (1.0, float("nan")),
             (-1.0, float("inf")), (0.5, -float("inf")), (-3.0, 2)]


@cuda_only
@pytest.mark.parametrize("dt", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("int_exponent", [False, True])
def test_pow_special_values_cuda(dt, int_exponent):
    """The GPU's decomposed pow against eager on C99's special cases,
    signed zeros included: -0 ** -3 is -inf (it was +inf: GPU fuzz seed
    260683, transcendental.c emit_pow), -0 ** 0.5 is +0."""
    xs = torch.tensor([c[0] for c in POW_CASES], dtype=dt, device="cuda")
    ys = [c[1] for c in POW_CASES]
    if int_exponent:
        keep = [i for i, y in enumerate(ys) if float(y).is_integer()]
        xs = xs[keep]
        ys = torch.tensor([int(ys[i]) for i in keep], device="cuda")
    else:
        ys = torch.tensor(ys, dtype=dt, device="cuda")

    def f(a, b):
        r = a ** b
        return r, 1 / torch.where(r == 0, r, torch.ones_like(r))

    run_both(f, xs, ys)


def _many_pows(a, b):
    """More POWs than ptx_emit.c inlines (POW_INLINE_MAX): each is a call
    of one .func (an optimizer step: beta ** step per parameter)."""
    rs = (a ** b, (-a) ** b, a ** (b - 1), (a * 2) ** b, a ** (b * 2),
          (a - 1) ** (b + 1))
    return rs + tuple(1 / torch.where(r == 0, r, torch.ones_like(r)) for r in rs)


@cuda_only
@pytest.mark.parametrize("dt", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_pow_calls_special_values_cuda(dt):
    xs = torch.tensor([c[0] for c in POW_CASES], dtype=dt, device="cuda")
    ys = torch.tensor([c[1] for c in POW_CASES], dtype=dt, device="cuda")
    run_both(_many_pows, xs, ys)
    g = torch.Generator().manual_seed(5)
    xs = torch.rand(4099, generator=g, dtype=torch.float64).to(dt) * 4
    ys = torch.randn(4099, generator=g, dtype=torch.float64).to(dt) * 3
    run_both(_many_pows, xs.cuda(), ys.cuda())


@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
def test_pow_calls_ptx(tmp_path):
    """Past POW_INLINE_MAX, POW is one .func per dtype and a call per
    site (the module assembles); at or below it, inline."""
    d = str(tmp_path)
    tcjit._C.set_config(ptx_dump_dir=d)
    try:
        for dt in (torch.float32, torch.float64):
            tcjit.reset()
            tcjit.compile(_many_pows)(torch.rand(64, dtype=dt),
                                      torch.randn(64, dtype=dt))
        tcjit.reset()
        tcjit.compile(lambda a, b: a ** b)(torch.rand(64), torch.randn(64))
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)
    files = dumped_ptx(d, 3)
    texts = [open(f).read() for f in files]
    for t in ("f32", "f64"):
        assert any(f".func (.reg .{t} d) tc_pow_{t}(" in x
                   and f"), tc_pow_{t}, (" in x for x in texts), t
    assert sum("tc_pow_" not in x for x in texts) >= 1     # the inline one
    assert_ptxas_accepts(files)
