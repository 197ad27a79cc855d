#!/usr/bin/env python3
"""The table and JSON of bench/vulkan_h200_device.sh, from its work folder.

  vulkan_h200_summary.py WORK OUT

Reads WORK/{machine.txt, copy.json, hf.jsonl, vlmc.jsonl, profile.*.txt} and the checkpoint's
headers (WORK/ckpt-3b), writes OUT/vulkan_h200.json and OUT/vulkan_h200.txt and prints the
table. Ratios: vlmc / transformers (the faster of eager and sdpa; for times, transformers' time
over vlmc's, so > 1 always means vlmc is faster) and vlmc / roofline, where the decode roof is
the copy bandwidth over the bytes of weights read per token (as the issue states it: 4,275
GB/s copy / 6.17 GB), the prefill roof the bf16 matmul rate over 2 x the text model's weights
per token. Token agreement: vlmc f32 against transformers f32 (eager, TF32 off), vlmc f16 against the
same, as the length of the common prefix of the 32 greedy tokens and the count of equal
positions."""
import datetime
import glob
import json
import os
import re
import sys

from checkpoint_bytes import weights


def load_jsonl(path):
    if not os.path.exists(path):
        return []
    return [json.loads(l) for l in open(path) if l.strip()]


def agreement(a, b):
    if not a or not b:
        return None
    prefix = 0
    while prefix < min(len(a), len(b)) and a[prefix] == b[prefix]:
        prefix += 1
    return {"common_prefix": prefix, "equal_positions": sum(x == y for x, y in zip(a, b)),
            "of": min(len(a), len(b))}


def chunk_ab(path):
    """decode tok/s per VLMC_VULKAN_CHUNK setting from stats.decode64.txt (the lines after
    each "VLMC_VULKAN_CHUNK=N" that vulkan_h200_device.sh appends)."""
    out, chunk = {}, None
    if not os.path.exists(path):
        return out
    for line in open(path):
        m = re.match(r"VLMC_VULKAN_CHUNK=(\d+\+?)", line)
        if m:
            chunk = m.group(1)
            continue
        m = re.search(r"decode \d+ tokens in [0-9.]+ ms \(([0-9.]+) tokens/s\)", line)
        if m and chunk is not None:
            out.setdefault(chunk, {})["decode_tok_s"] = float(m.group(1))
        m = re.search(r"(\d+) submits", line)
        if m and chunk is not None:
            out.setdefault(chunk, {})["submits"] = int(m.group(1))
    return out


def main():
    work, out = sys.argv[1], sys.argv[2]
    copy = json.load(open(os.path.join(work, "copy.json"))) if os.path.exists(
        os.path.join(work, "copy.json")) else {}
    hf = load_jsonl(os.path.join(work, "hf.jsonl"))
    vl = load_jsonl(os.path.join(work, "vlmc.jsonl"))
    _, per_token, _ = weights(os.path.join(work, "ckpt-3b"))
    elements = per_token // 2  # bf16: the text model's weight elements, 2 x each per token
    roof = {}
    if copy.get("copy_gb_s"):
        roof["decode_tok_s"] = round(copy["copy_gb_s"] * 1e9 / per_token, 1)
    if copy.get("matmul_tflop_s"):
        roof["prefill_tok_s"] = round(copy["matmul_tflop_s"] * 1e12 / (2 * elements), 1)

    def pick(rows, **kv):
        return next((r for r in rows if all(r.get(k) == v for k, v in kv.items())), {})
    eager, sdpa = pick(hf, attn="eager", dtype="bf16"), pick(hf, attn="sdpa", dtype="bf16")
    hf32 = pick(hf, dtype="f32")
    f16, f32 = pick(vl, precision="f16"), pick(vl, precision="f32")
    figures = [("decode64_tok_s", "decode tok/s, 32 after 64", True, "decode_tok_s"),
               ("decode1024_tok_s", "decode tok/s, 32 after 1024", True, "decode_tok_s"),
               ("prefill512_tok_s", "prefill 512 tok/s", True, "prefill_tok_s"),
               ("encode448_ms", "encode 448x448 ms", False, None),
               ("encode1080_ms", "encode 1920x1080 ms", False, None),
               ("peak_gib", "peak device memory GiB", False, None)]
    ratios = {}
    lines = ["%-30s %12s %12s %12s %12s %10s %10s" % ("figure", "hf eager", "hf sdpa",
             "vlmc f16", "vlmc f32", "f16/hf", "f16/roof")]
    for key, label, higher, roof_key in figures:
        vals = [r.get(key) for r in (eager, sdpa, f16, f32)]
        hf_vals = [v for v in vals[:2] if isinstance(v, (int, float)) and v > 0]
        best_hf = (max(hf_vals) if higher else min(hf_vals)) if hf_vals else None
        r_hf = r_roof = None
        if best_hf and isinstance(vals[2], (int, float)) and vals[2] > 0 and key != "peak_gib":
            r_hf = round(vals[2] / best_hf if higher else best_hf / vals[2], 2)
        if roof_key in roof and isinstance(vals[2], (int, float)):
            r_roof = round(vals[2] / roof[roof_key], 3)
        ratios[key] = {"vlmc_f16_over_transformers": r_hf, "vlmc_f16_over_roofline": r_roof}
        cells = ["%12s" % ("-" if v is None else v) for v in vals]
        lines.append("%-30s %s %10s %10s" % (label, " ".join(cells), r_hf or "-", r_roof or "-"))
    tokens = {"vlmc_f32_vs_transformers_f32": agreement(f32.get("tokens"), hf32.get("tokens")),
              "vlmc_f16_vs_transformers_f32": agreement(f16.get("tokens"), hf32.get("tokens")),
              "vlmc_f16_vs_vlmc_f32": agreement(f16.get("tokens"), f32.get("tokens"))}
    lines.append("")
    lines.append("roofs: copy %s GB/s (read + written), bf16 matmul %s TFLOP/s; %.2f GB of weights "
                 "read per token -> decode roof %s tok/s, prefill roof %s tok/s" % (
                     copy.get("copy_gb_s"), copy.get("matmul_tflop_s"), per_token / 1e9,
                     roof.get("decode_tok_s"), roof.get("prefill_tok_s")))
    for name, agr in tokens.items():
        lines.append("greedy tokens of the 448x448 image prompt, %s: %s" % (name, agr))
    chunks = chunk_ab(os.path.join(work, "stats.decode64.txt"))
    if "0" in chunks and len(chunks) > 1:
        base = chunks["0"].get("decode_tok_s")
        for c, v in sorted(chunks.items(), key=lambda kv: (int(kv[0].rstrip("+")), kv[0])):
            if c != "0" and base and v.get("decode_tok_s"):
                lines.append("chunked submission, decode64 f16: chunks of %s dispatches (N+: growing "
                             "from N) %.1f tok/s "
                             "against whole batches %.1f (%.3fx; %s against %s submits)" % (
                                 c, v["decode_tok_s"], base, v["decode_tok_s"] / base,
                                 v.get("submits"), chunks["0"].get("submits")))
    q4 = pick(vl, precision="f16-q4")
    if q4:
        lines.append("4-bit weights (MLX format, f16 compute): decode %s tok/s after 64, %s after "
                     "1024, prefill 512 %s tok/s" % (q4.get("decode64_tok_s"),
                                                     q4.get("decode1024_tok_s"),
                                                     q4.get("prefill512_tok_s")))
    for r in vl:
        if r.get("errors") or r.get("rc"):
            lines.append("vlmc %s: rc %s, errors %s" % (r.get("precision"), r.get("rc"), r.get("errors")))
    text = "\n".join(lines)
    print(text)
    machine = open(os.path.join(work, "machine.txt")).read() if os.path.exists(
        os.path.join(work, "machine.txt")) else ""
    devices = open(os.path.join(work, "devices.txt")).read() if os.path.exists(
        os.path.join(work, "devices.txt")) else ""
    profiles = {os.path.basename(p)[8:-4]: open(p).read()
                for p in sorted(glob.glob(os.path.join(work, "profile.*.txt")))}
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": machine, "vulkan_devices": devices, "roofs": copy, "roofline": roof,
              "bytes_per_token": per_token, "transformers": hf, "vlmc": vl, "ratios": ratios,
              "tokens": tokens, "chunked_submission": chunks, "profiles": profiles}
    os.makedirs(out, exist_ok=True)
    json.dump(result, open(os.path.join(out, "vulkan_h200.json"), "w"), indent=1)
    open(os.path.join(out, "vulkan_h200.txt"), "w").write(text + "\n")


if __name__ == "__main__":
    main()
