"""F.linear whose output rows are misaligned for cuBLAS (src/runtime/
extern_call.c uses it for float16 / bfloat16 linear nodes whose
out_features is not a multiple of 8).

A [M, N] half-precision result with N odd (GPT-2's vocabulary, 50257) has
rows that start 2-byte aligned, and cuBLAS then takes an align1 kernel: on
an H100 GPT-2's lm_head (2048 x 768 x 50257, bfloat16) took 1.65 ms, 7x
what the same product takes into rows padded to 50264 (0.23 ms).  So the
product is written into a buffer whose rows are padded to a multiple of 8
(cuBLAS takes a strided result as is: its leading dimension is the padded
width) and copied from there into eager's contiguous result.  Every element
is the same dot product as eager's.

Memory: the padded buffer holds at most _CHUNK_BYTES, the rows are done
in chunks of that size, so the peak is eager's result plus one chunk (a
whole padded product beside the result was 206 MB more than eager on
GPT-2 124M, batch 4 x 512).  Inductor pads the weight instead (pad_mm).

Under autograd (a tensor requires grad) the out= calls are not
differentiable: the weight is padded instead, as Inductor does.  On the
CPU the product is called as is.
"""
import torch

_linear = torch._C._nn.linear
_mm = torch.mm
_addmm = torch.addmm
_CHUNK_BYTES = 64 << 20


def linear(x, w, b=None, *, force=False):
    """torch._C._nn.linear(x, w, b), computed into rows padded to a
    multiple of 8 on CUDA (or with force=True, for tests)."""
    n = w.shape[0]
    pad = -n % 8
    if not pad or n < 64 or not (w.is_cuda or force):
        # (a few output features: nothing to gain from another kernel)
        return _linear(x, w, b)
    if torch.is_grad_enabled() and any(
            t is not None and t.requires_grad for t in (x, w, b)):
        return _padded_weight(x, w, b, n, pad)
    return _padded_rows(x, w, b, n, pad)


def _padded_rows(x, w, b, n, pad):
    k = w.shape[1]
    lead = x.shape[:-1]
    out = x.new_empty(lead + (n,))
    m = out.numel() // n if n else 0
    if m == 0:
        return out
    x2, o2, wt = x.reshape(m, k), out.view(m, n), w.t()
    rows = max(1, min(m, _CHUNK_BYTES // ((n + pad) * out.element_size())))
    buf = out.new_empty(rows, n + pad)
    for i in range(0, m, rows):
        r = min(rows, m - i)
        y = buf[:r, :n]
        if b is None:
            _mm(x2[i:i + r], wt, out=y)
        else:
            _addmm(b, x2[i:i + r], wt, out=y)
        o2[i:i + r].copy_(y)
    return out


def _padded_weight(x, w, b, n, pad):
    wp = w.new_zeros(n + pad, w.shape[1])
    wp[:n].copy_(w)
    bp = None
    if b is not None:
        bp = b.new_zeros(n + pad)
        bp[:n].copy_(b)
    # copied into a tensor of eager's (contiguous) layout: a view of the
    # padded product would differ in the strides of size-1 dims, which
    # the runtime's layout check ignores (fuzz seed 221843)
    y = _linear(x, wp, bp)
    out = y.new_empty(y.shape[:-1] + (n,))
    return out.copy_(y[..., :n])
