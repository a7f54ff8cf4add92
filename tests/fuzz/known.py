"""Failure classes the fuzzer finds in the current code.

KNOWN maps a regular expression, matched against a failure's whole
signature (backend:kind[@2]:detail, see check.py), to what is known about
it.  tests/test_fuzz.py fails on any failure no entry matches, and warns
about entries that match nothing in its slice: a fix removes its entries.
"""
import re


KNOWN = {
}


def known_as(signature):
    """The KNOWN entry matching a signature, or None."""
    for pattern in KNOWN:
        if re.fullmatch(pattern, signature):
            return pattern
    return None
