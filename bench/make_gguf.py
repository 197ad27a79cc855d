#!/usr/bin/env python3
"""A bf16 GGUF (llama.cpp's "qwen2" text model) from a Qwen2.5-VL checkpoint folder, written
with llama.cpp's own gguf-py and numpy only, so that llama.cpp can be measured on the very
weights vlmc runs (bench/cpu_backend.sh --llama-bench).

    bench/make_gguf.py CHECKPOINT_DIR OUT.gguf --gguf-py LLAMA_CPP_SRC/gguf-py

Why not llama.cpp's convert_hf_to_gguf.py: it imports torch at the top, and this machine has
no torch. Why a "qwen2" model and not the VL one: the comparison is text prefill and decode,
and for text-only positions Qwen2.5-VL's mrope is the plain rope that llama.cpp's qwen2
applies (all three position sections carry the same index). The vision tower (visual.*) is
left out.

The tokenizer: the checkpoint's vocabulary is not needed to time random token ids, so the
GGUF says tokenizer "none" with the config's vocab_size (llama.cpp then makes that many dummy
tokens; llama-bench draws random ids from them). Matrices are written as bf16 exactly as
stored (the raw bits); 1-D tensors (norms, biases) as f32, as llama.cpp's converter does.
"""
import argparse
import json
import os
import re
import struct
import sys

import numpy as np


def fail(msg):
    print("make_gguf: " + msg, file=sys.stderr)
    sys.exit(1)


def safetensors_files(ckpt):
    names = sorted(f for f in os.listdir(ckpt) if f.endswith(".safetensors"))
    if not names:
        fail("no .safetensors file in %s" % ckpt)
    return [os.path.join(ckpt, f) for f in names]


def read_header(path):
    """The safetensors header: {name: (dtype, shape, absolute byte offset, byte length)}."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            fail("%s: too short for a safetensors header" % path)
        n = struct.unpack("<Q", raw)[0]
        if n > 100 << 20:
            fail("%s: header of %d bytes is not a safetensors header" % (path, n))
        header = json.loads(f.read(n))
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        out[name] = (t["dtype"], t["shape"], 8 + n + lo, hi - lo)
    return out


def load(path, entry):
    """A tensor as numpy: bf16 as its raw uint16 bits, other floats as they are."""
    dtype, shape, offset, nbytes = entry
    np_dtype = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32}.get(dtype)
    if np_dtype is None:
        fail("%s: dtype %s is not supported (bf16, f16, f32)" % (path, dtype))
    a = np.memmap(path, dtype=np_dtype, mode="r", offset=offset, shape=tuple(shape))
    if a.nbytes != nbytes:
        fail("%s: tensor byte size %d does not match its shape %s" % (path, nbytes, shape))
    return dtype, a


def to_f32(dtype, a):
    if dtype == "BF16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return np.asarray(a, dtype=np.float32)


# Hugging Face names (after the model./model.language_model. prefix) -> GGUF qwen2 names.
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
TOP_NAMES = {"embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight"}


def gguf_name(hf):
    """The GGUF name of a text-model tensor, None for one left out (the vision tower)."""
    if hf.startswith("visual.") or hf.startswith("model.visual."):
        return None
    if hf == "lm_head.weight":
        return "output.weight"
    m = re.match(r"model\.(?:language_model\.)?(.*)$", hf)
    if not m:
        fail("unexpected tensor name %s" % hf)
    rest = m.group(1)
    if rest in TOP_NAMES:
        return TOP_NAMES[rest]
    m = re.match(r"layers\.(\d+)\.(.*)$", rest)
    if m and m.group(2) in LAYER_NAMES:
        return "blk.%s.%s" % (m.group(1), LAYER_NAMES[m.group(2)])
    fail("no GGUF name for tensor %s" % hf)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("out")
    ap.add_argument("--gguf-py", required=True, help="llama.cpp's gguf-py folder")
    args = ap.parse_args()
    sys.path.insert(0, args.gguf_py)
    try:
        import gguf
    except ImportError as e:
        fail("cannot import gguf from %s: %s" % (args.gguf_py, e))

    cfg_path = os.path.join(args.checkpoint, "config.json")
    if not os.path.exists(cfg_path):
        fail("no config.json in %s" % args.checkpoint)
    c = json.load(open(cfg_path))
    c = c.get("text_config", c) if "hidden_size" not in c else c

    w = gguf.GGUFWriter(args.out, "qwen2")
    w.add_name("vlmc random %dx%d" % (c["hidden_size"], c["num_hidden_layers"]))
    w.add_context_length(c.get("max_position_embeddings", 32768))
    w.add_embedding_length(c["hidden_size"])
    w.add_block_count(c["num_hidden_layers"])
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(c["num_attention_heads"])
    w.add_head_count_kv(c.get("num_key_value_heads", c["num_attention_heads"]))
    w.add_rope_freq_base(float(c.get("rope_theta", 1e6)))
    w.add_layer_norm_rms_eps(float(c.get("rms_norm_eps", 1e-6)))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    w.add_tokenizer_model("none")
    w.add_vocab_size(c["vocab_size"])

    count = 0
    for path in safetensors_files(args.checkpoint):
        for hf, entry in sorted(read_header(path).items()):
            name = gguf_name(hf)
            if name is None:
                continue
            dtype, a = load(path, entry)
            if a.ndim == 1:
                w.add_tensor(name, to_f32(dtype, a))
            elif dtype == "BF16":
                w.add_tensor(name, a, raw_dtype=gguf.GGMLQuantizationType.BF16)
            else:
                w.add_tensor(name, to_f32(dtype, a).astype(np.float16))
            count += 1
    if count == 0:
        fail("no text-model tensors in %s" % args.checkpoint)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
    print("make_gguf: %d tensors -> %s (%.2f GB)" %
          (count, args.out, os.path.getsize(args.out) / 1e9), file=sys.stderr)


if __name__ == "__main__":
    main()
