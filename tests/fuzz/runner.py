"""Batches of seeds run in worker processes.

A worker (python3 tests/fuzz --worker) reads chunk commands on stdin and
writes one JSON line per phase of each seed, then the seed's result.  When
a worker dies, the parent knows the seed and phase it was in: that seed is
reported as a crash (signal, and the tail of its stderr, where faulthandler
writes the Python stack), and a fresh worker goes on with the next seed.
A seed that writes nothing for `timeout` seconds is a hang.
"""
import collections
import json
import os
import queue
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time

FUZZ = os.path.dirname(os.path.abspath(__file__))     # python3 FUZZ runs __main__.py
ROOT = os.path.dirname(os.path.dirname(FUZZ))


def worker_env(jobs=1):
    """A worker's environment.  With several workers each gets its share of
    the cores for torch's and tcjit's threads: 15 workers of 16 threads
    each, all spinning between parallel regions, stalled some seeds past
    the hang timeout."""
    env = dict(os.environ)
    if jobs > 1:
        share = str(max(1, (os.cpu_count() or 1) // jobs))
        env.setdefault("OMP_NUM_THREADS", share)
        env.setdefault("TCJIT_FUZZ_THREADS", share)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(ROOT, "python")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["PYTHONFAULTHANDLER"] = "1"
    return env


# ------------------------------------------------------------------ worker

def worker_main():
    """Serve chunk commands from stdin (runs in the worker process)."""
    import faulthandler
    import warnings

    from .check import run_program
    from .gen import generate

    faulthandler.enable()
    warnings.simplefilter("ignore")
    if os.environ.get("TCJIT_FUZZ_THREADS"):
        import torch

        import tcjit
        n = int(os.environ["TCJIT_FUZZ_THREADS"])
        torch.set_num_threads(n)
        tcjit.config.num_threads = n
    out = sys.stdout

    def emit(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    for line in sys.stdin:
        cmd = json.loads(line)
        for seed in range(cmd["start"], cmd["start"] + cmd["count"]):
            emit({"seed": seed, "phase": "gen"})
            prog = None
            try:
                prog = generate(seed, cmd["profile"], cmd["device"])
                failures, stats = run_program(
                    prog, tuple(cmd["backends"]), cmd["device"],
                    progress=lambda phase, s=seed: emit({"seed": s, "phase": phase}))
            except Exception as e:  # noqa: BLE001 - a fuzzer bug, or a dead GPU
                if "CUDA error" in str(e):
                    # the context is lost: the parent reports this seed as
                    # a crash and starts a fresh worker
                    sys.stderr.write(f"CUDA error: {e}\n")
                    sys.stderr.flush()
                    os._exit(3)
                failures, stats = [dict(backend="fuzz", kind="internal", detail=type(e).__name__,
                                        call=0, message=repr(e), where={},
                                        signature=f"fuzz:internal:{type(e).__name__}")], {}
            emit({"seed": seed, "done": True, "failures": failures,
                  "nstmts": len(prog.stmts) if prog else 0,
                  "raises": prog.raises if prog else False,
                  "graphs": stats.get("graphs", 0)})
        emit({"chunk_done": True})


# ------------------------------------------------------------------ parent

class Worker:
    def __init__(self, jobs=1):
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, FUZZ, "--worker"], cwd=ROOT, env=worker_env(jobs),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err)
        self.buf = b""

    def send(self, obj):
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def readline(self, timeout):
        """A decoded JSON line, None at EOF, "timeout" after timeout s."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            r, _, _ = select.select([fd], [], [], timeout)
            if not r:
                return "timeout"
            data = os.read(fd, 1 << 16)
            if not data:
                return None
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def stderr_tail(self, n=3000):
        self.err.seek(0)
        return self.err.read().decode(errors="replace")[-n:]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.err.close()


def _death(seed, phase, what, message):
    backend = phase if phase in ("auto", "eager") else "fuzz"
    return dict(backend=backend, kind="crash" if what != "hang" else "hang", detail=what,
                call=1, message=message, where={},
                signature=f"{backend}:{'hang' if what == 'hang' else 'crash'}:{what}")


class Results:
    def __init__(self):
        self.by_seed = {}           # seed -> failures
        self.info = {}              # seed -> dict(nstmts, raises, graphs)
        self.lock = threading.Lock()

    def add(self, seed, failures, info=None):
        with self.lock:
            self.by_seed[seed] = failures
            if info:
                self.info[seed] = info

    def groups(self):
        """signature -> [(seed, failure)], seeds in order."""
        g = collections.defaultdict(list)
        for seed in sorted(self.by_seed):
            seen = set()
            for f in self.by_seed[seed]:
                if f["signature"] not in seen:
                    seen.add(f["signature"])
                    g[f["signature"]].append((seed, f))
        return dict(g)


def fuzz(count, seed=0, jobs=1, profile="small", device="cpu", backends=("auto", "eager"),
         chunk=100, timeout=120, on_result=None):
    """Run seeds [seed, seed + count) in `jobs` workers; Results."""
    res = Results()
    chunk = max(1, min(chunk, -(-count // max(jobs, 1))))
    q = queue.Queue()
    for s in range(seed, seed + count, chunk):
        q.put((s, min(chunk, seed + count - s)))

    def serve():
        w = None
        try:
            while True:
                try:
                    start, n = q.get_nowait()
                except queue.Empty:
                    return
                end = start + n
                while start < end:
                    if w is None:
                        w = Worker(jobs)
                    w.send(dict(start=start, count=end - start, profile=profile,
                                device=device, backends=list(backends)))
                    cur, phase = start, "gen"
                    while True:
                        msg = w.readline(timeout)
                        if isinstance(msg, dict) and msg.get("chunk_done"):
                            start = end
                            break
                        if isinstance(msg, dict) and msg.get("done"):
                            info = {k: msg[k] for k in ("nstmts", "raises", "graphs")}
                            res.add(msg["seed"], msg["failures"], info)
                            if on_result:
                                on_result(msg["seed"], msg["failures"])
                            continue
                        if isinstance(msg, dict):
                            cur, phase = msg["seed"], msg["phase"]
                            continue
                        # the worker died (None) or hangs ("timeout")
                        if msg == "timeout":
                            what = "hang"
                            w.proc.send_signal(signal.SIGABRT)   # faulthandler prints the stack
                            time.sleep(1)
                        else:
                            w.proc.wait()
                            rc = w.proc.returncode
                            what = (signal.Signals(-rc).name if rc < 0 else
                                    "CUDA-error" if rc == 3 else f"exit{rc}")
                        f = _death(cur, phase, what, w.stderr_tail())
                        res.add(cur, [f])
                        if on_result:
                            on_result(cur, [f])
                        w.kill()
                        w = None
                        start = cur + 1
                        break
        finally:
            if w is not None:
                w.proc.stdin.close()
                w.kill()

    threads = [threading.Thread(target=serve, daemon=True) for _ in range(max(jobs, 1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return res


def reproduce(seed, failure, profile, device="cpu", budget_s=60.0, timeout=None):
    """Minimize one failure in a fresh process; dict(reproducer, signature,
    program) or dict(error)."""
    cmd = [sys.executable, FUZZ, "--repro", str(seed), "--profile", profile,
           "--device", device, "--budget", str(budget_s), "--failure", json.dumps(failure)]
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=worker_env(), capture_output=True,
                           timeout=timeout or budget_s * 2 + 60)
    except subprocess.TimeoutExpired:
        return {"error": "minimizer timed out"}
    if p.returncode != 0:
        return {"error": p.stderr.decode(errors="replace")[-2000:]}
    return json.loads(p.stdout.decode().strip().splitlines()[-1])
