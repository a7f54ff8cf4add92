"""The Python API: compile forms, backends, counters, enable/disable, SKIP,
multi-output results, autograd fallback, fullgraph, and leaks."""
import collections
import functools
import gc
import os
import sys
import threading
import tracemalloc
import weakref

import pytest
import torch

import tcjit
from conftest import check_same, counters, run_both


# ---- the issue example -----------------------------------------------------------

def issue_f(x, y, alpha: float):
    z = torch.sin(x) + y.cos() * alpha
    return torch.relu(z).exp() - 1, z.abs()


def test_issue_example():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(1000, 64, generator=g), torch.randn(64, generator=g)
    f = tcjit.compile(issue_f)
    out = f(x, y, 0.5)
    check_same(out, issue_f(x, y, 0.5))
    c1 = counters()
    assert c1["frames_compiled"] == 1
    assert c1["graphs"] == 1
    assert c1["kernels_compiled"] >= 1
    x2, y2 = torch.randn(1000, 64, generator=g), torch.randn(64, generator=g)
    out2 = f(x2, y2, 0.5)
    check_same(out2, issue_f(x2, y2, 0.5))
    c2 = counters()
    assert c2["cache_hits"] == c1["cache_hits"] + 1
    assert c2["frames_compiled"] == 1
    assert c2["kernels_compiled"] == c1["kernels_compiled"]
    # the first results were not overwritten by the second call
    check_same(out, issue_f(x, y, 0.5))


# ---- compile forms ---------------------------------------------------------------------

def test_compile_forms():
    def f(x):
        """doc of f"""
        return x * 2

    x = torch.randn(3)
    cf = tcjit.compile(f)
    assert cf.__name__ == "f" and cf.__doc__ == "doc of f"
    assert cf.__wrapped__ is f
    check_same(cf(x), f(x))

    @tcjit.compile
    def g(x):
        return x - 2
    check_same(g(x), x - 2)

    @tcjit.compile(backend="eager")
    def h(x):
        return x / 2
    check_same(h(x), x / 2)

    @tcjit.compile(fullgraph=True)
    def k(x):
        return x + 7
    check_same(k(x), x + 7)
    assert counters()["frames_compiled"] == 4


def test_compile_keyword_call_and_defaults():
    def f(x, y=None, *, alpha=1.5):
        return x * alpha + (y if y is not None else 0)

    cf = tcjit.compile(f)
    x, y = torch.randn(3), torch.randn(3)
    check_same(cf(x), f(x))
    check_same(cf(x, y), f(x, y))
    check_same(cf(x, y=y, alpha=2.0), f(x, y=y, alpha=2.0))
    check_same(cf(y=y, x=x), f(y=y, x=x))
    with pytest.raises(TypeError):
        cf(x, y, 3.0)         # alpha is keyword-only
    with pytest.raises(TypeError):
        cf()


def test_bad_backend():
    with pytest.raises(ValueError):
        tcjit.compile(lambda x: x, backend="inductor")
    with pytest.raises(TypeError):
        tcjit.compile(lambda x: x, backend=42)


# ---- backends -----------------------------------------------------------------------

def test_eager_backend():
    def f(x, y):
        return torch.sigmoid(x) * y - y.abs()

    x, y = torch.randn(4, 3), torch.randn(3)
    run_both(f, x, y, backend="eager")
    c = counters()
    assert c["frames_compiled"] == 1 and c["graphs"] == 1
    assert c["kernels_compiled"] == 0
    assert c["cache_hits"] == 1


def test_eager_backend_transposed_and_promotion():
    def f(x, n):
        return (x * n + 1).float() / 3

    run_both(f, torch.arange(12, dtype=torch.int32).reshape(3, 4).t(), 2,
             backend="eager")


def test_custom_backend_receives_graph():
    seen = []
    calls = collections.Counter()

    def backend(graph, example_inputs):
        seen.append((graph, example_inputs))

        def run(*args):
            calls["run"] += 1
            return graph(*args)
        return run

    def f(x, y):
        return torch.sin(x) + y * 2

    cf = tcjit.compile(f, backend=backend)
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    check_same(cf(x, y), f(x, y))
    assert len(seen) == 1
    graph, ex = seen[0]
    assert isinstance(graph, tcjit.Graph)
    assert isinstance(ex, list) and len(ex) == 2
    assert ex[0] is x and ex[1] is y
    assert collections.Counter(graph.ops()) == collections.Counter(["sin", "mul", "add"])
    assert graph.op_count == 3
    assert len(graph.inputs) == 2 and len(graph.outputs) == 1
    assert all(n.shape == torch.Size([4, 5]) for n in graph.inputs)
    assert graph.outputs[0].dtype == torch.float32
    text = str(graph)
    assert "sin" in text and "add" in text
    out = graph(x, y)
    assert isinstance(out, tuple) and len(out) == 1
    torch.testing.assert_close(out[0], f(x, y))
    # second call: same graph, backend not called again, compiled fn is
    x2 = torch.randn(4, 5)
    check_same(cf(x2, y), f(x2, y))
    assert len(seen) == 1
    assert calls["run"] == 2


def test_custom_backend_result_is_used():
    """The callable the backend returns is what runs (not tcjit's kernels)."""
    def backend(graph, example_inputs):
        return lambda *args: tuple(o * 0 for o in graph(*args))

    def f(x):
        return x + 1

    cf = tcjit.compile(f, backend=backend)
    out = cf(torch.ones(3))
    torch.testing.assert_close(out, torch.zeros(3))


def test_custom_backend_single_tensor_return_and_multi_output():
    graphs = []

    def backend(graph, example_inputs):
        graphs.append(graph)
        if len(graph.outputs) == 1:
            return lambda *args: graph(*args)[0]   # a bare tensor is fine
        return graph

    def f(x):
        return x.exp()

    def g(x, y):
        return x + y, x * y, (x - y).abs()

    x, y = torch.randn(3), torch.randn(3)
    check_same(tcjit.compile(f, backend=backend)(x), f(x))
    check_same(tcjit.compile(g, backend=backend)(x, y), g(x, y))
    assert len(graphs) == 2
    assert len(graphs[1].outputs) == 3


def test_custom_backend_non_callable_result():
    def f(x):
        return x * 3

    cf = tcjit.compile(f, backend=lambda graph, ex: 123)
    with pytest.raises(TypeError):
        cf(torch.randn(2))


def test_custom_backend_graph_with_scalars_and_casts():
    got = []

    def backend(graph, example_inputs):
        got.append(graph)
        return graph

    def f(x, alpha):
        return (x * alpha).to(torch.float64) + x.int()

    cf = tcjit.compile(f, backend=backend)
    x = torch.randn(3, 2)
    check_same(cf(x, 0.75), f(x, 0.75))
    ops = got[0].ops()
    assert "mul" in ops and "add" in ops and "to" in ops
    assert len(got[0].inputs) == 1


# ---- counters, reset --------------------------------------------------------------------

COUNTER_KEYS = {"frames_compiled", "cache_hits", "cache_misses", "recompiles",
                "graphs", "kernels_compiled", "eager_fallbacks", "frames_skipped"}


def test_counters_and_reset():
    c = counters()
    assert COUNTER_KEYS <= set(c)
    assert all(isinstance(c[k], int) and c[k] == 0 for k in COUNTER_KEYS)

    def f(x):
        return x * 4

    cf = tcjit.compile(f)
    cf(torch.randn(2))
    cf(torch.randn(2))
    c = counters()
    assert c["frames_compiled"] == 1 and c["cache_hits"] == 1
    assert c["cache_misses"] == 1
    # counters() is a snapshot
    c["frames_compiled"] = 99
    assert counters()["frames_compiled"] == 1
    tcjit.reset()
    assert all(counters()[k] == 0 for k in COUNTER_KEYS)
    x = torch.randn(2)
    check_same(cf(x), f(x))
    assert counters()["frames_compiled"] == 1   # compiled again after reset


# ---- enable / disable / skip ---------------------------------------------------------------

def test_enable_disable():
    def f(x):
        return x.sin() + 1

    def g(x):
        return x.cos() + 1

    x = torch.randn(3)
    assert not tcjit.is_enabled()
    tcjit.enable()
    try:
        assert tcjit.is_enabled()
        out = f(x)
        n = counters()["frames_compiled"]
    finally:
        tcjit.disable()
    check_same(out, torch.sin(x) + 1)
    assert n >= 1
    assert not tcjit.is_enabled()
    out = g(x)
    check_same(out, torch.cos(x) + 1)
    assert counters()["frames_compiled"] == n
    # compile() wrappers keep working while disabled
    cg = tcjit.compile(g)
    check_same(cg(x), g(x))
    assert counters()["frames_compiled"] == n + 1


def test_enable_caches_and_hits():
    def f(x, y):
        return x * y - 1

    x, y = torch.randn(5), torch.randn(5)
    tcjit.enable()
    try:
        a = f(x, y)
        b = f(y, x)
        c = counters()
    finally:
        tcjit.disable()
    check_same(a, x * y - 1)
    check_same(b, y * x - 1)
    assert c["frames_compiled"] >= 1
    assert c["cache_hits"] >= 1


def test_skip_non_tensor_frames():
    def ints_only(a, b):
        return a * b + 1

    tcjit.enable()
    try:
        r1 = ints_only(3, 4)
        r2 = ints_only(5, 6)
        c = counters()
    finally:
        tcjit.disable()
    assert (r1, r2) == (13, 31)
    assert c["frames_skipped"] >= 1
    assert c["graphs"] == 0
    assert c["frames_compiled"] == 0


def test_skip_non_tensor_frame_compiled_wrapper():
    def ints_only(a, b):
        return a - b

    cf = tcjit.compile(ints_only)
    assert cf(10, 3) == 7
    assert cf(1, 3) == -2
    c = counters()
    assert c["graphs"] == 0
    assert c["frames_skipped"] >= 1


# ---- outputs ----------------------------------------------------------------------------------

def test_tuple_list_nested_outputs():
    def f_tuple(x):
        return x + 1, x * 2

    def f_list(x):
        return [x + 1, x * 2]

    def f_nested(x, y):
        return (x + y, (x * y, [x - y, y.abs()]))

    x, y = torch.randn(3, 2), torch.randn(3, 2)
    run_both(f_tuple, x)
    run_both(f_list, x)
    run_both(f_nested, x, y)


def test_same_tensor_returned_twice_is_same_object():
    def f(x):
        z = x.sin() * 2
        return z, z

    cf = tcjit.compile(f)
    x = torch.randn(4)
    for _ in range(2):
        a, b = cf(x)
        assert a is b
        check_same((a, b), f(x))


def test_return_input_unchanged_is_same_object():
    def f(x):
        return x

    def g(x, y):
        return x + y, y

    cf, cg = tcjit.compile(f), tcjit.compile(g)
    x, y = torch.randn(3), torch.randn(3)
    for _ in range(2):
        assert cf(x) is x
        s, yy = cg(x, y)
        assert yy is y
        check_same(s, x + y)


def test_return_constants_mixed_with_tensors():
    def f(x):
        return x * 2, 3, "s", None, 2.5, True, (1, "a")

    run_both(f, torch.randn(3))


def test_return_dict():
    def f(x):
        return {"a": x + 1, "b": x.exp()}

    run_both(f, torch.randn(3))


def test_outputs_are_fresh_tensors():
    """Each call returns new storage: results of earlier calls are not
    overwritten and do not alias inputs."""
    def f(x):
        return x * 1, x + 0

    cf = tcjit.compile(f)
    x1, x2 = torch.randn(50), torch.randn(50)
    a1, b1 = cf(x1)
    a2, b2 = cf(x2)
    ptrs = {t.data_ptr() for t in (a1, b1, a2, b2, x1, x2)}
    assert len(ptrs) == 6
    check_same((a1, b1), f(x1))
    check_same((a2, b2), f(x2))
    a1.add_(100)
    check_same(cf(x1), f(x1))
    assert torch.equal(x1 * 1 + 100, a1)


def test_output_of_cast_to_same_dtype_aliases_like_eager():
    """eager's x.float() on a float tensor returns x itself."""
    def f(x):
        return x.float()

    x = torch.randn(3)
    assert f(x) is x
    cf = tcjit.compile(f)
    assert cf(x) is x


def test_output_can_be_freed():
    def f(x):
        return x.cos()

    cf = tcjit.compile(f)
    x = torch.randn(10)
    out = cf(x)
    ref = weakref.ref(out)
    del out
    gc.collect()
    assert ref() is None


# ---- autograd --------------------------------------------------------------------------------

def test_requires_grad_compiles_with_same_grads():
    def f(x, y):
        z = torch.sin(x) * y + x.exp()
        return z.relu(), (x * y).sigmoid()

    cf = tcjit.compile(f)
    g = torch.Generator().manual_seed(3)
    x0, y0 = torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g)
    xa, ya = x0.clone().requires_grad_(), y0.clone().requires_grad_()
    xb, yb = x0.clone().requires_grad_(), y0.clone().requires_grad_()
    before = counters()["eager_fallbacks"]
    out = cf(xa, ya)
    ref = f(xb, yb)
    check_same(out, ref)
    # an autograd node (test_training.py), not an eager run
    assert counters()["eager_fallbacks"] == before
    (out[0].sum() + out[1].sum()).backward()
    (ref[0].sum() + ref[1].sum()).backward()
    torch.testing.assert_close(xa.grad, xb.grad)
    torch.testing.assert_close(ya.grad, yb.grad)


def test_requires_grad_only_one_input():
    def f(x, w):
        return (x * w).tanh()

    cf = tcjit.compile(f)
    x = torch.randn(5)
    w1, w2 = torch.randn(5, requires_grad=True), None
    w2 = w1.detach().clone().requires_grad_()
    out, ref = cf(x, w1), f(x, w2)
    check_same(out, ref)
    out.sum().backward()
    ref.sum().backward()
    torch.testing.assert_close(w1.grad, w2.grad)


# ---- fullgraph -------------------------------------------------------------------------------

def test_fullgraph_unsupported_print(capsys):
    def f(x):
        y = x + 1
        print("hello")
        return y * 2

    assert issubclass(tcjit.Unsupported, RuntimeError)
    cf = tcjit.compile(f, fullgraph=True)
    with pytest.raises(tcjit.Unsupported) as info:
        cf(torch.randn(3))
    assert "print" in str(info.value)
    # not fullgraph: works
    capsys.readouterr()
    x = torch.randn(3)
    check_same(tcjit.compile(f)(x), x.add(1).mul(2))


def test_fullgraph_unsupported_item():
    def f(x):
        return x * x.item()

    cf = tcjit.compile(f, fullgraph=True)
    with pytest.raises(tcjit.Unsupported):
        cf(torch.tensor([3.0]))


def test_fullgraph_data_dependent_branch():
    def f(x):
        if x > 0:
            return x * 2
        return x - 1

    cf = tcjit.compile(f, fullgraph=True)
    with pytest.raises(tcjit.Unsupported):
        cf(torch.tensor(3.0))


def test_fullgraph_supported_code_compiles():
    def f(x, y):
        return torch.where(x > y, x, y).exp(), x.shape[0] * y

    cf = tcjit.compile(f, fullgraph=True)
    x, y = torch.randn(3), torch.randn(3)
    check_same(cf(x, y), f(x, y))
    check_same(cf(y, x), f(y, x))
    assert counters()["frames_compiled"] == 1


# ---- leaks -------------------------------------------------------------------------------------

def _rss_bytes():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096


def _leak_check(fn, args, n=10_000):
    for _ in range(200):
        fn(*args)
    gc.collect()
    refs = [sys.getrefcount(a) for a in args]
    tracemalloc.start()
    snap0 = tracemalloc.take_snapshot()
    rss0 = _rss_bytes()
    for _ in range(n):
        fn(*args)
    gc.collect()
    rss1 = _rss_bytes()
    snap1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    assert [sys.getrefcount(a) for a in args] == refs
    growth = sum(s.size_diff for s in snap1.compare_to(snap0, "filename"))
    assert growth < 1 << 20, f"python heap grew {growth} bytes"
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):
        # (AddressSanitizer keeps freed memory in quarantine: RSS grows)
        assert rss1 - rss0 < 5 << 20, f"RSS grew {(rss1 - rss0) >> 10} KiB"


def test_no_leaks_compiled_hit():
    def f(x, y, alpha):
        return (x.sin() + y) * alpha, x.relu()

    cf = tcjit.compile(f)
    x, y = torch.randn(64), torch.randn(64)
    _leak_check(cf, (x, y, 0.5))
    assert counters()["frames_compiled"] == 1


def test_no_leaks_graph_break_and_fallback():
    def f(x):
        y = x * 2
        if y.sum() > 1e9:       # data-dependent: graph break
            return y
        return y + 1

    cf = tcjit.compile(f)
    x = torch.randn(16)
    _leak_check(cf, (x,), n=3000)

    def g(x):
        return x.tanh()

    cg = tcjit.compile(g)
    xr = torch.randn(8, requires_grad=True)    # the autograd node path
    _leak_check(cg, (xr,), n=3000)


def test_no_leaks_exception_path():
    def f(x, y):
        return x + y

    cf = tcjit.compile(f)
    x, y = torch.randn(4), torch.randn(3)
    refs = (sys.getrefcount(x), sys.getrefcount(y))
    for _ in range(500):
        with pytest.raises(RuntimeError):
            cf(x, y)
    gc.collect()
    assert (sys.getrefcount(x), sys.getrefcount(y)) == refs


# ---- concurrency ---------------------------------------------------------------------------------

def _run_in_threads(work, n):
    """work(i) in n threads at once; re-raises the first failure."""
    import threading
    errors = []

    def worker(i):
        try:
            work(i)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True)
               for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "deadlock: threads still running"
    assert not errors, errors[0]


def test_concurrent_calls_from_python_threads():
    def f(x, y):
        return (x.sin() * y + 1).relu(), x - y

    cf = tcjit.compile(f)
    g = torch.Generator().manual_seed(7)
    inputs = [(torch.randn(50_000, generator=g), torch.randn(50_000, generator=g))
              for _ in range(4)]
    check_same(cf(*inputs[0]), f(*inputs[0]))     # compile once up front

    def work(i):
        for _ in range(30):
            check_same(cf(*inputs[i]), f(*inputs[i]))

    _run_in_threads(work, 4)
    assert counters()["frames_compiled"] == 1


def _mlp_with_intermediates(w1, b1, w2, b2):
    """Temporaries and extern operands: the buffers the CPU arena holds
    (arena.h); the kernels release the GIL, so threads overlap."""
    def f(x):
        h = torch.nn.functional.gelu(x @ w1.t() + b1, approximate="tanh")
        y = (h * 2) @ w2.t() + b2
        return x + y, h.sum(-1)
    return f


def test_arena_buffers_under_concurrent_calls():
    g = torch.Generator().manual_seed(3)
    w1, b1 = torch.randn(256, 64, generator=g), torch.randn(256, generator=g)
    w2, b2 = torch.randn(64, 256, generator=g), torch.randn(64, generator=g)
    f = _mlp_with_intermediates(w1, b1, w2, b2)
    cf = tcjit.compile(f)
    inputs = [torch.randn(512, 64, generator=g) for _ in range(4)]
    expected = [f(x) for x in inputs]

    def work(i):
        for _ in range(20):
            for a, e in zip(cf(inputs[i]), expected[i]):
                torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-4)

    _run_in_threads(work, 4)


def test_results_do_not_alias_the_arena():
    """What a call returns is fresh memory: a later call (which reuses the
    arena's intermediates) leaves earlier results alone."""
    g = torch.Generator().manual_seed(4)
    w1, b1 = torch.randn(128, 32, generator=g), torch.randn(128, generator=g)
    w2, b2 = torch.randn(32, 128, generator=g), torch.randn(32, generator=g)
    f = _mlp_with_intermediates(w1, b1, w2, b2)
    cf = tcjit.compile(f)
    x1, x2 = torch.randn(64, 32, generator=g), torch.randn(64, 32, generator=g)
    r1 = cf(x1)
    saved = [t.clone() for t in r1]
    cf(x2)
    r3 = cf(x2)
    for a, b in zip(r1, saved):
        assert torch.equal(a, b)
    for a, e in zip(r3, f(x2)):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-4)
    assert r3[0].data_ptr() != r1[0].data_ptr()


# ---- backend errors, fork ----------------------------------------------------------------------

def test_backend_compile_error_propagates():
    def bad_backend(graph, example_inputs):
        raise ValueError("backend boom")

    cf = tcjit.compile(lambda x: x + 1, backend=bad_backend)
    x = torch.randn(3)
    with pytest.raises(ValueError, match="backend boom"):
        cf(x)


def test_backend_runtime_error_propagates_without_leaks():
    def backend(graph, example_inputs):
        def run(*args):
            raise KeyError("run boom")
        return run

    cf = tcjit.compile(lambda x: x * 3, backend=backend)
    x = torch.randn(3)
    rc = sys.getrefcount(x)
    for _ in range(3):
        with pytest.raises(KeyError):
            cf(x)
    assert sys.getrefcount(x) == rc


def test_backend_wrong_output_count_is_an_error():
    cf = tcjit.compile(lambda x: x * 3, backend=lambda g, ex: (lambda *a: (a[0], a[0])))
    with pytest.raises(RuntimeError):
        cf(torch.randn(3))


FORK_SCRIPT = r"""
import hashlib, os, sys, time, torch, tcjit
f = tcjit.compile(lambda x: x.sin() * 2 + 1)
x = torch.randn(1_000_000, generator=torch.Generator().manual_seed(0))
digest = hashlib.sha256(f(x).numpy().tobytes()).hexdigest()   # pool started
pid = os.fork()
if pid == 0:
    # only tcjit work in the child (eager torch may itself hang after fork)
    ok = hashlib.sha256(f(x).numpy().tobytes()).hexdigest() == digest
    g = tcjit.compile(lambda x: x.cos() + 2)
    y = g(x)
    os._exit(0 if ok and y.shape == x.shape else 3)
t0 = time.time()
while time.time() - t0 < 60:
    r, status = os.waitpid(pid, os.WNOHANG)
    if r:
        sys.exit(os.waitstatus_to_exitcode(status))
    time.sleep(0.05)
os.kill(pid, 9)
print("child hung after fork", file=sys.stderr)
sys.exit(4)
"""


def test_thread_pool_after_fork(tmp_path):
    import os
    import subprocess
    script = tmp_path / "fork_script.py"
    script.write_text(FORK_SCRIPT)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "python") + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def _opaque(fn):
    # a decorator whose wrapper tcjit cannot trace (it reads a frame)
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        sys._getframe()
        return fn(*args, **kwargs)
    return wrapper


class _WrappedForward(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    @_opaque
    def forward(self, x):
        return (self.lin(x).relu() * 2).sum(-1)


def test_compile_compiles_what_the_function_calls():
    """As with torch.compile, frames that a compiled function calls are
    compiled too: a model whose forward sits behind an untraceable
    decorator still gets its forward compiled."""
    m = _WrappedForward()
    x = torch.randn(4, 8)
    with torch.no_grad():
        expected = m(x)
        cm = tcjit.compile(m)
        for _ in range(2):
            check_same(cm(x), expected)
    c = tcjit.counters()
    assert c["graphs"] >= 1 and c["frames_compiled"] >= 1, c


def test_compile_scope_is_per_thread():
    """A plain function that another thread runs while a compiled call is
    in flight is not compiled."""
    started, release = threading.Event(), threading.Event()

    def plain(x):
        return x.cos() + 1

    def slow(x):
        started.set()
        release.wait(10)   # a step: the compiled call stays in flight
        return x.sin()

    cf = tcjit.compile(slow)
    t = threading.Thread(target=cf, args=(torch.randn(3),))
    t.start()
    started.wait(10)
    before = tcjit.counters()["cache_misses"]
    check_same(plain(torch.ones(3)), torch.ones(3).cos() + 1)
    after = tcjit.counters()["cache_misses"]
    release.set()
    t.join()
    assert after == before


def test_explain_accepts_what_compile_returns():
    class M(torch.nn.Module):
        def forward(self, x):
            return x.sin() + 1

        def half(self, x):
            return x * 0.5

    m, x = M(), torch.randn(3)
    for fn, expected in [(tcjit.compile(lambda x: x.cos()), x.cos()),
                         (tcjit.compile(m), m(x)),
                         (tcjit.compile(m.half), m.half(x))]:
        ex = tcjit.explain(fn)(x)
        assert ex.graph_count == 1 and not ex.break_reasons
        check_same(ex.result, expected)
