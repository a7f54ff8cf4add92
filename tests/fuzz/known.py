"""Failure classes the fuzzer finds in the current code.

KNOWN maps a regular expression, matched against a failure's whole
signature (backend:kind[@2]:detail, see check.py), to what is known about
it.  tests/test_fuzz.py fails on any failure no entry matches, and warns
about entries that match nothing in its slice (except BY_DESIGN ones): a
fix removes its entries.
"""
import re


KNOWN = {
    # by design: float16 / bfloat16 values are rounded once per fused
    # kernel (as Inductor does); eager rounds after every op, which an
    # exact comparison can see.  With tcjit.config.emulate_precision_casts
    # = 1 the program gives eager's answer (check.py _precision_only),
    # at the cost of the roundings (docs/config.md)
    r"(auto|dynamic|grad):precision(@2)?:.*":
        "reduced floats rounded once per kernel (emulate_precision_casts=0)",
    # eager's saved tensors carry version counters: a value an op's
    # backward needs, written in place later, makes that backward raise
    # ("one of the variables needed for gradient computation has been
    # modified by an inplace operation").  tcjit raises it too where one
    # of its derivative rules reads the overwritten value (_autograd.py
    # _Builder.read).  Left: ops whose graph is a decomposition, whose
    # rules read other values than eager's op saved (logsumexp saves its
    # result; tcjit's log(sum(exp(x - max))) + max reads the exp).  Fuzz
    # seed 274 (slice, backend grad)
    r"grad:no-exception(@2)?:RuntimeError: one of the variables needed.*":
        "a saved value written in place, read only by a decomposed op's "
        "rules: eager's backward raises, tcjit's does not",
}

# Entries that stay while they match nothing: tcjit's documented behaviour,
# not bugs waiting for a fix.
BY_DESIGN = {r"(auto|dynamic|grad):precision(@2)?:.*"}


def known_as(signature):
    """The KNOWN entry matching a signature, or None."""
    for pattern in KNOWN:
        if re.fullmatch(pattern, signature):
            return pattern
    return None
