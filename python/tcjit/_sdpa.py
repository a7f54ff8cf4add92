"""The memory layout of eager's F.scaled_dot_product_attention result, for
the tracer (src/tracer/torchcalls.c call_sdpa).

torch picks one of several kernels from the operands' metadata
(torch._fused_sdp_choice), and each writes its own layout.  On the CPU:
math contiguous, flash empty_like(q) (an expanded k or v, for one, makes
torch take math).  On CUDA (torch 2.11):

  math               contiguous [B, H, L, Ev]
  cuDNN              empty_like(q) (measured on an H200: q split off a
                     projection, [B, L, H, E] memory, gives that layout)
  flash              contiguous [B, H, L, P] sliced to Ev, P = Ev rounded up
                     to a multiple of 8 (the operands are padded to P)
  memory-efficient   [B, L, H, Ev] memory seen as [B, H, L, Ev]

tcjit's node gets the same layout, so a compiled result has eager's
strides and the runtime never copies torch's result into another layout.
The choice reads metadata only; empty operands of the same sizes, strides
and dtype stand in for the real ones.
"""
import torch

CONTIG, HEADS_INNER, LIKE_Q, PAD8 = 0, 1, 2, 3   # extern.h TC_SDPA_*

_LAYOUT = {0: CONTIG, 1: PAD8, 2: HEADS_INNER, 3: LIKE_Q}
_CPU_LAYOUT = {1: LIKE_Q}


def layout(operands, device, is_causal, scale):
    """operands: (sizes, strides, dtype) of q, k, v and the mask if any."""
    t = [torch.empty_strided(s, st, dtype=dt, device=device)
         for s, st, dt in operands]
    mask = t[3] if len(t) > 3 else None
    choice = torch._fused_sdp_choice(t[0], t[1], t[2], mask, 0.0, is_causal,
                                     scale=scale)
    table = _CPU_LAYOUT if device == "cpu" else _LAYOUT
    return table.get(int(choice), CONTIG)
