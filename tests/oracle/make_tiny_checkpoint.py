#!/usr/bin/env python3
"""Builds the tiny random Qwen2.5-VL checkpoint of spec §7.3 (nested config form).

Weights: a fixed-seed torch.Generator, drawn so that every parameter matters (a C implementation
that drops a bias, ignores a norm weight or swaps q/k rows must fail):
  Linear / Conv3d weights  normal, std 1/sqrt(fan_in)  (unit-scale activations, attention far
                           from uniform)
  Linear biases            normal, std 0.1  (transformers' own init would zero them)
  RMSNorm weights          U(0.5, 1.5)      (transformers' own init would set them to 1)
  embed_tokens             N(0, 1)
then rounded to bf16 and saved with save_pretrained (hub tensor names, model.safetensors), so a
float32 reference run on the reloaded weights is exact for any consumer reading the bf16 file.

Also writes generation_config.json (bos 0, eos [1]) and preprocessor_config.json
(min_pixels 3136, max_pixels 12845056, CLIP mean/std, patch 14, merge 2, temporal 2).

Usage: python3 tests/oracle/make_tiny_checkpoint.py [OUT_DIR] [--vocab 512|151936] [--seed N]
  --vocab 151936 makes the tokenizer-level variant of §7.3 (real special ids, tied embeddings)
  and also saves the shared tokenizer + the Qwen2-VL chat template into OUT_DIR.
"""

import argparse
import copy
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle_common as oc  # noqa: E402

TINY_CONFIG = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"],
    "model_type": "qwen2_5_vl",
    "image_token_id": 500, "video_token_id": 501,
    "vision_start_token_id": 502, "vision_end_token_id": 503,
    "tie_word_embeddings": False,
    "text_config": {
        "model_type": "qwen2_5_vl_text",
        "vocab_size": 512, "hidden_size": 64, "intermediate_size": 176,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "hidden_act": "silu", "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
        "max_position_embeddings": 4096, "use_sliding_window": False,
        "bos_token_id": 0, "eos_token_id": 1,
    },
    "vision_config": {
        "depth": 4, "hidden_size": 64, "intermediate_size": 172, "num_heads": 4,
        "out_hidden_size": 64, "in_channels": 3, "patch_size": 14,
        "temporal_patch_size": 2, "spatial_merge_size": 2, "window_size": 112,
        "fullatt_block_indexes": [1, 3], "tokens_per_second": 2, "hidden_act": "silu",
    },
}

PREPROCESSOR_CONFIG = {
    "min_pixels": oc.MIN_PIXELS, "max_pixels": oc.MAX_PIXELS,
    "size": {"shortest_edge": oc.MIN_PIXELS, "longest_edge": oc.MAX_PIXELS},
    "patch_size": oc.PATCH, "temporal_patch_size": oc.TEMPORAL, "merge_size": oc.MERGE,
    "image_mean": oc.IMAGE_MEAN, "image_std": oc.IMAGE_STD,
    "do_resize": True, "do_rescale": True, "rescale_factor": 1.0 / 255.0,
    "do_normalize": True, "do_convert_rgb": True, "resample": 3,
    "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen2_5_VLProcessor",
}


def config_dict(vocab):
    cfg = copy.deepcopy(TINY_CONFIG)
    if vocab != 512:
        cfg["text_config"]["vocab_size"] = vocab
        cfg["text_config"]["bos_token_id"] = 151643
        cfg["text_config"]["eos_token_id"] = 151645
        cfg["tie_word_embeddings"] = True
        cfg.update({"image_token_id": 151655, "video_token_id": 151656,
                    "vision_start_token_id": 151652, "vision_end_token_id": 151653})
    return cfg


def init_weights(model, seed):
    import torch
    gen = torch.Generator().manual_seed(seed)
    done = set()
    for name, module in sorted(model.named_modules(), key=lambda kv: kv[0]):
        kind = type(module).__name__
        weight = getattr(module, "weight", None)
        if not isinstance(weight, torch.nn.Parameter) or id(weight) in done:
            continue
        done.add(id(weight))
        with torch.no_grad():
            if isinstance(module, (torch.nn.Linear, torch.nn.Conv3d)):
                fan_in = weight[0].numel()
                weight.copy_(torch.randn(weight.shape, generator=gen) / fan_in ** 0.5)
                if module.bias is not None:
                    module.bias.copy_(torch.randn(module.bias.shape, generator=gen) * 0.1)
            elif isinstance(module, torch.nn.Embedding):
                weight.copy_(torch.randn(weight.shape, generator=gen))
            elif kind.endswith("RMSNorm") and weight.dim() == 1:
                weight.copy_(0.5 + torch.rand(weight.shape, generator=gen))
            elif isinstance(module, torch.nn.LayerNorm):  # Qwen2-VL / Qwen3-VL vision towers
                weight.copy_(0.5 + torch.rand(weight.shape, generator=gen))
                if module.bias is not None:
                    module.bias.copy_(torch.randn(module.bias.shape, generator=gen) * 0.1)
            else:
                raise RuntimeError("no init rule for %s (%s)" % (name, kind))
    missed = [n for n, p in model.named_parameters() if id(p) not in done and
              not n.endswith(".bias")]
    if missed:
        raise RuntimeError("parameters left at their default init: %s" % missed)


def build(out_dir, vocab=512, seed=20251201):
    import torch
    from transformers import (GenerationConfig, Qwen2_5_VLConfig,
                              Qwen2_5_VLForConditionalGeneration)
    torch.manual_seed(seed)
    config = Qwen2_5_VLConfig.from_dict(config_dict(vocab))  # the path config.json takes
    model = Qwen2_5_VLForConditionalGeneration(config).eval()
    init_weights(model, seed)
    model = model.to(torch.bfloat16)
    if vocab == 512:
        model.generation_config = GenerationConfig(bos_token_id=0, eos_token_id=[1])
    else:
        model.generation_config = GenerationConfig(bos_token_id=151643,
                                                   eos_token_id=[151645, 151643],
                                                   pad_token_id=151643)
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    with open(os.path.join(out_dir, "preprocessor_config.json"), "w") as f:
        json.dump(PREPROCESSOR_CONFIG, f, indent=2)
        f.write("\n")
    if vocab != 512:
        save_processor(out_dir)
    return verify(out_dir, model)


def save_processor(out_dir):
    """Tokenizer + chat template + image processor, so that AutoProcessor works on OUT_DIR."""
    import transformers
    from transformers import AutoTokenizer, Qwen2_5_VLProcessor, Qwen2VLImageProcessor
    import make_tokenizer_fixtures as mtf
    tok = AutoTokenizer.from_pretrained(mtf.tokenizer_dir())
    with open(oc.CHAT_TEMPLATE_PATH, encoding="utf-8") as f:
        template = f.read()
    kwargs = {"image_processor": Qwen2VLImageProcessor(size=PREPROCESSOR_CONFIG["size"]),
              "tokenizer": tok, "chat_template": template}
    if hasattr(transformers, "Qwen2VLVideoProcessor"):
        kwargs["video_processor"] = transformers.Qwen2VLVideoProcessor()
    Qwen2_5_VLProcessor(**kwargs).save_pretrained(out_dir)
    # save_pretrained may rewrite preprocessor settings; keep the explicit official form too.
    with open(os.path.join(out_dir, "preprocessor_config.json"), "w") as f:
        json.dump(PREPROCESSOR_CONFIG, f, indent=2)
        f.write("\n")


def verify(out_dir, bf16_model):
    """Reload in float32 and check every tensor equals the bf16 values; list the file's names."""
    import torch
    from safetensors import safe_open
    from transformers import Qwen2_5_VLForConditionalGeneration
    try:
        f32 = Qwen2_5_VLForConditionalGeneration.from_pretrained(out_dir, dtype=torch.float32)
    except TypeError:
        f32 = Qwen2_5_VLForConditionalGeneration.from_pretrained(out_dir, torch_dtype=torch.float32)
    ref = dict(bf16_model.named_parameters())
    worst = 0.0
    for name, p in f32.named_parameters():
        worst = max(worst, float((p.detach() - ref[name].detach().float()).abs().max()))
    with safe_open(os.path.join(out_dir, "model.safetensors"), framework="pt") as sf:
        names = sorted(sf.keys())
        dtypes = sorted({str(sf.get_tensor(n).dtype) for n in names})
    n_params = sum(p.numel() for p in f32.parameters())
    files = sorted(os.listdir(out_dir))
    print("tiny checkpoint %s: %d tensors %s, %d parameters, reload max |delta| %g, files %s"
          % (out_dir, len(names), dtypes, n_params, worst, files))
    if worst != 0.0:
        raise RuntimeError("float32 reload differs from the bf16 weights by %g" % worst)
    return {"dir": out_dir, "tensors": len(names), "parameters": n_params, "files": files,
            "dtypes": dtypes, "tensor_names_sample": names[:6] + names[-4:]}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir", nargs="?",
                    default=os.path.join(oc.FIXTURES_DIR, "parity", "tiny-vocab512"))
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--seed", type=int, default=20251201)
    args = ap.parse_args(argv[1:])
    return build(args.out_dir, args.vocab, args.seed)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv)))
