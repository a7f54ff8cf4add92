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
Where torch takes math, the tracer inlines math_attention instead (MATH).
The choice reads metadata only; empty operands of the same sizes, strides
and dtype stand in for the real ones.
"""
import torch

CONTIG, HEADS_INNER, LIKE_Q, PAD8, MATH = 0, 1, 2, 3, 4   # extern.h TC_SDPA_*

_LAYOUT = {0: CONTIG, 1: PAD8, 2: HEADS_INNER, 3: LIKE_Q}
_CPU_LAYOUT = {1: LIKE_Q}


def layout(operands, device, is_causal, scale):
    """operands: (sizes, strides, dtype) of q, k, v and the mask if any;
    q alone where the tracer knows torch takes math (on the CPU: other
    than 4-d operands, or v's head size other than q's)."""
    if len(operands) == 1:
        return CONTIG if _reduced_math(operands[0][2]) else MATH
    t = [torch.empty_strided(s, st, dtype=dt, device=device)
         for s, st, dt in operands]
    mask = t[3] if len(t) > 3 else None
    choice = torch._fused_sdp_choice(t[0], t[1], t[2], mask, 0.0, is_causal,
                                     scale=scale)
    if int(choice) == 0 and not _reduced_math(t[0].dtype):
        return MATH
    table = _CPU_LAYOUT if device == "cpu" else _LAYOUT
    return table.get(int(choice), CONTIG)


def _reduced_math(dtype):
    """Whether torch's math kernel keeps float16 / bfloat16 products in
    that dtype (then math_attention, which upcasts, does not apply)."""
    return (dtype in (torch.float16, torch.bfloat16)
            and torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed())



def math_attention(q, k, v, attn_mask, is_causal, scale):
    """F.scaled_dot_product_attention as torch's math kernel computes it
    (aten _scaled_dot_product_attention_math, torch 2.11 and 2.13), in ops
    the tracer records: tcjit fuses the scaling, the casts, the mask and
    the softmax into its kernels and calls torch for the two products,
    where eager runs a dozen kernels (T5's attention on CUDA takes this
    kernel: its bias is a float mask of another dtype).

    The tracer inlines it only where torch would take math (layout() says
    MATH) and fp16/bf16 products are done in float32 (torch's default,
    torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed() False)."""
    out_dtype = q.dtype
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        # F.scaled_dot_product_attention converts a boolean mask first
        attn_mask = torch.where(attn_mask, 0.0, float("-inf")).to(q.dtype)
    if q.dtype in (torch.float16, torch.bfloat16):
        q, k, v = q.float(), k.float(), v.float()
    # q and k are each scaled by sqrt(scale), for stability
    factor = (scale if scale is not None else 1.0 / q.size(-1) ** 0.5) ** 0.5
    if is_causal:
        attn_mask = torch.where(
            torch.ones(q.size(-2), k.size(-2), dtype=torch.bool,
                       device=q.device).tril(),
            0.0, float("-inf")).to(q.dtype)
    attn = torch.matmul(q * factor, k.transpose(-2, -1) * factor)
    if attn_mask is not None:
        # (torch adds in place: the sum is rounded to attn's dtype)
        attn = (attn + attn_mask).to(attn.dtype)
    # torch's _safe_softmax: a row that is -inf everywhere gives zeros
    probs = torch.softmax(attn, -1)
    masked = (attn == float("-inf")).all(-1, keepdim=True)
    probs = torch.where(masked, 0.0, probs)
    return torch.matmul(probs, v).to(out_dtype)
