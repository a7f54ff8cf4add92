"""F.linear whose output rows are misaligned for cuBLAS (src/runtime/
extern_call.c uses it for float16 / bfloat16 linear nodes whose
out_features is not a multiple of 8).

A [M, N] half-precision result with N odd (GPT-2's vocabulary, 50257) has
rows that start 2-byte aligned, and cuBLAS then takes an align1 kernel: on
an H200 GPT-2's lm_head (2048 x 768 x 50257, bfloat16) took 1.68 ms.  The
product is written into a buffer whose rows are padded to a multiple of 8
(cuBLAS takes a strided result as is) and copied from there into eager's
contiguous result.  N itself must be aligned too (2.25 ms otherwise), so:
without a bias, the first N rounded down to 8 columns and the few last
ones are two products of views of the weight (0.53 ms with the copy); with
a bias, one product of a zero-padded weight and bias (0.60 ms).  Every
element is the same dot product as eager's (the padding columns are
dropped).  Inductor pads the weight (pad_mm).

Memory: the products are done in chunks of rows of at most _CHUNK_BYTES,
each copied into the result, so the peak is eager's result plus one chunk
(and the padded weight with a bias); a whole padded product beside the
result was 206 MB more on GPT-2 124M, batch 4 x 512.

Under autograd (a tensor requires grad) the out= calls are not
differentiable: F.linear of the padded weight, sliced and copied.  On the
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
    grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (x, w, b))
    if b is None and not grad:
        main = n - n % 8
        return _chunked(x, ((w[:main], None, 0, main), (w[main:], None, main, n)),
                        n, n + pad)
    wp = w.new_zeros(n + pad, w.shape[1])
    wp[:n].copy_(w)
    bp = None
    if b is not None:
        bp = b.new_zeros(n + pad)
        bp[:n].copy_(b)
    if grad:
        return _padded_linear(x, wp, bp, n)
    return _chunked(x, ((wp, bp, 0, n + pad),), n, n + pad)


def _chunked(x, parts, n, width):
    """Rows of x in chunks: each part (weight, bias, first, end) computes
    columns [first, end) of a [rows, width] buffer, whose first n columns
    are copied into eager's contiguous result."""
    k = x.shape[-1]
    lead = x.shape[:-1]
    out = x.new_empty(lead + (n,))
    m = out.numel() // n
    if m == 0:
        return out
    x2, o2 = x.reshape(m, k), out.view(m, n)
    rows = max(1, min(m, _CHUNK_BYTES // (width * out.element_size())))
    buf = out.new_empty(rows, width)
    for i in range(0, m, rows):
        r = min(rows, m - i)
        for w, b, first, end in parts:
            y = buf[:r, first:end]
            if b is None:
                _mm(x2[i:i + r], w.t(), out=y)
            else:
                _addmm(b[first:end], x2[i:i + r], w.t(), out=y)
        o2[i:i + r].copy_(buf[:r, :n])
    return out


def _padded_linear(x, wp, bp, n):
    # copied into a tensor of eager's (contiguous) layout: a view of the
    # padded product would differ in the strides of size-1 dims, which
    # the runtime's layout check ignores (fuzz seed 221843)
    y = _linear(x, wp, bp)
    out = y.new_empty(y.shape[:-1] + (n,))
    return out.copy_(y[..., :n])
