"""Compile modes, options and templates (docs/modes.md) on the CPU, and the
reduce-overhead recorder's bookkeeping with a stand-in for CUDA graphs
(tests/test_modes_cuda.py runs the real thing on a GPU)."""
import pytest
import torch

import tcjit
from tcjit import _modes_cudagraphs as cg
from tcjit._backends import Backend

from conftest import check_same, log_messages
from test_modes_cuda import CASES, check_case, collect_recorders


def f(x, y):
    return (x.sin() + y).relu() * 2, x.sum(0)


MODES = [None, "default", "reduce-overhead", "max-autotune",
         "max-autotune-no-cudagraphs"]


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_equals_eager_on_the_cpu(mode):
    g = tcjit.compile(f, mode=mode)
    for _ in range(3):
        x, y = torch.randn(64, 8), torch.randn(64, 8)
        check_same(g(x, y), f(x, y))
    assert tcjit.counters()["kernels_compiled"] > 0


@pytest.mark.parametrize("template", sorted(tcjit.config.templates))
def test_every_template_equals_eager(template):
    g = tcjit.compile(f, template=template)
    x, y = torch.randn(16, 4), torch.randn(16, 4)
    check_same(g(x, y), f(x, y))
    check_same(g(x, y), f(x, y))


def test_options_of_the_modes():
    opts = lambda **kw: Backend(**kw).settings()[1]  # noqa: E731
    assert opts() == {"cudagraphs": False, "max_autotune": False,
                      "freezing": False}
    assert opts(mode="reduce-overhead")["cudagraphs"]
    assert opts(mode="max-autotune") == {"cudagraphs": True,
                                         "max_autotune": True,
                                         "freezing": False}
    assert opts(mode="max-autotune-no-cudagraphs") == {
        "cudagraphs": False, "max_autotune": True, "freezing": False}
    # torch.compile's spelling
    assert opts(options={"triton.cudagraphs": True})["cudagraphs"]


def test_priority_options_mode_template_config():
    b = lambda **kw: Backend(**kw).option  # noqa: E731
    # explicit options > mode > template
    assert not b(mode="reduce-overhead",
                 options={"cudagraphs": False})("cudagraphs")
    assert b(template="max_autotune", mode="default")("cudagraphs")
    assert not b(template="cudagraphs",
                 options={"cudagraphs": False})("cudagraphs")
    assert not b(template="max_autotune",
                 mode="max-autotune-no-cudagraphs")("cudagraphs")
    # a template's own keys over the mode it names
    with tcjit.config.patch(templates={"mine": {"mode": "max-autotune",
                                                "cudagraphs": False}}):
        assert not b(template="mine")("cudagraphs")
        assert b(template="mine")("max_autotune")
    # compile()'s settings > config.template > config keys; read at each
    # compile, so a later config change counts for later compiles
    back = Backend()
    assert not back.option("freezing")
    with tcjit.config.patch(freezing=True):
        assert back.option("freezing")
        assert not Backend(options={"freezing": False}).option("freezing")
    with tcjit.config.patch(template="freezing"):
        assert back.option("freezing")
        with tcjit.config.patch(freezing=False):
            assert back.option("freezing")   # template > config key
        assert Backend(template="cudagraphs").option("freezing")
    with tcjit.config.patch(template="cudagraphs", cudagraphs=False):
        assert back.option("cudagraphs")
        assert not Backend(mode="default",
                           options={"cudagraphs": False}).option("cudagraphs")


@pytest.mark.parametrize("kw, valid", [
    (dict(mode="fast"), "'reduce-overhead'"),
    (dict(options={"cudagraph": True}), "'cudagraphs'"),
    (dict(options={"epilogue_fusion": True}), "'max_autotune'"),
    (dict(template="tma"), "'freezing'"),
    (dict(template="cutlass"), "'aten'"),
])
def test_unknown_names_raise_at_compile_naming_the_valid_ones(kw, valid):
    with pytest.raises(ValueError, match=valid):
        tcjit.compile(f, **kw)
    with pytest.raises(ValueError, match=valid):
        tcjit.compile(**kw)          # the decorator form checks at once


def test_bad_values():
    with pytest.raises(TypeError):
        tcjit.compile(f, options={"cudagraphs": "yes"})
    with pytest.raises(TypeError):
        tcjit.compile(f, options=[("cudagraphs", True)])
    with pytest.raises(ValueError, match="'default'"):
        tcjit.config.template = "nope"
    with pytest.raises(ValueError):
        tcjit.config.cudagraphs = 1
    with pytest.raises(ValueError, match="backend"):
        with tcjit.config.patch(templates={"bad": {"backend": "inductor"}}):
            tcjit.compile(f, template="bad")
    with pytest.raises(ValueError, match="mode"):
        with tcjit.config.patch(templates={"bad": {"mode": "turbo"}}):
            tcjit.compile(f, template="bad")
    assert tcjit.config.template is None


def test_aten_template_runs_the_graph_through_torch():
    x, y = torch.randn(16, 4), torch.randn(16, 4)
    g = tcjit.compile(f, template="aten")
    check_same(g(x, y), f(x, y))
    c = tcjit.counters()
    assert c["graphs"] == 1 and c["kernels_compiled"] == 0
    tcjit.reset()
    # an explicit backend wins over the template's
    g = tcjit.compile(f, template="aten", backend="auto")
    check_same(g(x, y), f(x, y))
    assert tcjit.counters()["kernels_compiled"] > 0


def test_config_template_is_read_per_compile():
    x, y = torch.randn(16, 4), torch.randn(16, 4)
    g = tcjit.compile(f)
    with tcjit.config.patch(template="eager"):
        check_same(g(x, y), f(x, y))
    assert tcjit.counters()["kernels_compiled"] == 0
    # the entry keeps what it was compiled with; a new compile reads anew
    tcjit.reset()
    check_same(g(x, y), f(x, y))
    assert tcjit.counters()["kernels_compiled"] > 0


def test_cudagraphs_on_a_cpu_graph_logs_one_line(tcjit_logs):
    caplog = tcjit_logs("perf_hints")
    g = tcjit.compile(f, mode="reduce-overhead")
    for n in (8, 8, 16, 32):      # a recompile and a dynamic entry too
        x, y = torch.randn(n, 4), torch.randn(n, 4)
        check_same(g(x, y), f(x, y))
    lines = log_messages(caplog, "perf_hints")
    assert len(lines) == 1, lines
    assert "skipping cudagraphs for f" in lines[0] and "CPU" in lines[0]
    # the same through the config key, under enable()
    caplog.clear()
    tcjit.reset()

    def h(x):
        return x.cos() + 1

    with tcjit.config.patch(cudagraphs=True):
        tcjit.enable()
        h(torch.randn(4))
        tcjit.disable()
    assert len(log_messages(caplog, "perf_hints")) == 1


def test_cpu_mode_changes_nothing():
    x, y = torch.randn(32, 4), torch.randn(32, 4)
    g = tcjit.compile(f, mode="reduce-overhead")
    a = g(x, y)
    b = g(x, y)
    assert a[0] is not b[0] and a[0].data_ptr() != b[0].data_ptr()
    assert type(g) is type(tcjit.compile(f))


# ---- the recorder, with a stand-in for a CUDA graph ------------------------

class FakeGraph:
    """Replays by running again on the recorded static inputs and writing
    into the recorded outputs: the memory a real graph reuses."""

    def __init__(self, rec, run):
        self.rec, self.run = rec, run
        self.replays = 0

    def replay(self):
        self.replays += 1
        statics = {s.untyped_storage().data_ptr() for s in self.rec.statics
                   if isinstance(s, torch.Tensor)}
        for o, n in zip(self.rec.outs, self.rec._run(self.run)):
            if o.untyped_storage().data_ptr() not in statics:
                o.copy_(n)


@pytest.fixture
def fake_capture(monkeypatch):
    def capture(self, run, device, pool):
        # a real recording runs nothing: undo what the run wrote
        saved = [(s, s.clone()) for s in self.statics
                 if isinstance(s, torch.Tensor)]
        self.graph = FakeGraph(self, run)
        outs = self._run(run)
        for s, v in saved:
            s.copy_(v)
        return outs
    monkeypatch.setattr(cg._Recording, "_capture", capture)


def recorder(fn, dynamic=False):
    r = cg.Recorder(lambda *a: tuple(fn(*a)), 0, dynamic, ("fn", "t.py", 1))
    r.dev = torch.device("cpu")
    return r


def test_recorder_warms_up_records_then_replays(fake_capture):
    w = torch.randn(8, 8)               # a parameter: read in place

    def fn(x, w):
        return [x @ w + 1]

    r = recorder(fn)
    outs = []
    for i in range(5):
        x = torch.randn(4, 8)           # a new address every call
        outs.append((x, r(x, w)[0]))
        if i == 0:
            assert not r.recordings     # warm-up
    rec = r.recordings[None]
    assert rec.copied == (0,) and rec.inplace == (1,)
    assert rec.graph.replays == 4       # the recording call replays too
    # every call's output is still its own value after the later calls
    for x, out in outs:
        torch.testing.assert_close(out, x @ w + 1)
    assert len({o.data_ptr() for _, o in outs}) == 5


def test_recorder_input_that_moves_is_copied_from_then_on(fake_capture):
    def fn(x, w):
        return [x * w]

    r = recorder(fn)
    x, w = torch.randn(6), torch.randn(6)
    r(x, w)
    r(x, w)
    assert r.recordings[None].inplace == (0, 1)
    w2 = torch.randn(6)                 # the "parameter" was replaced
    torch.testing.assert_close(r(x, w2)[0], x * w2)
    assert r.moved == {1} and r.recordings[None].copied == (1,)
    x.add_(1)                           # in-place change of an in-place input
    torch.testing.assert_close(r(x, w2)[0], x * w2)
    assert r.nrecorded == 2


def test_recorder_outputs_that_alias(fake_capture):
    def fn(x):
        y = x + 1
        return [x[1:], y, y.t(), x]

    r = recorder(fn)
    for _ in range(3):
        x = torch.randn(3, 4)
        out = r(x)
        ref = fn(x)
        for a, b in zip(out, ref):
            check_same(a, b)
        assert out[3] is x and out[0].data_ptr() == x[1:].data_ptr()
        assert out[2].data_ptr() == out[1].data_ptr()   # still one storage
    assert r.recordings[None].plan[0][0] == "view"


def test_recorder_expanded_input(fake_capture):
    def fn(x):
        return [x * 2]

    r = recorder(fn)
    for _ in range(3):
        x = torch.randn(5, 1).expand(5, 4)
        torch.testing.assert_close(r(x)[0], x * 2)


def test_recorder_dynamic_entry_records_per_size(fake_capture):
    def fn(x):
        return [x.sum(0)]

    r = recorder(fn, dynamic=True)
    for n in (3, 3, 3, 5, 5, 5, 3):
        x = torch.randn(n, 2)
        torch.testing.assert_close(r(x)[0], x.sum(0))
    assert len(r.recordings) == 2


def test_recorder_gives_up_with_one_line(fake_capture, tcjit_logs):
    caplog = tcjit_logs("perf_hints")

    def fn(x):
        if r.recordings is not None and x.sum() > 1e9:   # never
            pass
        return [x + 1]

    def boom(self, run, device):
        raise RuntimeError("operation not permitted when stream is capturing")

    r = recorder(fn)
    cg._Recording._capture, saved = boom, cg._Recording._capture
    try:
        for _ in range(4):
            x = torch.randn(3)
            torch.testing.assert_close(r(x)[0], x + 1)
    finally:
        cg._Recording._capture = saved
    assert r.off is not None
    lines = log_messages(caplog, "perf_hints")
    assert len(lines) == 1 and "recording failed" in lines[0]


def test_recorder_for_refuses_rng_and_training(tcjit_logs):
    caplog = tcjit_logs("perf_hints")
    desc = {"nodes": [{"kind": "op", "call": torch.rand_like}]}
    assert cg.recorder_for(desc, 0, 0, 0, ("g", "t.py", 2)) is None
    assert cg.recorder_for({"nodes": []}, 0, 0, 1, ("g", "t.py", 2)) is None
    assert cg.recorder_for({"nodes": []}, 0, 0, 0, ("g", "t.py", 2)) \
        is not None
    lines = log_messages(caplog, "perf_hints")
    assert len(lines) == 2
    assert "rand_like" in lines[0] and "training" in lines[1]


# ---- the GPU test cases, end to end through the C runtime ------------------

@pytest.fixture
def cpu_recorders(monkeypatch, fake_capture):
    """Compiles hand CPU graphs to Recorders (fake capture) as they hand
    CUDA graphs to the real ones."""
    def recorder_for(desc, device, dynamic, training, where):
        if training:
            return None

        def make(run, *rest):
            r = cg.Recorder(run, 0, dynamic, where, *rest)
            r.dev = torch.device("cpu")
            return r
        return make
    return collect_recorders(monkeypatch, recorder_for)


@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_cases_on_the_cpu(name, cpu_recorders):
    check_case(name, "cpu", cpu_recorders)


def test_recorder_address_check_both_ways(fake_capture, monkeypatch):
    """tcjit's C check and torch's (CUDA builds) agree: stand in torch's
    with its documented behaviour where the build lacks it."""
    def torch_check(tensors, ptrs, indices):
        assert type(tensors) is list and type(ptrs) is list \
            and type(indices) is list
        return all(tensors[i].data_ptr() == ptrs[i] for i in indices)

    for check in (None, torch_check):
        monkeypatch.setattr(cg, "_ptrs_equal", check)
        w = torch.randn(3)
        r = recorder(lambda x, w, n: [x * w])
        for _ in range(3):
            x = torch.randn(3)
            torch.testing.assert_close(r(x, w, 2)[0], x * w)
        w2 = torch.randn(3)
        torch.testing.assert_close(r(x, w2, 2)[0], x * w2)
        assert r.moved == {1}


def test_recorder_for_refuses_backward_graphs(tcjit_logs):
    caplog = tcjit_logs("perf_hints")
    seen = []

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            seen.append(cg.recorder_for({"nodes": []}, 0, 0, 0,
                                        ("bw", "t.py", 3)))
            return g * 2

    Probe.apply(torch.ones(2, requires_grad=True)).sum().backward()
    assert seen == [None]
    assert "backward" in log_messages(caplog, "perf_hints")[0]
