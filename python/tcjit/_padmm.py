"""F.linear whose output rows are misaligned for cuBLAS (src/runtime/
extern_call.c uses it for float16 / bfloat16 linear nodes whose
out_features is not a multiple of 8).

A [M, N] half-precision result with N odd (GPT-2's vocabulary, 50257) has
rows that start 2-byte aligned, and cuBLAS then takes an align1 kernel: on
an H200 GPT-2's lm_head (2048 x 768 x 50257, bfloat16) took 1.68 ms, 3x
what it takes with the weight padded to 50264 rows and the product written
into rows of that width, then copied into eager's contiguous result (0.53
ms with the padding and the copy).  Writing into padded rows alone is not
enough (2.25 ms: cuBLAS wants N itself aligned).  Every element is the
same dot product (the extra columns are dropped).  Inductor pads the same
way (pad_mm).

Memory: the padded product is computed in chunks of rows of at most
_CHUNK_BYTES, each copied into the result, so the peak is eager's result
plus the padded weight and one chunk (a whole padded product beside the
result was 206 MB more on GPT-2 124M, batch 4 x 512).

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
    """torch._C._nn.linear(x, w, b), computed with out_features padded to a
    multiple of 8 on CUDA (or with force=True, for tests)."""
    n = w.shape[0]
    pad = -n % 8
    if not pad or n < 64 or not (w.is_cuda or force):
        # (a few output features: nothing to gain from another kernel)
        return _linear(x, w, b)
    wp = w.new_zeros(n + pad, w.shape[1])
    wp[:n].copy_(w)
    bp = None
    if b is not None:
        bp = b.new_zeros(n + pad)
        bp[:n].copy_(b)
    if torch.is_grad_enabled() and any(
            t is not None and t.requires_grad for t in (x, w, b)):
        return _padded_linear(x, wp, bp, n)
    return _padded_rows(x, wp, bp, n)


def _padded_rows(x, wp, bp, n):
    """The product in chunks of rows into a padded buffer, each copied into
    eager's contiguous result."""
    k = wp.shape[1]
    lead = x.shape[:-1]
    out = x.new_empty(lead + (n,))
    m = out.numel() // n
    if m == 0:
        return out
    x2, o2, wt = x.reshape(m, k), out.view(m, n), wp.t()
    width = wp.shape[0]
    rows = max(1, min(m, _CHUNK_BYTES // (width * out.element_size())))
    buf = out.new_empty(rows, width)
    for i in range(0, m, rows):
        r = min(rows, m - i)
        if bp is None:
            _mm(x2[i:i + r], wt, out=buf[:r])
        else:
            _addmm(bp, x2[i:i + r], wt, out=buf[:r])
        o2[i:i + r].copy_(buf[:r, :n])
    return out


def _padded_linear(x, wp, bp, n):
    # copied into a tensor of eager's (contiguous) layout: a view of the
    # padded product would differ in the strides of size-1 dims, which
    # the runtime's layout check ignores (fuzz seed 221843)
    y = _linear(x, wp, bp)
    out = y.new_empty(y.shape[:-1] + (n,))
    return out.copy_(y[..., :n])
