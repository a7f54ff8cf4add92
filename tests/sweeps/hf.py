"""HuggingFace transformers models through tcjit: values, graphs, breaks.

    python -m tests.sweeps.hf [--models gpt2 bert ...] [--mode compile|enable]
                              [--device cpu] [--dtype float32]

Each model is built from a tiny config with random weights (no downloads),
run under torch.no_grad() eagerly and through tcjit (``tcjit.compile(model)``
or ``tcjit.enable()``), twice, and reported as: values match eager (1e-4),
graphs, graph breaks (first reasons), eager fallbacks and recompiles of the
second call.  Every model runs in its own subprocess, so a crash is a row.
"""
import argparse
import json
import subprocess
import sys

TINY = dict(n_layer=2, num_hidden_layers=2, n_embd=64, hidden_size=64,
            n_head=4, num_attention_heads=4, num_key_value_heads=4,
            intermediate_size=128, vocab_size=100, d_model=64, d_ff=128,
            d_kv=16, num_heads=4, num_layers=2)

# name -> (config class, model class); kwargs not in a config's signature
# are ignored by transformers' configs (they become attributes), so one
# TINY dict serves every family.
MODELS = {
    "gpt2": ("GPT2Config", "GPT2LMHeadModel"),
    "bert": ("BertConfig", "BertModel"),
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "t5": ("T5Config", "T5EncoderModel"),
    "mistral": ("MistralConfig", "MistralModel"),
    "qwen2": ("Qwen2Config", "Qwen2Model"),
    "opt": ("OPTConfig", "OPTModel"),
    "roberta": ("RobertaConfig", "RobertaModel"),
    "distilbert": ("DistilBertConfig", "DistilBertModel"),
}


def _outputs(out):
    """The tensors of a ModelOutput / tuple, in order."""
    import torch
    if isinstance(out, torch.Tensor):
        return [out]
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    res = []
    for o in out if isinstance(out, (list, tuple)) else []:
        res += _outputs(o)
    return res


def run_model(name, mode, device, dtype):
    import torch
    import transformers
    import tcjit
    cfg_cls, model_cls = MODELS[name]
    extra = {"dim": 64, "n_layers": 2, "n_heads": 4, "hidden_dim": 128} \
        if name == "distilbert" else {}
    cfg = getattr(transformers, cfg_cls)(**TINY, **extra)
    torch.manual_seed(0)
    model = getattr(transformers, model_cls)(cfg).eval().to(device,
                                                            getattr(torch, dtype))
    ids = torch.randint(0, 100, (2, 16), device=device)
    with torch.no_grad():
        exp = _outputs(model(ids))
        tcjit.reset()
        breaks = []
        if mode == "compile":
            fn = tcjit.compile(model)
            ex = tcjit.explain(model)(ids)
        else:
            tcjit.enable()
            ex = tcjit.explain(model)(ids)
            fn = model
        got1 = _outputs(ex.result)
        c1 = dict(tcjit.counters())
        got2 = _outputs(fn(ids))
        c2 = dict(tcjit.counters())
        tcjit.disable()
    breaks = [b.reason for b in ex.break_reasons]
    ok = len(got1) == len(exp) == len(got2) and all(
        g.shape == e.shape and torch.allclose(g.float(), e.float(), rtol=1e-4,
                                              atol=1e-4)
        for got in (got1, got2) for g, e in zip(got, exp))
    return {"model": name, "mode": mode, "values_ok": ok,
            "graphs": ex.graph_count, "breaks": len(breaks),
            "first_breaks": breaks[:3],
            "eager_fallbacks": c1.get("eager_fallbacks", 0),
            "recompiles_2nd_call": c2.get("recompiles", 0)
                                   - c1.get("recompiles", 0)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="*", default=["gpt2", "bert", "llama", "t5"])
    p.add_argument("--mode", nargs="*", default=["compile", "enable"])
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--json")
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(run_model(args.one[0], args.one[1], args.device,
                                   args.dtype)))
        return 0
    rows, bad = [], 0
    for name in args.models:
        for mode in args.mode:
            r = subprocess.run([sys.executable, "-m", "tests.sweeps.hf",
                                "--one", name, mode, "--device", args.device,
                                "--dtype", args.dtype],
                               capture_output=True, text=True)
            lines = [x for x in r.stdout.splitlines() if x.startswith("{")]
            if r.returncode != 0 or not lines:
                row = {"model": name, "mode": mode, "values_ok": False,
                       "error": (r.stderr.strip().splitlines() or ["?"])[-1]}
            else:
                row = json.loads(lines[-1])
            bad += not row["values_ok"]
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
