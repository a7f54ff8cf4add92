"""The tensors of a model's output, in order: a tensor, a transformers
ModelOutput (its to_tuple()), a dict's values, or nested lists/tuples of
them.  Shared by the sweeps (hf, graphnet) and bench/models.py."""


def output_tensors(out):
    import torch
    if isinstance(out, torch.Tensor):
        return [out]
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    if isinstance(out, dict):
        out = list(out.values())
    res = []
    for o in out if isinstance(out, (list, tuple)) else []:
        res += output_tensors(o)
    return res
