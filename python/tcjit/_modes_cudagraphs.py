"""reduce-overhead: a compiled entry's run recorded as a CUDA graph and
replayed (docs/modes.md).

The C runtime (src/frame_eval/cudagraphs.c) hands every entry compiled
with the "cudagraphs" option to recorder_for().  The entry's run -- tcjit's
PTX launches and torch's extern calls, all on torch's current stream -- is
recorded with torch.cuda.CUDAGraph into a private memory pool and
replayed:

* call 1 (per input shape for a size-generic entry) runs normally: the
  warm-up (module loads, cuBLAS handles and workspaces, lazy init);
* call 2 records.  An input at the same address in calls 1 and 2 (a
  parameter, a buffer, a preallocated cache) is read in place; the others
  get a static buffer the call's value is copied into;
* later calls check the addresses of the inputs read in place (one moved:
  record again with it copied), copy the others, replay, and copy the
  outputs out of the pool: the next replay writes the same memory, and a
  tensor a call returned must never change under its owner.

Outputs that are views of an input are rebuilt on the caller's input.
What cannot be recorded runs normally with one perf_hints log line.
"""
import re

import torch

from . import _C
from ._logging import emit

# recordings of one entry (input sizes of a size-generic entry, inputs
# that moved) before it runs without CUDA graphs
MAX_RECORDINGS = 64

# extern torch calls that draw random numbers (a graph replays the
# numbers it drew while recording)
_RNG = re.compile(r"rand|normal|bernoulli|dropout|multinomial|poisson|"
                  r"uniform|exponential|geometric|cauchy")

# torch's C++ check of input addresses (CUDA builds: its CUDA graph
# trees use it); tcjit's own (_C.cudagraph_moved) elsewhere
_ptrs_equal = getattr(torch._C, "_tensors_data_ptrs_at_indices_equal", None)

_reported = set()


def reset():
    """tcjit.reset(): report skips anew."""
    _reported.clear()


def _hint(where, why):
    """One perf_hints line per function and reason."""
    if (where, why) in _reported:
        return
    _reported.add((where, why))
    name, filename, line = where
    emit("perf_hints", f"skipping cudagraphs for {name} ({filename}:{line}): "
                       f"{why}; it runs without CUDA graphs")


def _rng_call(desc):
    for node in desc["nodes"]:
        name = getattr(node.get("call"), "__name__", "")
        if _RNG.search(name):
            return name
    return None


def recorder_for(desc, device, dynamic, training, where):
    """None (logged why) or make(run, transient, written) -> the entry's
    callable.  transient: the outputs only an in-place op's write-back
    reads, right after the run (they need no copy out of the graph's
    memory); written: (input, output) pairs, the write-backs of in-place
    ops (the kernels may also store into the input directly: schedule.h).
    """
    if device < 0:
        why = "a CPU graph (CUDA graphs need CUDA tensors)"
    elif training:
        why = "a graph that records autograd (training)"
    elif torch._C._current_graph_task_id() != -1:
        # a training step's compiled backward, run by autograd's engine
        why = "a backward graph (autograd's engine runs it)"
    else:
        rng = _rng_call(desc)
        why = f"random numbers ({rng}) in the graph" if rng else None
    if why is not None:
        _hint(where, why)
        return None
    return lambda run, transient=(), written=(): Recorder(
        run, device, dynamic, where, transient, written)


def _same_memory(a, b):
    return (a.data_ptr() == b.data_ptr() and a.shape == b.shape
            and a.stride() == b.stride() and a.dtype == b.dtype)


def _ptr(x):
    return x.data_ptr() if isinstance(x, torch.Tensor) else None


class _Recording:
    """One CUDA graph of an entry, its static inputs and output plan."""

    def __init__(self, run, inputs, device, pool, copy, transient=frozenset(),
                 written=frozenset()):
        # pool: the entry's [memory pool handle] (made at the first
        # capture: Recorder.pool)
        # copy: indices of the inputs given a static buffer
        self.transient = transient
        # copied inputs the graph may write: copied back after a replay
        self.copy_back = tuple(sorted({i for i, _ in written if i in copy}))
        # transient outputs written back into an input read in place: the
        # graph does the write-back itself, the output is the input (the
        # runtime's copy_ of a tensor into itself does no work)
        self.folded = {o: i for i, o in written
                       if o in transient and i not in copy}
        self.copied = tuple(sorted(copy))
        self.inplace = tuple(i for i, x in enumerate(inputs)
                             if isinstance(x, torch.Tensor) and i not in copy)
        self.statics = list(inputs)
        self.spans = {}          # copied inputs whose elements overlap
        for i in self.copied:
            x = inputs[i]
            if any(s == 0 and n > 1 for n, s in zip(x.shape, x.stride())):
                # an expanded input: copy the memory it spans, not its
                # elements (copy_ cannot write overlapping elements)
                n = 1 + sum((d - 1) * s for d, s in zip(x.shape, x.stride()))
                base = torch.empty(n, dtype=x.dtype, device=x.device)
                self.spans[i] = (base, n)
                self.statics[i] = base.as_strided(x.size(), x.stride(), 0)
            else:
                self.statics[i] = torch.empty_strided(
                    x.size(), x.stride(), dtype=x.dtype, device=x.device)
            self._copy_in(i, x)
        self.ptrs = [_ptr(x) for x in self.statics]
        self.inplace_ptrs = tuple(self.ptrs[i] for i in self.inplace)
        self.inplace_list = list(self.inplace)
        self.outs = self._capture(run, device, pool)
        self.plan = self._plan()

    def _run(self, run):
        outs = tuple(run(*self.statics))
        for o, i in self.folded.items():
            # (the kernels may have stored into the input already)
            if not _same_memory(outs[o], self.statics[i]):
                self.statics[i].copy_(outs[o])
        return outs

    def _capture(self, run, device, pool):
        """Record run on the static inputs into self.graph; its outputs
        (in the pool; a recording does not run the work)."""
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.device(device):
            if not pool:
                pool.append(torch.cuda.graph_pool_handle())
            with torch.cuda.graph(self.graph, pool=pool[0]):
                return self._run(run)

    def _copy_in(self, i, x):
        span = self.spans.get(i)
        if span is None:
            self.statics[i].copy_(x)
        else:
            span[0].copy_(x.as_strided((span[1],), (1,), x.storage_offset()))

    def _plan(self):
        """Per output: ("input", i) the input itself; ("view", i) a view of
        input i; ("raw",) a transient output, left in the graph's memory;
        ("group", k) shares storage with earlier output k (copied once);
        ("clone",) its own copy."""
        by_storage = {}
        for i in range(len(self.statics)):
            x = self.statics[i]
            if isinstance(x, torch.Tensor):
                by_storage.setdefault(x.untyped_storage().data_ptr(), i)
        plan, seen = [], {}
        for k, o in enumerate(self.outs):
            st = o.untyped_storage().data_ptr()
            same = [i for i, x in enumerate(self.statics) if x is o]
            if same:
                plan.append(("input", same[0]))
            elif st in by_storage:
                plan.append(("view", by_storage[st]))
            elif k in self.folded:
                plan.append(("input", self.folded[k]))
            elif k in self.transient:
                plan.append(("raw",))
            elif st in seen:
                plan.append(("group", seen[st]))
                plan[seen[st]] = ("group", seen[st])
            else:
                seen[st] = k
                # a contiguous output is copied by clone(); another (a
                # strided view) with its whole storage, strides and offset
                # as the run made them
                dense = (o.is_contiguous() and o.storage_offset() == 0
                         and o.untyped_storage().nbytes()
                         == o.numel() * o.element_size())
                plan.append(("clone",) if dense else ("group", k))
        return plan

    def replay(self, inputs):
        """The outputs, or None when an input read in place moved."""
        if _ptrs_equal is not None:
            if not _ptrs_equal(list(inputs), self.ptrs, self.inplace_list):
                return None
        elif _C.cudagraph_moved(inputs, self.inplace, self.inplace_ptrs) >= 0:
            return None
        for i in self.copied:
            self._copy_in(i, inputs[i])
        self.graph.replay()
        for i in self.copy_back:
            inputs[i].copy_(self.statics[i])
        return self._outputs(inputs)

    def _outputs(self, inputs):
        out, storages = [], {}
        for k, (o, p) in enumerate(zip(self.outs, self.plan)):
            if p[0] == "clone":
                out.append(o.clone())
            elif p[0] == "raw":
                out.append(o)
            elif p[0] == "input":
                out.append(inputs[p[1]])
            elif p[0] == "view":
                x, s = inputs[p[1]], self.statics[p[1]]
                off = o.storage_offset() - s.storage_offset()
                out.append(x.as_strided(o.size(), o.stride(),
                                        x.storage_offset() + off))
            else:
                st = storages.get(p[1])
                if st is None:
                    st = storages[p[1]] = o.untyped_storage().clone()
                t = torch.empty(0, dtype=o.dtype, device=o.device)
                out.append(t.set_(st, o.storage_offset(), o.size(),
                                  o.stride()))
        return tuple(out)


class Recorder:
    """The callable a compiled entry runs under reduce-overhead."""

    def __init__(self, run, device, dynamic, where, transient=(),
                 written=()):
        self.run = run
        self.transient = frozenset(transient)
        self.written = frozenset(written)
        self.device = device
        self.dev = torch.device("cuda", device)
        self.dynamic = dynamic
        self.where = where
        self.off = None          # why it stopped recording, once it did
        self.warm = {}           # key -> input addresses of the warm-up
        self.recordings = {}     # key -> _Recording
        self.moved = set()       # inputs once read in place that moved
        self.nrecorded = 0
        # the private memory pool of this entry's recordings (a replay's
        # outputs are copied out before anything else runs, so they share
        # it).  One per entry, not one per device: torch frees a pool when
        # its last graph goes (tcjit.reset()), and a capture into a freed
        # pool's handle fails an allocator assert and leaves torch's CUDA
        # generator in capture mode (every later torch.randn raises)
        self.pool = []

    def _key(self, inputs):
        if not self.dynamic:
            return None
        return tuple((tuple(x.shape), x.stride())
                     if isinstance(x, torch.Tensor) else x for x in inputs)

    def _give_up(self, why):
        self.off = why
        self.recordings.clear()
        _hint(self.where, why)

    def __call__(self, *inputs):
        # inputs: a tuple (C's cudagraph_moved reads it as one)
        if self.off is not None:
            return self.run(*inputs)
        key = self._key(inputs)
        rec = self.recordings.get(key)
        if rec is not None:
            out = rec.replay(inputs)
            if out is not None:
                return out
            # an input read in place moved: copy it from now on
            self.moved.update(i for i in rec.inplace
                              if inputs[i].data_ptr() != rec.ptrs[i])
            del self.recordings[key]
            return self._record(key, inputs)
        if key not in self.warm:
            for x in inputs:
                if isinstance(x, torch.Tensor) and x.device != self.dev:
                    self._give_up(f"an input on {x.device}")
                    return self.run(*inputs)
            self.warm[key] = [_ptr(x) for x in inputs]
            return self.run(*inputs)
        return self._record(key, inputs)

    def _record(self, key, inputs):
        if self.nrecorded >= MAX_RECORDINGS:
            self._give_up(f"more than {MAX_RECORDINGS} recordings (input "
                          f"sizes, or inputs that move between calls)")
            return self.run(*inputs)
        warm = self.warm[key]
        copy = {i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)
                and (i in self.moved or x.data_ptr() != warm[i])}
        try:
            rec = _Recording(self.run, inputs, self.device, self.pool, copy,
                             self.transient, self.written)
        except Exception as e:  # a sync, a CPU op, ... while capturing
            self._give_up(f"recording failed ({type(e).__name__}: {e})")
            return self.run(*inputs)
        self.nrecorded += 1
        self.recordings[key] = rec
        return rec.replay(inputs)
