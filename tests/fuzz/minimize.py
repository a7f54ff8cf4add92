"""Shrink a failing program while it keeps failing the same way.

"The same way" is the failure's backend and kind (and, for exceptions, the
exception types): the detail (which op) may change while shrinking, as when
`x.amax(0).sin()` becomes `x.amax(0)`.  Candidates, tried greedily until
none helps or the time budget is spent:

* drop outputs; drop dead statements; drop each statement, or bypass it
  (its uses read one of its operands instead);
* drop unused inputs; make inputs contiguous, without special values,
  float32, smaller; give them literal values (the same for both calls).

Every candidate runs in a child process (forked on the CPU), so one that
crashes does not end the minimizer: it only counts for a crash target.
"""
import copy
import dataclasses
import json
import os
import select
import signal
import subprocess
import sys
import time

import torch

from .check import run_program, signature
from .program import FLOATS, NAME_RE

MAX_LITERAL = 48          # elements up to which inputs get literal values


def same_class(target, failures):
    """A failure of the same backend and kind as target, or None."""
    for f in failures:
        if f["backend"] != target["backend"] or f["kind"] != target["kind"]:
            continue
        if f["kind"] in ("raised", "wrong-exception", "no-exception") and \
                f["detail"].split(":")[0] != target["detail"].split(":")[0]:
            continue
        return f
    return None


def run_isolated(prog, backend, device, timeout=120, repeat=1):
    """(failures, death) of prog run `repeat` times in a child process:
    death is the signal that killed it, "exitN", "hang", or None.  On the
    CPU the child is forked (cheap); CUDA cannot be used after a fork:
    there, a fresh process."""
    if device != "cpu":
        return _run_in_subprocess(prog, backend, device, timeout, repeat)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: run, report, exit without cleanup
        try:
            os.close(r)
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
            try:
                for _ in range(repeat):
                    failures = run_program(prog, (backend,), device)[0]
                data = json.dumps(failures)
            except Exception as e:  # noqa: BLE001 - a broken candidate
                data = json.dumps({"error": repr(e)})
            os.write(w, data.encode())
        finally:
            os._exit(0)
    os.close(w)
    out, deadline = b"", time.time() + timeout
    while time.time() < deadline:
        ready, _, _ = select.select([r], [], [], 0.1)
        if ready:
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            out += chunk
    os.close(r)
    if time.time() >= deadline:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return [], "hang"
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return [], signal.Signals(os.WTERMSIG(status)).name
    if os.WEXITSTATUS(status):     # exit(4): an internal compiler error in libgccjit
        return [], f"exit{os.WEXITSTATUS(status)}"
    failures = json.loads(out.decode() or "[]")
    return (failures if isinstance(failures, list) else []), None


def _run_in_subprocess(prog, backend, device, timeout, repeat):
    from .runner import FUZZ, ROOT, worker_env
    cmd = [sys.executable, FUZZ, "--run-program", json.dumps(prog.to_json()),
           "--backends", backend, "--device", device, "--count", str(repeat)]
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=worker_env(), capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [], "hang"
    if p.returncode < 0:
        return [], signal.Signals(-p.returncode).name
    if p.returncode == 3:
        return [], "CUDA-error"
    if p.returncode not in (0, 1):
        return [], f"exit{p.returncode}"
    try:
        return json.loads(p.stdout.decode().strip().splitlines()[-1]), None
    except (ValueError, IndexError):
        return [], None


class Minimizer:
    def __init__(self, prog, failure, device="cpu", budget_s=60.0):
        self.target, self.device = failure, device
        self.deadline = time.time() + budget_s
        self.best = prog
        self.runs = 0

    def fails(self, prog):
        """The failure prog shows in the target's class, or None."""
        self.runs += 1
        t = self.target
        try:
            prog.load()
        except SyntaxError:
            return None
        crash = t["kind"] in ("crash", "hang")
        # a crash may need the program's code compiled twice in one process
        failures, death = run_isolated(prog, t["backend"], self.device, repeat=3 if crash else 1)
        if crash:
            return dict(t) if death == t["detail"] else None
        return None if death else same_class(t, failures)

    def try_(self, cand):
        if time.time() > self.deadline or cand is None:
            return False
        f = self.fails(cand)
        if f is not None:
            self.best = cand
            if f["kind"] not in ("crash", "hang"):
                self.target = dict(self.target, **{k: f[k] for k in ("detail", "message",
                                                                     "where", "call")})
            return True
        return False

    def run(self):
        progress = True
        while progress and time.time() < self.deadline:
            progress = False
            for step in (self.outputs, self.dead, self.statements, self.unused_inputs,
                         self.inputs, self.literals):
                progress |= step()
        return self.best, self.target

    # ------------------------------------------------------------ steps

    def outputs(self):
        p, changed = self.best, False
        i = 0
        while i < len(p.outputs) and len(p.outputs) > 1:
            cand = dataclasses.replace(p, outputs=p.outputs[:i] + p.outputs[i + 1:],
                                       ret="tuple" if p.ret == "single" else p.ret)
            if self.try_(cand):
                p, changed = self.best, True
            else:
                i += 1
        if p.ret != "tuple" and self.try_(dataclasses.replace(p, ret="tuple")):
            changed = True
        return changed

    def dead(self):
        """Drop every statement nothing reads (in-place ones stay)."""
        p = self.best
        live = set(p.outputs)
        keep = []
        for s in reversed(p.stmts):
            if s.inplace or not s.targets or set(s.targets) & live:
                keep.append(s)
                live |= set(s.uses)
        keep.reverse()
        if len(keep) < len(p.stmts):
            return self.try_(dataclasses.replace(p, stmts=keep))
        return False

    def statements(self):
        changed = False
        i = len(self.best.stmts) - 1
        while i >= 0:
            p = self.best
            if i >= len(p.stmts):
                i -= 1
                continue
            s = p.stmts[i]
            rest = p.stmts[:i] + p.stmts[i + 1:]
            cands = []
            later_uses = {u for t in p.stmts[i + 1:] for u in t.uses} | set(p.outputs)
            if not set(s.targets) & later_uses:
                cands.append(dataclasses.replace(p, stmts=rest))
            else:
                for op in dict.fromkeys(u for u in s.uses if u not in s.targets):
                    cands.append(self.bypass(p, i, op))
                outs = [o for o in p.outputs if o not in s.targets]
                if outs:
                    cands.append(dataclasses.replace(
                        p, stmts=[t for t in rest if not set(t.uses) & set(s.targets)],
                        outputs=outs))
            if any(self.try_(c) for c in cands):
                changed = True
            i -= 1
        return changed

    @staticmethod
    def bypass(p, i, op):
        """Statement i dropped, its targets read as op afterwards."""
        s = p.stmts[i]
        stmts = list(p.stmts[:i])
        for t in p.stmts[i + 1:]:
            for name in s.targets:
                t = t.rename(name, op)
            stmts.append(t)
        outs = [op if o in s.targets else o for o in p.outputs]
        return dataclasses.replace(p, stmts=stmts, outputs=outs)

    def unused_inputs(self):
        p = self.best
        used = {u for s in p.stmts for u in NAME_RE.findall(s.text)} | set(p.outputs)
        keep = [i for i in p.inputs if i.name in used]
        if len(keep) < len(p.inputs):
            return self.try_(dataclasses.replace(p, inputs=keep))
        return False

    def inputs(self):
        changed = False
        for k in range(len(self.best.inputs)):
            for edit in (self.contiguous, self.no_specials, self.to_float32, self.smaller):
                try:
                    cands = edit(self.best.inputs[k])
                except Exception:  # noqa: BLE001 - an input that cannot be rebuilt so
                    cands = []
                for cand_input in cands:
                    p = self.best
                    ins = list(p.inputs)
                    ins[k] = cand_input
                    if self.try_(dataclasses.replace(p, inputs=ins)):
                        changed = True
                        break
        return changed

    def contiguous(self, inp):
        if inp.kind == "number" or not inp.layout:
            return []
        t = _build(inp)
        values = tuple(_py(v) for v in t.reshape(-1).tolist()) if inp.kind == "literal" else ()
        return [dataclasses.replace(inp, base_shape=tuple(t.shape), layout="", specials=(),
                                    values=values)]

    @staticmethod
    def no_specials(inp):
        return [dataclasses.replace(inp, specials=())] if inp.specials else []

    @staticmethod
    def to_float32(inp):
        if inp.kind in ("randn", "literal") and inp.dtype in FLOATS and inp.dtype != "float32":
            return [dataclasses.replace(inp, dtype="float32")]
        return []

    @staticmethod
    def smaller(inp):
        if inp.kind == "number" or inp.layout:
            return []
        out = []
        for d, n in enumerate(inp.base_shape):
            for m in sorted({1, 2, n // 2}):
                if 0 < m < n:
                    s = list(inp.base_shape)
                    s[d] = m
                    kind = "randn" if inp.kind == "literal" else inp.kind
                    out.append(dataclasses.replace(inp, base_shape=tuple(s), specials=(),
                                                   kind=kind, values=()))
        return out

    def literals(self):
        """Inputs as literal values (for both calls: those of the call that
        failed)."""
        p, changed = self.best, False
        variant = 1 if self.target.get("call") == 2 else 0
        for k, inp in enumerate(p.inputs):
            if inp.kind in ("number", "literal"):
                continue
            try:
                t = _build(dataclasses.replace(inp, layout=""), variant)
            except Exception:  # noqa: BLE001
                continue
            if t.numel() > MAX_LITERAL:
                continue
            vals = tuple(_py(v) for v in t.reshape(-1).tolist())
            lit = dataclasses.replace(inp, kind="literal", values=vals, specials=())
            for cand in (dataclasses.replace(lit, values=tuple(_round(v) for v in vals)), lit):
                ins = list(self.best.inputs)
                ins[k] = cand
                if self.try_(dataclasses.replace(self.best, inputs=ins)):
                    changed = True
                    break
        return changed


def _build(inp, variant=0):
    ns = {"torch": torch, "variant": variant, "device": "cpu"}
    exec("\n".join(inp.code()), ns)
    return ns[inp.name]


def _py(v):
    return float(v) if isinstance(v, float) else v


def _round(v):
    if isinstance(v, float) and v == v and abs(v) != float("inf"):
        return round(v, 1)
    return v


def minimize(prog, failure, device="cpu", budget_s=60.0):
    """(smallest program found, its failure)."""
    m = Minimizer(copy.deepcopy(prog), failure, device, budget_s)
    best, target = m.run()
    target["signature"] = signature(target)
    return best, target
