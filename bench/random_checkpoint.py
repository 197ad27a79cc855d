#!/usr/bin/env python3
"""The bytes of a `vlmc random-checkpoint` checkpoint, rewritten where vlmc cannot be built.

The GPU machine has Python and numpy but no LLVM/MLIR, so `vlmc` (and its `random-checkpoint`
subcommand) does not build there, and a 3B checkpoint (7.5 GB) is far over what may travel to
it. An artifact compiled here with `--params external` checks every parameter's checksum
against the checkpoint it was compiled from, so the checkpoint made there must be the same
bytes. Two steps:

  random_checkpoint.py skeleton CKPT SKEL.json    (here) the small files of a checkpoint made
                                                  by `vlmc random-checkpoint`, its shards'
                                                  headers, and which tensors are norm weights
                                                  (values around 1): ~100 KB for the 3B
  random_checkpoint.py write SKEL.json OUT --seed S [--jobs N]
                                                  (there) the same checkpoint, byte for byte

`write` reproduces tools/cmd_random_checkpoint.c exactly: each tensor's values come from a
splitmix64 stream seeded by xxh64(name, seed), u = (z >> 11) * 2^-53, the value center +
(2u - 1) * 0.02 * sqrt(3) in double (center 1 for norm weights, else 0), rounded to f32, then
to bf16 to nearest even. splitmix64's state after i steps is seed0 + i * golden, so a chunk of
the stream is computed as whole numpy vectors. tests/e2e/random_checkpoint_py.sh checks the
bytes against vlmc's for a small config. Shards are written in parallel (--jobs, default the
core count) with pwrite at each tensor's offset.
"""
import argparse
import json
import os
import struct
import sys
from concurrent.futures import ProcessPoolExecutor

import numpy as np

SIDE_FILES = ("config.json", "generation_config.json", "preprocessor_config.json",
              "model.safetensors.index.json")
CHUNK = 1 << 22  # elements per vector step

# ---- xxh64 (the reference algorithm; names are short, so plain Python is fast enough) ----
P1, P2, P3, P4, P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                      0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)
M64 = (1 << 64) - 1


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def _round(acc, lane):
    return (_rotl((acc + lane * P2) & M64, 31) * P1) & M64


def _merge(acc, v):
    return ((acc ^ _round(0, v)) * P1 + P4) & M64


def xxh64(data, seed):
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed & M64, (seed - P1) & M64]
        while i + 32 <= n:
            for j in range(4):
                v[j] = _round(v[j], struct.unpack_from("<Q", data, i + 8 * j)[0])
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & M64
        for x in v:
            h = _merge(h, x)
    else:
        h = (seed + P5) & M64
    h = (h + n) & M64
    while i + 8 <= n:
        h = ((_rotl(h ^ _round(0, struct.unpack_from("<Q", data, i)[0]), 27) * P1) + P4) & M64
        i += 8
    if i + 4 <= n:
        h = ((_rotl(h ^ (struct.unpack_from("<I", data, i)[0] * P1 & M64), 23) * P2) + P3) & M64
        i += 4
    while i < n:
        h = (_rotl(h ^ (data[i] * P5 & M64), 11) * P1) & M64
        i += 1
    h = ((h ^ (h >> 33)) * P2) & M64
    h = ((h ^ (h >> 29)) * P3) & M64
    return h ^ (h >> 32)


# ---- the values ----
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
HALF_WIDTH = 0.02 * 1.7320508075688772


def values_bf16(state0, first, count, is_norm):
    """Elements [first, first + count) of a tensor's stream as bf16 bits (uint16)."""
    with np.errstate(over="ignore"):
        steps = np.arange(first + 1, first + count + 1, dtype=np.uint64)
        z = np.uint64(state0) + steps * GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    u = (z >> np.uint64(11)).astype(np.float64) * (2.0 ** -53)
    v = ((1.0 if is_norm else 0.0) + (2.0 * u - 1.0) * HALF_WIDTH).astype(np.float32)
    x = v.view(np.uint32)
    return ((x + np.uint32(0x7FFF) + ((x >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)


def write_tensor(job):
    path, offset, name, nbytes, is_norm, seed = job
    state0 = xxh64(name.encode(), seed)
    fd = os.open(path, os.O_WRONLY)
    try:
        total = nbytes // 2
        for first in range(0, total, CHUNK):
            data = values_bf16(state0, first, min(CHUNK, total - first), is_norm).tobytes()
            done = 0
            while done < len(data):
                done += os.pwrite(fd, data[done:], offset + 2 * first + done)
    finally:
        os.close(fd)
    return nbytes


# ---- the two commands ----
def skeleton(ckpt, out):
    skel = {"files": {}, "shards": [], "norms": []}
    for name in SIDE_FILES:
        with open(os.path.join(ckpt, name)) as f:
            skel["files"][name] = f.read()
    index = json.loads(skel["files"]["model.safetensors.index.json"])
    for shard in sorted(set(index["weight_map"].values())):
        with open(os.path.join(ckpt, shard), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header_bytes = f.read(n)
            header = json.loads(header_bytes)
            for key, t in header.items():
                if key == "__metadata__":
                    continue
                f.seek(8 + n + t["data_offsets"][0])
                first = struct.unpack("<H", f.read(2))[0]
                if np.array([first << 16], dtype=np.uint32).view(np.float32)[0] > 0.5:
                    skel["norms"].append(key)
        skel["shards"].append({"name": shard, "header": header_bytes.decode()})
    with open(out, "w") as f:
        json.dump(skel, f)
    print("skeleton: %d shards, %d norm weights -> %s" % (len(skel["shards"]), len(skel["norms"]), out))


def write(skel_path, out, seed, jobs):
    with open(skel_path) as f:
        skel = json.load(f)
    os.makedirs(out, exist_ok=True)
    for name, text in skel["files"].items():
        with open(os.path.join(out, name), "w") as f:
            f.write(text)
    norms = set(skel["norms"])
    work = []
    for shard in skel["shards"]:
        path = os.path.join(out, shard["name"])
        header = shard["header"].encode()
        tensors = {k: v for k, v in json.loads(header).items() if k != "__metadata__"}
        end = max((t["data_offsets"][1] for t in tensors.values()), default=0)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header)
            f.truncate(8 + len(header) + end)
        for key, t in tensors.items():
            lo, hi = t["data_offsets"]
            work.append((path, 8 + len(header) + lo, key, hi - lo, key in norms, seed))
    work.sort(key=lambda w: -w[3])  # big tensors first: the pool ends evenly
    total = sum(w[3] for w in work)
    done, shown = 0, -1
    tty = sys.stderr.isatty()
    step = 1 if tty else 10  # percent between progress reports: in place, or plain lines
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for nbytes in pool.map(write_tensor, work):
            done += nbytes
            percent = 100 * done // max(total, 1)
            if percent // step != shown:
                shown = percent // step
                print("%srandom_checkpoint: %3d%% (%.2f of %.2f GB)" % (
                      "\r" if tty else "", percent, done / 1e9, total / 1e9),
                      end="" if tty else "\n", file=sys.stderr, flush=True)
    if tty:
        print(file=sys.stderr)
    print("random_checkpoint: %d tensors, %.3f GB of bf16 -> %s" % (len(work), total / 1e9, out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("skeleton", help="the small files and headers of CKPT into SKEL.json")
    s.add_argument("ckpt")
    s.add_argument("out")
    w = sub.add_parser("write", help="the checkpoint of SKEL.json, bytes as vlmc writes them")
    w.add_argument("skeleton")
    w.add_argument("out")
    w.add_argument("--seed", type=int, required=True)
    w.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    if a.cmd == "skeleton":
        skeleton(a.ckpt, a.out)
    else:
        write(a.skeleton, a.out, a.seed, a.jobs)


if __name__ == "__main__":
    main()
