#!/usr/bin/env python3
"""check-layers.py - fail the build on an include that breaks src/'s layering.

    python3 scripts/check-layers.py [SRC_DIR]      (default: src next to here)

src/ is a stack of stages (docs/dev.md, "Layers"); every directory is one
stage, src/module.c is the top.  A file may include

  * any header of its own stage, and
  * the PUBLIC headers (below) of a stage on a LOWER level,

never a header of a sibling (same level, other stage) or a higher stage,
nor another stage's private header.  src/graph/ is plain C: it must not
include <Python.h> either (tests/c/test_graph links it without Python).

Only `#include "..."` lines are read (resolved as the compiler does: next to
the including file, then under src/); a stage's internals may include each
other freely.  Exit status 1 with one line per violation, naming the file,
the include and the rule.  Python 3 standard library only (the build
already requires Python).
"""
import os
import re
import sys

# Stage (directory under src/, "" for src/ itself) -> level, bottom = 0.
LEVELS = {
    "pyrt": 0,        # CPython shim: frame access, value helpers
    "graph": 0,       # graph IR, op registry, schedule, KIR (no Python)
    "runtime": 1,     # what both backends share; the backend interface
    "jit": 2,         # CPU backend (libgccjit)
    "gpu": 2,         # CUDA backend (PTX + driver API)
    "guards": 3,
    "tracer": 4,
    "frame_eval": 5,  # orchestrates the stages below
    "": 6,            # module.c
}

# What a stage offers the stages above it.  Every other header of the stage
# is private to it.
PUBLIC = {
    "pyrt": {"pyframe.h", "pyvalue.h"},
    "graph": {"graph.h", "ops.h", "kir.h", "schedule.h", "extern.h",
              "textbuf.h", "mathconst.h", "reduce_plan.h", "freeze.h",
              "reinplace.h", "bn_lower.h"},
    "runtime": {"backend.h", "extern_table.h", "tensor_alloc.h",
                "torch_tensor.h",
                "extern_call.h", "threadpool.h", "tunetable.h",
                "diskcache.h"},
    "jit": {"jit.h"},
    "gpu": {"gpu.h"},
    "guards": {"guards.h", "nn_module.h", "tensor_keys.h"},
    "tracer": {"tracer.h", "bindings.h"},
    "frame_eval": {"eval_frame.h", "bn_eval.h"},
    "": set(),
}

NO_PYTHON = {"graph"}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def stage_of(path, src):
    rel = os.path.relpath(path, src)
    parts = rel.split(os.sep)
    return "" if len(parts) == 1 else parts[0]


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.abspath(argv[1] if len(argv) > 1
                          else os.path.join(here, "..", "src"))
    errors = []
    files = []
    for root, dirs, names in os.walk(src):
        dirs.sort()
        files += [os.path.join(root, n) for n in sorted(names)
                  if n.endswith((".c", ".h"))]
    for path in files:
        rel = os.path.relpath(path, os.path.dirname(src))
        stage = stage_of(path, src)
        if stage not in LEVELS:
            errors.append(f"{rel}: directory src/{stage}/ is no stage: "
                          f"add it to LEVELS and PUBLIC in "
                          f"scripts/check-layers.py")
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        for lineno, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if m is None:
                continue
            where = f"{rel}:{lineno}: #include {m.group(1)}{m.group(2)}" \
                    f"{'>' if m.group(1) == '<' else chr(34)}"
            if m.group(1) == "<":
                if stage in NO_PYTHON and m.group(2) == "Python.h":
                    errors.append(f"{where}: src/{stage}/ is plain C and "
                                  f"must not use Python")
                continue
            target = None
            for base in (os.path.dirname(path), src):
                cand = os.path.normpath(os.path.join(base, m.group(2)))
                if os.path.isfile(cand):
                    target = cand
                    break
            if target is None:
                errors.append(f"{where}: no such file next to it or under "
                              f"src/")
                continue
            if os.path.commonpath([target, src]) != src:
                continue  # outside src/: not a stage
            tstage = stage_of(target, src)
            if tstage == stage:
                continue
            name = os.path.basename(target)
            mine = f"src/{stage}/ (level {LEVELS[stage]})" if stage \
                else f"src/ (level {LEVELS[stage]})"
            theirs = f"src/{tstage}/ (level {LEVELS.get(tstage, '?')})"
            if tstage not in LEVELS:
                errors.append(f"{where}: src/{tstage}/ is no stage")
            elif LEVELS[tstage] > LEVELS[stage]:
                errors.append(f"{where}: {mine} must not include a higher "
                              f"stage, {theirs}")
            elif LEVELS[tstage] == LEVELS[stage]:
                errors.append(f"{where}: {mine} must not include its "
                              f"sibling stage {theirs}")
            elif name not in PUBLIC[tstage]:
                errors.append(f"{where}: {name} is private to {theirs}; "
                              f"public there: "
                              f"{', '.join(sorted(PUBLIC[tstage]))}")
    for e in errors:
        print(f"layer error: {e}", file=sys.stderr)
    if errors:
        print(f"check-layers: {len(errors)} include(s) break the layering "
              f"of src/ (docs/dev.md, \"Layers\")", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
