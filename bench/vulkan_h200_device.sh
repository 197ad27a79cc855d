#!/usr/bin/env bash
# The GPU machine's half of bench/vulkan_h200.sh (read that first): runs there, from the
# repository root, with the folder .h200/ that bench/vulkan_h200.sh prepared here (vlmc-run, its
# libraries and the Vulkan loader, the 3B artifacts, the checkpoint's skeleton, the 1920x1080
# image). Everything it measures goes to $OUT (or ./h200-out): vulkan_h200.json, the table
# vulkan_h200.txt, and log.txt with every step's output.
#
#   bench/vulkan_h200_device.sh [--reps N] [--skip-hf] [--precisions "f16 f32"] [--also "NAME..."]
#                               [--figures-only]
#
# --also: more f16 artifacts of .h200/ (NAME.vlmc, e.g. one an earlier revision compiled,
# renamed 3b-vk-f16-base) measured by the same batch right after the others, each a line of
# vlmc.jsonl whose "precision" is its name: a before/after of a kernel change in one run.
# --figures-only: the batches and the summary only (no 4-bit run, profiles or submission
# modes): a sweep of kernel variants in one short device call.
#
# In one run: the machine (nvidia-smi, versions), the 3B checkpoint rewritten from the skeleton
# (bench/random_checkpoint.py, the bytes the artifacts were compiled against), the prompts
# (random text ids with fixed seeds; the image prompts sized by transformers' image processor),
# the device-to-device copy bandwidth (torch), transformers eager and sdpa in bf16
# (bench/hf_h200.py) and eager in f32 (TF32 off) for the greedy tokens, then vlmc's vulkan backend on the
# f16 and f32 artifacts: one vlmc-run --batch per artifact (requests of token ids: an untimed
# warm-up, then --reps of each figure), peak device memory sampled by nvidia-smi, and one
# VLMC_VULKAN_PROFILE=1 run per phase for the per-kernel GPU time.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/h200_lib.sh  # H, W, CKPT, the environment; h200_checkpoint, h200_vulkan
OUT=${OUT:-$PWD/h200-out}
REPS=3
SKIP_HF=0
PRECISIONS="f16 f32" # --precisions f16: a quicker run (the f32 artifact left out)
ALSO=
FIGURES_ONLY=0
while [ $# -gt 0 ]; do
  case $1 in
    --reps) REPS=$2; shift 2 ;;
    --skip-hf) SKIP_HF=1; shift ;;
    --precisions) PRECISIONS=$2; shift 2 ;;
    --also) ALSO=$2; shift 2 ;;
    --figures-only) FIGURES_ONLY=1; shift ;;
    *) echo "usage: $0 [--reps N] [--skip-hf] [--precisions \"f16 f32\"] [--also \"NAME...\"] [--figures-only]" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
LOG=$OUT/log.txt
step() { echo "== $* ($(date +%T))" | tee -a "$LOG"; }

step "machine"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers",
transformers.__version__)'; } 2>&1 | tee -a "$LOG" >"$W/machine.txt"

step "3B checkpoint from the skeleton (bench/random_checkpoint.py, seed 1)"
h200_checkpoint >>"$LOG" 2>&1 || { echo "checkpoint failed" | tee -a "$LOG"; exit 1; }

step "prompts"
python3 - "$CKPT" "$W/prompts.json" "$H/photo_1920x1080.png" >>"$LOG" 2>&1 <<'EOF' || exit 1
import json, random, sys
from PIL import Image
from transformers import AutoImageProcessor
ckpt, out, photo = sys.argv[1:]
try:  # the slow (PIL) processor, the one vlmc's preprocessing matches bit for bit
    proc = AutoImageProcessor.from_pretrained(ckpt, use_fast=False)
except Exception as e:
    print("prompts: no slow image processor (%s); the default one" % e)
    proc = AutoImageProcessor.from_pretrained(ckpt)
def text(n, seed):
    r = random.Random(seed)
    return [r.randrange(1000, 30000) for _ in range(n)]
def image(path):
    grid = proc(images=[Image.open(path).convert("RGB")], return_tensors="pt")["image_grid_thw"]
    pads = int(grid.prod()) // 4
    return {"path": path, "grid": grid[0].tolist(),
            "ids": [151652] + [151655] * pads + [151653, 1000, 2000, 3000]}
p = {"p64": text(64, 1), "p512": text(512, 2), "p1024": text(1024, 3),
     "i448": image("tests/fixtures/images/square_448.png"), "i1080": image(photo)}
json.dump(p, open(out, "w"))
print("prompts: i448 grid %s, i1080 grid %s" % (p["i448"]["grid"], p["i1080"]["grid"]))
EOF

step "roofs: copy bandwidth (torch, device to device, 4 GiB), bf16 matmul (8192^3)"
python3 - >"$W/copy.json" 2>>"$LOG" <<'EOF'
import json, torch
n = 1 << 32
a = torch.empty(n, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
for _ in range(3): b.copy_(a)
torch.cuda.synchronize()
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
best = 1e9
for _ in range(10):
    s.record(); b.copy_(a); e.record(); torch.cuda.synchronize()
    best = min(best, s.elapsed_time(e) / 1e3)
del a, b
m = 8192
x = torch.randn(m, m, device="cuda", dtype=torch.bfloat16); y = torch.randn_like(x)
for _ in range(3): x @ y
torch.cuda.synchronize()
mm = 1e9
for _ in range(10):
    s.record(); x @ y; e.record(); torch.cuda.synchronize()
    mm = min(mm, s.elapsed_time(e) / 1e3)
print(json.dumps({"copy_gb_s": round(2 * n / best / 1e9, 1), "copy_note": "bytes read + written",
                  "matmul_tflop_s": round(2 * m ** 3 / mm / 1e12, 1),
                  "matmul_note": "torch bf16 8192^3, random data, best of 10"}))
EOF
cat "$W/copy.json" | tee -a "$LOG"

if [ "$SKIP_HF" = 1 ] && [ -s "$W/hf.jsonl" ]; then
  echo "transformers: reusing $W/hf.jsonl of an earlier run on this machine" | tee -a "$LOG"
elif [ "$SKIP_HF" = 0 ]; then
  : >"$W/hf.jsonl"
  # The f32 token run is the oracle's setting (eager, TF32 off: tests/oracle/dump_taps.py): a
  # random model's greedy path has near-ties (top-1 margins of 3e-4), which sdpa's f32
  # kernels flipped at the second token in an earlier run.
  for run in "eager bf16" "sdpa bf16" "eager f32 --only tokens"; do
    set -- $run
    step "transformers $run"
    python3 bench/hf_h200.py "$CKPT" "$W/prompts.json" --attn "$1" --dtype "$2" --reps "$REPS" \
      "${@:3}" >>"$W/hf.jsonl" 2>>"$LOG" || echo "transformers $run failed" | tee -a "$LOG"
    tail -1 "$W/hf.jsonl" | cut -c1-400 | tee -a "$LOG"
  done
fi

# ---- vlmc ----
step "Vulkan: loader and GLVND from .gl/, the NVIDIA ICD"
h200_vulkan > >(tee -a "$LOG") 2>&1  # not a pipe: its exports must stay in this shell
export XDG_CACHE_HOME=$W/cache
RUN=$H/vlmc-run
step "vlmc-run --list-devices"
"$RUN" --list-devices 2>&1 | tee -a "$LOG" >"$W/devices.txt"

# requests.jsonl for the batch: a warm-up, then REPS of each figure, then the image's tokens.
python3 - "$W/prompts.json" "$W/requests.jsonl" "$REPS" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1])); reps = int(sys.argv[3])
with open(sys.argv[2], "w") as f:
    def req(id, ids, n, image=None):
        r = {"id": id, "input_ids": ids, "max_new_tokens": n}
        if image: r["images"] = [image]
        f.write(json.dumps(r) + "\n")
    req("warm", p["p64"], 2)
    req("warm-image", p["i448"]["ids"], 1, p["i448"]["path"])
    for i in range(reps):
        req("prefill512", p["p512"], 1)
        req("decode64", p["p64"], 33)
        req("decode1024", p["p1024"], 33)
        req("encode448", p["i448"]["ids"], 1, p["i448"]["path"])
        req("encode1080", p["i1080"]["ids"], 1, p["i1080"]["path"])
    req("tokens", p["i448"]["ids"], 32, p["i448"]["path"])
EOF

: >"$W/vlmc.jsonl"
for P in $PRECISIONS $ALSO; do
  A=$H/3b-vk-$P.vlmc
  case " $ALSO " in *" $P "*) A=$H/$P.vlmc ;; esac
  step "vlmc vulkan $P: batch of $(wc -l <"$W/requests.jsonl") requests"
  base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$W/mem.$P.txt" &
  smi=$!
  "$RUN" "$A" --backend vulkan --params "$CKPT" --batch "$W/requests.jsonl" --stats --quiet \
    >"$W/answers.$P.jsonl" 2>"$W/stderr.$P.txt"
  rc=$?
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  grep -v '^stats: .*prefill' "$W/stderr.$P.txt" | tail -5 | tee -a "$LOG"
  peak=$(sort -n "$W/mem.$P.txt" | tail -1)
  python3 - "$W/answers.$P.jsonl" "$P" "$rc" "${base:-0}" "${peak:-0}" >>"$W/vlmc.jsonl" <<'EOF'
import json, statistics, sys
path, precision, rc, base, peak = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
rows = [json.loads(l) for l in open(path) if l.strip()]
errors = [r["error"] for r in rows if "error" in r]
by = {}
for r in rows:
    if "error" not in r: by.setdefault(r["id"], []).append(r)
def med(v): return round(statistics.median(v), 2) if v else None
out = {"engine": "vlmc vulkan", "precision": precision, "rc": rc, "errors": errors[:3],
       "peak_gib": round((peak - base) / 1024, 2)}
out["prefill512_tok_s"] = med([r["prompt_tokens"] * 1e3 / r["prefill_ms"] for r in by.get("prefill512", [])])
for key in ("decode64", "decode1024"):
    out[key + "_tok_s"] = med([(r["generated_tokens"] - 1) * 1e3 / r["decode_ms"]
                              for r in by.get(key, []) if r["generated_tokens"] > 1])
    out[key + "_steps"] = [r["generated_tokens"] - 1 for r in by.get(key, [])]
for key in ("encode448", "encode1080"):
    out[key + "_ms"] = med([r["encode_ms"] for r in by.get(key, [])])
out["tokens"] = by["tokens"][0]["tokens"] if "tokens" in by else None
print(json.dumps(out))
EOF
  tail -1 "$W/vlmc.jsonl" | cut -c1-400 | tee -a "$LOG"
done

if [ "$FIGURES_ONLY" = 1 ]; then
  step "summary"
  python3 bench/vulkan_h200_summary.py "$W" "$OUT" 2>&1 | tee -a "$LOG"
  exit 0
fi

# 4-bit weights (issue 16): the same checkpoint in MLX's 4-bit format, made here as
# bench/vulkan_h200.sh made it there (tests/oracle/make_mlx_checkpoint.py, numpy), and the
# f16 artifact compiled from it: decode after 64 and after 1,024, prefill 512 (precision
# "f16-q4" in vlmc.jsonl; its decode profile in log.txt: at most 8 files come back).
if [ -f "$H/3b-vk-f16-q4.vlmc" ]; then
  Q4=$CKPT-mlx-q4
  step "the 3B in MLX 4-bit format (tests/oracle/make_mlx_checkpoint.py)"
  [ -f "$Q4/config.json" ] && cmp -s "$CKPT.skeleton" "$Q4.skeleton" 2>/dev/null ||
    { python3 tests/oracle/make_mlx_checkpoint.py "$CKPT" "$Q4" --quantize-embed >>"$LOG" 2>&1 &&
      cp "$CKPT.skeleton" "$Q4.skeleton"; }
  grep -E '"id": "(warm|prefill512|decode64|decode1024)"' "$W/requests.jsonl" >"$W/requests.q4.jsonl"
  step "vlmc vulkan f16-q4: batch of $(wc -l <"$W/requests.q4.jsonl") requests"
  "$RUN" "$H/3b-vk-f16-q4.vlmc" --backend vulkan --params "$Q4" --batch "$W/requests.q4.jsonl" \
    --stats --quiet >"$W/answers.f16-q4.jsonl" 2>"$W/stderr.f16-q4.txt"
  rc=$?
  grep -v '^stats: .*prefill' "$W/stderr.f16-q4.txt" | tail -3 | tee -a "$LOG"
  python3 - "$W/answers.f16-q4.jsonl" "$rc" >>"$W/vlmc.jsonl" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    if "error" not in r: by.setdefault(r["id"], []).append(r)
def med(v): return round(statistics.median(v), 2) if v else None
out = {"engine": "vlmc vulkan", "precision": "f16-q4", "rc": int(sys.argv[2]),
       "errors": [r["error"] for r in rows if "error" in r][:3]}
out["prefill512_tok_s"] = med([r["prompt_tokens"] * 1e3 / r["prefill_ms"] for r in by.get("prefill512", [])])
for key in ("decode64", "decode1024"):
    out[key + "_tok_s"] = med([(r["generated_tokens"] - 1) * 1e3 / r["decode_ms"]
                              for r in by.get(key, []) if r["generated_tokens"] > 1])
print(json.dumps(out))
EOF
  tail -1 "$W/vlmc.jsonl" | tee -a "$LOG"
  grep '"id": "decode64"' "$W/requests.jsonl" | head -1 >"$W/profile.decode64_q4.jsonl"
  VLMC_VULKAN_PROFILE=1 "$RUN" "$H/3b-vk-f16-q4.vlmc" --backend vulkan --params "$Q4" \
    --batch "$W/profile.decode64_q4.jsonl" --quiet >/dev/null 2>"$W/q4.profile.decode64.txt"
  grep -v "^weights" "$W/q4.profile.decode64.txt" | head -16 | tee -a "$LOG"
fi

# Per-kernel GPU time (f16), one phase per run: decode after 64, prefill 512, 1080p encode.
python3 - "$W/requests.jsonl" "$W" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for key in ("decode64", "prefill512", "encode1080"):
    r = next(r for r in rows if r["id"] == key)
    open("%s/profile.%s.jsonl" % (sys.argv[2], key), "w").write(json.dumps(r) + "\n")
EOF
for key in decode64 prefill512 encode1080; do
  step "vlmc vulkan f16 profile: $key (VLMC_VULKAN_PROFILE=1)"
  VLMC_VULKAN_PROFILE=1 "$RUN" "$H/3b-vk-f16.vlmc" --backend vulkan --params "$CKPT" \
    --batch "$W/profile.$key.jsonl" --quiet >/dev/null 2>"$W/profile.$key.txt"
  grep -v '^weights' "$W/profile.$key.txt" | head -24 | tee -a "$LOG"
done

# Where a decode step's wall time goes: GPU time, host time recording dispatches, the rest
# (the walker, submits and waits), for the decode64 request alone, unprofiled.
step "vlmc vulkan f16 --stats: decode64"
"$RUN" "$H/3b-vk-f16.vlmc" --backend vulkan --params "$CKPT" --batch "$W/profile.decode64.jsonl" \
  --stats --quiet 2>&1 >/dev/null | grep -E '^stats' | tee -a "$LOG" >"$W/stats.decode64.txt"

# Chunked submission (VLMC_VULKAN_CHUNK, runtime/backends/vulkan/README.md): the decode64
# request with whole batches, fixed chunks of 256 dispatches and chunks growing from 32 (the
# default), appended to stats.decode64.txt (at most 8 files come back from the GPU machine);
# bench/vulkan_h200_submit.sh measures more modes on its own.
for chunk in 0 256 32+; do
  step "vlmc vulkan f16 decode64, VLMC_VULKAN_CHUNK=$chunk"
  echo "VLMC_VULKAN_CHUNK=$chunk" >>"$W/stats.decode64.txt"
  VLMC_VULKAN_CHUNK=$chunk "$RUN" "$H/3b-vk-f16.vlmc" --backend vulkan --params "$CKPT" \
    --batch "$W/profile.decode64.jsonl" --stats --quiet 2>&1 >/dev/null |
    grep -E '^stats: backend|submits' | tee -a "$LOG" >>"$W/stats.decode64.txt"
done

# The dispatch floor: the demo model's decode (its kernels do almost no work), unprofiled with
# --stats (GPU time per dispatch of a decode step) and profiled (each kernel's time alone).
if [ -f "$H/demo-vk-f16.vlmc" ]; then
  for chunk in 0 32; do
    step "dispatch floor: demo model, vulkan f16, 64 tokens decoded, VLMC_VULKAN_CHUNK=$chunk"
    echo "demo VLMC_VULKAN_CHUNK=$chunk" >>"$W/stats.floor.txt"
    VLMC_VULKAN_CHUNK=$chunk "$RUN" "$H/demo-vk-f16.vlmc" --backend vulkan --params assets/shapes-vl \
      -p "a red circle and a blue square" -n 64 --ignore-eos --stats --quiet 2>&1 >/dev/null |
      grep -E '^stats' | tee -a "$LOG" >>"$W/stats.floor.txt"
  done
  step "dispatch floor: demo model profile (VLMC_VULKAN_PROFILE=1)"
  VLMC_VULKAN_PROFILE=1 "$RUN" "$H/demo-vk-f16.vlmc" --backend vulkan --params assets/shapes-vl \
    -p "a red circle and a blue square" -n 64 --ignore-eos --quiet 2>&1 >/dev/null |
    grep -v '^weights' | head -30 | tee -a "$LOG" >>"$W/stats.floor.txt"
fi

step "summary"
python3 bench/vulkan_h200_summary.py "$W" "$OUT" 2>&1 | tee -a "$LOG"
cp "$W"/profile.*.txt "$W"/stats.*.txt "$OUT/" 2>/dev/null
true
