#!/usr/bin/env python3
"""transformers on the GPU machine, the peer of bench/vulkan_h200.sh: the same figures vlmc's
vulkan backend is measured on, for one attention implementation per run, as JSON on stdout.

  hf_h200.py CKPT PROMPTS.json --attn eager|sdpa [--dtype bf16|f32] [--reps N]
             [--only tokens]

PROMPTS.json (written by bench/vulkan_h200_device.sh, shared with vlmc's requests): token ids
"p64", "p512", "p1024" (random text ids) and, per image ("i448", "i1080"), "path" and "ids"
(<|vision_start|>, one <|image_pad|> per merged patch, <|vision_end|>, three text ids).

Figures, each the median of --reps timed runs after one untimed warm-up, CUDA synchronized:
  prefill512_tok_s   512 / the time of one forward over p512 (use_cache, as generate's first step)
  decode64_tok_s     32 / (generate 33 new tokens - generate 1) after p64, greedy,
  decode1024_tok_s   min_new_tokens forcing all 33 (the random model may say eos)
  encode448_ms,      the vision tower alone (get_image_features) on the image's pixel values
  encode1080_ms
  peak_gib           torch.cuda.max_memory_allocated over all of the above
  tokens             the 32 greedy tokens of the i448 prompt (generate, eos allowed), with
                     mm_token_type_ids and no stale rope_deltas (the oracle's 5.x traps)
--only tokens skips the timings (the f32 run that only gives tokens to compare with vlmc f32).
Pixel values come from the checkpoint's image processor, the slow (PIL) one: vlmc's
preprocessing is bit-identical to it (README, frontends)."""
import argparse
import json
import os
import statistics
import sys
import time

import torch
from PIL import Image
from transformers import AutoImageProcessor, Qwen2_5_VLForConditionalGeneration

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "oracle"))
import dump_taps  # noqa: E402  (the oracle's f32 setting and its rope-state reset)


def timed(fn, reps):
    fn()  # warm-up: kernels chosen, caches allocated
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("prompts")
    ap.add_argument("--attn", required=True, choices=("eager", "sdpa"))
    ap.add_argument("--dtype", default="bf16", choices=("bf16", "f32"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", choices=("tokens",))
    a = ap.parse_args()
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    if a.dtype == "f32":  # the oracle's f32: no TF32 in matmuls or in the patch embedding's conv
        dump_taps.setup_torch()
    prompts = json.load(open(a.prompts))
    t0 = time.perf_counter()
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(
        a.ckpt, dtype=dtype, attn_implementation=a.attn, device_map="cuda").eval()
    try:  # the slow (PIL) processor, the one vlmc's preprocessing matches bit for bit
        processor = AutoImageProcessor.from_pretrained(a.ckpt, use_fast=False)
    except Exception as e:
        print("hf_h200: no slow image processor (%s); the default one" % e, file=sys.stderr)
        processor = AutoImageProcessor.from_pretrained(a.ckpt)
    out = {"engine": "transformers", "attn": a.attn, "dtype": a.dtype,
           "load_s": round(time.perf_counter() - t0, 2)}
    dev = "cuda"

    image_token = model.config.image_token_id

    def ids_of(key):
        return torch.tensor([prompts[key]], device=dev)

    def pixels(key):
        p = processor(images=[Image.open(prompts[key]["path"]).convert("RGB")], return_tensors="pt")
        grid = p["image_grid_thw"]
        want = int(grid.prod()) // 4
        have = prompts[key]["ids"].count(image_token)
        if want != have:
            sys.exit("%s: the processor makes %d merged patches, the prompt has %d image pads"
                     % (key, want, have))
        return p["pixel_values"].to(dev, dtype), grid.to(dev)

    def generate(ids, n, force, **extra):
        # transformers 5.x's two traps (tests/oracle/dump_taps.py): rope_deltas cached on the
        # model from the previous call shift this prompt's positions, and without
        # mm_token_type_ids an image prompt silently gets 1-D positions.
        dump_taps.reset_rope_state(model)
        mm = (ids == image_token).long()
        return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                              min_new_tokens=n if force else 0, do_sample=False,
                              mm_token_type_ids=mm, **extra)

    torch.cuda.reset_peak_memory_stats()
    with torch.inference_mode():
        if a.only != "tokens":
            p512 = ids_of("p512")
            t = timed(lambda: model(input_ids=p512, use_cache=True), a.reps)
            out["prefill512_tok_s"] = round(512 / t, 1)
            for key, name in (("p64", "decode64_tok_s"), ("p1024", "decode1024_tok_s")):
                ids = ids_of(key)
                t1 = timed(lambda: generate(ids, 1, True), a.reps)
                t33 = timed(lambda: generate(ids, 33, True), a.reps)
                out[name] = round(32 / max(t33 - t1, 1e-9), 1)
            for key, name in (("i448", "encode448_ms"), ("i1080", "encode1080_ms")):
                pv, grid = pixels(key)
                features = getattr(model, "get_image_features", None) or model.model.get_image_features
                t = timed(lambda: features(pixel_values=pv, image_grid_thw=grid), a.reps)
                out[name] = round(1e3 * t, 2)
        pv, grid = pixels("i448")
        ids = torch.tensor([prompts["i448"]["ids"]], device=dev)
        gen = generate(ids, 32, False, pixel_values=pv, image_grid_thw=grid)
        out["tokens"] = gen[0, ids.shape[1]:].tolist()
    out["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
