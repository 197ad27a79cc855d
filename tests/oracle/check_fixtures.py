#!/usr/bin/env python3
"""Checks the committed oracle fixtures against each other and against oracle_common.py.

Needs python3 + numpy + Pillow only (no torch, no transformers), so it runs on the development
machine and in CI. It proves that the fixtures are internally consistent and that the spec-level
reference (smart_resize, patch order, normalisation, window index, rope index, chat ids) agrees
with what transformers produced -- i.e. that a C implementation of the spec can match them.

Usage: python3 tests/oracle/check_fixtures.py   (exit status 0 when every check passes)
"""

import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle_common as oc  # noqa: E402

FIX = oc.FIXTURES_DIR
DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "BF16": np.uint16}
PIXEL_TOL = 1e-6  # torchvision fuses rescale+normalize: a 1-ulp difference from the plain order
FAILURES = []
COUNT = [0]


def check(name, ok, detail=""):
    COUNT[0] += 1
    if not ok:
        FAILURES.append(name)
        print("FAIL %s %s" % (name, detail))


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        a, b = info["data_offsets"]
        arr = np.frombuffer(data[8 + n + a:8 + n + b], dtype=DTYPES[info["dtype"]])
        out[name] = arr.reshape(info["shape"])
    return out


def png_rows(path):
    """pixel_values of an image that needs no resize, by the spec (float32)."""
    rgb = np.asarray(Image.open(path).convert("RGB"))
    h, w = rgb.shape[:2]
    grid = oc.image_grid(h, w)
    assert (grid[1] * oc.PATCH, grid[2] * oc.PATCH) == (h, w), path
    chw = oc.normalize_rgb8(rgb)
    return oc.patchify(np.stack([chw, chw]), grid), grid


def check_pixel_rows(tag, taps, rows_full):
    if "pixel_values" in taps:
        got, ref = taps["pixel_values"], rows_full
    else:
        idx = taps["row_index"]
        check(tag + " row_index", idx.tolist() == oc.row_subset(rows_full.shape[0], len(idx)))
        got, ref = taps["pixel_values_rows"], rows_full[idx]
    err = float(np.abs(got - ref).max())
    check(tag + " pixel rows vs spec", err <= PIXEL_TOL, "max |d| %g" % err)
    s = float(rows_full.astype(np.float64).sum())
    check(tag + " pixel sum", abs(s - float(taps["pixel_values_sum"][0])) <= 1e-6 * rows_full.size,
          "%r vs %r" % (s, float(taps["pixel_values_sum"][0])))


def check_preprocess():
    index = json.load(open(os.path.join(FIX, "preprocess", "index.json")))
    for name, info in sorted(index["images"].items()):
        tag = "preprocess " + name
        taps = load_safetensors(os.path.join(FIX, "preprocess", name + ".safetensors"))
        path = os.path.join(oc.REPO_ROOT, info["file"])
        with Image.open(path) as im:
            w, h = im.size
        grid = oc.image_grid(h, w)
        check(tag + " grid", taps["image_grid_thw"].tolist() == [list(grid)])
        n = grid[0] * grid[1] * grid[2]
        if (grid[1] * oc.PATCH, grid[2] * oc.PATCH) == (h, w):
            check_pixel_rows(tag, taps, png_rows(path)[0])
        else:  # resized: only the shape contract can be checked without a bicubic resampler
            rows = taps.get("pixel_values", taps.get("pixel_values_rows"))
            check(tag + " rows shape", rows.shape[1] == oc.ROW_FEATURES and rows.shape[0] <= n)


def check_parity_case(case):
    tag = "parity " + case
    d = os.path.join(FIX, "parity", case)
    taps = load_safetensors(os.path.join(d, "taps.safetensors"))
    exp = json.load(open(os.path.join(d, "expected.json")))
    ids = json.load(open(os.path.join(d, "input_ids.json")))
    check(tag + " input_ids", taps["input_ids"].tolist() == ids == exp["input_ids"])
    grids = [list(g) for g in taps["image_grid_thw"].tolist()] if "image_grid_thw" in taps else []
    check(tag + " grids", grids == exp["image_grid_thw"])
    planes, delta = oc.rope_index(ids, grids, 500)
    check(tag + " position_ids", taps["position_ids"].tolist() == planes)
    check(tag + " rope_delta", int(taps["rope_deltas"][0]) == delta == exp["rope_delta"])
    logits = taps["logits_last"]
    check(tag + " first token = argmax logits_last",
          int(np.argmax(logits)) == exp["greedy_tokens"][0])
    top0 = exp["top5"][0]
    check(tag + " top5[0] = logits_last",
          all(abs(float(logits[i]) - v) <= 1e-5 for i, v in top0))
    check(tag + " greedy = top1", [s[0][0] for s in exp["top5"]] == exp["greedy_tokens"])
    check(tag + " 16 tokens", len(exp["greedy_tokens"]) == 16)
    check(tag + " transformers checks", all(v is not False for v in exp["checks"].values()),
          str(exp["checks"]))
    if not grids:
        return
    wi, cu = oc.window_index(grids)
    check(tag + " window_index", taps["window_index"].tolist() == wi)
    check(tag + " cu_window_seqlens", taps["cu_window_seqlens"].tolist() == cu)
    inv = oc.inverse_permutation(wi)
    check(tag + " image_embeds = merger[inverse]",
          np.array_equal(taps["image_embeds"], taps["merger"][inv]))
    pads = np.array(ids) == 500
    check(tag + " inputs_embeds at pads = image_embeds",
          np.array_equal(taps["inputs_embeds"][pads], taps["image_embeds"]))
    n = sum(t * h * w for t, h, w in grids)
    check(tag + " patch_embed shape", taps["patch_embed"].shape == (n, 64))
    for i in range(4):
        if "vision_block.%d" % i in taps:
            check(tag + " block shape", taps["vision_block.%d" % i].shape == (n, 64))
    # Pixel rows: rebuilt from the case's PNGs (or the 8-bit resized image when one was resized).
    resized = {r["file"] for r in exp.get("resized_images", [])}
    parts = []
    for k, img in enumerate(exp["images"]):
        alt = "image_%d_resized.png" % k
        path = os.path.join(d, alt) if alt in resized else os.path.join(oc.REPO_ROOT, img)
        rows, grid = png_rows(path)
        check(tag + " image %d grid" % k, list(grid) == grids[k])
        parts.append(rows)
    check_pixel_rows(tag, taps, np.concatenate(parts))


def check_tokenizer():
    tdir = os.path.join(FIX, "tokenizer")
    corpus = open(os.path.join(tdir, "corpus.jsonl"), encoding="utf-8").read().split("\n")
    ids = open(os.path.join(tdir, "corpus_ids.txt"), encoding="utf-8").read().split("\n")
    check("tokenizer line counts", len(corpus) == len(ids) and corpus[-1] == ids[-1] == "")
    check("tokenizer corpus size", len(corpus) - 1 >= 300)
    for i, (s, line) in enumerate(zip(corpus[:-1], ids[:-1])):
        text = json.loads(s)
        toks = [int(t) for t in line.split()] if line else []
        if (text == "") != (toks == []):
            check("tokenizer line %d empty iff empty" % (i + 1), False)
    cases = json.load(open(os.path.join(tdir, "chat_cases.json"), encoding="utf-8"))
    check("chat spec 5.2", cases[0]["input_ids"] == oc.spec_5_2_ids(256))
    try:
        from jinja2.sandbox import ImmutableSandboxedEnvironment
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        template = env.from_string(open(oc.CHAT_TEMPLATE_PATH, encoding="utf-8").read())
    except ImportError:
        template = None
        print("note: jinja2 not installed, chat texts not re-rendered")
    for c in cases:
        tag = "chat " + c["name"]
        n_pad = sum(t * h * w // 4 for t, h, w in c["image_grid_thw"])
        check(tag + " pads", c["input_ids"].count(oc.IMAGE_PAD) == n_pad)
        check(tag + " image blocks", c["text"].count("<|image_pad|>") == len(c["images"]))
        for (t, h, w), img in zip(c["image_grid_thw"], c["images"]):
            with Image.open(os.path.join(oc.REPO_ROOT, img)) as im:
                check(tag + " grid", oc.image_grid(im.size[1], im.size[0]) == (t, h, w))
        if template is not None:
            text = template.render(messages=c["messages"],
                                   add_generation_prompt=c["add_generation_prompt"])
            check(tag + " text", text == c["text"])


def check_shapes_png():
    script = os.path.join(FIX, "generate_test_image_shapes.py")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "shapes.png")
        subprocess.run([sys.executable, script, out], check=True)
        regen = np.asarray(Image.open(out).convert("RGB"))
        same_bytes = open(out, "rb").read() == open(os.path.join(FIX, "test_image_shapes.png"),
                                                      "rb").read()
    committed = np.asarray(Image.open(os.path.join(FIX, "test_image_shapes.png")).convert("RGB"))
    check("test_image_shapes pixels", np.array_equal(regen, committed))
    digest = hashlib.sha256(open(os.path.join(FIX, "test_image_shapes.png"), "rb").read())
    check("test_image_shapes sha256", digest.hexdigest() ==
          "74a99b458cc06613ccc6b5e8832d3b85198ae50e518542143017f7075dedd14c")
    print("note: regenerated test_image_shapes.png is %sbyte-identical here"
          % ("" if same_bytes else "NOT "))


def main():
    check_preprocess()
    for case in ("img448", "img336", "img448x672", "two_images", "img1036", "wide1024x484",
                 "text_only"):
        check_parity_case(case)
    check_tokenizer()
    check_shapes_png()
    print("%d passed, %d failed" % (COUNT[0] - len(FAILURES), len(FAILURES)))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
