"""Log channels: recompiles, guards, graph, output_code, graph_breaks; through
tcjit.set_logs and the TCJIT_LOGS environment variable."""
import inspect
import logging
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

import tcjit
from conftest import check_same, log_messages

PYTHON_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "python")


def _line_of(fn, needle):
    lines, start = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if needle in line:
            return start + i
    raise AssertionError(needle)


# ---- recompiles --------------------------------------------------------------------

def test_recompiles_exact_format(tcjit_logs):
    caplog = tcjit_logs("recompiles")

    def f(x):
        return x + 1

    cf = tcjit.compile(f)
    cf(torch.randn(4))
    cf(torch.randn(8))
    msgs = log_messages(caplog, "recompiles")
    assert len(msgs) == 1
    head = (f"Recompiling function f in {f.__code__.co_filename}:"
            f"{f.__code__.co_firstlineno}\n"
            "    triggered by the following guard failure(s):\n")
    assert msgs[0].startswith(head), msgs[0]
    assert re.fullmatch(re.escape(head) + r"    - \d+/0: tensor 'x' size mismatch "
                        r"at index 0\. expected 4, actual 8"
                        r"\n    automatic dynamic shapes: recompiling with "
                        r"size-generic kernels \(sizes are dynamic from now "
                        r"on\)", msgs[0])
    rec = [r for r in caplog.records if r.name == "tcjit.recompiles"][0]
    assert rec.levelno == logging.INFO


def test_recompiles_lists_every_failing_entry(tcjit_logs):
    caplog = tcjit_logs("recompiles")

    def f(x):
        return x * 2

    cf = tcjit.compile(f, dynamic=False)
    cf(torch.randn(2))
    cf(torch.randn(3))
    cf(torch.randn(5))
    msgs = log_messages(caplog, "recompiles")
    assert len(msgs) == 2
    last = msgs[-1]
    assert re.search(r"- \d+/0: tensor 'x' size mismatch at index 0. expected 2, actual 5", last)
    assert re.search(r"- \d+/1: tensor 'x' size mismatch at index 0. expected 3, actual 5", last)


def test_no_recompiles_log_when_channel_off(caplog):
    caplog.set_level(logging.INFO, logger="tcjit")

    def f(x):
        return x - 1

    cf = tcjit.compile(f)
    cf(torch.randn(4))
    cf(torch.randn(8))
    assert [r for r in caplog.records if r.name.startswith("tcjit")] == []


def test_recompile_limit_logged_and_warned(tcjit_logs):
    caplog = tcjit_logs("recompiles")

    def f(x):
        return x * 9

    cf = tcjit.compile(f, dynamic=False)  # static: every size compiles
    with tcjit.config.patch(recompile_limit=2):
        with pytest.warns(RuntimeWarning, match=r"^tcjit hit config\.recompile_limit \(2\)"):
            cf(torch.randn(1))
            cf(torch.randn(2))
            cf(torch.randn(3))
    msgs = log_messages(caplog, "recompiles")
    assert msgs and msgs[0].startswith("Recompiling function f in ")
    # docs/logs.md: "When tcjit.config.recompile_limit is reached, says so and
    # that the function will run eagerly from now on."
    assert any(re.search(r"recompile.limit", m, re.IGNORECASE) for m in msgs), msgs


# ---- graph breaks ------------------------------------------------------------------

def test_graph_break_print_log(tcjit_logs, capsys):
    caplog = tcjit_logs("graph_breaks")

    def f(x):
        y = x.cos()
        print("in f")            # graph break here
        return y + 1

    line = _line_of(f, "graph break here")
    cf = tcjit.compile(f)
    x = torch.randn(3)
    check_same(cf(x), torch.cos(x) + 1)
    assert capsys.readouterr().out == "in f\n"
    msgs = log_messages(caplog, "graph_breaks")
    assert msgs, "no graph_breaks message"
    m = msgs[0]
    assert m.startswith(f"Graph break in user code at {f.__code__.co_filename}:{line}"), m
    assert "Reason: Unsupported: " in m
    assert "call to print" in m


def test_graph_break_item_log(tcjit_logs):
    caplog = tcjit_logs("graph_breaks")

    def f(x):
        return x * x.item()      # item here

    line = _line_of(f, "item here")
    x = torch.tensor([1.5])
    check_same(tcjit.compile(f)(x), x * 1.5)
    msgs = log_messages(caplog, "graph_breaks")
    assert msgs
    assert msgs[0].startswith(f"Graph break in user code at {__file__}:{line}")
    assert "Reason: Unsupported: " in msgs[0]
    assert "item" in msgs[0]


def test_graph_break_data_dependent_if_log(tcjit_logs):
    caplog = tcjit_logs("graph_breaks")

    def f(x):
        if x.sum() > 0:          # branch here
            return x + 1
        return x - 1

    cf = tcjit.compile(f)
    for v in ([1.0, 2.0], [-1.0, -2.0]):
        x = torch.tensor(v)
        check_same(cf(x), f(x))
    msgs = log_messages(caplog, "graph_breaks")
    assert msgs
    assert msgs[0].startswith("Graph break in user code at ")
    assert "Reason: Unsupported: " in msgs[0]


def test_graph_breaks_silent_when_off(caplog, capsys):
    caplog.set_level(logging.INFO, logger="tcjit")

    def f(x):
        print("x")
        return x + 1

    tcjit.compile(f)(torch.randn(2))
    assert not [r for r in caplog.records if r.name.startswith("tcjit")]


# ---- graph, output_code, guards ---------------------------------------------------------

def test_graph_log(tcjit_logs):
    caplog = tcjit_logs("graph")

    def f(x, y):
        return (torch.sin(x) + torch.cos(y)).relu() * 2 + 1

    tcjit.compile(f)(torch.randn(8), torch.randn(8))
    msgs = log_messages(caplog, "graph")
    assert msgs
    text = "\n".join(msgs)
    for op in ("sin", "cos", "add", "relu", "mul"):
        assert op in text, op
    assert "float32" in text or "f32" in text or "Float" in text


def test_output_code_log(tcjit_logs):
    caplog = tcjit_logs("output_code")

    def f(x, y):
        return torch.exp(x) * y - 3

    tcjit.compile(f)(torch.randn(16), torch.randn(16))
    msgs = log_messages(caplog, "output_code")
    assert msgs
    text = "\n".join(msgs)
    assert "for (" in text
    assert "exp" in text


def test_output_code_log_names_compile_flags(tcjit_logs):
    """docs/logs.md: output_code prints the kernels "and the compile flags
    used (e.g. -O3 -march=x86-64-v3)"."""
    caplog = tcjit_logs("output_code")

    def f(x):
        return x * 2 + 1

    tcjit.compile(f)(torch.randn(16))
    text = "\n".join(log_messages(caplog, "output_code"))
    assert "for (" in text
    assert re.search(r"-O[0-3s]", text), text


def test_output_code_not_logged_for_eager_backend(tcjit_logs):
    caplog = tcjit_logs("output_code")

    def f(x):
        return x + 2

    tcjit.compile(f, backend="eager")(torch.randn(4))
    assert "for (" not in "\n".join(log_messages(caplog, "output_code"))


def test_set_logs_all_and_off(tcjit_logs):
    caplog = tcjit_logs("all")

    def f(x):
        return x.sin() + 1

    cf = tcjit.compile(f)
    cf(torch.randn(4))
    cf(torch.randn(5))
    names = {r.name for r in caplog.records}
    assert {"tcjit.graph", "tcjit.output_code", "tcjit.guards",
            "tcjit.recompiles"} <= names
    caplog.clear()
    tcjit.set_logs("")
    cf(torch.randn(6))
    assert not [r for r in caplog.records if r.name.startswith("tcjit")]


def test_set_logs_selects_channels(tcjit_logs):
    caplog = tcjit_logs("graph")

    def f(x):
        return x * 3

    cf = tcjit.compile(f)
    cf(torch.randn(4))
    cf(torch.randn(5))
    names = {r.name for r in caplog.records if r.name.startswith("tcjit")}
    assert names == {"tcjit.graph"}


def test_set_logs_rejects_unknown_channel():
    with pytest.raises(ValueError):
        tcjit.set_logs("recompiles,nonsense")
    tcjit.set_logs("+recompiles, graph_breaks")   # spaces and '+' accepted
    tcjit.set_logs("")


# ---- TCJIT_LOGS (subprocess) -----------------------------------------------------------------

SCRIPT = textwrap.dedent("""
    import torch, tcjit

    def f(x):
        return x.sin() * 2

    cf = tcjit.compile(f)
    a = cf(torch.randn(4))
    b = cf(torch.randn(8))
    assert b.shape == (8,)
    g = tcjit.compile(lambda x: (print("hi"), x + 1)[1])
    g(torch.randn(2))
    print("DONE")
""")


def _run_script(tmp_path, logs, script=SCRIPT):
    path = tmp_path / "script.py"
    path.write_text(script)
    env = dict(os.environ)
    env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", "")
    env["TCJIT_LOGS"] = logs
    return subprocess.run([sys.executable, str(path)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


def test_env_var_recompiles(tmp_path):
    r = _run_script(tmp_path, "recompiles")
    assert r.returncode == 0, r.stderr
    assert "DONE" in r.stdout
    assert "Recompiling function" in r.stderr
    assert "[tcjit:recompiles]" in r.stderr
    assert re.search(r"- \d+/0: tensor 'x' size mismatch at index 0. expected 4, "
                     r"actual 8", r.stderr)
    assert "Graph break" not in r.stderr


def test_env_var_unset_is_quiet(tmp_path):
    r = _run_script(tmp_path, "")
    assert r.returncode == 0, r.stderr
    assert "tcjit" not in r.stderr


def test_env_var_unknown_channel(tmp_path):
    r = _run_script(tmp_path, "bogus")
    assert r.returncode == 0, r.stderr
    assert "ignoring TCJIT_LOGS" in r.stderr
    assert "DONE" in r.stdout
