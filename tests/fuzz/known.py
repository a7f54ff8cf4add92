"""Failure classes the fuzzer finds in the current code.

KNOWN maps a regular expression, matched against a failure's whole
signature (backend:kind[@2]:detail, see check.py), to what is known about
it.  tests/test_fuzz.py fails on any failure no entry matches, and warns
about entries that match nothing in its slice: a fix removes its entries.
"""
import re


KNOWN = {
    # x.contiguous() of a tensor eager calls contiguous (size-1 dims, no
    # elements) is x itself in eager; tcjit copies it (so x.contiguous()
    # .add_(1) does not change x) and restrides it.
    r"auto:(unmerged|unshared)(@2)?:contiguous\+input": "contiguous() copies a contiguous input",

    # Strides of size-1 dims differ from eager's (expand's new leading dim,
    # pointwise results of inputs with size-1 dims).
    r"auto:stride1(@2)?:\w+": "strides of size-1 dims differ from eager's",

    # F.scaled_dot_product_attention(q.transpose(0, 1), ...): eager's CPU
    # result follows q's layout.
    r"auto:stride(@2)?:sdpa": "sdpa output layout with a permuted q",
}


def known_as(signature):
    """The KNOWN entry matching a signature, or None."""
    for pattern in KNOWN:
        if re.fullmatch(pattern, signature):
            return pattern
    return None
