"""A slice written into an input in place (graph/reinplace.c).

The tracer builds an input's new value after ``x[..., t:t+1] = k`` as
cat(x's elements before, k, x's elements after), and the runtime copies it
back into x.  For tcjit's own code generators the pass turns that into one
write_box node: k copied into x's memory, no cat, no copy back.  Each case
is checked against eager (test_mutation.check_mutation: results, the
inputs after the call, their ``_version``, identity and aliasing of the
results) and by the graph the compile logged: rewritten or left as it was.
"""
import pytest
import torch
import torch.nn as nn

import tcjit
from conftest import check_same, log_messages
from test_mutation import check_mutation


def graphs(caplog):
    return "\n".join(log_messages(caplog, "graph"))


def check(fn, make, tcjit_logs, reinplaced, **kw):
    caplog = tcjit_logs("graph")
    check_mutation(fn, make, **kw)
    msgs = log_messages(caplog, "graph")
    assert msgs, "no graph logged"
    text = msgs[0]              # (explain() compiles it again)
    if reinplaced:
        assert "write_box(" in text and "cat(" not in text, text
    else:
        assert "write_box(" not in text, text
    return text


def cache(*extra, shape=(1, 2, 16, 4), kshape=(1, 2, 1, 4), dtype=None):
    def make():
        kc = torch.randn(shape)
        k = torch.randn(kshape)
        if dtype is not None:
            k = k.to(dtype)
        return [kc, k, *extra], []
    return make


# ---- the decode step's write, at the start / middle / end -----------------

@pytest.mark.parametrize("t", [0, 3, 15])
def test_write_then_read_prefix(tcjit_logs, t):
    def f(kc, k, t):
        kc[:, :, t:t + 1] = k
        return kc[:, :, :t + 1].sum(2)
    check(f, cache(t), tcjit_logs, True)


def test_write_selected_row(tcjit_logs):
    # cache[:, :, t] = k: the value is unsqueezed into the box
    def f(kc, k):
        kc[:, :, 5] = k
        return kc[:, :, :6].sum(2)
    check(f, cache(kshape=(1, 2, 4)), tcjit_logs, True)


def test_write_whole_rows(tcjit_logs):
    def f(kc, k):
        kc[:, :, 4:7] = k
        return kc.mean()
    check(f, cache(kshape=(1, 2, 3, 4)), tcjit_logs, True)


def test_write_last_dim_box(tcjit_logs):
    # the box is a slice of the innermost dim: a strided copy
    def f(kc, k):
        kc[..., 1:3] = k
        return kc * 2
    check(f, cache(kshape=(1, 2, 16, 2)), tcjit_logs, True)


def test_box_over_two_dims(tcjit_logs):
    # a nested cat: the box is [0:1] in dim 0 and [5:6] in dim 2
    def f(kc, k):
        kc[0:1, :, 5:6] = k
        return kc.sum()
    check(f, cache(shape=(2, 2, 16, 4)), tcjit_logs, True)


def test_buffer_returned(tcjit_logs):
    def f(kc, k):
        kc[:, :, 2:3] = k
        return kc
    check(f, cache(), tcjit_logs, True)


def test_view_of_buffer_returned(tcjit_logs):
    def f(kc, k):
        kc[:, :, 2:3] = k
        return kc[:, :, :3], kc[:, :, 2:3] + 1
    check(f, cache(), tcjit_logs, True)


def test_two_buffers(tcjit_logs):
    def f(kc, k, vc, v):
        kc[:, :, 6:7] = k
        vc[:, :, 6:7] = v
        s = kc[:, :, :7] @ vc[:, :, :7].transpose(-1, -2)
        return s.softmax(-1)

    def make():
        return [torch.randn(1, 2, 16, 4), torch.randn(1, 2, 1, 4),
                torch.randn(1, 2, 16, 4), torch.randn(1, 2, 1, 4)], []
    text = check(f, make, tcjit_logs, True)
    assert text.count("write_box(") == 2, text


def test_computed_value(tcjit_logs):
    def f(kc, k):
        kc[:, :, 9:10] = torch.tanh(k * 2 + 1)
        return kc[:, :, :10].amax(2)
    check(f, cache(), tcjit_logs, True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64,
                                   torch.int32])
def test_value_of_another_dtype(tcjit_logs, dtype):
    # eager casts the value to the buffer's dtype
    def f(kc, k):
        kc[:, :, 3:4] = k
        return kc[:, :, :4].sum(2)
    check(f, cache(dtype=dtype), tcjit_logs, True)


def test_integer_buffer(tcjit_logs):
    def f(kc, k):
        kc[:, 1:2] = k
        return kc.sum(1)

    def make():
        return [torch.arange(24).view(4, 6), torch.tensor([[7], [8], [9],
                                                           [10]])], []
    check(f, make, tcjit_logs, True)


class Cache(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("kc", torch.zeros(1, 2, 16, 4))

    def forward(self, k, t):
        self.kc[:, :, t:t + 1] = k
        return self.kc[:, :, :t + 1].sum(2)


@pytest.mark.parametrize("opts", [{}, {"dynamic": True},
                                  {"options": {"freezing": True}},
                                  {"mode": "reduce-overhead"}],
                         ids=["default", "dynamic", "freezing",
                              "reduce-overhead"])
def test_module_buffer(tcjit_logs, opts):
    caplog = tcjit_logs("graph")
    ref, mod = Cache(), Cache()
    compiled = tcjit.compile(mod, **opts)
    for t in range(4):
        k = torch.randn(1, 2, 1, 4)
        expected = ref(k, t)
        actual = compiled(k, t)
        check_same(actual, expected)
        torch.testing.assert_close(mod.kc, ref.kc, rtol=0, atol=0)
        assert mod.kc._version == ref.kc._version
    text = graphs(caplog)
    assert "write_box(" in text and "cat(" not in text, text


# ---- left as it was: the old value is read elsewhere ---------------------

def test_read_before_write(tcjit_logs):
    # the old sum must not see the write
    def f(kc, k):
        old = kc.sum()
        kc[:, :, 3:4] = k
        return old, kc[:, :, :4].sum(2)
    check(f, cache(), tcjit_logs, False)


def test_old_row_read_after_write(tcjit_logs):
    # a kernel reading the old row could be scheduled after the write
    def f(kc, k):
        old = kc[:, :, 3:4] * 2
        kc[:, :, 3:4] = k
        return old + kc[:, :, 3:4]
    check(f, cache(), tcjit_logs, False)


def test_value_from_the_buffer(tcjit_logs):
    def f(kc, k):
        kc[:, :, 3:4] = kc[:, :, 2:3] * 2 + k
        return kc.sum(2)
    check(f, cache(), tcjit_logs, False)


def test_two_writes_of_one_buffer(tcjit_logs):
    def f(kc, k):
        kc[:, :, 3:4] = k
        kc[:, :, 5:6] = k * 3
        return kc.sum(2)
    check(f, cache(), tcjit_logs, False)


def test_custom_backend_keeps_cat(tcjit_logs):
    def f(kc, k):
        kc[:, :, 3:4] = k
        return kc.sum(2)
    check(f, cache(), tcjit_logs, False, backend="eager")


def test_unrelated_op_that_may_raise(tcjit_logs):
    # an index out of range raises before the write in eager: the buffer
    # stays as it was; the write is not moved before the index
    def f(kc, k, w, i):
        y = w[i]
        kc[:, :, 3:4] = k
        return y, kc.sum(2)

    def make(i):
        def m():
            return [torch.randn(1, 2, 16, 4), torch.randn(1, 2, 1, 4),
                    torch.randn(5, 3), torch.tensor(i)], []
        return m
    check(f, make([1, 4]), tcjit_logs, False)
    args, _ = make([1, 9])()
    before = args[0].clone()
    with pytest.raises(IndexError):
        tcjit.compile(f)(*args)
    torch.testing.assert_close(args[0], before, rtol=0, atol=0)


# ---- where eager and the pass disagree on nothing, under grad --------------

def test_grad_mode_buffer_without_grad(tcjit_logs):
    # grad mode on, nothing requires grad: the graph records no autograd
    def f(kc, k):
        kc[:, :, 3:4] = k
        return kc[:, :, :4].sum(2)
    with torch.enable_grad():
        check(f, cache(), tcjit_logs, True)
