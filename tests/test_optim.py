"""Optimizer steps compiled (issues 12/13): tcjit.compile(opt.step) for
torch.optim's SGD, Adam and AdamW (foreach=True and the default) against
eager: every parameter, every state tensor (values, dtype, shape) and the
step counters after a few steps, and explain() for the graphs and breaks.
"""
import collections
import itertools

import pytest
import torch
import torch.nn as nn

import tcjit


def _model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


OPTIMIZERS = {
    "sgd": lambda ps, fe: torch.optim.SGD(ps, lr=0.1, foreach=fe),
    "sgd_momentum": lambda ps, fe: torch.optim.SGD(ps, lr=0.1, momentum=0.9,
                                                   foreach=fe),
    "sgd_nesterov_wd": lambda ps, fe: torch.optim.SGD(
        ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2,
        foreach=fe),
    "adam": lambda ps, fe: torch.optim.Adam(ps, lr=1e-2, foreach=fe),
    "adam_amsgrad": lambda ps, fe: torch.optim.Adam(ps, lr=1e-2, amsgrad=True,
                                                    foreach=fe),
    "adamw": lambda ps, fe: torch.optim.AdamW(ps, lr=1e-2, foreach=fe),
}


def _grads(model, step):
    gen = torch.Generator().manual_seed(100 + step)
    x = torch.randn(5, 8, generator=gen)
    model.zero_grad(set_to_none=True)
    model(x).pow(2).sum().backward()


def _same_state(oa, ob, atol):
    assert len(oa.state) == len(ob.state)
    for pa, pb in zip(oa.param_groups[0]["params"],
                      ob.param_groups[0]["params"]):
        torch.testing.assert_close(pa.detach(), pb.detach(), atol=atol,
                                   rtol=atol)
        sa, sb = oa.state[pa], ob.state[pb]
        assert sorted(sa) == sorted(sb)
        for k in sb:
            if isinstance(sb[k], torch.Tensor):
                assert sa[k].dtype == sb[k].dtype and sa[k].shape == sb[k].shape
                torch.testing.assert_close(sa[k], sb[k], atol=atol, rtol=atol)
            else:
                assert sa[k] == sb[k]


def run_steps(name, foreach, wrap, steps=3, atol=1e-6, warm=0):
    """Two equal models and optimizers: eager's opt.step() and wrap(opt)()
    take `steps` steps on equal gradients; `warm` eager steps first on
    both (the first step makes the optimizer's state)."""
    ma, mb = _model(), _model()
    oa = OPTIMIZERS[name](ma.parameters(), foreach)
    ob = OPTIMIZERS[name](mb.parameters(), foreach)
    for s in range(warm):
        for m, o in ((ma, oa), (mb, ob)):
            _grads(m, s)
            o.step()
    step = wrap(oa)
    for s in range(warm, warm + steps):
        _grads(ma, s)
        _grads(mb, s)
        step()
        ob.step()
        _same_state(oa, ob, atol)
    return oa, ob
