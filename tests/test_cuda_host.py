"""CPU tensors inside a graph on a CUDA device (graph.h TC_PLACE_HOST).

Eager keeps CPU tensors on the CPU beside CUDA ones and lets a 0-d one join
a CUDA op as a scalar: an optimizer's step counter (Adam's default on CUDA),
torch.tensor(1.0) - mask, torch.rand([]) for layer drop.  tcjit runs such a
graph's host part on the CPU first, then its device part (place.c,
hostsplit.c).  Every test compares with eager: values, devices, the CPU
tensors written in place, the CPU random stream; and counts graph breaks.

CUDA only (the split pass itself is tested without a GPU in
tests/c/test_graph.c test_split_host).
"""
import copy

import pytest
import torch

import tcjit

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device")


def one_graph(fn, *args):
    ex = tcjit.explain(fn)(*args)
    assert ex.graph_break_count == 0, ex.break_reasons
    assert ex.graph_count == 1, ex
    return ex


def test_step_counter_written_on_the_cpu():
    def f(x, step):
        step += 1
        return x * (1 - 0.9 ** step)

    x = torch.randn(1000, device="cuda")
    s_eager, s_comp = torch.tensor(0.0), torch.tensor(0.0)
    cf = tcjit.compile(f)
    for _ in range(3):
        want = f(x, s_eager)
        got = cf(x, s_comp)
        torch.testing.assert_close(got, want)
        assert got.device == want.device
    assert s_comp.device.type == "cpu" and s_comp.item() == 3.0
    one_graph(f, x, torch.tensor(0.0))


def test_cpu_constant_minus_cuda_mask():
    def f(mask, x):
        inv = torch.tensor(1.0) - mask
        return x.masked_fill(inv.bool(), -1e4) + inv

    mask = (torch.rand(4, 16, device="cuda") > 0.5).float()
    x = torch.randn(4, 16, device="cuda")
    torch.testing.assert_close(tcjit.compile(f)(mask, x), f(mask, x))
    one_graph(f, mask, x)


def test_cpu_random_stream_kept():
    def f(x):
        r = torch.rand([])       # the CPU generator, as in eager
        return x * r, r

    x = torch.randn(64, device="cuda")
    cf = tcjit.compile(f)
    for seed in range(3):
        torch.manual_seed(seed)
        want = f(x)
        torch.manual_seed(seed)
        got = cf(x)
        torch.testing.assert_close(got, want)
        assert got[1].device.type == "cpu"
    one_graph(f, x)


def test_device_queries_of_a_cpu_value():
    def f(x, s):
        t = s * 2
        return x + t, t.device.type, t.is_cuda, x.device.type

    x, s = torch.randn(8, device="cuda"), torch.tensor(3.0)
    got, want = tcjit.compile(f)(x, s), f(x, s)
    assert got[1:] == want[1:] == ("cpu", False, "cuda")
    torch.testing.assert_close(got[0], want[0])


def test_explicit_copy_to_the_device():
    def f(x):
        idx = torch.arange(x.shape[0]).to(x.device)
        return x * idx

    x = torch.randn(16, device="cuda")
    torch.testing.assert_close(tcjit.compile(f)(x), f(x))


def test_cpu_tensor_not_0d_raises_as_eager():
    def f(x, m):
        return x + m

    x, m = torch.randn(4, device="cuda"), torch.randn(4)
    with pytest.raises(RuntimeError) as want:
        f(x, m)
    with pytest.raises(RuntimeError) as got:
        tcjit.compile(f)(x, m)
    assert "Expected all tensors to be on the same device" in str(want.value)
    assert type(got.value) is type(want.value)


@pytest.mark.parametrize("name, kw", [
    ("Adam", {}), ("AdamW", {"weight_decay": 0.1}), ("Adam", {"foreach": False}),
    ("AdamW", {"foreach": False, "amsgrad": True}),
])
def test_cuda_optimizer_with_cpu_steps(name, kw):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(),
                                torch.nn.Linear(64, 8)).cuda()
    twin = copy.deepcopy(model)
    opt = getattr(torch.optim, name)(model.parameters(), lr=1e-2, **kw)
    opt2 = getattr(torch.optim, name)(twin.parameters(), lr=1e-2, **kw)
    step = tcjit.compile(opt2.step)
    for i in range(4):
        x = torch.randn(16, 32, device="cuda")
        for m in (model, twin):
            m.zero_grad()
            m(x).square().mean().backward()
        opt.step()
        step()
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-5, atol=1e-6)
        s, t = opt.state[p], opt2.state[q]
        assert t["step"].device == s["step"].device
        assert t["step"].item() == s["step"].item() == 4
        torch.testing.assert_close(t["exp_avg"], s["exp_avg"])
    ex = tcjit.explain(opt2.step)()
    assert ex.graph_break_count == 0, ex.break_reasons


def test_cpu_mask_built_then_moved():
    # GraphNet's long-t5 / Swin v2 (FX-printed): a mask made on the CPU,
    # written in place, then .to(device) and mixed with CUDA tensors; the
    # meta run says .to() returns its input, which it does not across devices
    def f(x, ids):
        block_ends = (torch.arange(12) % 16).__eq__(15)
        ends = block_ends.to(torch.device(type="cuda", index=0))
        img = torch.zeros((1, 4, 4, 1), dtype=torch.float32)
        img[:, 0:2, :, :] = 1.0
        img[:, 2:, 2:, :] = 2.0
        m = img.view(-1, 16)
        mask = (m.unsqueeze(1) - m.unsqueeze(2)).masked_fill(
            (m.unsqueeze(1) - m.unsqueeze(2)) != 0, -100.0)
        mask = mask.to(torch.device(type="cuda", index=0))
        both = torch.logical_and(ends, ids >= 0)
        return torch.cat([x + mask, x], -1), both, block_ends

    x = torch.randn(1, 16, 16, device="cuda")
    ids = torch.arange(12, device="cuda") - 3
    got, want = tcjit.compile(f)(x, ids), f(x, ids)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
        assert g.device == w.device
    one_graph(f, x, ids)


def test_cpu_copy_of_a_cuda_tensor_breaks():
    # x.cpu() inside the graph would be a device sync: eager runs it
    def f(x):
        return x.cpu() + 1

    x = torch.randn(4, device="cuda")
    got, want = tcjit.compile(f)(x), f(x)
    torch.testing.assert_close(got, want)
    assert got.device.type == "cpu"
