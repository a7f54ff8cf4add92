"""The PTX emitter's code for large grouped kernels (docs/dev.md, "JIT time
of large kernels"): div.rn / sqrt.rn become calls of a .func where an entry
has many of them, the vector entry keeps one member's values live at a
time.  No GPU: the modules are dumped by CPU compiles and checked with
ptxas and by their text."""
import os
import re
import subprocess

import pytest
import torch

import tcjit
from test_cuda import _ptxas, assert_ptxas_accepts, dumped_ptx

pytestmark = pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")

RN_INLINE_MAX = 16      # ptx_emit.c


def _dump(tmp_path, fn, *args):
    """The sm_90 modules fn dumps; every module assembles."""
    d = str(tmp_path / "ptx")
    os.makedirs(d, exist_ok=True)
    tcjit._C.set_config(ptx_dump_dir=d)
    try:
        tcjit.reset()
        fn(*args)
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)
    files = dumped_ptx(d, 1)
    assert_ptxas_accepts(files)         # sm_80 and sm_90
    return [f for f in files if f.endswith("_sm90.ptx")]


def _entries(text):
    """{entry name: its text}"""
    parts = re.split(r"\n(?=\.visible \.entry )", text)
    return {re.match(r"\.visible \.entry (\w+)", p).group(1): p
            for p in parts if p.startswith(".visible .entry")}


def _sites(body):
    """(inline div.rn / sqrt.rn, called ones) of an entry; a call of the
    4-lane form counts 4."""
    inline = len(re.findall(r"\t(?:div|sqrt)\.rn\.f(?:32|64) ", body))
    called = len(re.findall(r"call \(\S+\), tc_(?:div|sqrt)_rn_f(?:32|64),", body))
    called += 4 * len(re.findall(r"call \(rn_d\), tc_(?:div|sqrt)_rn_f(?:32|64)_x4,", body))
    return inline, called


def _check_rn_form(text, hot_inline=False):
    """Every entry: all sites inline up to RN_INLINE_MAX, all called above
    (hot_inline: a reduction's per-point sites, inline at any count, may
    come on top); the module defines exactly the .funcs it calls."""
    ents = _entries(text)
    called_any = False
    for name, body in ents.items():
        inline, called = _sites(body)
        if hot_inline:
            called_any |= called > 0
            continue
        assert not (inline and called), name
        if called:
            assert called > RN_INLINE_MAX, (name, called)
            called_any = True
        else:
            assert inline <= RN_INLINE_MAX, (name, inline)
    defined = set(re.findall(r"^\.func \(.*?\) (\w+)\(", text, re.M))
    used = set(re.findall(r"call \(\S+\), (\w+),", text))
    assert defined == used
    return ents, called_any


def test_optimizer_step_rn_calls_and_late_values(tmp_path):
    """tcjit.compile(opt.step), AdamW foreach over 148 same-shaped
    parameters (issue 13/15: 12.9 s of driver JIT at its second call on an
    H100).  Its grouped kernels (48 members: 96 div.rn and 48 sqrt.rn per
    element) call the .func forms, 4 lanes a call in the vector entry; the
    vector entry loads a member's arguments shortly before it uses them
    and stores them right after (a store before the last load), with no
    parameter loaded ahead of the loop; the module assembles."""
    torch.manual_seed(0)
    ps = [torch.nn.Parameter(torch.randn(64, 64)) for _ in range(148)]
    for p in ps:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(ps, lr=1e-4, foreach=True)
    opt.step()                      # the state, made eagerly
    files = _dump(tmp_path, lambda: tcjit.compile(opt.step)())
    text = "".join(open(f).read() for f in files)
    ents, called_any = _check_rn_form(text)
    assert called_any
    big_vec = [n for n, b in ents.items()     # the groups of 48
               if n.endswith("_v4") and "call (rn_d), tc_div_rn_f32_x4" in b
               and b.count(".param .u64") > 150]
    assert len(big_vec) >= 3, sorted(ents)
    for n in big_vec:
        body = ents[n]
        loop = body.index("$vloop_")
        assert "ld.param" not in body[:loop], n
        assert body.index("st.global") < body.rindex("ld.global"), n


def test_few_rn_sites_stay_inline(tmp_path):
    """A kernel with a few divisions and square roots keeps div.rn /
    sqrt.rn inline (a call costs a branch and a register shuffle), and its
    module defines no .func."""
    x = torch.rand(4096) + 0.5
    files = _dump(tmp_path, lambda: tcjit.compile(
        lambda x, y: (x / y).sqrt() + y.sqrt() / x)(x, x + 1))
    text = "".join(open(f).read() for f in files)
    ents, called_any = _check_rn_form(text)
    assert not called_any and ".func" not in text
    assert sum(_sites(b)[0] for b in ents.values()) > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64,
                                   torch.float16, torch.bfloat16])
def test_many_rn_sites_vector_forms_assemble(tmp_path, dtype):
    """Per dtype: 12 divisions / square roots per element stay inline in
    the scalar entry and become calls in the vector entry (4 lanes of
    float32 / float64 per call; 8 lanes with a 16-bit dtype, two calls);
    both forms assemble."""
    def f(x, y):
        r = x
        for i in range(6):
            r = r + (x / (y + i)).sqrt()
        return r
    x = (torch.rand(4096) + 0.5).to(dtype)
    files = _dump(tmp_path, lambda: tcjit.compile(f)(x, x + 1))
    text = "".join(open(f).read() for f in files)
    ents, called_any = _check_rn_form(text)
    assert called_any
    t = "f64" if dtype == torch.float64 else "f32"
    assert f"tc_div_rn_{t}_x4" in text and f"tc_sqrt_rn_{t}_x4" in text
    scalar = [b for n, b in ents.items() if not n.endswith("_v4")]
    assert scalar and all(_sites(b)[1] == 0 for b in scalar)


def test_reductions_call_only_in_per_row_code(tmp_path):
    """Reductions: the divisions of each point of a row held in registers
    (two rows of 4096 normalized by their sums: 16 points per thread each,
    32 sites) stay inline, since a call there would cost every element; 20
    grouped row norms call sqrt.rn once per row."""
    x = torch.rand(64, 4096)
    files = _dump(tmp_path, lambda: tcjit.compile(
        lambda x, y: (x / x.sum(-1, keepdim=True), y / y.sum(-1, keepdim=True)))(x, x + 1))
    text = "".join(open(f).read() for f in files)
    ents, called_any = _check_rn_form(text, hot_inline=True)
    assert not called_any
    assert sum(_sites(b)[0] for b in ents.values()) > RN_INLINE_MAX

    xs = [torch.randn(8, 1024) for _ in range(20)]
    files = _dump(tmp_path / "norms", lambda: tcjit.compile(
        lambda *xs: [x.pow(2).sum(-1).sqrt() for x in xs])(*xs))
    text = "".join(open(f).read() for f in files)
    ents, called_any = _check_rn_form(text, hot_inline=True)
    assert called_any and "tc_sqrt_rn_f32," in text


def test_size_generic_kernels_call_and_load_late(tmp_path):
    """Size-generic kernels (dynamic shapes, ptx_emit.c em.generic) get the
    same treatment: an Adam-like update of 12 tensors whose size changes
    (an automatic-dynamic recompile) emits a generic module that calls the
    .func forms, loads argument pointers in the loop, not ahead of it
    (only the block parameter's sizes are loaded there), and
    assembles."""
    from test_dynamic_cuda import dump, generic_texts

    def step(*ts):
        out = []
        for p, g, m, v in zip(ts[0::4], ts[1::4], ts[2::4], ts[3::4]):
            m2 = m * 0.9 + g * 0.1
            v2 = v * 0.999 + g * g * 0.001
            out.append(p - 0.01 * (m2 / 0.1) / ((v2 / 0.001).sqrt() + 1e-8))
        return out

    def make(n):
        g = torch.Generator().manual_seed(n)
        return tuple(torch.rand(n, 16, generator=g) + 0.5 for _ in range(48))

    dump(step, make, (2, 3, 4), tmp_path)
    texts = generic_texts(tmp_path)
    assert texts, "no size-generic kernel was emitted"
    called_any = False
    for t in (ts[0] for ts in texts.values()):
        assert "tc_generic_d[" in t
        ents, called = _check_rn_form(t)
        called_any |= called
        for n, b in ents.items():
            if n.endswith("_v4"):
                head = b[:b.index("$vloop_")]
                assert "_p" not in "".join(re.findall(r"ld\.param[^\n]*", head)), n
    assert called_any
    assert_ptxas_accepts([f for f in dumped_ptx(str(tmp_path), 1)
                          if re.search(r"g\d+_k\d+_sm\d+\.ptx$", f)])
