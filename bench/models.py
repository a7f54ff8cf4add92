"""Whole models: eager vs torch.compile vs tcjit, per call, first call, peak
memory, and how tcjit captured them (issue 18's GPU table).

    python bench/models.py [--device cuda] [--models gpt2 llama ...]
                           [--dtypes float32 bfloat16] [--budget 1.0]
                           [--no-inductor] [--output FILE]

Models are built from configs with random weights (no downloads), in eval
mode, called under torch.no_grad().  Per-call times are medians taken in
rounds (bench.py's per_call_seconds: each round samples every
implementation, so a slow phase of the machine lands on all of them);
first calls are cold (tcjit.reset(), torch._dynamo.reset() and a fresh
Inductor cache directory).  Peak memory is torch.cuda.max_memory_allocated
over one call minus the model's own parameters and inputs.  "graphs" and
"breaks" are tcjit.explain's count for one call.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.sweeps.outputs import output_tensors  # noqa: E402
import bench  # noqa: E402  (sets a fresh Inductor cache dir before torch)

import torch  # noqa: E402

import tcjit  # noqa: E402


def _hf(config, model, **cfg):
    import transformers
    return getattr(transformers, model)(getattr(transformers, config)(**cfg))


def _ids(batch, seq, vocab):
    return lambda dev: torch.randint(0, vocab, (batch, seq), device=dev)


def _pixels(batch):
    return lambda dev, dt: torch.randn(batch, 3, 224, 224, device=dev,
                                       dtype=dt)


def _tv(name):
    import torchvision
    return getattr(torchvision.models, name)(weights=None)


# name -> (builder, input maker (device[, dtype]), input is float)
MODELS = {
    "gpt2": (lambda: _hf("GPT2Config", "GPT2LMHeadModel"),
             _ids(4, 512, 50257), False),
    "llama": (lambda: _hf("LlamaConfig", "LlamaForCausalLM", hidden_size=1024,
                          intermediate_size=2816, num_hidden_layers=8,
                          num_attention_heads=16, num_key_value_heads=16,
                          vocab_size=32000), _ids(4, 512, 32000), False),
    "t5_encoder": (lambda: _hf("T5Config", "T5EncoderModel"),
                   _ids(4, 512, 32128), False),
    "resnet50": (lambda: _tv("resnet50"), _pixels(16), True),
    "vit_b_16": (lambda: _tv("vit_b_16"), _pixels(16), True),
}


def _max_rel_err(got, want):
    err = 0.0
    for a, b in zip(output_tensors(got), output_tensors(want)):
        a, b = a.double(), b.double()
        scale = b.abs().max().item() or 1.0
        err = max(err, (a - b).abs().max().item() / scale)
    return err


def _peak_bytes(fn, x, sync, own):
    if not torch.cuda.is_available() or x.device.type != "cuda":
        return None
    sync()
    torch.cuda.reset_peak_memory_stats()
    fn(x)
    sync()
    return torch.cuda.max_memory_allocated() - own


def run_model(name, dtype, device, budget, inductor):
    build, make, is_float = MODELS[name]
    torch.manual_seed(0)
    model = build().eval().to(device=device, dtype=dtype)
    x = make(device, dtype) if is_float else make(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    own = sum(p.numel() * p.element_size() for p in model.parameters()) \
        + x.numel() * x.element_size()
    row = {"name": name, "dtype": str(dtype).split(".")[-1], "device": device}
    with torch.no_grad():
        want = model(x)
        impls = {"eager": model}
        firsts = {"eager": None}
        tcjit.reset()
        tc = tcjit.compile(model)
        firsts["tcjit"], got = bench.first_call_seconds(tc, (x,), sync)
        impls["tcjit"] = tc
        row["tcjit_rel_err"] = _max_rel_err(got, want)
        ex = tcjit.explain(model)(x)
        row["graphs"], row["breaks"] = ex.graph_count, ex.graph_break_count
        row["break_reasons"] = [b.reason[:300] for b in ex.break_reasons[:5]]
        if inductor:
            try:
                torch._dynamo.reset()
                ic = torch.compile(model)
                firsts["torch.compile"], _ = bench.first_call_seconds(
                    ic, (x,), sync)
                impls["torch.compile"] = ic
            except Exception as e:  # report, keep benchmarking the rest
                row["torch.compile"] = {"error": f"{type(e).__name__}: {e}"}
        times = bench.per_call_seconds(impls, (x,), sync, budget)
        for impl, fn in impls.items():
            row[impl] = {"per_call_s": times[impl],
                         "first_call_s": firsts[impl],
                         "peak_bytes": _peak_bytes(fn, x, sync, own)}
    for base in ("eager", "torch.compile"):
        b = row.get(base, {}).get("per_call_s")
        if b:
            row[f"tcjit/{base}"] = times["tcjit"] / b
    return row


def _fmt(r, impl):
    d = r.get(impl, {})
    if "per_call_s" not in d:
        return f"{impl:14s} {d.get('error', '-')[:60]}"
    first = d["first_call_s"]
    peak = d["peak_bytes"]
    return (f"{impl:14s} {bench.fmt_time(d['per_call_s']):>10s} "
            f"{bench.fmt_time(first) if first else '-':>10s} "
            f"{peak / 2**20 if peak is not None else float('nan'):9.0f} MB")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available()
                    else "cpu")
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--dtypes", nargs="*", default=["float32", "bfloat16"])
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--no-inductor", action="store_true")
    ap.add_argument("--output", metavar="FILE")
    a = ap.parse_args()
    rows = []
    print(f"torch {torch.__version__}, {a.device}; per call, first call, "
          "peak memory over the model's own", flush=True)
    for name in a.models:
        for dt in a.dtypes:
            try:
                r = run_model(name, getattr(torch, dt), a.device, a.budget,
                              not a.no_inductor)
            except Exception as e:  # a row, not the end of the run
                r = {"name": name, "dtype": dt, "error":
                     f"{type(e).__name__}: {e}"[:300]}
            rows.append(r)
            print(f"{name} {dt}: graphs {r.get('graphs')} breaks "
                  f"{r.get('breaks')} rel err {r.get('tcjit_rel_err', 0):.1e}"
                  f" {r.get('error', '')}", flush=True)
            for impl in ("eager", "torch.compile", "tcjit"):
                print("   " + _fmt(r, impl), flush=True)
            if "tcjit/eager" in r:
                print(f"   tcjit/eager = {r['tcjit/eager']:.2f}, "
                      f"tcjit/torch.compile = "
                      f"{r.get('tcjit/torch.compile', float('nan')):.2f}",
                      flush=True)
            for reason in r.get("break_reasons", []):
                print("   break:", reason[:200], flush=True)
    if a.output:
        with open(a.output, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
