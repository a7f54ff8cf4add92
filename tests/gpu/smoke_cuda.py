import torch, tcjit, time
tcjit.set_logs("graph_breaks")
dev = "cuda"
def f(x, y):
    return (torch.sin(x) + torch.cos(y)).relu() * 2 + 1
g = tcjit.compile(f)
for n in [1, 1000, 1 << 24]:
    x, y = torch.randn(n, device=dev), torch.randn(n, device=dev)
    t = time.perf_counter(); r = g(x, y); torch.cuda.synchronize(); t = time.perf_counter() - t
    torch.testing.assert_close(r, f(x, y)); print("ok", n, "first" if n == 1 else "", t)
print(tcjit.counters())
def h(x, y, a: float):
    z = torch.sin(x) + y.cos() * a
    return torch.relu(z).exp() - 1, z.abs(), (x > 0) & (y < 0.5), x.to(torch.float16 if False else torch.float64)
hh = tcjit.compile(h)
x, y = torch.randn(1000, 64, device=dev), torch.randn(64, device=dev)
for a, b in zip(hh(x, y, 0.5), h(x, y, 0.5)): torch.testing.assert_close(a, b); assert a.stride() == b.stride()
xt = torch.randn(64, 1000, device=dev).t()
for a, b in zip(hh(xt, y, 0.5), h(xt, y, 0.5)): torch.testing.assert_close(a, b); assert a.stride() == b.stride()
print("multi ok", tcjit.counters())
# stream interleave
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    x = torch.randn(1 << 22, device=dev); y = torch.randn(1 << 22, device=dev)
    r = g(x, y); e = f(x, y)
s.synchronize(); torch.testing.assert_close(r, e); print("stream ok")
import timeit
x1 = torch.randn(1, device=dev); one = tcjit.compile(lambda x: x + 1); one(x1); torch.cuda.synchronize()
print("x+1 tcjit us", min(timeit.repeat(lambda: one(x1), number=2000, repeat=5))/2000*1e6)
print("x+1 eager us", min(timeit.repeat(lambda: x1 + 1, number=2000, repeat=5))/2000*1e6)
x, y = torch.randn(1 << 24, device=dev), torch.randn(1 << 24, device=dev)
for name, fn in [("eager", f), ("tcjit", g)]:
    fn(x, y); torch.cuda.synchronize()
    st = torch.cuda.Event(enable_timing=True); en = torch.cuda.Event(enable_timing=True)
    st.record()
    for _ in range(50): fn(x, y)
    en.record(); torch.cuda.synchronize()
    ms = st.elapsed_time(en) / 50
    print(name, "16M chain us", ms * 1e3, "GB/s", 3 * 4 * (1 << 24) / ms / 1e6)
