#!/usr/bin/env python3
"""Converts a HuggingFace-layout Qwen2.5-VL safetensors checkpoint into the MLX affine-quantized
format of mlx-community checkpoints (docs/mlx_format.md), with numpy only.

Quantization is MLX's `mx.quantize(w, group_size, bits)` ("affine" mode), reproduced bit for bit
from MLX's C++ CPU kernel (mlx/backend/cpu/quantized.cpp, `quantize`): per group of G consecutive
elements of a row, in float32,
    mask  = |w_min| > |w_max|
    scale = max((w_max - w_min) / (2^b - 1), 1e-7), negated unless mask
    edge  = mask ? w_min : w_max
    q0    = rint(edge / scale);  if q0 != 0: scale = edge / q0, bias = edge  else bias = 0
    q     = clip(rint((w - bias) / scale), 0, 2^b - 1)
scales and biases are then rounded to the weight's dtype (round to nearest even). With
`--variant metal` the Apple-GPU / CUDA kernel is followed instead (w_max starts at 0, so it is
max(0, max w), and rounding is half away from zero): that is what `mlx_vlm.convert -q` on a Mac
produces. q is packed as a little-endian bit stream per row: element i of a row takes bits
[i*b, (i+1)*b) of the row, i.e. for b = 4 element j is bits 4*(j%8)..4*(j%8)+3 of uint32 word j/8.

Quantized (2-D `*.weight`, in-dim divisible by the group size):
  language model q_proj k_proj v_proj o_proj gate_proj up_proj down_proj, and lm_head if present;
  --quantize-embed   also embed_tokens (real mlx-community checkpoints quantize it);
  --quantize-vision  also every 2-D vision weight (attn.qkv, attn.proj, mlp.*, merger.mlp.0/2).
NAME.weight becomes uint32 [out, in*bits/32]; NAME.scales and NAME.biases [out, in/G] get the
weight's dtype. Every other tensor is copied (cast only with --dtype).

Names: the source's names are kept (model.layers.*, visual.*, lm_head.*). mlx_vlm itself renames
them (language_model.model.*, language_model.lm_head.*, vision_tower.*) and stores
patch_embed.proj.weight as [out, T, H, W, C]; --mlx-names writes that layout instead.

Output: OUT_DIR/ with the source's shard file names, model.safetensors.index.json, config.json
(+ "quantization" and "quantization_config" = {"group_size", "bits", "mode": "affine"}) and a
copy of every other file of SRC_DIR (tokenizer*, preprocessor_config.json, chat_template*,
generation_config.json, ...). --dequantize-to DIR also writes the oracle input: the source names
and config, every quantized weight replaced by float32(scales) * q + float32(biases) in float32
(float32 multiply, then float32 add), every other tensor as written to OUT_DIR (source layout).
Files are written to a temporary folder beside the target and renamed at the end; the target
must not exist or must be an empty folder. Same input, same bytes.

Usage: make_mlx_checkpoint.py SRC_DIR OUT_DIR [--group-size 64] [--bits 4] [--quantize-vision]
           [--quantize-embed] [--variant cpu|metal] [--dtype source|float16|bfloat16|float32]
           [--mlx-names] [--dequantize-to DIR]
       make_mlx_checkpoint.py --self-test
"""

import argparse
import json
import math
import os
import shutil
import struct
import sys
import tempfile

import numpy as np

GROUP_SIZES = (32, 64, 128)  # mx.quantize accepts only these (mlx/ops.cpp, affine_quantize)
BITS = (2, 3, 4, 5, 6, 8)  # and these
LM_PROJ = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
VISION_PREFIXES = ("visual.", "model.visual.", "vision_tower.")
FLOAT_DTYPES = ("F32", "F16", "BF16")
ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
            "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1}
CAST = {"source": None, "float16": "F16", "bfloat16": "BF16", "float32": "F32"}
MAX_HEADER = 100 << 20
CHUNK_ELEMENTS = 1 << 22  # rows are quantized in chunks of about this many elements


class Bad(Exception):
    """Bad input: reported as one line, exit status 1."""


# ------------------------------------------------------------------ dtypes

def to_f32(raw, dtype):
    """float32 array from the raw little-endian bytes (numpy uint8 array) of a float tensor."""
    if dtype == "F32":
        return raw.view("<f4").astype(np.float32)
    if dtype == "F16":
        return raw.view("<f2").astype(np.float32)
    if dtype == "BF16":
        return (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
    raise Bad("not a float dtype: %s" % dtype)


def from_f32(a, dtype):
    """Little-endian bytes of float32 array a in dtype, rounded to nearest even (as MLX's
    static_cast<T>(float) does); a must be finite and fit."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    if dtype == "F32":
        out = a.astype("<f4")
    elif dtype == "F16":
        with np.errstate(over="ignore"):
            out = a.astype("<f2")
        if not np.all(np.isfinite(out)):
            raise Bad("a value overflows float16")
    elif dtype == "BF16":
        u = a.view(np.uint32).astype(np.uint64)
        out = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")
        if np.any((out & 0x7F80) == 0x7F80):
            raise Bad("a value overflows bfloat16")
    else:
        raise Bad("not a float dtype: %s" % dtype)
    return out.tobytes()


# ------------------------------------------------------------------ quantization (MLX affine)

def round_half_away(x):
    """Metal's / CUDA's round(): half away from zero, exact for float32."""
    t = np.trunc(x)
    return t + np.sign(x) * (np.abs(x - t) >= np.float32(0.5))


def quantize(w, group_size, bits, variant="cpu"):
    """MLX affine quantization of float32 matrix w [rows, cols].
    Returns (q uint8 [rows, cols], scale float32 [rows, cols/G], bias float32 [rows, cols/G]):
    scale and bias before their rounding to the weight's dtype (q was computed with these)."""
    rows, cols = w.shape
    g = np.ascontiguousarray(w, dtype=np.float32).reshape(rows, cols // group_size, group_size)
    n_bins = np.float32((1 << bits) - 1)
    eps = np.float32(1e-7)
    rnd = np.rint if variant == "cpu" else round_half_away
    w_max = g.max(axis=-1)
    w_min = g.min(axis=-1)
    if variant == "metal":
        w_max = np.maximum(w_max, np.float32(0))  # the kernel's running max starts at 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scale = np.maximum((w_max - w_min) / n_bins, eps)
        mask = np.abs(w_min) > np.abs(w_max)
        scale = np.where(mask, scale, -scale)
        edge = np.where(mask, w_min, w_max)
        q0 = rnd(edge / scale)
        nz = q0 != 0
        scale = np.where(nz, edge / np.where(nz, q0, np.float32(1)), scale).astype(np.float32)
        bias = np.where(nz, edge, np.float32(0)).astype(np.float32)
        q = rnd((g - bias[..., None]) / scale[..., None])
    q = np.clip(q, np.float32(0), n_bins).astype(np.uint8).reshape(rows, cols)
    return q, scale, bias


def pack(q, bits):
    """uint32 [rows, cols*bits/32] from q [rows, cols]: row-wise little-endian bit stream."""
    rows, cols = q.shape
    if bits == 8:
        return np.ascontiguousarray(q, dtype=np.uint8).view("<u4").reshape(rows, -1)
    if bits in (2, 4):
        per = 32 // bits
        shifts = (np.arange(per, dtype=np.uint32) * bits)
        words = q.reshape(rows, cols // per, per).astype(np.uint32) << shifts
        return np.bitwise_or.reduce(words, axis=-1).astype("<u4")
    bitplanes = (q[..., None] >> np.arange(bits, dtype=np.uint8)) & 1  # [rows, cols, bits]
    packed = np.packbits(bitplanes.reshape(rows, cols * bits), axis=-1, bitorder="little")
    return np.ascontiguousarray(packed).view("<u4").reshape(rows, -1)


def unpack(wq, bits, cols):
    """q uint8 [rows, cols] from the packed uint32 [rows, cols*bits/32] (independent of pack)."""
    rows = wq.shape[0]
    raw = np.ascontiguousarray(wq, dtype="<u4").view(np.uint8).reshape(rows, -1)
    stream = np.unpackbits(raw, axis=-1, bitorder="little")[:, :cols * bits]
    planes = stream.reshape(rows, cols, bits).astype(np.uint16)
    return (planes << np.arange(bits, dtype=np.uint16)).sum(axis=-1).astype(np.uint8)


def dequantize(q, scales, biases, group_size):
    """float32(scales) * q + float32(biases), in float32 (q uint8 [rows, cols])."""
    s = np.repeat(scales.astype(np.float32), group_size, axis=1)
    b = np.repeat(biases.astype(np.float32), group_size, axis=1)
    return (q.astype(np.float32) * s).astype(np.float32) + b


# ------------------------------------------------------------------ safetensors by hand

def read_header(path):
    """(entries {name: (dtype, shape, begin, end)}, data_start, metadata) of a safetensors file."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            raise Bad("%s: shorter than the 8-byte header length" % path)
        n = struct.unpack("<Q", raw)[0]
        if n > size - 8 or n > MAX_HEADER:
            raise Bad("%s: header length %d does not fit the file (%d bytes)" % (path, n, size))
        text = f.read(n)
    try:
        header = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise Bad("%s: the header is not JSON (%s)" % (path, e))
    if not isinstance(header, dict):
        raise Bad("%s: the header is not a JSON object" % path)
    data_len = size - 8 - n
    meta = header.pop("__metadata__", {})
    entries = {}
    for name, e in header.items():
        where = "%s: tensor %r" % (path, name)
        if not isinstance(e, dict) or not {"dtype", "shape", "data_offsets"} <= set(e):
            raise Bad("%s: not {dtype, shape, data_offsets}" % where)
        dtype, shape, off = e.get("dtype"), e.get("shape"), e.get("data_offsets")
        if dtype not in ITEMSIZE:
            raise Bad("%s: unsupported dtype %r" % (where, dtype))
        if (not isinstance(shape, list)
                or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                           for d in shape)):
            raise Bad("%s: bad shape %r" % (where, shape))
        if (not isinstance(off, list) or len(off) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in off)
                or not 0 <= off[0] <= off[1] <= data_len):
            raise Bad("%s: bad data_offsets %r (data is %d bytes)" % (where, off, data_len))
        if off[1] - off[0] != math.prod(shape) * ITEMSIZE[dtype]:
            raise Bad("%s: %d bytes for shape %r of %s" % (where, off[1] - off[0], shape, dtype))
        entries[name] = (dtype, shape, off[0], off[1])
    spans = sorted((b, e, k) for k, (_, _, b, e) in entries.items() if e > b)
    for (b0, e0, k0), (b1, e1, k1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise Bad("%s: tensors %r and %r overlap" % (path, k0, k1))
    return entries, 8 + n, meta


def tensor_bytes(path, data_start, begin, end):
    if end == begin:
        return np.zeros(0, dtype=np.uint8)
    return np.memmap(path, dtype=np.uint8, mode="r", offset=data_start + begin,
                     shape=(end - begin,))


def layout(tensors, metadata):
    """Header bytes and {name: data offset} for tensors [(name, dtype, shape)]: the JSON header
    (keys sorted, padded with spaces to a multiple of 8), data ordered by element size (largest
    first) then name, so every tensor starts at a multiple of its element size."""
    order = sorted(tensors, key=lambda t: (-ITEMSIZE[t[1]], t[0]))
    header, offsets, pos = {"__metadata__": metadata}, {}, 0
    for name, dtype, shape in order:
        nbytes = math.prod(shape) * ITEMSIZE[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [pos, pos + nbytes]}
        offsets[name] = pos
        pos += nbytes
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text, offsets, pos


class ShardWriter:
    def __init__(self, path, tensors, metadata):
        head, self.offsets, self.data_len = layout(tensors, metadata)
        self.data_start = len(head)
        self.names = {t[0]: (t[1], tuple(t[2])) for t in tensors}
        self.written = set()
        self.f = open(path, "wb")
        self.f.write(head)
        self.f.truncate(self.data_start + self.data_len)

    def put(self, name, data):
        dtype, shape = self.names[name]
        if len(data) != math.prod(shape) * ITEMSIZE[dtype]:
            raise AssertionError("internal: %s has %d bytes" % (name, len(data)))
        self.f.seek(self.data_start + self.offsets[name])
        self.f.write(data)
        self.written.add(name)

    def close(self):
        if self.written != set(self.names):
            raise AssertionError("internal: tensors not written: %s"
                                 % sorted(set(self.names) - self.written)[:5])
        self.f.close()


def write_index(folder, shards):
    """shards {file: [(name, dtype, shape)]}: model.safetensors.index.json as mlx_vlm writes it."""
    total = sum(math.prod(s) * ITEMSIZE[d] for ts in shards.values() for _, d, s in ts)
    weight_map = {n: f for f, ts in shards.items() for n, _, _ in ts}
    index = {"metadata": {"total_size": total},
             "weight_map": {k: weight_map[k] for k in sorted(weight_map)}}
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=4)
        f.write("\n")


# ------------------------------------------------------------------ the checkpoint

def load_source(src):
    """[(name, file, dtype, shape, begin, end, data_start)] sorted by name, and the shard files."""
    index_path = os.path.join(src, "model.safetensors.index.json")
    if os.path.exists(index_path):
        try:
            with open(index_path) as f:
                weight_map = json.load(f)["weight_map"]
            assert isinstance(weight_map, dict)
            assert all(isinstance(v, str) for v in weight_map.values())
        except (ValueError, KeyError, TypeError, AssertionError):
            raise Bad("%s: not an index with a weight_map object" % index_path)
        files = sorted(set(weight_map.values()))
    else:
        weight_map = None
        files = sorted(f for f in os.listdir(src) if f.endswith(".safetensors"))
        if not files:
            raise Bad("%s: no *.safetensors file and no model.safetensors.index.json" % src)
    tensors, seen = [], {}
    for fname in files:
        if not isinstance(fname, str) or os.path.basename(fname) != fname:
            raise Bad("%s: shard name %r is not a plain file name" % (index_path, fname))
        path = os.path.join(src, fname)
        if not os.path.isfile(path):
            raise Bad("%s: missing shard %s" % (src, fname))
        entries, data_start, _ = read_header(path)
        for name, (dtype, shape, b, e) in entries.items():
            if name in seen:
                raise Bad("tensor %r is in both %s and %s" % (name, seen[name], fname))
            seen[name] = fname
            tensors.append((name, fname, dtype, shape, b, e, data_start))
    if weight_map is not None:
        listed = {k for k in weight_map}
        wrong = [k for k in listed if seen.get(k) != weight_map[k]]
        extra = sorted(set(seen) - listed)
        if wrong or extra:
            raise Bad("index and shards disagree on %r" % (sorted(wrong) + extra)[0])
    if not tensors:
        raise Bad("%s: the checkpoint has no tensor" % src)
    return sorted(tensors), files


def is_vision(name):
    return name.startswith(VISION_PREFIXES)


def module_of(name):
    return name[:-len(".weight")] if name.endswith(".weight") else None


def quant_role(name, dtype, shape, args):
    """Why a tensor is quantized ("lm", "lm_head", "embed", "vision") or None."""
    module = module_of(name)
    if module is None or dtype not in FLOAT_DTYPES or len(shape) != 2:
        return None
    last = module.rsplit(".", 1)[-1]
    if is_vision(name):
        return "vision" if args.quantize_vision else None
    if not name.startswith(("model.", "language_model.", "lm_head.")):
        return None
    if last in LM_PROJ:
        return "lm"
    if last == "lm_head":
        return "lm_head"
    if last == "embed_tokens" and args.quantize_embed:
        return "embed"
    return None


def mlx_name(name):
    """mlx_vlm's name of a HuggingFace tensor name (Qwen2.5-VL Model.sanitize, made exact)."""
    for p in ("model.visual.", "visual."):
        if name.startswith(p):
            return "vision_tower." + name[len(p):]
    if name.startswith("model.language_model."):
        return "language_model.model." + name[len("model.language_model."):]
    if name.startswith("model."):
        return "language_model." + name
    if name.startswith("lm_head."):
        return "language_model." + name
    return name


def is_patch_embed(name, shape):
    return name.endswith("patch_embed.proj.weight") and len(shape) == 5


def convert(args):
    src, out = os.path.abspath(args.src), os.path.abspath(args.out)
    if not os.path.isdir(src):
        raise Bad("%s: not a folder" % src)
    targets = [out] + ([os.path.abspath(args.dequantize_to)] if args.dequantize_to else [])
    if len(set(targets)) != len(targets):
        raise Bad("OUT_DIR and --dequantize-to are the same folder")
    for t in targets:
        if t == src or t.startswith(src + os.sep) or src.startswith(t + os.sep):
            raise Bad("%s: the output must not be the source or inside it (or hold it)" % t)
        if os.path.lexists(t) and not (os.path.isdir(t) and not os.listdir(t)):
            raise Bad("%s: exists and is not an empty folder" % t)
    try:
        with open(os.path.join(src, "config.json")) as f:
            config = json.load(f)
        assert isinstance(config, dict)
    except FileNotFoundError:
        raise Bad("%s: no config.json" % src)
    except (ValueError, AssertionError):
        raise Bad("%s: config.json is not a JSON object" % src)
    if "quantization" in config or "quantization_config" in config:
        raise Bad("%s: config.json already has a quantization entry" % src)

    tensors, files = load_source(src)
    cast = CAST[args.dtype]
    G, B = args.group_size, args.bits
    plans, skipped = [], []
    for name, fname, dtype, shape, b, e, ds in tensors:
        out_dtype = cast if (cast and dtype in FLOAT_DTYPES) else dtype
        role = quant_role(name, dtype, shape, args)
        if role and shape[1] % G:
            skipped.append("%s (in-dim %d %% %d != 0)" % (name, shape[1], G))
            role = None
        plans.append((name, fname, dtype, shape, b, e, ds, out_dtype, role))

    if not any(p[-1] for p in plans):
        raise Bad("no tensor can be quantized with group size %d (%s)"
                  % (G, "; ".join(skipped[:3]) or "no candidate weight"))

    # output tensor lists per shard
    mlx_shards = {f: [] for f in files}
    deq_shards = {f: [] for f in files}
    for name, fname, dtype, shape, b, e, ds, out_dtype, role in plans:
        oname = mlx_name(name) if args.mlx_names else name
        if role:
            base = oname[:-len(".weight")]
            rows, cols = shape
            mlx_shards[fname] += [(base + ".weight", "U32", [rows, cols * B // 32]),
                                  (base + ".scales", out_dtype, [rows, cols // G]),
                                  (base + ".biases", out_dtype, [rows, cols // G])]
            deq_shards[fname].append((name, "F32", shape))
        else:
            oshape = shape
            if args.mlx_names and is_patch_embed(name, shape):
                oshape = [shape[0], shape[2], shape[3], shape[4], shape[1]]
            mlx_shards[fname].append((oname, out_dtype, oshape))
            deq_shards[fname].append((name, out_dtype, shape))
    names = [t[0] for ts in mlx_shards.values() for t in ts]
    if len(set(names)) != len(names):
        raise Bad("two output tensors get the same name (a source name clashes with a "
                  "NAME.scales / NAME.biases / renamed one)")
    for f in files:  # drop shards left empty
        if not mlx_shards[f]:
            del mlx_shards[f], deq_shards[f]

    # the outputs are made beside where they go, then renamed: their folders must exist
    for target in targets:
        if target:
            os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    tmp_out = tempfile.mkdtemp(prefix=".mlxq-", dir=os.path.dirname(out))
    tmp_deq = (tempfile.mkdtemp(prefix=".mlxdq-", dir=os.path.dirname(targets[1]))
               if args.dequantize_to else None)
    try:
        mw = {f: ShardWriter(os.path.join(tmp_out, f), ts, {"format": "mlx"})
              for f, ts in mlx_shards.items()}
        dw = ({f: ShardWriter(os.path.join(tmp_deq, f), ts, {"format": "pt"})
               for f, ts in deq_shards.items()} if tmp_deq else {})
        counts = {}
        for name, fname, dtype, shape, b, e, ds, out_dtype, role in plans:
            raw = tensor_bytes(os.path.join(src, fname), ds, b, e)
            oname = mlx_name(name) if args.mlx_names else name
            if dtype != out_dtype:
                data = from_f32(to_f32(raw, dtype), out_dtype)
            else:
                data = raw.tobytes()
            if not role:
                mdata = data
                if args.mlx_names and is_patch_embed(name, shape):
                    item = ITEMSIZE[out_dtype]
                    arr = np.frombuffer(data, dtype="u%d" % item).reshape(shape)
                    mdata = np.ascontiguousarray(arr.transpose(0, 2, 3, 4, 1)).tobytes()
                mw[fname].put(oname, mdata)
                if tmp_deq:
                    dw[fname].put(name, data)
                continue
            counts[role] = counts.get(role, 0) + 1
            base = oname[:-len(".weight")]
            rows, cols = shape
            w_all = to_f32(np.frombuffer(data, dtype=np.uint8), out_dtype).reshape(rows, cols)
            if not np.all(np.isfinite(w_all)):
                raise Bad("%s: has a non-finite value; it cannot be quantized" % name)
            step = max(1, CHUNK_ELEMENTS // cols)
            packed, sc, bi, deq = [], [], [], []
            for r0 in range(0, rows, step):
                w = w_all[r0:r0 + step]
                q, s, bb = quantize(w, G, B, args.variant)
                s_t, b_t = from_f32(s, out_dtype), from_f32(bb, out_dtype)
                packed.append(pack(q, B).tobytes())
                sc.append(s_t)
                bi.append(b_t)
                if tmp_deq:
                    s_back = to_f32(np.frombuffer(s_t, np.uint8), out_dtype).reshape(s.shape)
                    b_back = to_f32(np.frombuffer(b_t, np.uint8), out_dtype).reshape(s.shape)
                    deq.append(dequantize(q, s_back, b_back, G).astype("<f4").tobytes())
            mw[fname].put(base + ".weight", b"".join(packed))
            mw[fname].put(base + ".scales", b"".join(sc))
            mw[fname].put(base + ".biases", b"".join(bi))
            if tmp_deq:
                dw[fname].put(name, b"".join(deq))
        for w in list(mw.values()) + list(dw.values()):
            w.close()
        write_index(tmp_out, mlx_shards)
        if tmp_deq:
            write_index(tmp_deq, deq_shards)

        qconf = {"group_size": G, "bits": B, "mode": "affine"}
        mconfig = dict(config)
        mconfig["quantization"] = dict(qconf)
        mconfig["quantization_config"] = dict(qconf)
        with open(os.path.join(tmp_out, "config.json"), "w") as f:
            json.dump(dict(sorted(mconfig.items())), f, indent=4)  # mlx_vlm's save_config
            f.write("\n")
        for entry in sorted(os.listdir(src)):
            p = os.path.join(src, entry)
            if entry.endswith(".safetensors") or entry == "model.safetensors.index.json":
                continue
            for folder in (tmp_out, tmp_deq):
                if folder is None or (folder == tmp_out and entry == "config.json"):
                    continue
                if os.path.isdir(p):
                    shutil.copytree(p, os.path.join(folder, entry), symlinks=False)
                elif os.path.isfile(p):
                    shutil.copyfile(p, os.path.join(folder, entry))
        for folder, target in ((tmp_out, out), (tmp_deq, targets[-1] if tmp_deq else None)):
            if folder is None:
                continue
            os.chmod(folder, 0o755)
            if os.path.isdir(target):
                os.rmdir(target)
            os.rename(folder, target)
    except BaseException:
        for folder in (tmp_out, tmp_deq):
            if folder and os.path.isdir(folder):
                shutil.rmtree(folder, ignore_errors=True)
        raise
    n_q = sum(counts.values())
    print("make_mlx_checkpoint: %d tensors, %d quantized (%s) with group_size %d, bits %d, "
          "variant %s -> %s%s" % (len(plans), n_q,
                                  ", ".join("%s %d" % kv for kv in sorted(counts.items())) or "-",
                                  G, B, args.variant, out,
                                  (" and dequantized -> %s" % targets[1]) if tmp_deq else ""))
    for s in skipped:
        print("  not quantized: %s" % s)


# ------------------------------------------------------------------ self-test

def self_test():
    fails = []

    def check(what, ok):
        if not ok:
            fails.append(what)
            print("FAIL %s" % what)

    # the worked example of docs/mlx_format.md: 8 values in one uint32
    q = np.array([[3, 0, 15, 7, 1, 12, 9, 4]], dtype=np.uint8)
    word = pack(q, 4)
    check("pack 4-bit example", word.shape == (1, 1) and int(word[0, 0]) == 0x49C17F03)
    check("pack bytes", word.tobytes() == bytes([0x03, 0x7F, 0xC1, 0x49]))
    check("unpack example", np.array_equal(unpack(word, 4, 8), q))
    rng = np.random.default_rng(7)
    for bits in BITS:
        qq = rng.integers(0, 1 << bits, size=(3, 128), dtype=np.uint8)
        p = pack(qq, bits)
        check("pack %d-bit shape" % bits, p.shape == (3, 128 * bits // 32))
        check("round trip %d-bit" % bits, np.array_equal(unpack(p, bits, 128), qq))
        # element i of a row = bits [i*b, (i+1)*b) of the row's little-endian bit stream
        row = int.from_bytes(p[1].astype("<u4").tobytes(), "little")
        check("bit stream %d-bit" % bits,
              all((row >> (i * bits)) & ((1 << bits) - 1) == qq[1, i] for i in range(128)))
    # quantization: hand-checked group, and properties on random data
    w = np.linspace(-0.7, 0.5, 64, dtype=np.float32)[None, :]
    qv, s, b = quantize(w, 64, 4)
    check("example scale", np.isclose(s[0, 0], np.float32(-0.7) / np.float32(-9)))
    check("example bias", b[0, 0] == np.float32(-0.7))
    check("example q range", qv.min() == 0 and qv.max() == 15)
    for variant in ("cpu", "metal"):
        w = (rng.standard_normal((16, 256)) * 0.05).astype(np.float32)
        w[0, :64] = np.abs(w[0, :64])  # an all-positive group
        w[1, :64] = -np.abs(w[1, :64])  # an all-negative group
        w[2, :64] = 0  # a zero group
        qv, s, b = quantize(w, 64, 4, variant)
        rec = (qv.astype(np.float32) * np.repeat(s, 64, 1)) + np.repeat(b, 64, 1)
        err = np.abs(rec - w)
        step = np.repeat(np.abs(s), 64, 1)
        check("%s error <= one step" % variant, np.all(err <= step * 1.0001 + 1e-7))
        frac = np.mean(err <= step * 0.5 * 1.0001 + 1e-7)
        check("%s almost all within half a step (%.4f)" % (variant, frac), frac > 0.99)
        check("%s zero group exact" % variant, np.all(rec[2, :64] == 0))
        zero_q = -np.round(b / s)  # the code of 0.0 is an integer: exact zero
        check("%s zero point integral" % variant,
              np.all(np.abs((0 - b) / s - zero_q) < 1e-3) and np.all(zero_q >= 0))
    print("%d failed" % len(fails) if fails else "self-test: all checks passed")
    return 1 if fails else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src", nargs="?", metavar="SRC_DIR")
    ap.add_argument("out", nargs="?", metavar="OUT_DIR")
    ap.add_argument("--group-size", type=int, default=64)
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--quantize-vision", action="store_true",
                    help="also quantize the vision tower's 2-D weights")
    ap.add_argument("--quantize-embed", action="store_true",
                    help="also quantize embed_tokens (as mlx_vlm does)")
    ap.add_argument("--variant", choices=("cpu", "metal"), default="cpu",
                    help="MLX kernel to follow: cpu (default) or metal (also CUDA)")
    ap.add_argument("--dtype", choices=sorted(CAST), default="source",
                    help="cast every float tensor first (mlx_vlm <= 0.2 used float16)")
    ap.add_argument("--mlx-names", action="store_true",
                    help="write mlx_vlm's tensor names and patch_embed layout")
    ap.add_argument("--dequantize-to", metavar="DIR",
                    help="also write the float32 dequantized checkpoint (source names)")
    ap.add_argument("--self-test", action="store_true", help="check packing and quantization")
    args = ap.parse_args(argv)
    if args.self_test:
        return self_test()
    if not args.src or not args.out:
        ap.error("SRC_DIR and OUT_DIR are required")
    if args.group_size not in GROUP_SIZES:
        ap.error("--group-size must be one of %s (what mx.quantize accepts)" % (GROUP_SIZES,))
    if args.bits not in BITS:
        ap.error("--bits must be one of %s (what mx.quantize accepts)" % (BITS,))
    try:
        convert(args)
    except Bad as e:
        print("make_mlx_checkpoint: error: %s" % e, file=sys.stderr)
        return 1
    except OSError as e:
        print("make_mlx_checkpoint: error: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
