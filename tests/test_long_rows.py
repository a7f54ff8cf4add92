"""Multi-phase reductions over rows too long for registers (softmax: the
max, then the sum of exponentials), the rows read again by the later
phase: looped rows, the grid looping over more rows than it has blocks
(cross-entropy's forward over GPT-2's logits is [4096, 50304]).  Every row
must be reduced once, with eager's results.

(A plan that kept fewer rows in flight so that the second read would hit
L2 was measured on an H200 and was slower: 1024 threads and 132 blocks
510 us, 256 threads and 1056 blocks 406 us, the logits' [4096, 50304].)"""
import pytest
import torch
import torch.nn.functional as F

import tcjit
from conftest import check_against_float64
from test_cuda import _ptxas, assert_ptxas_accepts, dumped_ptx

HAS_CUDA = torch.cuda.is_available()

BODIES = {
    "softmax": lambda x, t: torch.softmax(x, -1),
    "log_softmax": lambda x, t: torch.log_softmax(x * 2, -1),
    "logsumexp": lambda x, t: torch.logsumexp(x, -1),
    "var": lambda x, t: torch.var(x, -1),
}
CROSS_ENTROPY = lambda x, t: F.cross_entropy(x, t)   # noqa: E731 (no float64
#                                                       CUDA nll_loss to check against)

# rows x points: rows of 36-400 KB, fewer rows than blocks in flight and
# many more
SHAPES = [(300, 20000), (2000, 9000), (7, 100000), (1000, 12289)]


def _inputs(shp, dev, grad=False):
    g = torch.Generator().manual_seed(shp[0] + shp[1])
    x = torch.randn(shp, generator=g, dtype=torch.float64).float()
    t = torch.randint(0, shp[1], (shp[0],), generator=g)
    x, t = x.to(dev), t.to(dev)
    return x.requires_grad_(grad), t


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
@pytest.mark.parametrize("shp", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("name", list(BODIES))
def test_long_rows_cuda(name, shp):
    tcjit.reset()
    check_against_float64(BODIES[name], _inputs(shp, "cuda"))


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
@pytest.mark.parametrize("shp", SHAPES[:2], ids=lambda s: f"{s[0]}x{s[1]}")
def test_long_rows_cross_entropy_grad_cuda(shp):
    """The training graph's forward (cross-entropy's logsumexp) and its
    gradient, against eager."""
    tcjit.reset()
    x, t = _inputs(shp, "cuda", grad=True)
    xe = x.detach().clone().requires_grad_()
    loss = tcjit.compile(CROSS_ENTROPY)(x, t)
    le = F.cross_entropy(xe, t)
    loss.backward()
    le.backward()
    torch.testing.assert_close(loss, le, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x.grad, xe.grad, rtol=1e-5, atol=1e-7)


@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
def test_long_rows_ptx_assembles(tmp_path):
    tcjit._C.set_config(ptx_dump_dir=str(tmp_path))
    try:
        for name, fn in list(BODIES.items()) + [("ce", CROSS_ENTROPY)]:
            for shp in SHAPES[:2]:
                tcjit.reset()
                tcjit.compile(fn)(*_inputs(shp, "cpu"))
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)
    assert_ptxas_accepts(dumped_ptx(str(tmp_path), 5))
