"""docs/ops.md is generated from the op registry: it must not be stale."""
import os

from tcjit.tools.gen_ops_doc import render

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    "docs", "ops.md")


def test_ops_md_is_up_to_date():
    with open(DOCS) as f:
        assert f.read() == render(), "docs/ops.md is stale: run `make docs-ops`"


def test_every_traced_spelling_names_a_registry_op_or_a_decomposition():
    from tcjit import _C
    from tcjit.tools.gen_ops_doc import DECOMPOSED
    ops = {row["name"] for row in _C.op_table()} | set(DECOMPOSED)
    for path, op in _C.bindings():
        if op is not None and not op.startswith(("float", "bfloat", "int", "uint", "bool")):
            assert op in ops, path
