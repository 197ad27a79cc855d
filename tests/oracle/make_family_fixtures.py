#!/usr/bin/env python3
"""Oracle fixtures for the next two model families (issue 17): Qwen2-VL and Qwen3-VL.

For each family a tiny random checkpoint in the hub layout (the Qwen2.5-VL tiny one's sizes:
text 64 x 2 layers, 4 heads / 2 kv heads, vocab 512; a 4-block vision tower of width 64; the
same special ids 500..503), built from a config dict by transformers 5.17 with the weights of
make_tiny_checkpoint.py's rule (init_weights: every parameter drawn so that it matters,
LayerNorm weights U(0.5, 1.5) and biases N(0, 0.1) too), rounded to bf16 and saved, then per case (448x448 and
336x336 scenes, a 448x672 one, two images in one prompt, text only) what transformers computes
in float32 (eager attention, TF32 off, CPU):
  tests/fixtures/parity_families/<family>/tiny/                 the checkpoint
  tests/fixtures/parity_families/<family>/<case>/input_ids.json the prompt (ids; image pads
                                                                expanded from the processor's
                                                                grid)
  tests/fixtures/parity_families/<family>/<case>/taps.safetensors, expected.json
Taps keep the Qwen2.5-VL names where the stage exists (tests/oracle/README.md): input_ids,
position_ids and rope_deltas (get_rope_index), pixel_values_rows / row_index / sums,
image_grid_thw, patch_embed, vision_block.{i}, merger, image_embeds, inputs_embeds, logits_last;
and per family: vision_block_input.0 (the first block's input: for Qwen3-VL the patch embedding
plus the interpolated learned position embedding), deepstack.{i} (Qwen3-VL: each deepstack
merger's output), deepstack_visual_embeds.{i} (what the language model received) and
lm_layer.{i} (the output of each language-model layer the deepstack features are added after,
before the addition). expected.json: greedy ids (16, pure greedy), top-5 logits per step, the
smallest top-1 margin, the resolved config and the processor's settings.

Usage (repository root, transformers 5.17): python3 tests/oracle/make_family_fixtures.py
  [--families qwen2_vl,qwen3_vl] [--out tests/fixtures/parity_families]
Not run yet: written in a session without a device machine; the first run there may need the
config spellings adjusted (it prints the resolved configs and fails by family, not as a whole).
"""

import argparse
import copy
import json
import os
import random
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dump_taps as dt  # noqa: E402
import make_tiny_checkpoint as mtc  # noqa: E402  (its weight rule, LayerNorms included)
import oracle_common as oc  # noqa: E402

IMAGE, VIDEO, VSTART, VEND = 500, 501, 502, 503
SEED = 20261204
IMAGES = os.path.join("tests", "fixtures", "images")
SHAPES = os.path.join("tests", "fixtures", "test_image_shapes.png")
# Three cases a family (each image case's taps weigh 1 to 3 MB, and the repository stays
# light): one square image, two images of which the second is not square (two grids, the
# positions of the second after the first, height != width: where M-RoPE layouts differ), and
# text only. The Qwen2.5-VL parity fixtures (make_parity_fixtures.py) cover more sizes.
CASES = [
    ("img336", [os.path.join(IMAGES, "scene_336x336.png")]),
    ("two_images", [SHAPES, os.path.join(IMAGES, "scene_224x448.png")]),
    ("text_only", []),
]
TEXT = {
    "vocab_size": 512, "hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_act": "silu",
    "rms_norm_eps": 1e-06, "max_position_embeddings": 4096, "bos_token_id": 0, "eos_token_id": 1,
}
SPECIAL = {"image_token_id": IMAGE, "video_token_id": VIDEO, "vision_start_token_id": VSTART,
           "vision_end_token_id": VEND, "tie_word_embeddings": False}
FAMILIES = {
    "qwen2_vl": {
        "class": "Qwen2VLForConditionalGeneration", "config_class": "Qwen2VLConfig",
        "config": dict(SPECIAL, **{
            "architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl",
            "text_config": dict(TEXT, **{
                "model_type": "qwen2_vl_text", "rope_theta": 1000000.0,
                "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}}),
            # Qwen2-VL's vision config: embed_dim is the tower's width, hidden_size the
            # merger's output (the language model's width); the MLP is mlp_ratio * 64 = 192 wide
            # (transformers 5.17 types mlp_ratio an int, as Qwen2-VL's 4)
            "vision_config": {"depth": 4, "embed_dim": 64, "hidden_size": 64, "mlp_ratio": 3,
                              "num_heads": 4, "in_channels": 3, "patch_size": 14,
                              "spatial_merge_size": 2, "temporal_patch_size": 2,
                              "hidden_act": "quick_gelu"},
        }),
        "processor": {"patch_size": 14, "merge_size": 2, "temporal_patch_size": 2,
                      "min_pixels": oc.MIN_PIXELS, "max_pixels": oc.MAX_PIXELS,
                      "image_mean": oc.IMAGE_MEAN, "image_std": oc.IMAGE_STD,
                      "processor_class": "Qwen2VLProcessor"},
    },
    "qwen3_vl": {
        "class": "Qwen3VLForConditionalGeneration", "config_class": "Qwen3VLConfig",
        "config": dict(SPECIAL, **{
            "architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl",
            # Qwen3's text model: head_dim explicit, q/k norms, no q/k/v bias; the interleaved
            # M-RoPE layout (sections summing to head_dim / 2 = 8; t >= h = w as in the
            # released [24, 20, 20], so that every height / width slot 3i+1, 3i+2 is below 8)
            "text_config": dict(TEXT, **{
                "model_type": "qwen3_vl_text", "head_dim": 16, "attention_bias": False,
                "rope_theta": 5000000.0,
                "rope_scaling": {"rope_type": "default", "mrope_section": [4, 2, 2],
                                 "mrope_interleaved": True}}),
            # 16-pixel patches, a learned 8 x 8 position table interpolated to the grid, and
            # deepstack features from blocks 0 and 2 (added after language-model layers 0, 1)
            "vision_config": {"depth": 4, "hidden_size": 64, "intermediate_size": 172,
                              "num_heads": 4, "in_channels": 3, "patch_size": 16,
                              "spatial_merge_size": 2, "temporal_patch_size": 2,
                              "out_hidden_size": 64, "num_position_embeddings": 64,
                              "deepstack_visual_indexes": [0, 2],
                              "hidden_act": "gelu_pytorch_tanh"},
        }),
        "processor": {"patch_size": 16, "merge_size": 2, "temporal_patch_size": 2,
                      "size": {"shortest_edge": 65536, "longest_edge": 16777216},
                      "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
                      "processor_class": "Qwen3VLProcessor"},
    },
}


# ---------------------------------------------------------------------------- the checkpoint

def build_checkpoint(family, out_dir):
    import torch
    import transformers
    spec = FAMILIES[family]
    torch.manual_seed(SEED)
    config = getattr(transformers, spec["config_class"]).from_dict(copy.deepcopy(spec["config"]))
    model = getattr(transformers, spec["class"])(config).eval()
    mtc.init_weights(model, SEED)
    model = model.to(torch.bfloat16)
    model.generation_config = transformers.GenerationConfig(bos_token_id=0, eos_token_id=[1])
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    processor = dict(spec["processor"], do_resize=True, do_rescale=True, rescale_factor=1.0 / 255.0,
                     do_normalize=True, do_convert_rgb=True, resample=3,
                     image_processor_type="Qwen2VLImageProcessor")
    with open(os.path.join(out_dir, "preprocessor_config.json"), "w") as f:
        json.dump(processor, f, indent=2)
        f.write("\n")
    return model


def load(family, ckpt):
    import torch
    import transformers
    dt.setup_torch()
    cls = getattr(transformers, FAMILIES[family]["class"])
    model = cls.from_pretrained(ckpt, dtype=torch.float32, attn_implementation="eager").eval()
    if {p.dtype for p in model.parameters()} != {torch.float32}:
        raise RuntimeError("%s did not load in float32" % family)
    return model


# ---------------------------------------------------------------------------- one case

def image_inputs(ckpt, paths):
    import torch
    from PIL import Image
    from transformers import AutoImageProcessor
    if not paths:
        return {}, None
    # transformers' default processor (torchvision's resize in 5.17): what a user gets, what
    # the Qwen2.5-VL parity fixtures use (dump_taps.py) and what vlmc's preprocessing follows
    # by default. (The PIL one rounds a few resized pixels differently: 8 of 400 patch rows
    # of a 336 -> 320 Qwen3-VL resize, one level each.)
    ip = AutoImageProcessor.from_pretrained(ckpt)
    enc = ip(images=[Image.open(p).convert("RGB") for p in paths], return_tensors="pt")
    settings = {k: str(getattr(ip, k, None)) for k in ("size", "min_pixels", "max_pixels",
                                                        "patch_size", "merge_size")}
    settings["class"] = type(ip).__name__
    return {"pixel_values": enc["pixel_values"].float(),
            "image_grid_thw": enc["image_grid_thw"].to(torch.long)}, settings


def case_ids(case, grids):
    """make_parity_fixtures.py's prompt shape: 10 text ids, per image vision_start, the pads
    (t h w / 4 from the processor's grid), vision_end and 4 text ids between images, 5 at the
    end (24 text ids without an image)."""
    rnd = random.Random("vlmc-family-" + case)

    def text(k):
        return [rnd.randrange(2, IMAGE) for _ in range(k)]
    if not grids:
        return text(24)
    ids = text(10)
    for k, (t, h, w) in enumerate(grids):
        if k:
            ids += text(4)
        ids += [VSTART] + [IMAGE] * (t * h * w // 4) + [VEND]
    return ids + text(5)


class FamilyTaps(dt.Taps):
    """dump_taps.Taps' first-call hooks on the stages every family has, plus the first vision
    block's input and Qwen3-VL's deepstack (its mergers, what the language model receives, and
    the language-model layers the features are added after)."""

    def __init__(self, model, deepstack_layers):  # pylint: disable=super-init-not-called
        self.values, self.handles = {}, []
        visual, lm, _ = dt.inner(model)
        self.hook(visual.patch_embed, "patch_embed", dt.first_tensor)
        for i, blk in enumerate(visual.blocks):
            self.hook(blk, "vision_block.%d" % i, dt.first_tensor)
        self.handles.append(visual.blocks[0].register_forward_pre_hook(self.block_input, with_kwargs=True))
        self.hook(visual.merger, "merger", dt.first_tensor)
        for i, m in enumerate(getattr(visual, "deepstack_merger_list", None) or []):
            self.hook(m, "deepstack.%d" % i, dt.first_tensor)
        self.hook(visual, "image_embeds", dt.vision_output)
        for i in range(deepstack_layers):  # [1, S, H] from the layer: stored as vlmc's [S, H]
            self.hook(lm.layers[i], "lm_layer.%d" % i, lambda out: dt.first_tensor(out)[0])
        self.handles.append(lm.register_forward_pre_hook(self.lm_input, with_kwargs=True))

    def block_input(self, _m, args, kwargs):
        x = args[0] if args else kwargs.get("hidden_states")
        if x is not None and "vision_block_input.0" not in self.values:
            self.values["vision_block_input.0"] = x.detach().float().cpu().clone()

    def lm_input(self, m, args, kwargs):
        self.lm_pre_hook(m, args, kwargs)
        self.values.pop("lm_position_ids", None)
        for i, d in enumerate(kwargs.get("deepstack_visual_embeds") or []):
            name = "deepstack_visual_embeds.%d" % i
            if name not in self.values:
                self.values[name] = d.detach().float().cpu().clone()


def rope_index(model, inputs):
    import torch
    _, _, core = dt.inner(model)
    ids = inputs["input_ids"]
    if "image_grid_thw" not in inputs:
        s = ids.shape[1]
        return torch.arange(s).unsqueeze(0).expand(3, s).clone(), 0, "text only: arange"
    tries = [dict(mm_token_type_ids=inputs["mm_token_type_ids"], image_grid_thw=inputs["image_grid_thw"],
                  attention_mask=inputs["attention_mask"]),
             dict(image_grid_thw=inputs["image_grid_thw"], attention_mask=inputs["attention_mask"])]
    for kw in tries:
        try:
            pos, delta = core.get_rope_index(ids, **kw)
            return pos[:, 0, :].cpu().long(), int(delta.reshape(-1)[0]), "get_rope_index(%s)" % ", ".join(kw)
        except TypeError:
            continue
    raise RuntimeError("get_rope_index takes none of the known signatures")


def run_case(family, model, ckpt, case, paths, out_dir):
    import torch
    import transformers
    from safetensors.torch import save_file
    os.makedirs(out_dir, exist_ok=True)
    vis, settings = image_inputs(ckpt, paths)
    grids = vis["image_grid_thw"].tolist() if vis else []
    ids = case_ids(case, grids)
    with open(os.path.join(out_dir, "input_ids.json"), "w") as f:
        json.dump(ids, f)
        f.write("\n")
    inputs = dict(vis)
    inputs["input_ids"] = torch.tensor([ids], dtype=torch.long)
    inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
    mm = torch.zeros_like(inputs["input_ids"])
    mm[inputs["input_ids"] == IMAGE] = 1
    inputs["mm_token_type_ids"] = mm
    deepstack = len(getattr(model.config.vision_config, "deepstack_visual_indexes", None) or [])
    taps = FamilyTaps(model, deepstack if vis else 0)
    try:
        out = dt.prefill(model, inputs)
    finally:
        taps.remove()
    pos, delta, rope_how = rope_index(model, inputs)
    t = {"input_ids": inputs["input_ids"][0].contiguous(), "position_ids": pos.contiguous(),
         "rope_deltas": torch.tensor([delta], dtype=torch.long),
         "logits_last": out.logits[0, -1].float().cpu().contiguous()}
    for name, value in taps.values.items():
        if vis or name == "inputs_embeds":
            t[name] = value.contiguous()
    if vis:
        pv = inputs["pixel_values"]
        rows = oc.row_subset(pv.shape[0], 64)
        index = torch.tensor(rows, dtype=torch.long)
        t["pixel_values_rows"] = pv.index_select(0, index).contiguous()
        t["row_index"] = index
        t["pixel_values_sum"] = pv.double().sum().reshape(1)
        t["pixel_values_abs_sum"] = pv.double().abs().sum().reshape(1)
        t["image_grid_thw"] = inputs["image_grid_thw"].contiguous()
    save_file(t, os.path.join(out_dir, "taps.safetensors"))
    tokens, logits = dt.greedy_generate(model, inputs, 16)
    checks = {"step0_logits_equal_logits_last_max_abs": float((logits[0] - t["logits_last"]).abs().max())}
    if vis:
        mask = inputs["input_ids"][0] == IMAGE
        checks["inputs_embeds_equal_image_embeds_at_pads"] = bool(
            torch.equal(t["inputs_embeds"][mask], t["image_embeds"]))
    expected = {
        "family": family, "checkpoint": os.path.relpath(ckpt, oc.REPO_ROOT),
        "images": paths, "input_ids": ids, "image_grid_thw": grids, "rope_delta": delta,
        "greedy_tokens": tokens, "top5": dt.top5(logits), "min_top1_margin": dt.min_margin(logits),
        "checks": checks, "taps": sorted(t.keys()),
        "run": {"transformers": transformers.__version__, "torch": torch.__version__,
                "dtype": "float32 (weights are bf16-exact)", "attn_implementation": "eager",
                "tf32": False, "decode": "generate(do_sample=False, use_cache=True), pure greedy",
                "max_new_tokens": 16, "position_ids": rope_how, "image_processor": settings,
                "pixel_values": "rows 64" if vis else None},
    }
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    print("%s %s: S=%d grids %s delta %d tokens %s margin %.3g checks %s"
          % (family, case, len(ids), grids, delta, tokens, expected["min_top1_margin"], checks))
    return expected


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--out", default=os.path.join("tests", "fixtures", "parity_families"))
    args = ap.parse_args(argv)
    os.chdir(oc.REPO_ROOT)
    failures = []
    for family in args.families.split(","):
        if family not in FAMILIES:
            failures.append("%s: unknown family" % family)
            continue
        try:
            ckpt = os.path.join(args.out, family, "tiny")
            build_checkpoint(family, ckpt)
            model = load(family, ckpt)
            print("%s config: %s" % (family, json.dumps(model.config.to_dict(), default=str)[:4000]))
            for case, paths in CASES:
                try:
                    run_case(family, model, ckpt, case, paths, os.path.join(args.out, family, case))
                except Exception as e:  # the other cases still run
                    traceback.print_exc()
                    failures.append("%s %s: %r" % (family, case, e))
        except Exception as e:
            traceback.print_exc()
            failures.append("%s: %r" % (family, e))
    print("parity_families: failures %s" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
