"""F.linear whose output rows are misaligned for cuBLAS (src/runtime/
extern_call.c uses it for float16 / bfloat16 linear nodes whose
out_features is not a multiple of 8).

A [M, N] half-precision result with N odd (GPT-2's vocabulary, 50257) has
rows that start 2-byte aligned, and cuBLAS then takes an align1 kernel: on
an H100 GPT-2's lm_head (2048 x 768 x 50257, bfloat16) took 1.65 ms, 7x
what the same product takes with N padded to 50264 (0.23 ms).  Padding the
weight with zero rows changes no element of the result: each is the same
dot product, the extra columns are dropped.  Inductor pads the same way
(pad_mm).  On the CPU the product is called as is.
"""
import torch

_linear = torch._C._nn.linear


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
    # copied into a tensor of eager's (contiguous) layout: a view of the
    # padded product would differ in the strides of size-1 dims, which
    # the runtime's layout check ignores (fuzz seed 221843)
    y = _linear(x, wp, bp)
    out = y.new_empty(y.shape[:-1] + (n,))
    return out.copy_(y[..., :n])
