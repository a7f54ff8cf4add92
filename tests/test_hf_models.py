"""HuggingFace transformers models under tcjit (issue 18), at the issue's
tiny sizes (2 layers, hidden 64, 4 heads, vocab 100; batch 2 x 16 tokens;
torch.no_grad()), as tcjit.compile(model) and under tcjit.enable().

Each compiles as one graph without breaks, with eager's values, no eager
fallback, and no recompile on the second call.  tests/sweeps/hf.py reports
graphs and breaks for more models.
"""
import pytest
import torch

import tcjit
from conftest import check_same

transformers = pytest.importorskip("transformers")

TINY = dict(n_layer=2, num_hidden_layers=2, n_embd=64, hidden_size=64,
            n_head=4, num_attention_heads=4, num_key_value_heads=4,
            intermediate_size=128, vocab_size=100, d_model=64, d_ff=128,
            d_kv=16, num_heads=4, num_layers=2, image_size=32, patch_size=8,
            num_channels=3)

MODELS = {
    "gpt2": ("GPT2Config", "GPT2LMHeadModel"),
    "bert": ("BertConfig", "BertModel"),
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "t5": ("T5Config", "T5EncoderModel"),
    "vit": ("ViTConfig", "ViTModel"),
}


def build(name):
    cfg_cls, model_cls = MODELS[name]
    torch.manual_seed(0)
    model = getattr(transformers, model_cls)(
        getattr(transformers, cfg_cls)(**TINY)).eval()
    x = torch.randn(2, 3, 32, 32) if name == "vit" \
        else torch.randint(0, 100, (2, 16))
    return model, x


def tensors(out):
    out = out.to_tuple() if hasattr(out, "to_tuple") else out
    if isinstance(out, torch.Tensor):
        return [out]
    res = []
    for o in out if isinstance(out, (list, tuple)) else []:
        res += tensors(o)
    return res


def run(name, mode):
    model, x = build(name)
    with torch.no_grad():
        expected = model(x)
        tcjit.reset()
        try:
            if mode == "enable":
                tcjit.enable()
                fn = model
            else:
                fn = tcjit.compile(model)
            ex = tcjit.explain(model)(x)
            tcjit.reset()
            got = [fn(x)]
            before = dict(tcjit.counters())
            got.append(fn(x))
            after = dict(tcjit.counters())
        finally:
            tcjit.disable()
    for g in got:
        assert type(g) is type(expected)
        assert list(g.keys()) == list(expected.keys())
        for a, b in zip(tensors(g), tensors(expected)):
            check_same(a, b)
    assert after.get("recompiles", 0) == before.get("recompiles", 0)
    # no frame with tensor work ran eagerly, in the first call or after
    # (tensor-free frames, the output dataclass's __init__ made at the
    # exit, are frames_skipped)
    assert after.get("eager_fallbacks", 0) == 0, after
    return ex


@pytest.mark.parametrize("mode", ["compile", "enable"])
@pytest.mark.parametrize("name", ["gpt2", "bert", "llama", "t5", "vit"])
def test_model_is_one_graph(name, mode):
    ex = run(name, mode)
    assert ex.graph_break_count == 0, [b.reason for b in ex.break_reasons]
    assert ex.graph_count == 1
