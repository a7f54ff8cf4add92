"""Dynamic shapes on the GPU (issue 14, docs/dynamic.md): size-generic PTX.

After an automatic-dynamic recompile, src/gpu/ptx_emit.c reads every loop
size, stride, argument offset and parameter constant of a kernel from a
block parameter (kir.h tc_dims_block, the CPU's layout) and puts the
kernel in a module of its own, whose text is the reuse key: a later size
whose kernel has the same text launches the loaded module with its own
block, compiling nothing.

GPU tests (skipped without CUDA): tests/test_dynamic.py's workloads on
CUDA tensors, sizes 1..64, at most two compiles each; rows of lengths
that cross every reduction schedule the sizes pick; the nanoGPT generate
loop.

CPU tests (ptxas, no GPU): the generic modules of every workload
assemble; sizes 2..40 give one text per kernel (the reuse key); static
(non-dynamic) plans' PTX is byte-identical to what it was before generic
kernels existed.
"""
import glob
import hashlib
import os
import re

import pytest
import torch
import torch.nn.functional as F

import tcjit
from tcjit import counters

import test_dynamic
from test_cuda import _ptxas, assert_ptxas_accepts, dumped_ptx
from test_dynamic import CASES, TinyGPT, compiles, generate, same

HAS_CUDA = torch.cuda.is_available()
cuda_only = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
ptxas_only = pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")


@pytest.fixture(autouse=True)
def fresh():
    tcjit.reset()
    yield
    tcjit.reset()


def on_cuda(args):
    return tuple(a.cuda() for a in args)


# ---- GPU -------------------------------------------------------------------

@pytest.fixture
def cuda_globals(monkeypatch):
    """CASES' weights (test_dynamic.W, EMB) as CUDA tensors."""
    if HAS_CUDA:
        monkeypatch.setattr(test_dynamic, "W", test_dynamic.W.cuda())
        monkeypatch.setattr(test_dynamic, "EMB", test_dynamic.EMB.cuda())


@cuda_only
@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_sizes_1_to_64_compile_at_most_twice(name, cuda_globals):
    fn, make = CASES[name]
    try:
        fn(*on_cuda(make(2)))
    except RuntimeError as e:   # e.g. a CPU arange added to a CUDA tensor
        pytest.skip(f"eager fails on CUDA tensors: {e}")
    cf = tcjit.compile(fn)
    with torch.no_grad():
        for n in range(1, 65):
            args = on_cuda(make(n))
            same(cf(*args), fn(*args))
    c = counters()
    assert compiles() <= 2, c
    assert c["dynamic_reuses"] >= 60, c
    assert c["eager_fallbacks"] == 0, c


ROW_LENGTHS = [1, 2, 31, 32, 33, 64, 65, 255, 256, 257, 511, 1000, 1024,
               1025, 2049, 4096, 4097, 5000, 8192, 8193, 20000]


@cuda_only
@pytest.mark.parametrize("rows", [1, 3, 40])
def test_cuda_rows_across_reduction_schedules(rows):
    """Row lengths that pick every schedule (threads per block, persistent
    points 1..16 rounded to powers of two, looped rows, a single row on a
    1024-thread block): one compiled function, every length checked."""
    def f(x):
        return (torch.softmax(x, -1), F.layer_norm(x, (x.shape[-1],)),
                x.sum(-1), x.argmax(-1), x.var(-1))

    cf = tcjit.compile(f)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n in ROW_LENGTHS:
            x = torch.randn(rows, n, generator=g).cuda()
            for got, want in zip(cf(x), f(x)):
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5,
                                           equal_nan=True)   # var of 1
    assert counters()["dynamic_reuses"] > 0


@cuda_only
def test_cuda_generate_reuses_kernels():
    torch.manual_seed(0)
    model = TinyGPT().eval().cuda()
    start = torch.zeros(1, 1, dtype=torch.long, device="cuda")
    cm = tcjit.compile(model)
    with torch.no_grad():
        expected = generate(model, start, 63)
        got = generate(cm, start, 63)
    assert torch.equal(got, expected)
    c = counters()
    assert compiles() <= 3, c
    assert c["dynamic_reuses"] >= 60, c


@cuda_only
def test_cuda_dynamic_false_compiles_every_size():
    cf = tcjit.compile(lambda x: x.sin() * 2, dynamic=False)
    for n in (3, 4, 5):
        x = torch.randn(n, 8, device="cuda")
        same(cf(x), x.sin() * 2)
    assert counters()["dynamic_reuses"] == 0


# ---- CPU: the PTX of dynamic plans (ptxas) ------------------------------------

def dump(fn, make, sizes, d, **kw):
    """Compile fn on CPU tensors at sizes with ptx_dump_dir=d: every plan's
    PTX (the generic kernels' modules too, gNNNNN_kK_smS.ptx)."""
    tcjit._C.set_config(ptx_dump_dir=str(d))
    try:
        tcjit.reset()
        cf = tcjit.compile(fn, **kw)
        with torch.no_grad():
            for n in sizes:
                args = make(n)
                got, want = cf(*args), fn(*args)
                if isinstance(want, torch.Tensor):
                    got, want = [got], [want]
                for a, b in zip(got, want, strict=True):
                    same(a, b)
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)


def body(path):
    """A dumped module without its title line (the function's name)."""
    with open(path) as f:
        return f.read().split("\n", 1)[1]


def generic_texts(d):
    """{kernel index: [module text per dumped plan]} of the generic kernels
    dumped for sm_90, in plan order."""
    out = {}
    for p in sorted(glob.glob(os.path.join(str(d), "g*_k*_sm90.ptx"))):
        k = int(re.search(r"_k(\d+)_sm", p).group(1))
        out.setdefault(k, []).append(body(p))
    return out


def unique_files(files):
    seen, out = set(), []
    for f in files:
        b = body(f)
        if b not in seen:
            seen.add(b)
            out.append(f)
    return out


LONG_ROWS = {
    "softmax_long_rows": (lambda x: torch.softmax(x, -1),
                          lambda n: (torch.randn(6, 300 * n),)),
    "layer_norm_one_row": (lambda x: F.layer_norm(x, (x.shape[-1],)),
                           lambda n: (torch.randn(1, 900 * n),)),
    "argmax_rows": (lambda x: x.argmax(-1) + x.argmin(-1),
                    lambda n: (torch.randn(5, 700 * n),)),
    "half_math": (lambda x: (x.half() * 2).sin().float() + x.bfloat16().exp(),
                  lambda n: (torch.randn(n, 24),)),
    "float64_math": (lambda x: x.double().exp().tanh() * x.shape[0],
                     lambda n: (torch.randn(n, 3),)),
}


@ptxas_only
@pytest.mark.parametrize("name", sorted(CASES) + sorted(LONG_ROWS))
def test_generic_ptx_assembles(name, tmp_path):
    fn, make = {**CASES, **LONG_ROWS}[name]
    dump(fn, make, (1, 2, 3, 7), tmp_path)
    files = dumped_ptx(str(tmp_path), 1)
    assert generic_texts(tmp_path), "no size-generic kernel was emitted"
    for texts in generic_texts(tmp_path).values():
        assert "tc_generic_d[" in texts[0]
    assert_ptxas_accepts(unique_files(files))


@pytest.mark.parametrize("name", sorted(CASES))
def test_generic_ptx_is_the_same_for_every_size(name, tmp_path):
    """The reuse key: sizes 2..40 (one size-generic compile, then new
    sizes) emit the same module text for each kernel, so the GPU runtime
    loads it once."""
    fn, make = CASES[name]
    dump(fn, make, range(1, 41), tmp_path)
    texts = generic_texts(tmp_path)
    assert texts
    for k, t in texts.items():
        assert len(t) == 39, (k, len(t))
        assert len(set(t)) == 1, f"kernel {k}: {len(set(t))} texts"


def test_generic_ptx_rows_share_schedules(tmp_path):
    """Softmax rows of 2..256 points (block sizes 32..256) share one text:
    the block's warps are counted at run time; 257..4096 points (2..16
    persistent points per thread) take at most 4 more (powers of two)."""
    fn = CASES["softmax_dynamic_rows"][0]
    lengths = [1, 2, 3, 33, 64, 65, 100, 200, 256, 257, 400, 600, 1000,
               1500, 2000, 3000, 4096]
    dump(fn, lambda i: (torch.randn(4, lengths[i]),), range(len(lengths)),
         tmp_path)
    t = generic_texts(tmp_path)[0]
    short = lengths.index(257) - 1      # dumped from lengths[1]
    assert len(set(t[:short])) == 1
    assert len(set(t)) <= 5


@ptxas_only
def test_generic_ptx_many_arguments_fit_the_parameter_space(tmp_path):
    """60 sums of two inputs of different layouts: a kernel of 48 of them
    has ~140 pointers, and a size-generic block beside them would pass
    CUDA's 4 KB of kernel parameters (ptxas: "uses too much parameter
    space"); such kernels keep constant sizes."""
    def f(*xs):
        return [x + y for x, y in zip(xs[::2], xs[1::2])]

    def make(n):
        return tuple(torch.randn(n, 5, 4, 3).permute(0, 3, 2, 1) if i % 2
                     else torch.randn(n, 3, 4, 5) for i in range(120))

    dump(f, make, (2, 3, 4), tmp_path, dynamic=True)
    assert_ptxas_accepts(unique_files(dumped_ptx(str(tmp_path), 1)))


# Static plans (dynamic=False): sha256 of each dumped module.  First
# computed with the emitter before size-generic kernels existed (69c73f2);
# recomputed after the ptxjit branch (div.rn / sqrt.rn .func calls, late
# addresses and loads) changed static PTX on purpose, equal to that
# branch's own emitter's output; recomputed after d4fad07 named entries by
# what they compute (tc_k0_red_sum_p0 where it was tc_k0_k0_p0): with the
# names mapped back, every module hashed to the digest before.  A change
# of the static emitter on purpose updates them.  "pointwise" recomputed
# when vector entries came to nests of more dims (its [37, 64] + [64]
# kernel gained one, tests/test_vector_nd.py); the others are unchanged.
# "sum_split" recomputed when unrolled reduction points took their loads
# first (ptx_emit.c emit_red_points: the same adds in the same order).
# "pointwise" recomputed when the vector entry computed values the same in
# every lane (its constants) once instead of once a lane (uniform_leaf).
STATIC = {
    "pointwise": (lambda x, y: (x.sin() + y.cos()).relu() * 2 + 1,
                  lambda: (torch.randn(37, 64), torch.randn(64))),
    "transposed": (lambda x: x.exp() - x.t(),
                   lambda: (torch.randn(33, 33),)),
    "softmax": (lambda x: torch.softmax(x, -1), lambda: (torch.randn(8, 300),)),
    "layer_norm": (lambda x: F.layer_norm(x, (1000,)),
                   lambda: (torch.randn(16, 1000),)),
    "sum_split": (lambda x: x.sum(), lambda: (torch.randn(1 << 17),)),
    "argmax": (lambda x: x.argmax(-1), lambda: (torch.randn(3, 5000),)),
    "half_mean": (lambda x: x.half().float().mean(0) / 3,
                  lambda: (torch.randn(50, 7),)),
}
STATIC_SHA256 = {
    "argmax":
        "fd9040452ff6451977518a6e86950117ddeb7f6cb63e008251a7d28ee47730dd",
    "half_mean":
        "70a911d1944b927a4552c4385ad23d66ef0620b37496c3b931eb779b7e4c7859",
    "layer_norm":
        "a786f49bf52c3c61e9f9ceaf410dc0444a12b3f50f2da184f23c1aed916b094b",
    "pointwise":
        "ee674e6c1258a874132850133aed5cf9dbfaa559798c25fa7e379e2c96c27468",
    "softmax":
        "a773819f4eaacb087567a567dacd032c8460e22bebf7db91d60d7d8ca3c4d825",
    "sum_split":
        "ef35258a780ed4fe99410e3ab4635f4a404f7c6e8bd4a53d265ad9cf2fdc64dc",
    "transposed":
        "28d52d86b8a3a7253d833bc2c27409d9f8fa71ed119e12c79b88a8b24d50e63a",
}


def static_digests(tmp_path):
    out = {}
    for name, (fn, make) in sorted(STATIC.items()):
        d = tmp_path / name
        d.mkdir()
        tcjit._C.set_config(ptx_dump_dir=str(d))
        try:
            tcjit.reset()
            tcjit.compile(fn, dynamic=False)(*make())
        finally:
            tcjit._C.set_config(ptx_dump_dir=None)
        h = hashlib.sha256()
        for p in dumped_ptx(str(d), 2):
            assert "_k" not in os.path.basename(p)   # no generic module
            h.update(body(p).encode())
        out[name] = h.hexdigest()
    return out


def test_static_ptx_unchanged(tmp_path):
    assert static_digests(tmp_path) == STATIC_SHA256
