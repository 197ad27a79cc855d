#!/usr/bin/env python3
"""Image-processor fixtures from transformers 5.17 (run where transformers is installed).

For every PNG in tests/fixtures/images/ runs the default Qwen2VLImageProcessor (the torchvision
implementation in 5.x) with size={"shortest_edge": 3136, "longest_edge": 12845056} and writes
OUT_DIR/<name>.safetensors:
  image_grid_thw       I64 [1,3]
  pixel_values         F32 [N,1176]   when N*1176*4 <= FULL_LIMIT bytes, otherwise
  pixel_values_rows    F32 [K,1176]   rows row_index of the full tensor (oracle_common.row_subset)
  row_index            I64 [K]
  pixel_values_sum     F64 [1]        sum over the full tensor (always written)
  pixel_values_abs_sum F64 [1]        sum of |x| over the full tensor (always written)
and OUT_DIR/index.json with, per image: sizes, grid, storage form, the PIL-path difference
(Qwen2VLImageProcessorPil vs torchvision: max and mean |delta|) and whether the torchvision output
is an exact function of an 8-bit resized image.

Usage: python3 tests/oracle/make_preprocess_fixtures.py [OUT_DIR]
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle_common as oc  # noqa: E402

FULL_LIMIT = 2 * 1024 * 1024
ROWS_K = 64
IMAGES = os.path.join(oc.FIXTURES_DIR, "images")


def processors():
    import transformers
    size = {"shortest_edge": oc.MIN_PIXELS, "longest_edge": oc.MAX_PIXELS}
    fast = transformers.Qwen2VLImageProcessor(size=size)
    pil_cls = getattr(transformers, "Qwen2VLImageProcessorPil", None)
    pil = pil_cls(size=size) if pil_cls is not None else None
    return fast, pil


def run(proc, img):
    out = proc(images=[img], return_tensors="pt")
    return out["pixel_values"].float().contiguous(), out["image_grid_thw"].long().contiguous()


def eight_bit_check(pv, grid):
    """Is pv = normalize(u8 image)? Returns (max distance of de-normalised values to integers,
    max |pv - normalize(rounded u8)|) for the reconstructed image."""
    import numpy as np
    frames = oc.unpatchify(pv.numpy(), grid)
    u8f = oc.denormalize_to_rgb8_float(frames[0])
    dist = float(np.abs(u8f - np.rint(u8f)).max())
    u8 = np.clip(np.rint(u8f), 0, 255).astype(np.uint8)
    again = oc.patchify(np.stack([oc.normalize_rgb8(u8)] * 2), grid)
    return dist, float(np.abs(again - pv.numpy()).max())


def one_image(path, fast, pil, out_dir):
    import torch
    from PIL import Image
    from safetensors.torch import save_file
    name = os.path.splitext(os.path.basename(path))[0]
    img = Image.open(path).convert("RGB")
    pv, grid = run(fast, img)
    t, gh, gw = (int(v) for v in grid[0].tolist())
    want = oc.image_grid(img.size[1], img.size[0])
    n = pv.shape[0]
    tensors = {"image_grid_thw": grid,
               "pixel_values_sum": pv.double().sum().reshape(1),
               "pixel_values_abs_sum": pv.double().abs().sum().reshape(1)}
    if n * oc.ROW_FEATURES * 4 <= FULL_LIMIT:
        tensors["pixel_values"] = pv
        form = "full"
    else:
        rows = oc.row_subset(n, ROWS_K)
        index = torch.tensor(rows, dtype=torch.int64)
        tensors["pixel_values_rows"] = pv.index_select(0, index).contiguous()
        tensors["row_index"] = index
        form = "rows"
    save_file(tensors, os.path.join(out_dir, name + ".safetensors"))
    info = {"file": os.path.relpath(path, oc.REPO_ROOT), "width": img.size[0],
            "height": img.size[1], "resized_width": gw * oc.PATCH, "resized_height": gh * oc.PATCH,
            "image_grid_thw": [t, gh, gw], "rows": n, "stored": form,
            "grid_matches_smart_resize": [t, gh, gw] == list(want)}
    dist, redo = eight_bit_check(pv, (t, gh, gw))
    info["torchvision_8bit_distance"] = dist
    info["torchvision_renormalize_max_abs"] = redo
    if pil is not None:
        pv_pil, grid_pil = run(pil, img)
        if grid_pil.tolist() != grid.tolist():
            info["pil_grid"] = grid_pil.tolist()
        else:
            d = (pv_pil - pv).abs()
            info["pil_vs_torchvision_max_abs"] = float(d.max())
            info["pil_vs_torchvision_mean_abs"] = float(d.double().mean())
    print("preprocess %-24s %4dx%-4d -> grid %s N=%5d %s 8bit-dist %.2g pil max %.3g mean %.3g"
          % (name, img.size[0], img.size[1], [t, gh, gw], n, form, dist,
             info.get("pil_vs_torchvision_max_abs", -1),
             info.get("pil_vs_torchvision_mean_abs", -1)))
    return name, info


def main(argv):
    out_dir = argv[1] if len(argv) > 1 else os.path.join(oc.FIXTURES_DIR, "preprocess")
    os.makedirs(out_dir, exist_ok=True)
    import transformers
    fast, pil = processors()
    index = {"transformers": transformers.__version__,
             "processor": type(fast).__name__,
             "pil_processor": type(pil).__name__ if pil is not None else None,
             "size": {"shortest_edge": oc.MIN_PIXELS, "longest_edge": oc.MAX_PIXELS},
             "full_limit_bytes": FULL_LIMIT, "rows_k": ROWS_K, "images": {}}
    for fname in sorted(os.listdir(IMAGES)):
        if fname.endswith(".png"):
            name, info = one_image(os.path.join(IMAGES, fname), fast, pil, out_dir)
            index["images"][name] = info
    with open(os.path.join(out_dir, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    bad = [n for n, i in index["images"].items() if not i["grid_matches_smart_resize"]]
    return {"images": len(index["images"]), "grid_mismatch": bad}


if __name__ == "__main__":
    result = main(sys.argv)
    print(json.dumps(result))
    sys.exit(1 if result["grid_mismatch"] else 0)
