"""Regression tests for values at the edges of the number range, found by
the differential fuzzer (tests/fuzz): where eager's answer is defined by
how its kernels compute, not by a tolerance.

* float -> integer conversion gives x86's answer, as eager's CPU kernels
  do: truncation toward zero (so a negative fraction becomes +0 again when
  converted back), INT_MIN / INT64_MIN for NaN, infinities and magnitudes
  out of range, and integers below 32 bits through int32 (so 0 there).
  GCC folded (float)(int)x into trunc(x) (gccjit_emit.c
  emit_float_to_int), and KIR folded constants by wrapping (kir.c
  kb_const_f).  uint8 goes through int64 as c10 casts it (a float64 of
  2500000007 gives 7).
* var / std / layer_norm over one element: the deviation is x - x, exactly
  0 (graph.c centered), as eager's Welford gives; a float32 mean is summed
  in float64, so a row of equal values has exactly that mean.
* The norm of one element is its abs (no overflow of x * x), as eager's;
  float16 / bfloat16 norms are computed in float32.
* logsumexp of float16 / bfloat16 rounds every step, as ATen's composite;
  their mean sums and divides in float32 and rounds once.
* layer_norm / rms_norm of float16 / bfloat16 compute in float32 (rms_norm
  with float32's eps) and round once, as eager; so does the eager replay.
* softmax / log_softmax / layer_norm / triu / tril results have
  at::empty's strides, size-1 dims included (graph.c layout_is_canonical).
"""
import os
import warnings

import pytest
import torch

import tcjit
from conftest import run_both
from test_cuda import _ptxas, assert_ptxas_accepts, dumped_ptx

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]
EDGES = [float("nan"), float("inf"), -float("inf"), 1e30, -1e30, 3e9, -3e9,
         1e19, -1e19, 70000.0, -70000.0, 300.0, -300.0, -0.2, -0.7, -0.0,
         0.0, 2.5e9, 65504.0, 1.5, 2500000007.0, -2500000007.0, 5e9 + 7]


def _same_bits(actual, expected):
    """Equal, with the sign of zero and NaN where eager has them."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if expected.dtype.is_floating_point:
        nan = expected.isnan()
        assert torch.equal(actual.isnan(), nan)
        a, e = actual[~nan], expected[~nan]
        assert torch.equal(a, e) and torch.equal(a.signbit(), e.signbit()), \
            [(x, y) for x, y in zip(a.tolist(), e.tolist())
             if x != y or str(x) != str(y)][:4]
    else:
        assert torch.equal(actual, expected)


@pytest.mark.parametrize("n", [1, 40], ids=["scalar", "vector"])
@pytest.mark.parametrize("idt", INTS, ids=str)
@pytest.mark.parametrize("fdt", FLOATS, ids=str)
def test_float_to_int(fdt, idt, n):
    x = torch.tensor(EDGES, dtype=torch.float64).to(fdt).repeat_interleave(n)
    fns = [lambda x: x.to(idt),
           lambda x: x.to(idt).to(x.dtype),
           lambda x: x.to(idt).rsqrt(),
           lambda x: 1.0 / x.to(idt)]
    for fn in fns:
        tcjit.reset()
        _same_bits(tcjit.compile(fn)(x), fn(x))


def test_float_to_int_fuzz_reproducers():
    # fuzz seeds 7267 (rsqrt of int32(-0.2) was -inf), 6815 (hardtanh of
    # int64 into float: reciprocal of -0), 9598 (int32(1e30) was 1e30)
    x = torch.tensor([-0.2, 0.5, -0.9, 1e30, -3.7])
    for fn in (lambda a: a.to(dtype=torch.int32).rsqrt(),
               lambda a: a.type(torch.int32).sigmoid()):
        _same_bits(tcjit.compile(fn)(x), fn(x))
    i = torch.tensor([[0, -3, 4, -1, 2]])
    fn = lambda a: torch.nn.functional.hardtanh(a, -0.5, 2.0).reciprocal()
    _same_bits(tcjit.compile(fn)(i), fn(i))


@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
def test_float_to_int_ptx(tmp_path):
    # the CUDA backend's casts assemble; uint8 converts through int64
    for fn in (lambda x: [(x * 2).to(i) for i in INTS],
               lambda x: (x * 2).to(torch.uint8)):
        d = str(tmp_path / str(len(os.listdir(tmp_path))))
        os.mkdir(d)
        tcjit._C.set_config(ptx_dump_dir=d)
        try:
            for fdt in (torch.float32, torch.float64):
                tcjit.reset()
                tcjit.compile(fn)(torch.tensor(EDGES, dtype=fdt))
        finally:
            tcjit._C.set_config(ptx_dump_dir=None)
        files = dumped_ptx(d, 2)
        assert_ptxas_accepts(files)
    assert all("cvt.rzi.s64.f" in open(f).read() for f in files)


def test_float_constant_to_int():
    # a cast of a constant folds in KIR: out of int32's range it gives
    # the backend's answer, not the wrapped int64
    def f(x):
        return (x + torch.full((3,), 3e9).int(),
                x + torch.full((3,), -1e10).to(torch.int16),
                x + torch.full((3,), 70000.0).to(torch.int16),
                x + torch.full((3,), float("nan")).to(torch.int64))
    run_both(f, torch.zeros(3, dtype=torch.int64))


# ---- variance of one element ------------------------------------------------

@pytest.mark.parametrize("backend", ["auto", "eager"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_var_of_one_element(dtype, backend):
    # fuzz seed 9094: (a ** 3).var(1) over one element was inf (eager NaN,
    # 0 / 0): the mean and the deviation recomputed a ** 3 differently
    # (an FMA in one kernel), so the deviation was not exactly 0
    x = torch.tensor([[[1.2]], [[-0.7]], [[float("inf")]], [[3.3e30]]],
                     dtype=dtype)
    fns = [lambda a: (a ** 3).var(1, keepdim=True),
           lambda a: (a ** 3).var(1, correction=0),
           lambda a: (a * a * a).std(-1),
           lambda a: (a ** 3).std(2, keepdim=True, correction=0),
           lambda a: torch.var_mean(a ** 3, 1)]
    for fn in fns:
        tcjit.reset()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")    # eager: degrees of freedom <= 0
            run_both(fn, x, backend=backend)


# ---- norms --------------------------------------------------------------------

BACKENDS = ["auto", "eager"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_norm_of_one_element_is_abs(backend):
    # fuzz seed 8291: F.normalize([1e30]) was 0 (eager 1): eager's norm of
    # one element is its abs, where sqrt(x * x) overflows in float32
    x = torch.tensor([[1e30], [1e-30], [-3e20], [float("nan")], [-float("inf")]])
    for fn in (lambda a: torch.nn.functional.normalize(a, dim=-1),
               lambda a: torch.linalg.vector_norm(a, dim=1),
               lambda a: a.norm(dim=1, keepdim=True),
               lambda a: torch.linalg.vector_norm(a[0])):
        tcjit.reset()
        run_both(fn, x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_norm_half_in_float32(backend):
    # fuzz seed 294: F.normalize of float16 [1900, -800] replayed the norm
    # in float16 (x * x overflowed: 0); eager's norm runs in float32
    x = torch.tensor([1.9, -0.8], dtype=torch.float16)
    for fn in (lambda a: torch.nn.functional.normalize(a / 0.001, dim=-1),
               lambda a: torch.linalg.vector_norm(a * 1000),
               lambda a: (a * 1000).to(torch.bfloat16).norm(p=1)):
        tcjit.reset()
        run_both(fn, x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_rms_norm_half_in_float32(dtype, backend):
    # fuzz seed 5977: rms_norm of a float16 row of zeros was NaN: the
    # default eps was float64's (0 in float16) and the math ran in float16;
    # eager computes in float32 with float32's eps and rounds once
    g = torch.Generator().manual_seed(0)
    x = torch.randn(300, 4, generator=g).to(dtype)
    x[0] = 0
    w = torch.randn(4, generator=g)
    fns = [lambda a: torch.nn.functional.rms_norm(a, (4,)),
           lambda a: torch.nn.functional.rms_norm(a, (4,), w.to(dtype)),
           lambda a: torch.nn.functional.rms_norm(a, (4,), w),
           lambda a: torch.nn.functional.rms_norm(a.maximum(torch.zeros(
               1, 1, 1, 1, dtype=torch.int64)), (4,))]
    for fn in fns:
        tcjit.reset()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")    # eager: no fused kernel
            run_both(fn, x, backend=backend)
            _same_bits(tcjit.compile(fn, backend=backend)(x), fn(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_layer_norm_half_in_float32(backend):
    # fuzz seed 5585: layer_norm of a float16 (10000, 1) over both dims
    # replayed (backend="eager") in float16 and was 2 ulp off
    fn = lambda a: torch.nn.functional.layer_norm(a, a.shape[-2:])
    for seed in (416730, 417730):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(10000, 1, generator=g).to(torch.float16)
        run_both(fn, x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [1, 3, 8])
def test_layer_norm_zero_times_negative_weight(n, backend):
    # fuzz seed 30435: a row of equal values times a negative weight and no
    # bias is +0 in eager (it adds a zero bias), not -0; rsqrt of it +inf
    x = torch.full((2, n), 0.7)
    w = torch.full((n,), -1.3)
    fn = lambda a, w: torch.nn.functional.layer_norm(a, (n,), w, eps=1e-3)
    run_both(fn, x, w, backend=backend)
    _same_bits(tcjit.compile(fn, backend=backend)(x, w), fn(x, w))
    g = lambda a, w: fn(a, w).rsqrt()
    _same_bits(tcjit.compile(g, backend=backend)(x, w), g(x, w))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("backend", BACKENDS)
def test_mean_half_sums_in_float32(dtype, backend):
    # fuzz seed 22464: ATen's CPU mean of float16/bfloat16 sums and divides
    # in float32 and rounds once; a sum rounded to float16 overflowed to inf
    # where eager's mean is 65504.  mean(dtype=half) of a float32 input sums
    # the float32 values (not first rounded to half)
    big = torch.finfo(dtype).max
    x = torch.full((4, 3), big, dtype=dtype)
    y = torch.randn(6, 5, generator=torch.Generator().manual_seed(1)) * 1e3
    for fn, a in ((lambda a: a.mean(), x), (lambda a: a.mean(0), x),
                  (lambda a: a.mean((0, 1), keepdim=True), x),
                  (lambda a: (a * 2).mean(1) - a.mean(1), x),
                  (lambda a: a.mean(1, dtype=dtype), y),
                  (lambda a: a.mean(dtype=dtype), y + 0.3)):
        tcjit.reset()
        _same_bits(tcjit.compile(fn, backend=backend)(a), fn(a))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_logsumexp_half_rounds_every_step(dtype, backend):
    # fuzz seed 32229: at::logsumexp of float16 is composite (amax, sub,
    # exp, sum, log_, add_), each step rounded; a fused kernel kept float32
    # and the logsumexp of log_softmax's output was 1e-4 where eager's is 0
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(5, 4, 3, generator=g) * 3).to(dtype)
    for fn in (lambda a: a.logsumexp(1), lambda a: a.logsumexp((0, 2), True),
               lambda a: torch.logsumexp(a.log_softmax(0), 0).std(),
               lambda a: torch.logsumexp(a, (0, 1, 2))):
        tcjit.reset()
        _same_bits(tcjit.compile(fn, backend=backend)(x), fn(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_layer_norm_of_one_element(backend):
    x = torch.tensor([[1.3], [-2.0e10], [7.0e18]], dtype=torch.float64)
    fn = lambda a: torch.nn.functional.layer_norm(a ** 3, (1,))
    run_both(fn, x, backend=backend)
    _same_bits(tcjit.compile(fn, backend=backend)(x), fn(x))


# ---- layouts --------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_softmax_layer_norm_strides_of_size_one_dims(backend):
    # fuzz seed 7330: log_softmax of a (1, 5) tensor with strides (1, 1)
    # kept them; eager allocates at::empty(sizes): (5, 1).  rms_norm keeps
    # an input torch calls contiguous (empty_like), so its strides stay
    # fuzz seed 1274: triu of a (1, 5, 1) with strides (5, 1, 5) as well
    fns = [lambda a: a.log_softmax(1), lambda a: a.softmax(0),
           lambda a: torch.nn.functional.layer_norm(a, a.shape[-1:]),
           lambda a: torch.nn.functional.rms_norm(a, a.shape[-1:]),
           lambda a: a.triu(1), lambda a: a.tril(-1)]
    xs = [torch.randn(5, 1).t(), torch.randn(1, 4, 3).transpose(0, 1),
          torch.randn(4, 1, 3).permute(1, 0, 2), torch.randn(4, 3).t(),
          torch.randn(1, 1, 5).permute(0, 2, 1)]
    for fn in fns:
        for x in xs:
            tcjit.reset()
            run_both(fn, x, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [3, 7, 8, 12, 100])
def test_layer_norm_of_equal_values(n, backend):
    # fuzz seed 1433: layer_norm of an expanded float32 row (all values
    # equal) was up to 3e-4 (eager 0): the float32 mean 3 * x / 3 can be
    # x's neighbour, and rsqrt(eps) scales the difference by 316
    # (a row computed in the kernel, such as (a * 3), is not exact yet:
    # reduction kernels contract a * 3 - mean into an FMA)
    x = torch.randn(2000, 1, generator=torch.Generator().manual_seed(1))
    fn = lambda a: torch.nn.functional.layer_norm(a, (n,))
    run_both(fn, x.expand(2000, n), backend=backend)
    tcjit.reset()
    run_both(fn, x.expand(2000, n).contiguous(), backend=backend)
