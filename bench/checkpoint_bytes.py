"""What a checkpoint's safetensors headers say about its weights, for the benchmarks' roofs
(bench/cpu_backend.sh's tables, bench/vulkan_h200_summary.py). Reads the headers only."""
import glob
import json
import os
import struct


def headers(ckpt):
    """Every tensor's header entry ({"dtype", "shape", "data_offsets"}) over the shards."""
    out = {}
    for path in sorted(glob.glob(os.path.join(ckpt, "*.safetensors"))):
        with open(path, "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            header = json.loads(fh.read(n))
        out.update({k: v for k, v in header.items() if k != "__metadata__"})
    return out


def weights(ckpt):
    """(bytes of all weights, bytes read per decoded token, tied): per token, the text model's
    tensors (not visual.*), the embedding table only when it is also the lm_head (a lookup
    reads one row of it)."""
    sizes = {k: t["data_offsets"][1] - t["data_offsets"][0] for k, t in headers(ckpt).items()}
    tied = not any(k.endswith("lm_head.weight") for k in sizes)
    per_token = sum(b for k, b in sizes.items() if "visual" not in k.split(".")
                    and not (k.endswith("embed_tokens.weight") and not tied))
    return sum(sizes.values()), per_token, tied
