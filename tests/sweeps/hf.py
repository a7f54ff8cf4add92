"""HuggingFace transformers models through tcjit: values, graphs, breaks.

    python -m tests.sweeps.hf [--models gpt2 bert ...] [--mode compile|enable]
                              [--device cpu] [--dtype float32]

Each model is built from a tiny config with random weights (no downloads),
run under torch.no_grad() eagerly and through tcjit (``tcjit.compile(model)``
or ``tcjit.enable()``), twice, and reported as: values match eager (1e-4)
and the largest difference, graphs and graph breaks (first reasons) as
explain() sees them, eager fallbacks and tensor-free frames skipped in the
first compiled call, and recompiles of the second.  Every model runs in
its own subprocess, so a crash is a row.
"""
import argparse
import json
import subprocess
import sys
from tests.sweeps.outputs import output_tensors  # noqa: E402

TINY = dict(n_layer=2, num_hidden_layers=2, n_embd=64, hidden_size=64,
            n_head=4, num_attention_heads=4, num_key_value_heads=4,
            intermediate_size=128, vocab_size=100, d_model=64, d_ff=128,
            d_kv=16, num_heads=4, num_layers=2, ffn_dim=128,
            word_embed_proj_dim=64, encoder_layers=2,
            encoder_attention_heads=4, encoder_ffn_dim=128,
            num_mel_bins=16, max_source_positions=8, image_size=32,
            patch_size=8, num_channels=3, head_dim=16, decoder_layers=2,
            decoder_attention_heads=4, decoder_ffn_dim=128)

# name -> (config class, model class, inputs[, overrides]); kwargs not in
# a config's signature are ignored by transformers' configs (they become
# attributes), so one TINY dict serves most families; overrides replace
# TINY's entries (None drops one: a property of that config).  inputs:
# "ids" token ids (2, 16); "seq2seq" those and decoder_input_ids (2, 8);
# "pixels" (2, 3, 32, 32); "features" (2, 16, 16); "audio" (2, 400).
MODELS = {
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", "ids"),
    "bert": ("BertConfig", "BertModel", "ids"),
    "llama": ("LlamaConfig", "LlamaForCausalLM", "ids"),
    "t5": ("T5Config", "T5EncoderModel", "ids"),
    "mistral": ("MistralConfig", "MistralModel", "ids"),
    "qwen2": ("Qwen2Config", "Qwen2Model", "ids"),
    "opt": ("OPTConfig", "OPTModel", "ids"),
    "roberta": ("RobertaConfig", "RobertaModel", "ids"),
    "distilbert": ("DistilBertConfig", "DistilBertModel", "ids"),
    "vit": ("ViTConfig", "ViTModel", "pixels"),
    "whisper_encoder": ("WhisperConfig",
                        "models.whisper.modeling_whisper.WhisperEncoder",
                        "features"),
    "phi": ("PhiConfig", "PhiModel", "ids"),
    "gemma": ("GemmaConfig", "GemmaModel", "ids"),
    "qwen3": ("Qwen3Config", "Qwen3Model", "ids"),
    "bloom": ("BloomConfig", "BloomModel", "ids"),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXModel", "ids"),
    "electra": ("ElectraConfig", "ElectraModel", "ids"),
    "albert": ("AlbertConfig", "AlbertModel", "ids"),
    "deberta_v2": ("DebertaV2Config", "DebertaV2Model", "ids"),
    "mpnet": ("MPNetConfig", "MPNetModel", "ids"),
    "bart": ("BartConfig", "BartModel", "ids"),
    "mbart": ("MBartConfig", "MBartModel", "ids"),
    "clip_text": ("CLIPTextConfig", "CLIPTextModel", "ids"),
    "clip_vision": ("CLIPVisionConfig", "CLIPVisionModel", "pixels"),
    "deit": ("DeiTConfig", "DeiTModel", "pixels"),
    "resnet_hf": ("ResNetConfig", "ResNetModel", "pixels"),
    # issue 18, wider: heads, encoder-decoders, MoE, vision, audio
    "t5_lm": ("T5Config", "T5ForConditionalGeneration", "seq2seq"),
    "bart_lm": ("BartConfig", "BartForConditionalGeneration", "ids"),
    "pegasus": ("PegasusConfig", "PegasusModel", "seq2seq"),
    "marian": ("MarianConfig", "MarianMTModel", "seq2seq",
               dict(pad_token_id=0, decoder_start_token_id=0)),
    "led": ("LEDConfig", "LEDModel", "ids", dict(attention_window=8)),
    "bert_mlm": ("BertConfig", "BertForMaskedLM", "ids"),
    "gptj": ("GPTJConfig", "GPTJModel", "ids", dict(rotary_dim=8)),
    "gpt_neo": ("GPTNeoConfig", "GPTNeoModel", "ids",
                dict(attention_types=[[["global", "local"], 1]],
                     window_size=8)),
    "falcon": ("FalconConfig", "FalconModel", "ids", dict(head_dim=None)),
    "gpt_bigcode": ("GPTBigCodeConfig", "GPTBigCodeModel", "ids"),
    "stablelm": ("StableLmConfig", "StableLmModel", "ids"),
    "phi3": ("Phi3Config", "Phi3Model", "ids", dict(pad_token_id=0)),
    "starcoder2": ("Starcoder2Config", "Starcoder2Model", "ids"),
    "gemma2": ("Gemma2Config", "Gemma2Model", "ids"),
    "gemma3_text": ("Gemma3TextConfig", "Gemma3TextModel", "ids"),
    "mixtral": ("MixtralConfig", "MixtralModel", "ids",
                dict(num_local_experts=4)),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeModel", "ids",
                  dict(num_experts=4, moe_intermediate_size=32,
                       shared_expert_intermediate_size=64)),
    "mobilebert": ("MobileBertConfig", "MobileBertModel", "ids",
                   dict(embedding_size=32, intra_bottleneck_size=32,
                        num_feedforward_networks=2)),
    "xlm_roberta": ("XLMRobertaConfig", "XLMRobertaModel", "ids"),
    "funnel": ("FunnelConfig", "FunnelModel", "ids",
               dict(num_hidden_layers=None, block_sizes=[1, 1],
                    num_decoder_layers=1, n_head=4, d_head=16,
                    d_inner=128)),
    "siglip_text": ("SiglipTextConfig", "SiglipTextModel", "ids"),
    "siglip_vision": ("SiglipVisionConfig", "SiglipVisionModel", "pixels"),
    "blip_vision": ("BlipVisionConfig", "BlipVisionModel", "pixels"),
    "swin": ("SwinConfig", "SwinModel", "pixels",
             dict(embed_dim=32, depths=[1, 1], num_heads=[2, 4], head_dim=None,
                  num_attention_heads=None,
                  patch_size=4, window_size=4)),
    "convnext": ("ConvNextConfig", "ConvNextModel", "pixels",
                 dict(num_stages=2, hidden_sizes=[16, 32], depths=[1, 1])),
    "segformer": ("SegformerConfig", "SegformerModel", "pixels",
                  dict(num_encoder_blocks=2, depths=[1, 1],
                       sr_ratios=[2, 1], hidden_sizes=[16, 32],
                       patch_sizes=[7, 3], strides=[4, 2],
                       num_attention_heads=[1, 2], mlp_ratios=[2, 2],
                       decoder_hidden_size=32)),
    "beit": ("BeitConfig", "BeitModel", "pixels"),
    "dinov2": ("Dinov2Config", "Dinov2Model", "pixels"),
    "wav2vec2": ("Wav2Vec2Config", "Wav2Vec2Model", "audio",
                 dict(conv_dim=[32, 32], conv_stride=[5, 2],
                      conv_kernel=[10, 3], num_conv_pos_embeddings=16,
                      num_conv_pos_embedding_groups=4)),
}


def _lookup(module, dotted):
    for part in dotted.split("."):
        module = getattr(module, part)
    return module


def run_model(name, mode, device, dtype, use_cache, grad=False):
    import torch
    import transformers
    import tcjit
    cfg_cls, model_cls, kind, over = (MODELS[name] + ({},))[:4]
    if name == "distilbert":
        over = {"dim": 64, "n_layers": 2, "n_heads": 4, "hidden_dim": 128}
    conf = {k: v for k, v in {**TINY, **over}.items() if v is not None}
    cfg = getattr(transformers, cfg_cls)(**conf)
    torch.manual_seed(0)
    model = _lookup(transformers, model_cls)(cfg).eval().to(
        device, getattr(torch, dtype))
    fdt = getattr(torch, dtype)
    kwargs = {}
    if kind in ("ids", "seq2seq"):
        args = (torch.randint(0, 100, (2, 16), device=device),)
    elif kind == "pixels":
        args = (torch.randn(2, 3, 32, 32, device=device, dtype=fdt),)
    elif kind == "audio":
        args = (torch.randn(2, 400, device=device, dtype=fdt),)
    else:
        args = (torch.randn(2, 16, 16, device=device, dtype=fdt),)
    if kind == "seq2seq":
        kwargs["decoder_input_ids"] = args[0][:, :8].contiguous()
    if use_cache is not None and kind in ("ids", "seq2seq") and name not in (
            "bert", "roberta", "distilbert", "t5"):
        kwargs["use_cache"] = use_cache
    # grad: the call most users make, model(x) in the default grad mode
    # with parameters that require grad (issue 13)
    with torch.set_grad_enabled(grad):
        exp = output_tensors(model(*args, **kwargs))
        tcjit.reset()
        if mode == "compile":
            fn = tcjit.compile(model)
            ex = tcjit.explain(model)(*args, **kwargs)
        else:
            tcjit.enable()
            ex = tcjit.explain(model)(*args, **kwargs)
            fn = model
        tcjit.reset()   # what explain compiled is its own
        got1 = output_tensors(fn(*args, **kwargs))
        c1 = dict(tcjit.counters())
        got2 = output_tensors(fn(*args, **kwargs))
        c2 = dict(tcjit.counters())
        tcjit.disable()
    breaks = [b.reason for b in ex.break_reasons]
    ok = len(got1) == len(exp) == len(got2) and all(
        g.shape == e.shape for got in (got1, got2) for g, e in zip(got, exp))
    err = max((float((g.detach().float() - e.detach().float()).abs().max())
               for got in (got1, got2) for g, e in zip(got, exp)
               if g.numel()), default=0.0) if ok else None
    ok = ok and err <= 1e-4
    return {"model": name, "mode": mode, "grad": grad, "values_ok": ok,
            "max_abs_err": err,
            "graphs": ex.graph_count, "breaks": len(breaks),
            "first_breaks": breaks[:3],
            "eager_fallbacks": c1.get("eager_fallbacks", 0),
            # (tensor-free frames, e.g. a config's __getattribute__ that
            # a guard runs: counted among eager_fallbacks once each)
            "frames_skipped": c1.get("frames_skipped", 0),
            "recompiles_2nd_call": c2.get("recompiles", 0)
                                   - c1.get("recompiles", 0)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="*",
                   default=["gpt2", "bert", "llama", "t5"],
                   help="'all', or of: " + " ".join(MODELS))
    p.add_argument("--mode", nargs="*", default=["compile", "enable"])
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--use-cache", choices=["default", "true", "false"],
                   default="default",
                   help="use_cache= of the decoder models' call")
    p.add_argument("--grad", action="store_true",
                   help="run in the default grad mode (not torch.no_grad())")
    p.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--json")
    args = p.parse_args(argv)
    if args.models == ["all"]:
        args.models = list(MODELS)
    if args.one:
        cache = {"default": None, "true": True, "false": False}[
            args.use_cache]
        print(json.dumps(run_model(args.one[0], args.one[1], args.device,
                                   args.dtype, cache, args.grad)))
        return 0
    rows, bad = [], 0
    for name in args.models:
        for mode in args.mode:
            r = subprocess.run([sys.executable, "-m", "tests.sweeps.hf",
                                "--one", name, mode, "--device", args.device,
                                "--dtype", args.dtype,
                                "--use-cache", args.use_cache]
                               + (["--grad"] if args.grad else []),
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
