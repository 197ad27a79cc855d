#!/usr/bin/env python3
"""Dump transformers' Qwen2.5-VL intermediate tensors ("taps") for a stage-by-stage diff with vlmc.

Usage:
  dump_taps.py CKPT_DIR [--image IMG]... (-p PROMPT | --input-ids FILE) -o DIR [-n 16]
               [--pixel-rows K] [--no-block-taps] [--save-resized] [--device cpu|cuda]

  -p PROMPT        chat prompt: [user: images in command-line order, then PROMPT] with the
                   generation prompt, rendered by the checkpoint's processor (its chat template,
                   or tests/oracle/qwen2_vl_chat_template.jinja when it has none)
  --input-ids FILE the prompt as a JSON list of token ids (image pads already expanded); images
                   go through the checkpoint's preprocessor_config.json
  --pixel-rows K   store K fixed rows of pixel_values (+ sums) instead of the full tensor
  --no-block-taps  leave out vision_block.{i} (large for big images)
  --save-resized   when the processor resized an image, also write DIR/image_<k>_resized.png, the
                   8-bit image it produced, after checking that it reproduces pixel_values

The model runs in float32 (the bf16 checkpoint values are exact in f32) with TF32 off and eager
attention; CPU is the default and is exact and deterministic. Writes DIR/taps.safetensors and
DIR/expected.json; the tensor names and meanings are listed in tests/oracle/README.md.
"""

import argparse
import copy
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle_common as oc  # noqa: E402


def parse_args(argv):
    ap = argparse.ArgumentParser(description="Dump transformers Qwen2.5-VL stage taps.")
    ap.add_argument("ckpt")
    ap.add_argument("--image", action="append", default=[])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("-p", "--prompt")
    src.add_argument("--input-ids")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("-n", "--max-new-tokens", type=int, default=16)
    ap.add_argument("--pixel-rows", type=int, default=0)
    ap.add_argument("--no-block-taps", action="store_true")
    ap.add_argument("--save-resized", action="store_true")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--skip-no-cache-check", action="store_true",
                    help="do not re-run the greedy decode without KV cache (n extra prefills)")
    return ap.parse_args(argv)


# ----------------------------------------------------------------------------------------------
# Model and inputs


def setup_torch():
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.use_deterministic_algorithms(True, warn_only=True)


def load_model(ckpt, device="cpu"):
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration
    setup_torch()
    kw = {"attn_implementation": "eager"}
    try:
        model = Qwen2_5_VLForConditionalGeneration.from_pretrained(ckpt, dtype=torch.float32, **kw)
    except TypeError:
        model = Qwen2_5_VLForConditionalGeneration.from_pretrained(ckpt, torch_dtype=torch.float32,
                                                                   **kw)
    model = model.to(device).eval()
    dtypes = {p.dtype for p in model.parameters()}
    if dtypes != {torch.float32}:
        raise RuntimeError("model did not load in float32: %s" % dtypes)
    return model


def inner(model):
    """(vision tower, language model, module that owns get_rope_index) across 4.x/5.x layouts."""
    core = model.model
    visual = getattr(core, "visual", None)
    if visual is None:
        visual = model.visual
    lm = getattr(core, "language_model", None)
    if lm is None:
        lm = core
    return visual, lm, core


def load_image_processor(ckpt):
    import transformers
    try:
        return transformers.AutoImageProcessor.from_pretrained(ckpt)
    except Exception as e:  # fall back to the explicit official settings
        print("AutoImageProcessor failed (%r); using Qwen2VLImageProcessor defaults" % e)
        path = os.path.join(ckpt, "preprocessor_config.json")
        cfg = json.load(open(path)) if os.path.exists(path) else {}
        size = {"shortest_edge": cfg.get("min_pixels", oc.MIN_PIXELS),
                "longest_edge": cfg.get("max_pixels", oc.MAX_PIXELS)}
        return transformers.Qwen2VLImageProcessor(size=size)


def build_inputs(model, args):
    """Returns a dict: input_ids [1,S], attention_mask, pixel_values, image_grid_thw,
    mm_token_type_ids, plus 'how' (a description) and the PIL images."""
    import torch
    from PIL import Image
    cfg = model.config
    images = [Image.open(p).convert("RGB") for p in args.image]
    how = {}
    if args.input_ids:
        with open(args.input_ids) as f:
            ids = json.load(f)
        if not isinstance(ids, list) or not all(isinstance(t, int) for t in ids):
            raise ValueError("%s: expected a JSON list of integer token ids" % args.input_ids)
        inputs = {"input_ids": torch.tensor([ids], dtype=torch.long)}
        if images:
            ip = load_image_processor(args.ckpt)
            enc = ip(images=images, return_tensors="pt")
            inputs["pixel_values"] = enc["pixel_values"]
            inputs["image_grid_thw"] = enc["image_grid_thw"]
            how["image_processor"] = type(ip).__name__
            how["image_processor_limits"] = {
                k: str(getattr(ip, k, None)) for k in ("size", "min_pixels", "max_pixels")}
        how["prompt"] = {"input_ids_file": args.input_ids}
    else:
        from transformers import AutoProcessor
        proc = AutoProcessor.from_pretrained(args.ckpt)
        if not getattr(proc, "chat_template", None):
            with open(oc.CHAT_TEMPLATE_PATH, encoding="utf-8") as f:
                proc.chat_template = f.read()
        content = [{"type": "image"} for _ in images] + [{"type": "text", "text": args.prompt}]
        messages = [{"role": "user", "content": content}]
        text = proc.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        enc = proc(text=[text], images=images or None, return_tensors="pt")
        inputs = {k: enc[k] for k in ("input_ids", "pixel_values", "image_grid_thw",
                                      "mm_token_type_ids") if k in enc}
        how["prompt"] = {"text": args.prompt, "rendered": text}
        how["processor"] = type(proc).__name__
        how["image_processor"] = type(proc.image_processor).__name__
    ids = inputs["input_ids"]
    # Spec §4.4's 5.x trap: without mm_token_type_ids the model silently uses 1-D positions.
    mm = torch.zeros_like(ids)
    mm[ids == cfg.image_token_id] = 1
    mm[ids == cfg.video_token_id] = 2
    if "mm_token_type_ids" in inputs and not torch.equal(inputs["mm_token_type_ids"].long(), mm):
        raise RuntimeError("processor mm_token_type_ids disagree with the image token positions")
    inputs["mm_token_type_ids"] = mm
    inputs["attention_mask"] = torch.ones_like(ids)
    if "pixel_values" in inputs:
        inputs["pixel_values"] = inputs["pixel_values"].float()
        grids = inputs["image_grid_thw"].tolist()
        n_pad = int((ids == cfg.image_token_id).sum())
        want = sum(t * h * w // 4 for t, h, w in grids)
        if n_pad != want:
            raise ValueError("the prompt has %d image tokens but the images need %d (grids %s)"
                             % (n_pad, want, grids))
    elif int((ids == cfg.image_token_id).sum()):
        raise ValueError("the prompt has image tokens but no --image was given")
    return inputs, how, images


def to_device(inputs, device):
    return {k: v.to(device) for k, v in inputs.items()}


def reset_rope_state(model):
    # 5.x caches rope_deltas on the model between calls; a stale value would shift the positions
    # of the next, unrelated prompt.
    _, _, core = inner(model)
    if hasattr(core, "rope_deltas"):
        core.rope_deltas = None


# ----------------------------------------------------------------------------------------------
# Taps


def first_tensor(out):
    import torch
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)):
        return out[0]
    for key in ("pooler_output", "last_hidden_state"):
        v = getattr(out, key, None)
        if v is not None:
            return v
    raise TypeError("cannot find a tensor in %s" % type(out).__name__)


def vision_output(out):
    """Merged embeddings in original order from the vision tower's return value."""
    import torch
    if isinstance(out, torch.Tensor):
        return out
    pooled = getattr(out, "pooler_output", None)
    if pooled is not None:
        return pooled
    return first_tensor(out)


class Taps:
    """Forward hooks that record the first call of each tapped module."""

    def __init__(self, model, blocks=True):
        self.values = {}
        self.handles = []
        visual, lm, _ = inner(model)
        self.hook(visual.patch_embed, "patch_embed", first_tensor)
        if blocks:
            for i, blk in enumerate(visual.blocks):
                self.hook(blk, "vision_block.%d" % i, first_tensor)
        self.hook(visual.merger, "merger", first_tensor)
        self.hook(visual, "image_embeds", vision_output)
        self.handles.append(lm.register_forward_pre_hook(self.lm_pre_hook, with_kwargs=True))

    def hook(self, module, name, pick):
        def fn(_m, _inp, out):
            if name not in self.values:
                self.values[name] = pick(out).detach().float().cpu().clone()
        self.handles.append(module.register_forward_hook(fn))

    def lm_pre_hook(self, _m, args, kwargs):
        if "inputs_embeds" in self.values:
            return
        emb = kwargs.get("inputs_embeds")
        if emb is not None:
            self.values["inputs_embeds"] = emb.detach().float().cpu()[0].clone()
        pos = kwargs.get("position_ids")
        if pos is not None:
            self.values["lm_position_ids"] = pos.detach().cpu().clone()

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []


def rope_index(model, inputs):
    """(position_ids [3,S], rope_delta) from transformers' get_rope_index."""
    import torch
    _, _, core = inner(model)
    ids = inputs["input_ids"]
    grid = inputs.get("image_grid_thw")
    if grid is None:
        s = ids.shape[1]
        return torch.arange(s).unsqueeze(0).expand(3, s).clone(), 0, "text only: arange"
    try:
        pos, delta = core.get_rope_index(ids, mm_token_type_ids=inputs["mm_token_type_ids"],
                                         image_grid_thw=grid,
                                         attention_mask=inputs["attention_mask"])
        how = "get_rope_index(input_ids, mm_token_type_ids=..., image_grid_thw=...)"
    except TypeError:  # transformers 4.x signature
        pos, delta = core.get_rope_index(ids, image_grid_thw=grid,
                                         attention_mask=inputs["attention_mask"])
        how = "get_rope_index(input_ids, image_grid_thw=...) [4.x]"
    return pos[:, 0, :].cpu().long(), int(delta.reshape(-1)[0]), how


def hf_window_index(model, grid):
    """transformers' own window index, when this version exposes it."""
    visual, _, _ = inner(model)
    try:
        from transformers.vision_utils import get_vision_window_index
        cfg = visual.config
        wi, cu = get_vision_window_index(grid, cfg.spatial_merge_size, cfg.window_size,
                                         cfg.patch_size)
        return [int(v) for v in wi.tolist()], [int(v) for v in cu.tolist()]
    except Exception as e:  # older layout: a method on the tower
        print("transformers.vision_utils.get_vision_window_index unavailable: %r" % e)
    try:
        wi, cu = visual.get_window_index(grid)
        return [int(v) for v in wi.tolist()], [int(v) for v in cu]
    except Exception as e:
        print("visual.get_window_index unavailable: %r" % e)
    return None, None


def prefill(model, inputs):
    import torch
    reset_rope_state(model)
    with torch.no_grad():
        return model(**inputs, use_cache=False)


def greedy_generate(model, inputs, n):
    """generate(do_sample=False) with every stopping and logits rule switched off."""
    import torch
    reset_rope_state(model)
    saved = model.generation_config
    cfg = copy.deepcopy(saved)
    for key, value in (("do_sample", False), ("num_beams", 1), ("max_new_tokens", n),
                       ("min_new_tokens", None), ("repetition_penalty", 1.0),
                       ("temperature", None), ("top_p", None), ("top_k", None),
                       ("eos_token_id", None)):
        setattr(cfg, key, value)
    if cfg.pad_token_id is None:
        cfg.pad_token_id = 0
    model.generation_config = cfg  # also the defaults generate() merges into the passed config
    try:
        with torch.no_grad():
            out = model.generate(**inputs, generation_config=cfg, return_dict_in_generate=True,
                                 output_logits=True, use_cache=True)
    finally:
        model.generation_config = saved
    s = inputs["input_ids"].shape[1]
    tokens = out.sequences[0, s:].tolist()
    logits = [step[0].float().cpu() for step in out.logits]
    return tokens, logits


def greedy_no_cache(model, inputs, n):
    """The same greedy decode recomputed from scratch at every step (no KV cache): positions then
    come from get_rope_index over the whole sequence, independent of rope_delta bookkeeping."""
    import torch
    ids = inputs["input_ids"]
    tokens, logits = [], []
    for _ in range(n):
        cur = dict(inputs)
        cur["input_ids"] = ids
        cur["attention_mask"] = torch.ones_like(ids)
        cur["mm_token_type_ids"] = torch.cat(
            [inputs["mm_token_type_ids"],
             torch.zeros((1, ids.shape[1] - inputs["input_ids"].shape[1]), dtype=torch.long,
                         device=ids.device)], dim=1)
        last = prefill(model, cur).logits[0, -1].float().cpu()
        nxt = int(torch.argmax(last))
        tokens.append(nxt)
        logits.append(last)
        ids = torch.cat([ids, torch.tensor([[nxt]], device=ids.device)], dim=1)
    return tokens, logits


def top5(logits):
    import torch
    out = []
    for row in logits:
        vals, idx = torch.topk(row, 5)
        out.append([[int(i), float(v)] for i, v in zip(idx, vals)])
    return out


def min_margin(logits):
    import torch
    m = float("inf")
    for row in logits:
        v = torch.topk(row, 2).values
        m = min(m, float(v[0] - v[1]))
    return m


# ----------------------------------------------------------------------------------------------
# The wrong-inverse experiment (spec §3.9)


def run_wrong_inverse(model, inputs, n):
    """Re-run with the un-permute gather using window_index instead of its inverse.

    transformers computes out = merger_out[argsort(window_index)]. A forward hook on the merger
    returns merger_out[window_index[window_index]] instead, so that the tower's own gather yields
    merger_out[window_index] -- exactly what the buggy inverse (reverse := window_index) gives.
    Returns (image_embeds, tokens, logits_last, merger_out, window_index).
    """
    import torch
    visual, _, _ = inner(model)
    wi = torch.tensor(oc.window_index(inputs["image_grid_thw"].tolist())[0])
    perm = wi[wi].to(inputs["pixel_values"].device)
    taps = Taps(model, blocks=False)
    handle = visual.merger.register_forward_hook(lambda _m, _i, out: out[perm])
    try:
        out = prefill(model, inputs)
        taps.remove()
        tokens, _ = greedy_generate(model, inputs, n)
    finally:
        handle.remove()
        taps.remove()
    return (taps.values["image_embeds"], tokens, out.logits[0, -1].float().cpu(),
            taps.values["merger"], wi)


# ----------------------------------------------------------------------------------------------
# Main


def save_resized_images(out_dir, inputs, images, model_ckpt):
    """Writes the 8-bit image behind each resized image's pixel_values, once verified."""
    import numpy as np
    from PIL import Image
    written = []
    grids = inputs["image_grid_thw"].tolist()
    pv = inputs["pixel_values"].cpu().numpy()
    start = 0
    ip = load_image_processor(model_ckpt)
    for k, (grid, img) in enumerate(zip(grids, images)):
        n = grid[0] * grid[1] * grid[2]
        rows = pv[start:start + n]
        start += n
        if (img.size[0], img.size[1]) == (grid[2] * oc.PATCH, grid[1] * oc.PATCH):
            continue
        u8f = oc.denormalize_to_rgb8_float(oc.unpatchify(rows, grid)[0])
        dist = float(np.abs(u8f - np.rint(u8f)).max())
        u8 = Image.fromarray(np.clip(np.rint(u8f), 0, 255).astype(np.uint8))
        again = ip(images=[u8], return_tensors="pt")["pixel_values"].float().numpy()
        err = float(np.abs(again - rows).max())
        name = "image_%d_resized.png" % k
        if dist < 1e-3 and err <= 1e-6:
            u8.save(os.path.join(out_dir, name), format="PNG", compress_level=9)
            written.append({"file": name, "size": list(u8.size), "max_abs_vs_pixel_values": err})
        else:
            print("not writing %s: 8-bit distance %g, re-run error %g" % (name, dist, err))
    return written


def dump(model, args, inputs=None, how=None, images=None):
    """Runs one prompt and writes DIR/taps.safetensors + DIR/expected.json. Returns expected."""
    import torch
    import transformers
    from safetensors.torch import save_file
    if inputs is None:
        inputs, how, images = build_inputs(model, args)
    device = next(model.parameters()).device
    inputs = to_device(inputs, device)
    os.makedirs(args.out, exist_ok=True)
    has_images = "pixel_values" in inputs
    ids = inputs["input_ids"]

    taps = Taps(model, blocks=has_images and not args.no_block_taps)
    try:
        out = prefill(model, inputs)
    finally:
        taps.remove()
    logits_last = out.logits[0, -1].float().cpu()
    pos, delta, rope_how = rope_index(model, inputs)
    checks = {}
    ref_pos, ref_delta = oc.rope_index(ids[0].tolist(),
                                       inputs["image_grid_thw"].tolist() if has_images else [],
                                       model.config.image_token_id)
    checks["position_ids_match_spec"] = (pos.tolist() == ref_pos and delta == ref_delta)
    lm_pos = taps.values.pop("lm_position_ids", None)
    if lm_pos is not None:
        # [3,B,S] (or [4,B,S] with a leading text plane in some 5.x versions) or plain [B,S].
        if lm_pos.dim() == 2:
            lm_pos = lm_pos[0].unsqueeze(0).expand(3, -1)
        else:
            lm_pos = lm_pos[:, 0, :][-3:]
        checks["position_ids_match_model_call"] = bool(torch.equal(lm_pos.long(), pos))

    t = {"input_ids": ids[0].cpu().long().contiguous(),
         "position_ids": pos.contiguous(),
         "rope_deltas": torch.tensor([delta], dtype=torch.long),
         "logits_last": logits_last.contiguous()}
    if "inputs_embeds" not in taps.values:
        raise RuntimeError("the language model was not called with inputs_embeds")
    t["inputs_embeds"] = taps.values["inputs_embeds"]
    if has_images:
        grid = inputs["image_grid_thw"].cpu().long()
        pv = inputs["pixel_values"].float().cpu()
        t["image_grid_thw"] = grid.contiguous()
        if args.pixel_rows:
            rows = oc.row_subset(pv.shape[0], args.pixel_rows)
            index = torch.tensor(rows, dtype=torch.long)
            t["pixel_values_rows"] = pv.index_select(0, index).contiguous()
            t["row_index"] = index
        else:
            t["pixel_values"] = pv.contiguous()
        t["pixel_values_sum"] = pv.double().sum().reshape(1)
        t["pixel_values_abs_sum"] = pv.double().abs().sum().reshape(1)
        for name, value in taps.values.items():
            t[name] = value.contiguous()
        wi, cu = oc.window_index(grid.tolist())
        t["window_index"] = torch.tensor(wi, dtype=torch.long)
        t["cu_window_seqlens"] = torch.tensor(cu, dtype=torch.long)
        hf_wi, hf_cu = hf_window_index(model, grid.to(device))
        if hf_wi is not None:
            checks["window_index_matches_transformers"] = (hf_wi == wi and hf_cu == cu)
        inv = torch.tensor(oc.inverse_permutation(wi))
        merger = taps.values["merger"]
        emb = taps.values["image_embeds"]
        checks["image_embeds_equal_merger_at_inverse"] = bool(torch.equal(emb, merger[inv]))
        mask = (ids[0] == model.config.image_token_id).cpu()
        checks["inputs_embeds_equal_image_embeds_at_pads"] = bool(
            torch.equal(t["inputs_embeds"][mask], emb))
    save_file(t, os.path.join(args.out, "taps.safetensors"))

    tokens, step_logits = greedy_generate(model, inputs, args.max_new_tokens)
    source = "generate(do_sample=False, use_cache=True)"
    nc_tokens = None
    if not getattr(args, "skip_no_cache_check", False):
        nc_tokens, nc_logits = greedy_no_cache(model, inputs, args.max_new_tokens)
        checks["generate_matches_no_cache_loop"] = tokens == nc_tokens
        if len(tokens) != args.max_new_tokens:
            tokens, step_logits, source = nc_tokens, nc_logits, "no-cache greedy loop"
        checks["cached_vs_no_cache_logits_max_abs"] = max(
            float((a - b).abs().max()) for a, b in zip(step_logits, nc_logits))
    checks["step0_logits_equal_logits_last_max_abs"] = float(
        (step_logits[0] - logits_last).abs().max())

    expected = {
        "checkpoint": os.path.relpath(os.path.abspath(args.ckpt), oc.REPO_ROOT)
        if os.path.abspath(args.ckpt).startswith(oc.REPO_ROOT) else args.ckpt,
        "images": [os.path.relpath(os.path.abspath(p), oc.REPO_ROOT)
                   if os.path.abspath(p).startswith(oc.REPO_ROOT) else p for p in args.image],
        "input_ids": ids[0].tolist(),
        "image_grid_thw": inputs["image_grid_thw"].tolist() if has_images else [],
        "rope_delta": delta,
        "window_index_is_involution": oc.is_involution(wi) if has_images else None,
        "greedy_tokens": tokens,
        "top5": top5(step_logits),
        "min_top1_margin": min_margin(step_logits),
        "no_cache_tokens": nc_tokens,
        "checks": checks,
        "taps": sorted(t.keys()),
        "run": {
            "transformers": transformers.__version__, "torch": torch.__version__,
            "dtype": "float32 (weights are bf16-exact)", "device": str(device),
            "attn_implementation": "eager", "tf32": False,
            "decode": source + ", pure greedy: no repetition penalty, no eos stop",
            "max_new_tokens": args.max_new_tokens,
            "mm_token_type_ids": "passed (1 at image pads)",
            "position_ids": rope_how,
            "pixel_values": ("rows %d" % args.pixel_rows) if args.pixel_rows else "full",
            "block_taps": has_images and not args.no_block_taps,
        },
    }
    expected["run"].update(how or {})
    tok = getattr(args, "tokenizer", None)
    if tok is not None:
        expected["greedy_text"] = tok.decode(tokens)
    if has_images and args.save_resized:
        expected["resized_images"] = save_resized_images(args.out, inputs, images, args.ckpt)
    with open(os.path.join(args.out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    print("taps %s: S=%d delta=%d tokens=%s margin=%.3g checks=%s"
          % (args.out, ids.shape[1], delta, tokens, expected["min_top1_margin"], checks))
    return expected, t


def main(argv):
    args = parse_args(argv)
    model = load_model(args.ckpt, args.device)
    if args.prompt is not None:
        from transformers import AutoTokenizer
        args.tokenizer = AutoTokenizer.from_pretrained(args.ckpt)
    dump(model, args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
