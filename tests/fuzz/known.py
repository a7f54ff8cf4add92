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
