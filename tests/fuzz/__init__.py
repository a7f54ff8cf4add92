"""tcjit's differential fuzzer.

Random programs (gen.py) are run eagerly and through tcjit.compile with
both backends (check.py); every difference is a failure with a signature
(backend:kind:detail).  Failing programs are shrunk (minimize.py) into
standalone reproducers (program.py writes them).  runner.py runs batches
in worker processes, so a crash is reported with its seed.

    python3 tests/fuzz --count 2000 --seed 0 --jobs 2
    make fuzz FUZZ_ARGS="--count 20000 --jobs 2"

See docs/dev.md.
"""
