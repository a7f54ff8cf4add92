"""Compile modes, per-compile options and config templates (docs/modes.md).

An *option* is a named setting that a compile reads (``cudagraphs``,
``max_autotune``, ``freezing``); each is also a ``tcjit.config`` key.  A
*mode* is a named set of options, as torch.compile's ``mode=``.  A
*template* is a named set of options that may also pick a mode and a
backend (``tcjit.config.templates``), as the config templates of
compiler harnesses (PaddlePaddle GraphNet's test_compiler).

Priority, highest first: ``options=`` of tcjit.compile > its ``mode=`` >
its ``template=`` > ``tcjit.config.template`` > the ``tcjit.config`` keys.
The compile pipeline reads the effective values once per compile
(``Backend.option``; C: ``tc_backend_option``), never per call.
"""

# option -> default (also the tcjit.config default)
OPTIONS = {
    "cudagraphs": False,     # reduce-overhead: replay CUDA graphs
    "max_autotune": False,   # time candidate kernel configurations
    "freezing": False,       # parameters as constants (inference)
}

# torch.compile's spellings of the same settings
ALIASES = {"triton.cudagraphs": "cudagraphs"}

# a mode sets the options it names; "default" sets none (as mode=None)
MODES = {
    "default": {},
    "reduce-overhead": {"cudagraphs": True},
    "max-autotune": {"max_autotune": True, "cudagraphs": True},
    "max-autotune-no-cudagraphs": {"max_autotune": True, "cudagraphs": False},
}

BACKENDS = ("auto", "eager")

# GraphNet's template names that mean something here; "cutlass" and "tma"
# do not (no CUTLASS kernels, no TMA loads): docs/modes.md
TEMPLATES = {
    "default": {},
    "triton": {},        # tcjit's own kernels are what Triton is to Inductor
    "cpp_wrapper": {},   # the per-call runtime is C already
    "aten": {"backend": "eager"},
    "eager": {"backend": "eager"},
    "cudagraphs": {"mode": "reduce-overhead"},
    "max_autotune": {"mode": "max-autotune"},
    "max_autotune_no_cudagraphs": {"mode": "max-autotune-no-cudagraphs"},
    "freezing": {"freezing": True},
}


def _names(d):
    return ", ".join(repr(k) for k in d)


def check_options(options, what="option"):
    """A copy of options with aliases resolved; ValueError for an unknown
    key, TypeError for a value that is not a bool."""
    out = {}
    for key, value in options.items():
        name = ALIASES.get(key, key)
        if name not in OPTIONS:
            raise ValueError(f"unknown tcjit {what} {key!r}; valid: "
                             f"{_names(OPTIONS)} (and {_names(ALIASES)})")
        if not isinstance(value, (bool, int)) or value not in (0, 1):
            raise TypeError(f"tcjit {what} {key!r} must be a bool, got "
                            f"{value!r}")
        out[name] = bool(value)
    return out


def mode_options(mode):
    """The options a mode sets (None: none)."""
    if mode is None:
        return {}
    if mode not in MODES:
        raise ValueError(f"unknown tcjit mode {mode!r}; valid: "
                         f"{_names(MODES)}")
    return dict(MODES[mode])


def template_settings(name, templates):
    """(backend or None, options) of a template: its own keys over those of
    the mode it names.  None selects nothing."""
    if name is None:
        return None, {}
    if name not in templates:
        raise ValueError(f"unknown tcjit template {name!r}; valid: "
                         f"{_names(templates)}")
    body = dict(templates[name])
    backend = body.pop("backend", None)
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"tcjit template {name!r}: backend {backend!r} is "
                         f"not one of {_names(BACKENDS)}")
    opts = mode_options(body.pop("mode", None))
    opts.update(check_options(body, f"option of template {name!r}"))
    return backend, opts


def per_compile(mode, options, template, templates):
    """What tcjit.compile's arguments set: (backend or None, options)."""
    backend, opts = template_settings(template, templates)
    opts.update(mode_options(mode))
    if options is not None:
        if not isinstance(options, dict):
            raise TypeError(f"options must be a dict, got "
                            f"{type(options).__name__}")
        opts.update(check_options(options))
    return backend, opts


def effective(config, backend, opts):
    """(backend or None, every option's value) of one compile: its own
    settings over config.template's over the config keys."""
    values = {k: getattr(config, k) for k in OPTIONS}
    t_backend, t_opts = template_settings(config.template, config.templates)
    values.update(t_opts)
    values.update(opts)
    return backend if backend is not None else t_backend, values
