"""Edits an MLX-format checkpoint folder written by tests/oracle/make_mlx_checkpoint.py, in place,
for tests/e2e/quantized_mlx.sh (numpy; Debian's python3).

  mlx_edit.py DIR config KEY=VALUE      quantization.KEY and quantization_config.KEY := VALUE
                                        (JSON: 72, "mxfp4", {"bits": 8})
  mlx_edit.py DIR noquant               config.json without quantization / quantization_config
  mlx_edit.py DIR drop-col TENSOR       the last column of a 2-D tensor removed
  mlx_edit.py DIR drop TENSOR           the tensor removed (and from the index)
  mlx_edit.py DIR u32 TENSOR            a BF16 tensor re-declared U32 (values widened)
  mlx_edit.py DIR f16 TENSOR            a BF16 tensor converted to F16
  mlx_edit.py DIR nan TENSOR INDEX      element INDEX of a BF16 tensor set to a NaN
  mlx_edit.py DIR tie                   tie_word_embeddings true, lm_head.* removed (the 3B
                                        layout: the quantized embed_tokens is the lm head)
  mlx_edit.py DIR short-groups TWIN G TENSOR...
      quantizes BF16 `X.weight` tensors whose in-dim G does not divide (MLX refuses those;
      docs/ir.md's dequantize allows them): 4 bits, groups of G along the row, the last one
      short, ceil(in/8) words with the last word's unused nibbles set to 0xF (padding), bf16
      scale (max-min)/15 and bias min; TWIN (a --dequantize-to folder) gets X.weight as F32
      f32(scale) * q + f32(bias), product and sum each rounded to f32.

Rewritten files keep the tensors' order, pad the header to 8 bytes and update the index
(weight_map and total_size)."""
import json
import os
import struct
import sys

import numpy as np


def load(folder):
    blob = open(os.path.join(folder, "model.safetensors"), "rb").read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    tensors = {k: (v, data[v["data_offsets"][0]:v["data_offsets"][1]])
               for k, v in header.items() if k != "__metadata__"}
    return header.get("__metadata__", {}), tensors


def save(folder, metadata, tensors):
    out, body, at = {"__metadata__": metadata}, [], 0
    for name, (entry, raw) in tensors.items():
        out[name] = dict(entry, data_offsets=[at, at + len(raw)])
        body.append(raw)
        at += len(raw)
    text = json.dumps(out).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(body))
    index_path = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index_path):
        index = json.load(open(index_path))
        index["weight_map"] = {k: "model.safetensors" for k in tensors}
        index["metadata"]["total_size"] = at
        json.dump(index, open(index_path, "w"), indent=4, sort_keys=True)


def bf16_bits(x):  # round to nearest even
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def short_groups(folder, twin, group, names):
    meta, tensors = load(folder)
    twin_meta, twin_tensors = load(twin)
    for name in names:
        entry, raw = tensors[name]
        assert entry["dtype"] == "BF16" and name.endswith(".weight"), (name, entry)
        rows, cols = entry["shape"]
        assert cols % group, f"{name}: {group} divides {cols}: make_mlx_checkpoint.py's case"
        w = bf16_values(np.frombuffer(raw, np.uint16)).reshape(rows, cols)
        groups, words = -(-cols // group), -(-cols // 8)
        scales = np.zeros((rows, groups), np.uint16)
        biases = np.zeros((rows, groups), np.uint16)
        codes = np.full((rows, words * 8), 15, np.uint32)  # padding: all ones
        dequantized = np.zeros((rows, cols), np.float32)
        for g in range(groups):
            block = w[:, g * group:(g + 1) * group]
            lo, hi = block.min(axis=1), block.max(axis=1)
            biases[:, g] = bf16_bits(lo)
            scales[:, g] = bf16_bits(np.maximum((hi - lo) / np.float32(15), np.float32(1e-7)))
            s = bf16_values(scales[:, g])[:, None]
            b = bf16_values(biases[:, g])[:, None]
            q = np.clip(np.rint((block - b) / s), 0, 15).astype(np.uint32)
            codes[:, g * group:g * group + block.shape[1]] = q
            product = (s * q.astype(np.float32)).astype(np.float32)  # rounded to f32
            dequantized[:, g * group:g * group + block.shape[1]] = product + b
        packed = np.zeros((rows, words), np.uint32)
        for j in range(8):
            packed |= codes[:, j::8] << np.uint32(4 * j)
        base = name[:-len(".weight")]
        tensors[name] = (dict(entry, dtype="U32", shape=[rows, words]), packed.tobytes())
        tensors[base + ".scales"] = ({"dtype": "BF16", "shape": [rows, groups]}, scales.tobytes())
        tensors[base + ".biases"] = ({"dtype": "BF16", "shape": [rows, groups]}, biases.tobytes())
        twin_entry = twin_tensors[name][0]
        twin_tensors[name] = (dict(twin_entry, dtype="F32"), dequantized.tobytes())
    save(folder, meta, tensors)
    save(twin, twin_meta, twin_tensors)


def main(argv):
    folder, action, args = argv[1], argv[2], argv[3:]
    if action in ("config", "noquant"):
        path = os.path.join(folder, "config.json")
        config = json.load(open(path))
        for key in ("quantization", "quantization_config"):
            if action == "noquant":
                config.pop(key, None)
            else:
                k, v = args[0].split("=", 1)
                config[key][k] = json.loads(v)
        json.dump(config, open(path, "w"), indent=4, sort_keys=True)
        return
    if action == "tie":
        path = os.path.join(folder, "config.json")
        config = json.load(open(path))
        config["tie_word_embeddings"] = True
        json.dump(config, open(path, "w"), indent=4, sort_keys=True)
        meta, tensors = load(folder)
        save(folder, meta, {k: v for k, v in tensors.items() if not k.startswith("lm_head.")})
        return
    if action == "short-groups":
        short_groups(folder, args[0], int(args[1]), args[2:])
        return
    meta, tensors = load(folder)
    name = args[0]
    entry, raw = tensors[name]
    shape = entry["shape"]
    if action == "drop":
        del tensors[name]
    elif action == "drop-col":
        row = len(raw) // shape[0]
        width = row // shape[1]
        raw = np.frombuffer(raw, np.uint8).reshape(shape[0], row)[:, :row - width].tobytes()
        tensors[name] = (dict(entry, shape=[shape[0], shape[1] - 1]), raw)
    elif action == "nan":
        assert entry["dtype"] == "BF16", entry["dtype"]
        bits = np.frombuffer(raw, np.uint16).copy()
        bits[int(args[1])] = 0x7FC1
        tensors[name] = (entry, bits.tobytes())
    elif action in ("u32", "f16"):
        assert entry["dtype"] == "BF16", entry["dtype"]
        bits = np.frombuffer(raw, np.uint16)
        if action == "u32":
            tensors[name] = (dict(entry, dtype="U32"), bits.astype(np.uint32).tobytes())
        else:
            values = bf16_values(bits).astype(np.float16)
            tensors[name] = (dict(entry, dtype="F16"), values.tobytes())
    else:
        sys.exit("mlx_edit.py: unknown action " + action)
    save(folder, meta, tensors)


if __name__ == "__main__":
    main(sys.argv)
