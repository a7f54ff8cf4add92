"""Failure classes the fuzzer finds in the current code.

KNOWN maps a regular expression, matched against a failure's whole
signature (backend:kind[@2]:detail, see check.py), to what is known about
it.  tests/test_fuzz.py fails on any failure no entry matches, and warns
about entries that match nothing in its slice: a fix removes its entries.
"""
import re


KNOWN = {
    # F.layer_norm / F.rms_norm with a weight of another dtype than x:
    # eager's result has x's dtype, tcjit's the promoted one.
    r"auto:dtype(@2)?:(layer_norm|rms_norm)": "norm result dtype with a weight of another dtype",

    # torch.logical_or(x, 5), torch.maximum(x, 0.5): eager raises TypeError
    # (the other operand must be a tensor), tcjit computes.
    r"auto:no-exception(@2)?:TypeError: (logical_(or|and|xor)|maximum|minimum)\(\): "
    r"argument '\.\.\.' \(position N\) must be Tensor.*":
        "binary ops that take only tensors accept Python numbers",
}


def known_as(signature):
    """The KNOWN entry matching a signature, or None."""
    for pattern in KNOWN:
        if re.fullmatch(pattern, signature):
            return pattern
    return None
