#!/usr/bin/env python3
"""The oracle input for `vlmc compile --quantize`: a checkpoint whose quantized weights are the
numpy dequantization of what vlmc's own quantizer makes of them (docs/quantization.md).

vlmc's quantizer (vlmc_quantize_affine_row, reference/tensor.c), per group of G weights of a
row along the input dimension, in float32: bias = f16(min), scale = f16((max - f32(bias)) /
(2^B - 1)), q = clamp(rint((x - f32(bias)) / f32(scale)), 0, 2^B - 1) (q = 0 when the scale is
0); the last group of a row may be short. The kernels then compute f32(scale) * q + f32(bias)
(a float32 multiply, then a float32 add). This script does the same with numpy, bit for bit,
and writes every such weight as that float32 dequantization, so that transformers run on the
twin computes what vlmc's q4 kernels must compute: a comparison of the two measures vlmc's
kernels, not the quantization error.

Which weights (passes/quantize.c): the 2-D weight of every linear of the language model (the
q, k, v, o, gate, up and down projections) and the lm_head; with --quantize-vision the vision
tower's and the merger's linears too. Embedding tables stay as they are. A tied lm_head (no
lm_head.weight, tie_word_embeddings true) is quantized from embed_tokens while the embedding
keeps its table, so the twin unties them: lm_head.weight is written and config.json's
tie_word_embeddings (top level and text_config) becomes false.

Output: OUT_DIR with model.safetensors (every tensor float32), config.json (dtype float32) and a
copy of the source's other files. Same input, same bytes.

Usage: make_quantized_twin.py SRC_DIR OUT_DIR [--bits 4|8] [--group-size G] [--quantize-vision]
"""

import argparse
import json
import os
import re
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_mlx_checkpoint as mmc  # noqa: E402  (safetensors reading and writing, dtypes)

LM_LINEAR = re.compile(r"^model\.layers\.\d+\.(self_attn|mlp)\.[a-z_]+_proj\.weight$")
VISION_LINEAR = re.compile(r"^visual\.(blocks\.\d+\.(attn\.(qkv|proj)|mlp\.[a-z_]+_proj)"
                           r"|merger\.mlp\.\d+)\.weight$")


def quantize_vlmc(w, bits, group):
    """vlmc_quantize_affine_row on every row of float32 w [rows, cols]: (q uint8, scales f16,
    biases f16), groups along the columns, the last one short when G does not divide cols."""
    rows, cols = w.shape
    top = np.float32((1 << bits) - 1)
    groups = -(-cols // group)
    q = np.zeros((rows, cols), dtype=np.uint8)
    scales = np.zeros((rows, groups), dtype=np.float16)
    biases = np.zeros((rows, groups), dtype=np.float16)
    for g in range(groups):
        x = w[:, g * group:(g + 1) * group]
        mn, mx = x.min(axis=1), x.max(axis=1)
        if not (np.isfinite(mn).all() and np.isfinite(mx).all()
                and np.abs(mn).max() <= 65504 and np.abs(mx).max() <= 65504):
            raise mmc.Bad("a group is beyond float16's range (vlmc refuses it too)")
        biases[:, g] = mn.astype(np.float16)
        b = biases[:, g].astype(np.float32)
        scales[:, g] = ((mx - b) / top).astype(np.float32).astype(np.float16)
        s = scales[:, g].astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.rint(((x - b[:, None]) / s[:, None]).astype(np.float32))
        r = np.where(s[:, None] > 0, r, np.float32(0))
        q[:, g * group:(g + 1) * group] = np.clip(r, 0, top).astype(np.uint8)
    return q, scales, biases


def dequantize_vlmc(q, scales, biases, group):
    """float32(scale) * q + float32(bias), a float32 multiply then a float32 add."""
    cols = q.shape[1]
    s = np.repeat(scales.astype(np.float32), group, axis=1)[:, :cols]
    b = np.repeat(biases.astype(np.float32), group, axis=1)[:, :cols]
    return (q.astype(np.float32) * s).astype(np.float32) + b


def quantized(name, shape, args):
    if len(shape) != 2:
        return False
    if LM_LINEAR.match(name) or name == "lm_head.weight":
        return True
    return bool(args.quantize_vision and VISION_LINEAR.match(name))


def convert(args):
    tensors, files = mmc.load_source(args.src)
    by_name = {t[0]: t for t in tensors}
    with open(os.path.join(args.src, "config.json")) as f:
        config = json.load(f)
    text = config.get("text_config", {})
    tied = bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False)))
    if tied and "lm_head.weight" in by_name:
        raise mmc.Bad("tie_word_embeddings with an lm_head.weight: which one is the head?")
    out_tensors, data, count = [], {}, 0

    def load(entry):
        name, fname, dtype, shape, b, e, start = entry
        raw = mmc.tensor_bytes(os.path.join(args.src, fname), start, b, e)
        return mmc.to_f32(raw, dtype).reshape(shape)

    for entry in tensors:
        name, shape = entry[0], entry[3]
        w = load(entry)
        if quantized(name, shape, args):
            w = dequantize_vlmc(*quantize_vlmc(w, args.bits, args.group_size), args.group_size)
            count += 1
        out_tensors.append((name, "F32", list(shape)))
        data[name] = np.ascontiguousarray(w, dtype=np.float32)
    if tied:
        embed = by_name.get("model.embed_tokens.weight")
        if embed is None:
            raise mmc.Bad("tied embeddings but no model.embed_tokens.weight")
        w = dequantize_vlmc(*quantize_vlmc(load(embed), args.bits, args.group_size),
                            args.group_size)
        out_tensors.append(("lm_head.weight", "F32", list(embed[3])))
        data["lm_head.weight"] = np.ascontiguousarray(w, dtype=np.float32)
        count += 1
        config["tie_word_embeddings"] = False
        if "text_config" in config:
            config["text_config"]["tie_word_embeddings"] = False
    config["dtype"] = "float32"
    config.pop("torch_dtype", None)
    os.makedirs(args.out, exist_ok=True)
    writer = mmc.ShardWriter(os.path.join(args.out, "model.safetensors"), out_tensors,
                             {"format": "pt"})
    for name, _, _ in out_tensors:
        writer.put(name, data[name].tobytes())
    writer.close()
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    for fname in sorted(os.listdir(args.src)):
        if fname in files or fname in ("config.json", "model.safetensors.index.json"):
            continue
        path = os.path.join(args.src, fname)
        if os.path.isfile(path):
            shutil.copyfile(path, os.path.join(args.out, fname))
    print("make_quantized_twin: %d tensors, %d quantized (vlmc's recipe, %d bits, group %d)%s"
          % (len(out_tensors), count, args.bits, args.group_size,
             ", lm_head untied from embed_tokens" if tied else ""))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src", metavar="SRC_DIR")
    ap.add_argument("out", metavar="OUT_DIR")
    ap.add_argument("--bits", type=int, choices=(4, 8), default=4)
    ap.add_argument("--group-size", type=int, default=64)
    ap.add_argument("--quantize-vision", action="store_true")
    args = ap.parse_args(argv)
    if args.group_size < 1 or args.group_size % (32 // args.bits):
        ap.error("--group-size must be a positive multiple of %d at %d bits"
                 % (32 // args.bits, args.bits))
    try:
        convert(args)
    except mmc.Bad as e:
        print("make_quantized_twin: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
