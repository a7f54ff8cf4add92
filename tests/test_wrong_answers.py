"""Regression tests for wrong answers of the graph / schedule stage, checked
against eager.

* Reductions over the same dims, some with keepdim and some without, share
  one kernel; each stores into its own output with its own rank
  (schedule.c member_map: the second output was indexed with the first
  one's rank and held uninitialized memory).
* Kernels with the same code run once (kir.c tc_kernel_same_code): an
  accumulator's kind is part of the code (amin and sum over the same rows).
* layer_norm / rms_norm keep eager's result dtype and exceptions with a
  weight / bias of another dtype or shape (graph.c, tracer torchcalls.c).
* max(dim) / min(dim) of a bool tensor replay their indices with an argmax
  eager accepts (ops.c .eager).
* logical_and/or/xor, maximum, minimum with a Python number raise eager's
  TypeError (their registry signatures mark the operands ": Tensor").
* Outputs keep eager's identity through CSE (graph.c cse_map): equal
  computations returned as different tensors stay different tensors
  (mutating one leaves the other alone), one tensor returned twice stays
  one object, an input returned is the input itself.
* A temporary stored for kernels after an extern keeps its eager layout when
  a view of it is read (schedule.c plan_op_buffers): the view's strides
  index into that layout, and a row-major copy was read through them
  (torchvision maxvit_t's window partition of a permuted sum).
"""
import warnings

import pytest
import torch
import torch.nn.functional as F

import torch.nn.functional as F

import tcjit
from conftest import check_same, run_both
from test_cuda import _ptxas, assert_ptxas_accepts, cuda_only, dumped_ptx

# ---- reductions over the same dims with and without keepdim ------------------

KEEPDIM_MIXES = {
    "amin_keep_amax": lambda x: (x.amin(0, keepdim=True), x.amax(0)),
    "amax_amin_keep": lambda x: (x.amax(0), x.amin(0, keepdim=True)),
    "sum_keep_amax": lambda x: (x.sum(0, keepdim=True), x.amax(0)),
    "amin_keep_max_dim": lambda x: (x.amin(0, keepdim=True), *x.max(dim=0)),
    "max_keep_min_dim1": lambda x: (*x.max(dim=1, keepdim=True), *x.min(dim=1)),
    "argmax_keep_argmin": lambda x: (x.argmax(1, keepdim=True), x.argmin(1)),
    "argmin_argmax_keep": lambda x: (x.argmin(-1), x.argmax(-1, keepdim=True)),
    "mean_keep_var_sum": lambda x: (x.mean(1, keepdim=True), x.var(1), x.sum(1)),
    "var_keep_mean_std_keep": lambda x: (x.var(0, keepdim=True), x.mean(0),
                                         x.std(0, keepdim=True)),
    "all_dims": lambda x: (x.sum((0, 1), keepdim=True), x.amax((0, 1)),
                           x.mean()),
    "all_dims_args": lambda x: (x.amax(), x.amin((0, 1), keepdim=True),
                                x.argmax(), x.argmin()),
    "with_epilogues": lambda x: (x.amin(1, keepdim=True) + 1, x.amax(1) * 2,
                                 x - x.mean(1, keepdim=True)),
    "six_outputs": lambda x: (x.sum(1), x.sum(1, keepdim=True), x.amax(1),
                              x.amax(1, keepdim=True), x.argmax(1),
                              x.argmax(1, keepdim=True)),
    "last_dim_3d": lambda x: (x.sum(-1, keepdim=True), x.amax(-1),
                              x.argmin(-1)),
}

SHAPES_2D = {
    "contiguous": lambda: torch.randn(8, 11),
    "transposed": lambda: torch.randn(11, 8).t(),
    "sliced": lambda: torch.randn(8, 22)[:, ::2],
    "size1_reduced": lambda: torch.randn(1, 11),
    "wide": lambda: torch.randn(5, 300),
}


def _input(layout, name):
    x = SHAPES_2D[layout]()
    if name == "last_dim_3d":
        x = x.unsqueeze(0).expand(3, *x.shape).contiguous() + \
            torch.arange(3.0).view(3, 1, 1)
    return x


@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
@pytest.mark.parametrize("layout", list(SHAPES_2D))
@pytest.mark.parametrize("name", list(KEEPDIM_MIXES))
def test_reductions_keepdim_mix(name, layout):
    fn = KEEPDIM_MIXES[name]
    x = _input(layout, name)
    cf = tcjit.compile(fn)
    for _ in range(2):
        check_same(cf(x), fn(x))
    assert tcjit.counters()["eager_fallbacks"] == 0


@pytest.mark.parametrize("dims", [(0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)])
def test_reductions_keepdim_mix_3d(dims):
    def f(x):
        return (x.sum(dims, keepdim=True), x.amax(dims), x.mean(dims),
                x.amin(dims, keepdim=True))

    for x in (torch.randn(4, 5, 6), torch.randn(6, 5, 4).permute(2, 1, 0)):
        tcjit.reset()
        check_same(tcjit.compile(f)(x), f(x))


def test_argmax_indices_keepdim_mix_int():
    """Indices exact (ties included: eager returns the first)."""
    def f(x):
        return (*x.max(dim=0), x.argmin(0, keepdim=True), x.amax(0, keepdim=True))

    x = torch.randint(-3, 4, (9, 13), dtype=torch.int32)
    check_same(tcjit.compile(f)(x), f(x))


# ---- kernels with the same code: the accumulator kind counts ------------------

SAME_ROWS_OTHER_ACC = {
    # x.amin(0) and x.sum((0, 1)) on (2, 1) are two kernels over the same rows
    # (the size-1 dim drops out); the second ran the first one's accumulator
    "amin_sum": lambda x: (x.amin(0), x.sum((0, 1))),
    "sum_amin": lambda x: (x.sum((1, -2)), x.amin(0)),
    "amax_prod": lambda x: (x.amax(0), x.prod(1).prod(0)),
    "argmax_argmin": lambda x: (x.argmax(0), x.argmin()),
}


@pytest.mark.parametrize("name", list(SAME_ROWS_OTHER_ACC))
def test_same_kernel_code_other_accumulator(name):
    fn = SAME_ROWS_OTHER_ACC[name]
    x = torch.tensor([[-0.2], [0.1]])
    check_same(tcjit.compile(fn)(x), fn(x))


# ---- layer_norm / rms_norm with a weight or bias of another dtype ---------------

NORM_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


@pytest.mark.filterwarnings("ignore:Mismatch dtype")
@pytest.mark.parametrize("xd", NORM_DTYPES, ids=str)
@pytest.mark.parametrize("pd", NORM_DTYPES, ids=str)
@pytest.mark.parametrize("which", ["ln_wb", "ln_w", "ln_b", "ln_w_xb", "rms"])
@pytest.mark.parametrize("backend", ["auto", "eager"])
def test_norm_params_of_another_dtype(xd, pd, which, backend):
    """Eager keeps x's dtype (float32 parameters of a half x on CPU, any
    rms_norm weight) or raises "mixed dtype"; tcjit promoted."""
    torch.manual_seed(0)
    x = torch.randn(2, 5, 3).to(xd)
    w, b = torch.randn(5, 3).to(pd), torch.randn(5, 3).to(pd)
    fns = {
        "ln_wb": lambda x, w, b: F.layer_norm(x, (5, 3), w, b),
        "ln_w": lambda x, w, b: F.layer_norm(x, (3,), w[0], eps=1e-3),
        "ln_b": lambda x, w, b: F.layer_norm(x, (5, 3), None, b),
        "ln_w_xb": lambda x, w, b: F.layer_norm(x, (5, 3), w, b.to(x.dtype)),
        "rms": lambda x, w, b: F.rms_norm(x, (5, 3), w),
    }
    if backend == "auto":
        run_both(fns[which], x, w, b)
        return
    # the eager backend replays the decomposition op by op, rounding half
    # intermediates: the dtype and the exception are what this checks
    fn, cf = fns[which], tcjit.compile(fns[which], backend="eager")
    try:
        expected = fn(x, w, b)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            cf(x, w, b)
        return
    actual = cf(x, w, b)
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, atol=5e-2, rtol=5e-2)


@pytest.mark.parametrize("fn", [
    lambda x, w: F.layer_norm(x, (3,), w),
    lambda x, w: F.layer_norm(x, (3,), None, w),
    lambda x, w: F.rms_norm(x, (3,), w),
    lambda x, w: F.layer_norm(x, (3,), w[:1]),
    lambda x, w: F.rms_norm(x, (3,), w[0]),
], ids=["ln_weight", "ln_bias", "rms_weight", "ln_weight_1", "rms_weight_1"])
def test_norm_param_of_the_wrong_shape(fn):
    """Eager wants normalized_shape exactly; tcjit broadcast."""
    run_both(fn, torch.randn(2, 3), torch.randn(2, 3))


# ---- max(dim) / min(dim) of bool through the eager backend ----------------------

@pytest.mark.parametrize("backend", ["auto", "eager"])
@pytest.mark.parametrize("fn", [
    lambda x: torch.max(x, 1),
    lambda x: torch.min(x, 0, keepdim=True),
    lambda x: x.max(-1).indices,
    lambda x: x.argmax(1),      # eager raises: argmax rejects bool
], ids=["max_dim", "min_dim_keep", "max_indices", "argmax"])
def test_max_min_dim_of_bool(fn, backend):
    """The indices are an argmax node; its replay gave it the bool input,
    which torch.argmax rejects."""
    x = torch.tensor([[False, True, True], [False, False, False]])
    run_both(fn, x, backend=backend)


# ---- binary ops that take only tensors ------------------------------------------

@pytest.mark.parametrize("backend", ["auto", "eager"])
@pytest.mark.parametrize("fn", [
    lambda x: torch.logical_or(x, 5),
    lambda x: x.logical_and(True),
    lambda x: torch.logical_xor(2, x),
    lambda x: torch.maximum(x, 0.5),
    lambda x: x.minimum(2),
    lambda x: torch.logical_xor(x, x > 0),
    lambda x: torch.maximum(x, x + 1),
], ids=["or_int", "and_bool", "xor_int_first", "maximum_float",
        "minimum_method", "xor_tensors", "maximum_tensors"])
def test_tensor_only_operands(fn, backend):
    """Eager raises TypeError for a Python number operand ("must be
    Tensor"); tcjit computed (bindings.c ": Tensor" parameters)."""
    run_both(fn, torch.tensor([1, 0, -3]), backend=backend)


# ---- output identity through CSE ----------------------------------------------

def _mm3(a, b):
    return a @ b, torch.mm(a, b), a.matmul(b)


IDENTITY = {
    "matmul_spellings": (_mm3, lambda: (torch.randn(4, 5), torch.randn(5, 3))),
    "pointwise_twice": (lambda x: (x + 1, x + 1), lambda: (torch.randn(4, 5),)),
    "chain_twice": (lambda x: ((x.sin() * 2).relu(), (x.sin() * 2).relu()),
                    lambda: (torch.randn(4, 5),)),
    "transposed_twice": (lambda x: (x.t() + 1, x.t() + 1),
                         lambda: (torch.randn(4, 5),)),
    "reduction_twice": (lambda x: (x.sum(0), x.sum(0), x.amax(1, keepdim=True),
                                   x.amax(1, keepdim=True)),
                        lambda: (torch.randn(4, 5),)),
    "same_tensor_twice": (lambda x: ((y := x * 2), y, y + 0),
                          lambda: (torch.randn(4, 5),)),
    "input_returned": (lambda x: (x, x, x + 0), lambda: (torch.randn(4, 5),)),
    "views_of_input": (lambda x: (x.t(), x.t(), x[1]), lambda: (torch.randn(4, 5),)),
    "views_of_equal_nodes": (lambda x: ((x + 1).t(), (x + 1)[0], x + 1),
                             lambda: (torch.randn(4, 5),)),
    "tensor_and_its_view": (lambda x: ((y := x + 1), y.t(), x + 1),
                            lambda: (torch.randn(4, 5),)),
    "int_twice": (lambda x: (x * 3, x * 3), lambda: (torch.arange(12).view(3, 4),)),
    # equal views merge in the graph; eager has one view object per call
    "equal_views": (lambda x: (x[3], torch.select(x, 0, -1), x.narrow(0, 1, 2),
                               x[1:3], x.reshape(20), x.reshape(-1),
                               x.permute(1, 0), x.t(), x.unflatten(1, (1, 5)),
                               x.view(4, 1, 5), x.split(2)[0], x[:2]),
                    lambda: (torch.randn(4, 5),)),
}


def _identity_pattern(outs, args):
    """Which outputs are the same object / share storage, with each other
    and with the inputs: what eager's aliasing is."""
    def first(xs, x):
        return xs.index(x) if x in xs else -1
    ids = [id(o) for o in outs]
    st = [o.untyped_storage().data_ptr() for o in outs]
    in_ids = [id(a) for a in args]
    in_st = [a.untyped_storage().data_ptr() for a in args]
    return ([ids.index(i) for i in ids], [first(in_ids, i) for i in ids],
            [st.index(s) for s in st], [first(in_st, s) for s in st])


def _check_identity(fn, args, device="cpu", backend="auto"):
    args = tuple(a.to(device) for a in args)
    cf = tcjit.compile(fn, backend=backend)
    for _ in range(2):
        expected, actual = fn(*args), cf(*args)
        check_same(actual, expected)
        assert _identity_pattern(actual, args) == _identity_pattern(expected, args)
    # mutating one output changes exactly what it changes in eager
    for k in range(len(expected)):
        e_args = tuple(a.clone() for a in args)
        c_args = tuple(a.clone() for a in args)
        expected, actual = fn(*e_args), cf(*c_args)
        expected[k].add_(7)
        actual[k].add_(7)
        check_same(actual, expected)
        check_same(c_args, e_args)


@pytest.mark.parametrize("name", list(IDENTITY))
def test_output_identity(name):
    fn, make = IDENTITY[name]
    _check_identity(fn, make())
    assert tcjit.counters()["eager_fallbacks"] == 0


def test_output_identity_through_the_eager_backend():
    fn, make = IDENTITY["pointwise_twice"]
    (x,) = make()
    a, b = tcjit.compile(fn, backend="eager")(x)
    assert a is not b and a.data_ptr() != b.data_ptr()


@pytest.mark.parametrize("name", list(IDENTITY))
@pytest.mark.parametrize("backend", ["eager", "graph_replay"])
def test_output_identity_of_other_backends(name, backend):
    """The frame_eval runtime, not each backend, gives outputs eager's
    identity: a callable backend that returns the graph's outputs as it
    computes them (one object for two merged views) gets it too."""
    fn, make = IDENTITY[name]
    if backend == "graph_replay":
        backend = lambda graph, inputs: graph  # noqa: E731
    _check_identity(fn, make(), backend=backend)


# ---- CUDA: the same graphs on the GPU, and their PTX through ptxas ------------

@cuda_only
@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
@pytest.mark.parametrize("name", list(KEEPDIM_MIXES))
def test_reductions_keepdim_mix_cuda(name):
    fn = KEEPDIM_MIXES[name]
    for layout in SHAPES_2D:
        x = _input(layout, name).cuda()
        tcjit.reset()
        check_same(tcjit.compile(fn)(x), fn(x))


@cuda_only
@pytest.mark.parametrize("name", list(IDENTITY))
def test_output_identity_cuda(name):
    fn, make = IDENTITY[name]
    torch.backends.cuda.matmul.allow_tf32 = False
    _check_identity(fn, make(), device="cuda")


@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
def test_ptx_assembles_wrong_answer_graphs(tmp_path):
    d = str(tmp_path)
    tcjit._C.set_config(ptx_dump_dir=d)
    try:
        for name, fn in KEEPDIM_MIXES.items():
            for layout in ("contiguous", "transposed", "size1_reduced"):
                tcjit.reset()
                tcjit.compile(fn)(_input(layout, name))
        for fn, make in IDENTITY.values():
            tcjit.reset()
            tcjit.compile(fn)(*make())
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)
    assert_ptxas_accepts(dumped_ptx(d, 40))


# ---- layouts of mixed-dtype pointwise ops ----------------------------------------

MIXED_DTYPE_LAYOUTS = {
    # eager (CPU) converts the input of another dtype with .to() first: a
    # broadcast or sliced input turns dense and decides the output's order
    "expand_f32_perm_f64": lambda: (torch.randn(1, 3).expand(4, 3),
                                    torch.randn(3, 4, dtype=torch.float64).t()),
    "expand_int_perm_f32": lambda: (torch.arange(3).view(1, 3).expand(4, 3),
                                    torch.randn(3, 4).t()),
    "col_expand_f64_perm_f32": lambda: (torch.randn(4, 1, dtype=torch.float64)
                                        .expand(4, 3), torch.randn(3, 4).t()),
}


@pytest.mark.parametrize("name", list(MIXED_DTYPE_LAYOUTS))
def test_mixed_dtype_pointwise_layout(name):
    a, b = MIXED_DTYPE_LAYOUTS[name]()
    fn = lambda a, b: (a + b, a * b, a < b, torch.maximum(a, b))  # noqa: E731
    check_same(tcjit.compile(fn)(a, b), fn(a, b))


# ---- strides of size-1 dims ----------------------------------------------------

SIZE1_INPUTS = {
    "mid1": lambda: torch.randn(3, 5, 1).transpose(1, 2),
    "two1": lambda: torch.randn(1, 4, 1).transpose(1, 2),
    "lead1": lambda: torch.randn(5, 1, 4).transpose(0, 1),
    "row": lambda: torch.randn(5, 1).t(),
    "col": lambda: torch.randn(1, 5)[:, :1],
    "sliced": lambda: torch.randn(4, 6)[:, ::2],
}

SIZE1_OPS = {
    # unary TensorIterators in eager (the parameters are Python numbers):
    # the fast path sees an input eager calls contiguous
    "elu": lambda x: F.elu(x),
    "softplus": lambda x: F.softplus(x),
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
    # hardtanh_out into empty_like(input): the input's strides
    "hardtanh": lambda x: F.hardtanh(x, -0.5, 2.0),
    "relu6": lambda x: F.relu6(x),
    "hardtanh_int": lambda x: F.hardtanh((x * 4).to(torch.int32), -1, 2),
    # number / tensor is Tensor.__rtruediv__: x.reciprocal() * number
    "rdiv": lambda x: 5 / x,
    "rdiv_int": lambda x: 2.5 / (x * 4).to(torch.int32).clamp(min=1),
    # at::empty results: fresh strides, size-1 dims too
    "tril": lambda x: torch.tril(x, -1),
    "triu": lambda x: x.triu(),
}


@pytest.mark.parametrize("inp", list(SIZE1_INPUTS))
@pytest.mark.parametrize("name", list(SIZE1_OPS))
@pytest.mark.parametrize("backend", ["auto", "eager"])
def test_size1_dim_strides_like_eager(name, inp, backend):
    fn, x = SIZE1_OPS[name], SIZE1_INPUTS[inp]()
    check_same(tcjit.compile(fn, backend=backend)(x), fn(x))


MIXED_LAYOUTS = {
    "expanded": lambda d: torch.tensor([[3]], dtype=d).expand(2, 8),
    "transposed": lambda d: (torch.randn(8, 2, 2) * 3).to(d).transpose(0, 2),
    "sliced": lambda d: (torch.randn(2, 2, 16) * 3).to(d)[:, :, ::2],
}


@pytest.mark.parametrize("op", ["logical_or", "logical_xor", "add", "eq"])
@pytest.mark.parametrize("dtypes", [(torch.int64, torch.bfloat16),
                                    (torch.float32, torch.float32),
                                    (torch.bool, torch.float32)])
@pytest.mark.parametrize("layouts", [("expanded", "transposed"),
                                     ("transposed", "sliced"),
                                     ("sliced", "expanded")])
def test_mixed_dtype_binary_result_strides(op, dtypes, layouts):
    # on the CPU an input of another dtype than result_type(a, b) is
    # converted with .to() first (a broadcast input turns dense), and that
    # decides the result's dim order; logical ops too (seed 22677)
    a, b = (MIXED_LAYOUTS[k](d) for k, d in zip(layouts, dtypes))
    fn = lambda a, b: getattr(torch, op)(a, b).permute(2, 1, 0)  # noqa: E731
    check_same(tcjit.compile(fn)(a, b), fn(a, b))


@pytest.mark.parametrize("backend", ["auto", "eager"])
def test_equal_views_returned_keep_their_strides(backend):
    # the chunks of an expanded tensor are equal views (CSE merges them);
    # each output is still its own object with eager's strides (0, 1)
    x = torch.tensor([3]).expand(3, 1)
    fn = lambda x: torch.flatten(x, 1).chunk(3, 0)  # noqa: E731
    got, expected = tcjit.compile(fn, backend=backend)(x), fn(x)
    check_same(got, expected)
    assert len({id(t) for t in got}) == 3


# ---- sdpa's result layout on the CPU -------------------------------------------

def _sdpa_q(perm, e=4):
    shape = [2, 3, 5, e]
    inv = [perm.index(i) for i in range(4)]
    return torch.randn([shape[p] for p in perm]).permute(inv)


@pytest.mark.parametrize("perm", [(0, 1, 2, 3), (1, 0, 2, 3), (0, 2, 1, 3),
                                  (2, 1, 0, 3), (0, 1, 3, 2), (3, 2, 1, 0)])
@pytest.mark.parametrize("ev", [4, 7])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sdpa_result_layout_follows_q(perm, ev, dtype):
    # the CPU flash kernel writes into empty_like(q) when q's last dim is
    # dense and the head dims agree; otherwise the result is contiguous
    q = _sdpa_q(perm).to(dtype)
    k, v = torch.randn(2, 3, 6, 4, dtype=dtype), torch.randn(2, 3, 6, ev, dtype=dtype)
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
    check_same(tcjit.compile(fn)(q, k, v), fn(q, k, v))


@pytest.mark.parametrize("which", ["k", "v", "mask"])
def test_sdpa_takes_math_for_expanded_operands(which):
    # fuzz seed 16510: an expanded k (stride 0) makes torch take the math
    # kernel (contiguous result) although q would suit the flash kernel
    q = torch.randn(2, 3, 4, 8).transpose(0, 1)
    k, v = torch.randn(3, 2, 4, 8), torch.randn(3, 2, 4, 8)
    mask = None
    if which == "k":
        k = torch.randn(3, 1, 1, 1).expand(3, 2, 4, 8)
    elif which == "v":
        v = torch.randn(3, 1, 4, 8).expand(3, 2, 4, 8)
    else:
        mask = torch.randn(1, 1, 4, 4).expand(3, 2, 4, 4)
    fn = lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m)  # noqa: E731
    check_same(tcjit.compile(fn)(q, k, v, mask), fn(q, k, v, mask))


# ---- autocast -----------------------------------------------------------------

def _mm_sin(a, b):
    return (a @ b).sin() + 1


def _autocast_inside(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = a @ b
        z = y.sin() + torch.is_autocast_enabled("cpu")
    return z * 2, y


@pytest.mark.parametrize("backend", ["auto", "eager"])
def test_autocast_regions_run_as_eager(backend):
    # a graph traced without autocast computed matmul's float32 dtype and
    # raised "extern op matmul returned ... bfloat16" under autocast; now
    # autocast is part of GLOBAL_STATE and its regions run eagerly
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    f = tcjit.compile(_mm_sin, backend=backend)
    check_same(f(a, b), _mm_sin(a, b))            # compiled, autocast off
    with torch.autocast("cpu", dtype=torch.bfloat16):
        check_same(f(a, b), _mm_sin(a, b))        # guard fails: eager
        report = tcjit.explain(_mm_sin)(a, b)
    assert any("autocast" in r.reason for r in report.break_reasons), report
    check_same(f(a, b), _mm_sin(a, b))            # off again: the graph
    g = tcjit.compile(_autocast_inside, backend=backend)
    check_same(g(a, b), _autocast_inside(a, b))
    check_same(g(a, b), _autocast_inside(a, b))


def test_dispatch_modes_see_every_op():
    # a TorchDispatchMode (FlopCounterMode, a debugging mode) sees each op
    # torch dispatches; fused kernels would hide them from it: with a mode
    # active the frame runs eagerly, and a graph compiled without one never
    # runs under one (GLOBAL_STATE)
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    f = lambda x: (x.sin() * 2).sum()  # noqa: E731
    cf = tcjit.compile(f)
    x = torch.randn(5)
    check_same(cf(x), f(x))
    with Count() as want:
        e = f(x)
    with Count() as got:
        a = cf(x)
    check_same(a, e)
    assert got.ops == want.ops


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64,
                                   torch.float16, torch.bfloat16])
@pytest.mark.parametrize("op", [torch.sin, torch.tanh])
def test_sin_keeps_the_sign_of_zero(dtype, op):
    """sin(-0) and tanh(-0) are -0 in eager: 1 / sin(x) is -inf there.
    Every range reduction's x - n pi/2 made it +0 (CPU float32 fast path,
    PTX), and tanh took its sign from x < 0 (fuzz seed 64382)."""
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        x = torch.tensor([-0.0, 0.0, -1e-30, -1e-45, 2.0],
                         device=device).to(dtype)
        f = lambda x: 1 / op(x * 1)
        got, expected = tcjit.compile(f)(x), f(x)
        assert torch.equal(torch.signbit(got), torch.signbit(expected))
        torch.testing.assert_close(got, expected)


_OPERATOR_CASES = {
    "a // b": lambda a, b: a // b, "a % b": lambda a, b: a % b,
    "a // 3": lambda a, b: a // 3, "17 // a": lambda a, b: 17 // a,
    "-7.5 % a": lambda a, b: -7.5 % a, "a % -3": lambda a, b: a % -3,
    "(a+1) // (b+2)": lambda a, b: (a + 1) // (b + 2),
    "a << b": lambda a, b: a << b.clamp(0, 5), "a >> 1": lambda a, b: a >> 1,
    "3 << b": lambda a, b: 3 << b.clamp(0, 5),
    "100 >> b": lambda a, b: 100 >> b.clamp(0, 5),
    "[[1.,2.],[3.,4.]] @ a": lambda a, b: torch.ones(2, 4) @ a.float().view(4, 1),
}


@pytest.mark.parametrize("case", sorted(_OPERATOR_CASES))
@pytest.mark.parametrize("dtypes", [("int64", "int64"), ("float32", "float32"),
                                    ("int64", "float32"), ("int32", "int64"),
                                    ("float32", "0-d int64")])
def test_floor_division_remainder_shift_operators(case, dtypes):
    """//, %, <<, >> on tensors (either side) are torch functions in the
    graph (GraphNet's timm graphs compute sizes with sym_sum(...) // 4 on
    0-d tensors): eager's values, dtypes and exceptions."""
    def make(name, base):
        if name == "0-d int64":
            return torch.tensor(9)
        return (base * 3.25).to(getattr(torch, name))
    base = torch.tensor([7.0, -5.0, 12.0, 3.0])
    a, b = make(dtypes[0], base), make(dtypes[1], base.flip(0) + 10)
    f = _OPERATOR_CASES[case]
    tcjit.reset()
    run_both(f, a, b, expect_compiled=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_activation_parameters_in_float32_for_reduced_floats(dtype):
    """ATen's reduced-float leaky_relu / elu / softplus kernels take their
    Scalar parameters .to<float>(): 0.2 is not rounded to half first
    (fuzz seed 61034: an eq after leaky_relu of float16 differed)."""
    a = (torch.randn(4096, generator=torch.Generator().manual_seed(0))
         * 4).to(dtype)
    f = lambda a: F.leaky_relu(a, 0.2)
    assert torch.equal(tcjit.compile(f)(a), f(a))
    g = lambda a: torch.eq(F.leaky_relu(a * 3 - 1, 0.1), a)
    assert torch.equal(tcjit.compile(g)(a), g(a))


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 1, 4, 5), (2, 3, 1, 1),
                                   (1, 3, 1, 5), (2, 3, 4, 5, 2)])
def test_cat_result_memory_format(shape):
    """torch.cat's result is channels last when every input's strides
    suggest it (c10's is_channels_last_strides_2d/_3d), else contiguous
    (fuzz seed 96431: a permuted stack)."""
    cl = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    a = torch.randn(*shape).to(memory_format=cl)
    b = torch.randn(*shape).to(memory_format=cl)
    c = torch.randn(*shape)
    for ins in [(a, b), (a, c), (c, a), (a[:, :, :1], b[:, :, :1])]:
        for d in range(len(shape)):
            run_both(lambda *t: torch.cat(t, d) * 1, *ins, calls=1)



def test_prod_with_inf_does_not_underflow_to_nan():
    """The vector lanes' partial products are folded pairwise: two small
    partials underflowed to 0 in float32 and 0 * inf gave NaN where eager
    gives -inf, as the float64 product does (fuzz seed 64410): float
    products accumulate in float64."""
    def gen(shape, seed):
        return torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    a0 = gen((4, 3, 7, 3), 467587).to(torch.bfloat16).transpose(0, 1)
    a1 = gen((3, 6), 580154).to(torch.bfloat16)
    a1.view(-1)[0] = 65504.0
    a1.view(-1)[16] = -float("inf")
    x = torch.matmul(a0, a1)
    f = lambda x: (x.prod(), x.float().prod(), x.flatten(1).prod(1))  # noqa: E731
    e = f(x)
    assert e[0].item() == e[1].item() == -float("inf")
    check_same(tcjit.compile(f)(x), e)


# ---- float16 / bfloat16 intermediates ------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_reduced_float_converts_as_stored(dtype):
    """A float16 / bfloat16 value computed in the kernel converts to
    float32 as eager stored it: a.tanh_(); a.float() - a is 0 (fuzz seed
    64969: the conversion took the unrounded float32)."""
    a0 = torch.randn(8, 2, generator=torch.Generator().manual_seed(1)).to(dtype)

    def f(a):
        a.tanh_()
        return a.float() - a, (a * 3).double() - (a * 3)
    a, b = a0.t().clone(), a0.t().clone()
    r, e = tcjit.compile(f)(a), f(b)
    check_same(r, e)
    check_same(a, b)
    assert not r[0].any() and not r[1].any()


def _eq_after_sub(a):
    v0 = torch.amin(a, dim=0)
    v1 = v0.add_(-1, alpha=2)
    return torch.eq(a, F.leaky_relu(v1, 0.2)), (a * 3 + 1) - a * 3


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_emulate_precision_casts_gives_eager_answers(dtype):
    """tcjit.config.emulate_precision_casts = 1 rounds every float16 /
    bfloat16 op result in the kernel as eager stores it: an exact eq after
    a float16 sub is eager's (fuzz seed 61034: one of 280 differed)."""
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(4, 1024, generator=g) * 4).to(dtype)
    with tcjit.config.patch(emulate_precision_casts=1):
        tcjit.reset()
        r = tcjit.compile(_eq_after_sub)(a)
    tcjit.reset()
    e = _eq_after_sub(a)
    assert torch.equal(r[0], e[0]) and torch.equal(r[1], e[1])
    once = tcjit.compile(_eq_after_sub)(a)
    tcjit.reset()
    assert not (torch.equal(once[0], e[0]) and torch.equal(once[1], e[1])), \
        "the test's inputs no longer tell one rounding from many"


@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
def test_ptx_assembles_emulated_precision(tmp_path):
    d = str(tmp_path)
    tcjit._C.set_config(ptx_dump_dir=d)
    try:
        with tcjit.config.patch(emulate_precision_casts=1):
            for dtype in (torch.float16, torch.bfloat16):
                tcjit.reset()
                tcjit.compile(_eq_after_sub)(torch.randn(4, 64).to(dtype))
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)
        tcjit.reset()
    assert_ptxas_accepts(dumped_ptx(d, 2))


# ---- advanced indexing: the result's strides ----------------------------------

INDEX_CASES = {
    # (source, index items): eager's aten::index is a TensorIterator over
    # the restrided source and the index tensors: size-1 dims take their
    # strides from them (fuzz seed 66371)
    "size1_after": (lambda: torch.randn(4, 1, 2).transpose(1, 2),
                    lambda s: (torch.arange(4),)),
    "size1_before": (lambda: torch.randn(1, 3, 5).transpose(0, 1),
                     lambda s: (slice(None), slice(None), torch.tensor([0, 4, 1, 1]))),
    "two_adjacent": (lambda: torch.randn(2, 1, 3, 4).permute(1, 0, 2, 3),
                     lambda s: (slice(None), torch.tensor([1, 0]),
                                torch.tensor([2, 2]))),
    "apart": (lambda: torch.randn(3, 1, 4, 1).transpose(1, 3),
              lambda s: (torch.tensor([[0, 2]]), slice(None),
                         torch.tensor([[1, 3]]))),
    "index_2d": (lambda: torch.randn(5, 1, 2).transpose(1, 2),
                 lambda s: (torch.tensor([[0], [4], [2]]),)),
}


@pytest.mark.parametrize("name", list(INDEX_CASES))
def test_index_result_strides(name):
    make, items = INDEX_CASES[name]
    x = make()
    ix = items(x)
    f = lambda x: (x[ix] / 2, x[ix])  # noqa: E731
    check_same(tcjit.compile(f)(x), f(x))
    tcjit.reset()


# ---- a view of a temporary stored across an extern ----------------------------

def _viewed_temp_t(x, y, w):
    v = (x + y).t()
    return v + F.linear(v * 2, w)


def _viewed_temp_layer_norm(x, y, w):
    # maxvit_t: reshape/permute of a residual sum, layer_norm, matmul, add
    v = (x + y).reshape(2, 3, 8).permute(1, 0, 2)
    return v + F.linear(F.layer_norm(v, (8,)), w)


@pytest.mark.parametrize("f, wsize", [(_viewed_temp_t, 6),
                                      (_viewed_temp_layer_norm, 8)])
def test_view_of_temporary_across_extern(f, wsize):
    # x + y takes x's transposed layout; the kernels after the matmul read
    # it (through the view) from a stored temporary
    x, y = torch.randn(8, 6).t(), torch.randn(6, 8)
    w = torch.randn(wsize, wsize)
    check_same(tcjit.compile(f)(x, y, w), f(x, y, w))
    tcjit.reset()


# ---- strides of size-1 dims of a generic extern's result ----------------------

EXTERN_SIZE1_OPERANDS = {
    # (sizes, strides) of dense operands whose size-1 strides are not the
    # contiguous ones
    "inner": ((3, 5, 1), (5, 1, 15)),    # fuzz seed 140757: a permuted (1, 3, 5)
    "middle": ((3, 1, 5), (5, 100, 1)),
    "outer": ((1, 3, 5), (1, 5, 1)),
}
EXTERN_SIZE1_OPS = {
    "sort": lambda x: x.sort(0).values,
    "argsort": lambda x: x.argsort(1),
    "flip": lambda x: x.flip(0),
    "renorm": lambda x: x.renorm(2, 0, 1.0),
}


@pytest.mark.parametrize("op", list(EXTERN_SIZE1_OPS))
@pytest.mark.parametrize("operand", list(EXTERN_SIZE1_OPERANDS))
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=cuda_only)])
def test_extern_size1_strides(op, operand, device):
    # the meta run lays out size-1 dims unlike torch's kernels (meta
    # renumbers sort's as if contiguous, its kernel keeps the operand's;
    # renorm the other way round); eager's unsqueeze and elementwise ops
    # carry them on, so the extern's layout takes the kernel's
    sizes, strides = EXTERN_SIZE1_OPERANDS[operand]
    x = torch.empty_strided(sizes, strides, device=device).normal_()
    g = EXTERN_SIZE1_OPS[op]
    f = lambda x: (g(x)[..., None], g(x) * 2, g(x).unsqueeze(0))  # noqa: E731
    check_same(tcjit.compile(f)(x), f(x))
    tcjit.reset()


# ---- float64 variance of equal values ------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda x: x.std((1, 0)),
    lambda x: x.var(0, correction=0),
    lambda x: F.layer_norm(x.permute(2, 0, 1), (3, 3)),
], ids=["std", "var", "layer_norm"])
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=cuda_only)])
def test_float64_variance_of_equal_values_is_zero(fn, device):
    # fuzz seed 213701: nine equal doubles (an expanded row): eager's
    # Welford gives 0, so std / std is NaN; a two-pass mean 9 * x / 9 can
    # be x's neighbour, leaving 1.2e-16
    x = torch.sin(torch.tensor([[[-1.1, 0.3, 2.7, -0.6]]], dtype=torch.float64,
                                device=device)).expand(3, 3, 4)
    f = lambda x: (fn(x), fn(x) / fn(x))  # noqa: E731
    check_same(tcjit.compile(f)(x), f(x))
    tcjit.reset()


@pytest.mark.parametrize("shape, dims", [((0, 1), (1, 0)), ((0, 3), 1), ((2, 0), 1)])
def test_float64_variance_over_empty_dims(shape, dims):
    # fuzz seed 140001: the shift above needs a first element; a crash
    # when the reduced dims hold none
    x = torch.randn(shape, dtype=torch.float64)
    f = lambda x: (x.var(dims), x.float().std(dims))  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_same(tcjit.compile(f)(x), f(x))
    tcjit.reset()


# ---- float -> integer casts keep eager's +0 (gccjit_emit.c emit_float_to_int)

CAST_VALUES = [-0.9, 0.9, -0.2, float("nan"), float("inf"), -float("inf"),
               3e9, -3e9, 1e20, -1e20, 2.0**31, -2.0**31, 2.0**63, -2.0**63,
               255.7, -129.3, 70000.5]


@pytest.mark.parametrize("n", [3, 37])
@pytest.mark.parametrize("after", ["none", "clamp"])
@pytest.mark.parametrize("idt", [torch.int64, torch.int32, torch.int16,
                                 torch.int8, torch.uint8])
@pytest.mark.parametrize("fdt", [torch.float32, torch.float64,
                                 torch.float16, torch.bfloat16])
def test_float_to_int_to_float_keeps_plus_zero(fdt, idt, after, n):
    """(float)(int)x is +0 for -1 < x < 0.  Under -fno-trapping-math GCC
    folds it into trunc(x), which is -0, whenever it can see through the
    out-of-range handling (jump threading did, with a clamp after the
    cast: fuzz seed 256825); 1/x then gives -inf where eager gives inf."""
    def f(a):
        r = torch.reciprocal(a.to(idt))
        return (r.clamp(min=-1) if after == "clamp" else r), a.to(idt)

    x = torch.tensor(CAST_VALUES * 3, dtype=torch.float64)[:n].to(fdt)
    run_both(f, x, expect_compiled=True)
