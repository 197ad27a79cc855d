#!/usr/bin/env python3
"""Model parity fixtures: the tiny checkpoint, per-case taps and the wrong-inverse experiment.

Run from anywhere where transformers 5.17 is installed; it writes inside the repository:
  tests/fixtures/parity/tiny-vocab512/        (make_tiny_checkpoint.py)
  tests/fixtures/parity/<case>/input_ids.json  the prompt as token ids (chat structure, small ids)
  tests/fixtures/parity/<case>/taps.safetensors, expected.json   (dump_taps.py)
  tests/oracle/wrong_inverse_results.json      spec §3.9 experiment, one entry per image case

Usage: python3 tests/oracle/make_parity_fixtures.py [--skip-checkpoint]
"""

import json
import os
import random
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle_common as oc  # noqa: E402

PARITY = os.path.join("tests", "fixtures", "parity")
CKPT = os.path.join(PARITY, "tiny-vocab512")
IMAGES = os.path.join("tests", "fixtures", "images")
SHAPES = os.path.join("tests", "fixtures", "test_image_shapes.png")
BUDGET_BYTES = 12 * 1000 * 1000
PIXEL_ROWS = 64

# Tiny-config special ids (spec §7.3).
IMAGE, VSTART, VEND = 500, 502, 503

# (case, images, keep vision_block taps, save the resized 8-bit image)
CASES = [
    ("img448", [SHAPES], True, False),
    ("img336", [os.path.join(IMAGES, "scene_336x336.png")], True, False),
    ("img448x672", [os.path.join(IMAGES, "scene_448x672.png")], False, False),
    ("two_images", [SHAPES, os.path.join(IMAGES, "scene_224x448.png")], True, False),
    ("img1036", [os.path.join(IMAGES, "scene_1036x1036.png")], False, False),
    ("wide1024x484", [os.path.join(IMAGES, "wide_1024x484.png")], False, True),
    ("text_only", [], False, False),
]


def case_input_ids(case, images):
    """Chat-shaped prompt with small ids: 10 text ids, then per image vision_start, the pads,
    vision_end and 4 text ids between images, 5 text ids at the end (24 text ids if no image)."""
    from PIL import Image
    rnd = random.Random("vlmc-parity-" + case)

    def text(k):
        return [rnd.randrange(2, IMAGE) for _ in range(k)]
    if not images:
        return text(24)
    ids = text(10)
    for k, path in enumerate(images):
        with Image.open(path) as im:
            t, h, w = oc.image_grid(im.size[1], im.size[0])
        if k:
            ids += text(4)
        ids += [VSTART] + [IMAGE] * (t * h * w // 4) + [VEND]
    return ids + text(5)


def dir_bytes(path):
    total = 0
    for root, _dirs, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def drop_block_taps(case_dir):
    """Re-save a case's taps without vision_block.{i} (to keep the parity folder in budget)."""
    from safetensors.torch import load_file, save_file
    path = os.path.join(case_dir, "taps.safetensors")
    taps = {k: v for k, v in load_file(path).items() if not k.startswith("vision_block.")}
    save_file(taps, path)
    exp_path = os.path.join(case_dir, "expected.json")
    with open(exp_path) as f:
        expected = json.load(f)
    expected["taps"] = sorted(taps.keys())
    expected["run"]["block_taps"] = False
    expected["run"]["block_taps_dropped_for_size"] = True
    with open(exp_path, "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")


def wrong_inverse(model, dt, case, inputs, correct_taps, correct_tokens):
    import torch
    emb_w, tokens_w, logits_w, merger, wi = dt.run_wrong_inverse(model, inputs, 16)
    emb = correct_taps["image_embeds"]
    misplaced = sum(1 for j in range(len(wi)) if int(wi[int(wi[j])]) != j)
    return {
        "case": case,
        "image_grid_thw": inputs["image_grid_thw"].tolist(),
        "window_index_is_involution": misplaced == 0,
        "merged_tokens": len(wi),
        "tokens_misplaced": misplaced,
        "image_embeds_max_abs": float(emb.abs().max()),
        "image_embeds_max_abs_delta": float((emb_w - emb).abs().max()),
        "emulation_check_max_abs": float((emb_w - merger[wi]).abs().max()),
        "merger_unchanged": bool(torch.equal(merger, correct_taps["merger"])),
        "logits_last_max_abs_delta": float((logits_w - correct_taps["logits_last"]).abs().max()),
        "greedy_tokens": correct_tokens,
        "greedy_tokens_wrong_inverse": tokens_w,
        "greedy_tokens_changed": tokens_w != correct_tokens,
    }


def main(argv):
    os.chdir(oc.REPO_ROOT)
    import dump_taps as dt
    import make_tiny_checkpoint as mtc
    summary = {}
    if "--skip-checkpoint" not in argv:
        summary["checkpoint"] = mtc.build(CKPT)
    model = dt.load_model(CKPT)
    results, failures = [], []
    for case, images, blocks, save_resized in CASES:
        case_dir = os.path.join(PARITY, case)
        os.makedirs(case_dir, exist_ok=True)
        ids_path = os.path.join(case_dir, "input_ids.json")
        with open(ids_path, "w") as f:
            json.dump(case_input_ids(case, images), f)
            f.write("\n")
        args = types.SimpleNamespace(
            ckpt=CKPT, image=images, prompt=None, input_ids=ids_path, out=case_dir,
            max_new_tokens=16, pixel_rows=PIXEL_ROWS if images else 0,
            no_block_taps=not blocks, save_resized=save_resized, device="cpu")
        try:
            inputs, how, pil_images = dt.build_inputs(model, args)
            expected, taps = dt.dump(model, args, inputs, how, pil_images)
            bad = [k for k, v in expected["checks"].items() if v is False]
            if bad:
                failures.append("%s: checks failed: %s" % (case, bad))
            if images:
                results.append(wrong_inverse(model, dt, case, inputs, taps,
                                             expected["greedy_tokens"]))
                print("wrong inverse %s: %s" % (case, json.dumps(results[-1])))
        except Exception as e:  # keep the other cases going; the failure is reported at the end
            import traceback
            traceback.print_exc()
            failures.append("%s: %r" % (case, e))
    total = dir_bytes(PARITY)
    if total > BUDGET_BYTES and os.path.exists(os.path.join(PARITY, "two_images")):
        drop_block_taps(os.path.join(PARITY, "two_images"))
        print("parity folder %d bytes > budget: dropped two_images block taps" % total)
        total = dir_bytes(PARITY)
    with open(os.path.join("tests", "oracle", "wrong_inverse_results.json"), "w") as f:
        json.dump(results, f, indent=1)
        f.write("\n")
    sizes = {d: dir_bytes(os.path.join(PARITY, d)) for d in sorted(os.listdir(PARITY))}
    summary.update({"parity_bytes": total, "case_bytes": sizes, "failures": failures})
    print("parity: %d bytes total %s; failures %s" % (total, sizes, failures))
    return summary


if __name__ == "__main__":
    result = main(sys.argv[1:])
    sys.exit(1 if result["failures"] or result["parity_bytes"] > BUDGET_BYTES else 0)
