"""Reductions, softmax / layer_norm and views traced from Python, checked
against eager: values, dtypes, shapes, strides, and view aliasing."""
import pytest
import torch
import torch.nn.functional as F

import tcjit
from conftest import check_same

REDUCTIONS = {
    "sum_all": lambda x: x.sum(),
    "sum_dim_keep": lambda x: x.sum(1, keepdim=True),
    "sum_dims": lambda x: torch.sum(x, (0, 1)),
    "sum_dtype": lambda x: x.sum(-1, dtype=torch.float64),
    "mean": lambda x: x.mean(0),
    "amax": lambda x: x.amax(-1),
    "amin_keep": lambda x: torch.amin(x, 0, keepdim=True),
    "prod": lambda x: (x / 4 + 1).prod(1),
    "var": lambda x: x.var(1),
    "var_corr0": lambda x: x.var(0, correction=0),
    "std_all": lambda x: x.std(),
    "std_unbiased_false": lambda x: x.std(1, False),
    "logsumexp": lambda x: x.logsumexp(1),
    "norm": lambda x: x.norm(),
    "norm_dim": lambda x: x.norm(dim=1),
    "norm_p1": lambda x: x.norm(p=1, dim=0),
    "argmax": lambda x: x.argmax(1),
    "argmin_all": lambda x: x.argmin(),
    "any": lambda x: (x > 1).any(1),
    "all": lambda x: (x > -3).all(),
    "sum_of_relu_fused": lambda x: (x.relu() * 2).sum(1) + 1,
    "int_sum": lambda x: (x > 0).to(torch.int32).sum(0),
}

LAYOUTS = {
    "contiguous": lambda: torch.randn(16, 33),
    "transposed": lambda: torch.randn(33, 16).t(),
    "sliced": lambda: torch.randn(16, 66)[:, ::2],
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction(name, layout):
    fn = REDUCTIONS[name]
    x = LAYOUTS[layout]()
    cf = tcjit.compile(fn)
    for _ in range(2):
        check_same(cf(x), fn(x))
    assert tcjit.counters()["eager_fallbacks"] == 0


def test_reduction_of_empty_and_0d():
    def f(x):
        return x.sum(), x.sum(0), x.mean(1)

    for x in (torch.randn(0, 4), torch.randn(3, 0)):
        check_same(tcjit.compile(f)(x), f(x))
    s = torch.tensor(2.5)
    g = lambda x: (x.sum(), x.amax())  # noqa: E731
    check_same(tcjit.compile(g)(s), g(s))


@pytest.mark.parametrize("scale", [1e19, 1e30, 1e-30])
def test_var_std_of_large_values_like_eager(scale):
    """Eager accumulates float32 / half variances in double: the squared
    deviations of values near 1e30 (1e60) overflowed float32 in tcjit
    (std inf, eager 1e30); var itself is inf where the result is."""
    def f(x, h):
        return (x.std(), x.std(0), x.std(1, keepdim=True),
                x.var(1), x.var(), torch.var_mean(x, 0), h.std(1))
    torch.manual_seed(0)
    x = torch.randn(4, 8) * scale
    h = (torch.randn(4, 8) * 1e3).half()
    check_same(tcjit.compile(f)(x, h), f(x, h))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_and_log_softmax(dim):
    def f(x):
        return torch.softmax(x, dim), F.log_softmax(x * 2, dim=dim), \
            x.softmax(dim, dtype=torch.float64)

    x = torch.randn(24, 40) * 4
    check_same(tcjit.compile(f)(x), f(x))


def test_layer_norm_and_rms_norm():
    w, b = torch.randn(64), torch.randn(64)

    def f(x):
        return F.layer_norm(x, (64,), w, b), F.layer_norm(x, (64,)), \
            F.rms_norm(x, (64,), w, eps=1e-6)

    x = torch.randn(8, 5, 64)
    check_same(tcjit.compile(f)(x), f(x))


VIEWS = {
    "t": lambda x: x.t(),
    "transpose_add": lambda x: x.transpose(0, 1) + 1,
    "view": lambda x: x.view(4, 2, 33),
    "view_tuple_relu": lambda x: x.view((33, 8)).relu(),
    "reshape_flat": lambda x: x.reshape(-1),
    "unsqueeze_squeeze": lambda x: x.unsqueeze(0).squeeze(0) * 2,
    "permute_contiguous": lambda x: x.permute(1, 0).contiguous(),
    "flatten": lambda x: torch.flatten(x.unsqueeze(1), 1),
    "expand": lambda x: x.unsqueeze(0).expand(2, 8, 33),
    "contiguous_noop": lambda x: x.contiguous(),
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_views_alias_and_layout_like_eager(name):
    fn = VIEWS[name]
    x = torch.randn(8, 33)
    cf = tcjit.compile(fn)
    got, want = cf(x), fn(x)
    check_same(got, want)
    shares = want.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert (got.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()) \
        == shares
    if shares:          # a view: writes to x show through, as in eager
        x.add_(1)
        check_same(got, want)


CONTIGUOUS_BY_EAGERS_RULE = {
    # size-1 dims with any stride, empty tensors, a storage offset: eager's
    # is_contiguous() holds, so x.contiguous() is x itself
    "size1_odd_stride": lambda: torch.randn(3, 8)[::2][:1],
    "size1_transposed": lambda: torch.randn(5, 1).t(),
    "empty": lambda: torch.randn(4, 6)[:, :0],
    "offset": lambda: torch.randn(4, 6)[1:],
}


@pytest.mark.parametrize("name", list(CONTIGUOUS_BY_EAGERS_RULE))
def test_contiguous_of_an_eager_contiguous_input_is_the_input(name):
    x = CONTIGUOUS_BY_EAGERS_RULE[name]()
    fn = lambda x: x.contiguous()  # noqa: E731
    assert fn(x) is x
    got = tcjit.compile(fn)(x)
    assert got is x


def test_invalid_view_raises_like_eager():
    def f(x):
        return x.t().view(-1)

    x = torch.randn(4, 6)
    with pytest.raises(RuntimeError) as eager:
        f(x)
    with pytest.raises(RuntimeError) as got:
        tcjit.compile(f)(x)
    assert str(got.value) == str(eager.value)


def test_hand_written_attention_with_softmax():
    def attn(q, k, v, mask):
        s = (q @ k.transpose(-2, -1)) * (q.size(-1) ** -0.5)
        s = torch.where(mask, s, float("-inf"))
        return torch.softmax(s, -1) @ v

    q, k, v = (torch.randn(2, 16, 8) for _ in range(3))
    mask = torch.ones(16, 16, dtype=torch.bool).tril()
    check_same(tcjit.compile(attn)(q, k, v, mask), attn(q, k, v, mask))


EXPAND_CASES = [((2, 1, 1), (1, 2, 2, 5)), ((3,), (1, 2, 3)), ((5, 1), (1, 5, 4)),
                ((2, 1, 1), (1, 2, 1, 0)), ((), (1, 3)), ((2, 3), (1, 1, 2, 3))]


@pytest.mark.parametrize("shape,sizes", EXPAND_CASES)
@pytest.mark.parametrize("backend", ["auto", "eager"])
def test_expand_new_size1_dims_have_eagers_strides(shape, sizes, backend):
    # eager's new leading dim of size 1 is strided as if contiguous with
    # the next dim (0 for a 0-d tensor), a broadcast one 0
    fn = lambda x: x.expand(sizes)  # noqa: E731
    x = torch.randn(shape)
    check_same(tcjit.compile(fn, backend=backend)(x), fn(x))


def _chained(kind, depth):
    """depth row reductions, each reading the one before: a kernel of
    them all would make more passes over a row than KIR has phases."""
    def f(x):
        y = x
        for i in range(depth):
            if kind == "softmax":
                y = torch.softmax(y * 1.1, -1)
            elif kind == "norm":
                y = (y - y.mean(-1, keepdim=True)) / (y.std(-1, keepdim=True)
                                                       + 1)
            elif kind == "layer_norm":
                y = F.layer_norm(y, y.shape[-1:]) * 1.5
            else:
                y = (y - y.amax(-1, keepdim=True) if i % 2
                     else y / (y.sum(-1, keepdim=True).abs() + 1))
        return y
    return f


@pytest.mark.parametrize("depth,shape", [(4, (3, 7)), (5, (1, 5)),
                                         (7, (2, 1, 4))])
@pytest.mark.parametrize("kind", ["softmax", "norm", "layer_norm", "mix"])
def test_reduction_chains_longer_than_a_kernel_compile(kind, depth, shape):
    # the scheduler cuts the chain into kernels that fit (schedule.c
    # cut_phases); it gave up once ("more than 8 passes over a row",
    # "cannot schedule node"), and the frame ran eagerly
    f = _chained(kind, depth)
    x = torch.randn(*shape)
    got = tcjit.compile(f, fullgraph=True)(x)
    assert tcjit.counters()["eager_fallbacks"] == 0
    torch.testing.assert_close(got, f(x), atol=1e-4, rtol=1e-4,
                               equal_nan=True)
