"""tcjit.config: runtime settings, also usable as ``config.patch(...)``.

Every setting is pushed into the C runtime when it changes, so the per-call
path never reads Python attributes.
"""
import contextlib
import copy
import os
import sysconfig

from . import _C
from . import _modes

_DEFAULTS = {
    "recompile_limit": 8,        # cache entries per code object, then eager
    "num_threads": 0,            # kernel threads; 0 = all online cores
    "parallel_threshold": 32768,  # elements before a kernel is split
    "cache": 1,                  # on-disk kernel cache (docs/cache.md)
    "cache_size_mb": 1024,       # its bound: least recently used evicted
    "compile_workers": 0,        # processes compiling a graph's kernels;
                                 # 0 = auto (docs/cache.md), 1 = serial
    # 1: round every float16 / bfloat16 op result inside fused kernels as
    # eager stores it (exact eager answers; bf16 chains ~1.3-1.6x slower)
    "emulate_precision_casts": 0,
}


# Settings the C runtime never reads (compile options: each compile reads
# them through Backend.option): name -> (type, what it must be)
_PY_SETTINGS = dict.fromkeys(_modes.OPTIONS, (bool, "a bool"))
_PY_SETTINGS["template"] = (type(None), "None or a template name")
_PY_SETTINGS["templates"] = (dict, "a dict")


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
        # the options of compile modes (_modes.py) live on the Python
        # side: each compile reads them once (Backend.option)
        values = dict(_DEFAULTS, **_modes.OPTIONS, template=None)
        values["templates"] = copy.deepcopy(_modes.TEMPLATES)
        object.__setattr__(self, "_values", values)
        _C.set_config(skip_prefixes=_skip_prefixes(), **_DEFAULTS)

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"tcjit.config has no setting {name!r}") from None

    def __setattr__(self, name, value):
        if name in _PY_SETTINGS:
            kind, what = _PY_SETTINGS[name]
            if name == "template" and value is not None:
                _modes.template_settings(value, self.templates)
            elif not isinstance(value, kind):
                raise ValueError(f"tcjit.config.{name} must be {what}, got "
                                 f"{value!r}")
            self._values[name] = value
            return
        if name not in _DEFAULTS:
            raise AttributeError(f"tcjit.config has no setting {name!r}; "
                                 f"settings: {', '.join(self._values)}")
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"tcjit.config.{name} must be a non-negative int, "
                             f"got {value!r}")
        if name == "cache" and value > 1:
            raise ValueError(f"tcjit.config.cache must be 0 or 1, got {value!r}")
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
        items = ", ".join(f"{k}={v!r}" for k, v in self._values.items()
                          if k != "templates")
        return f"tcjit.config({items})"


config = Config()
