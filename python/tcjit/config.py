"""tcjit.config: runtime settings, also usable as ``config.patch(...)``.

Every setting is pushed into the C runtime when it changes, so the per-call
path never reads Python attributes.
"""
import contextlib
import os
import sysconfig

from . import _C

_DEFAULTS = {
    "recompile_limit": 8,        # cache entries per code object, then eager
    "num_threads": 0,            # kernel threads; 0 = all online cores
    "parallel_threshold": 32768,  # elements before a kernel is split
    # 1: round every float16 / bfloat16 op result inside fused kernels as
    # eager stores it (exact eager answers; bf16 chains ~1.3-1.6x slower)
    "emulate_precision_casts": 0,
}


def _skip_prefixes():
    """(prefix, skip) pairs: roots from torch, tcjit and the standard
    library are never traced; site-packages (inside the stdlib tree) is."""
    import torch

    def d(p):
        return os.path.join(os.path.realpath(p), "")

    pairs = [(d(os.path.dirname(torch.__file__)), True),
             (d(os.path.dirname(__file__)), True)]
    for key in ("purelib", "platlib"):
        pairs.append((d(sysconfig.get_paths()[key]), False))
    for key in ("stdlib", "platstdlib"):
        pairs.append((d(sysconfig.get_paths()[key]), True))
    return tuple(pairs)


class Config:
    """Settings of the tcjit runtime (see docs/config.md)."""

    def __init__(self):
        object.__setattr__(self, "_values", dict(_DEFAULTS))
        _C.set_config(skip_prefixes=_skip_prefixes(), **_DEFAULTS)

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"tcjit.config has no setting {name!r}") from None

    def __setattr__(self, name, value):
        if name not in _DEFAULTS:
            raise AttributeError(f"tcjit.config has no setting {name!r}; "
                                 f"settings: {', '.join(_DEFAULTS)}")
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"tcjit.config.{name} must be a non-negative int, "
                             f"got {value!r}")
        _C.set_config(**{name: value})
        self._values[name] = value

    @contextlib.contextmanager
    def patch(self, **changes):
        """Temporarily change settings: ``with tcjit.config.patch(recompile_limit=2):``
        (also works as a decorator)."""
        saved = {k: getattr(self, k) for k in changes}
        try:
            for k, v in changes.items():
                setattr(self, k, v)
            yield self
        finally:
            for k, v in saved.items():
                setattr(self, k, v)

    def __repr__(self):
        items = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        return f"tcjit.config({items})"


config = Config()
