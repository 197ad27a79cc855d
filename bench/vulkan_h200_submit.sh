#!/usr/bin/env bash
# How the vulkan backend hands a batch to the GPU, measured on the GPU machine: the 3B's decode
# (32 tokens after a 64-token prompt, twice, after a warm-up request, in one vlmc-run --batch)
# and the demo model's decode (its kernels do almost no work: what a dispatch and its barrier
# cost) under each submission mode: whole batches (VLMC_VULKAN_CHUNK=0), fixed chunks, chunks
# growing from N (N+; the default is runtime/backends/vulkan/vulkan_backend.c's CHUNK_FIRST),
# each with compute-only barriers between dispatches (the default) and with
# VLMC_VULKAN_FULL_BARRIERS=1 (compute and transfer stages), and with push descriptors off
# (VLMC_VULKAN_NO_PUSH_DESCRIPTOR=1). Prints one line per mode: decode tok/s (median), submits,
# GPU time and host time recording per decode step.
#
#   bench/vulkan_h200_submit.sh [--modes "0 256 32+"]   (device tool, carrying .h200 and .gl,
#                                                        after bench/vulkan_h200.sh here)
#   bench/vulkan_h200_submit.sh --compare "3b-vk-f16-base 3b-vk-f16"
#
# --compare runs the default mode only, on each named artifact of .h200/ (e.g. one compiled
# by an earlier revision, renamed), in 3 alternating rounds, then each one's decode profile
# (VLMC_VULKAN_PROFILE=1, its 12 slowest kernels): a before/after of a kernel change.
#
# Writes $OUT/submit_modes.txt (the table) and $OUT/submit_modes.log (every run's --stats).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/h200_lib.sh  # H, W, CKPT, the environment; h200_checkpoint, h200_vulkan
OUT=${OUT:-$PWD/h200-out}
MODES="0 256 16+ 32+ 64+"
COMPARE=
while [ $# -gt 0 ]; do
  case $1 in
    --modes) MODES=$2; shift 2 ;;
    --compare) COMPARE=$2; shift 2 ;;
    *) echo "usage: $0 [--modes \"0 256 32+\"] [--compare \"ARTIFACT...\"]" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
LOG=$OUT/submit_modes.log
TABLE=$OUT/submit_modes.txt
: >"$LOG"
h200_checkpoint >>"$LOG" 2>&1 || { echo "checkpoint failed" | tee -a "$LOG"; exit 1; }
h200_vulkan >>"$LOG" 2>&1
RUN=$H/vlmc-run
"$RUN" --list-devices 2>&1 | head -2 | tee -a "$LOG"

python3 - "$W/submit.jsonl" <<'EOF'
import json, random, sys
r = random.Random(1)
ids = [r.randrange(1000, 30000) for _ in range(64)]
with open(sys.argv[1], "w") as f:
    f.write(json.dumps({"id": "warm", "input_ids": ids, "max_new_tokens": 4}) + "\n")
    for i in range(2):
        f.write(json.dumps({"id": "decode64", "input_ids": ids, "max_new_tokens": 33}) + "\n")
EOF

# run_mode LABEL ENV...: the 3B batch under ENV ($ART: the artifact); one table line.
ART=$H/3b-vk-f16.vlmc
run_mode() {
  local label=$1
  shift
  echo "== 3B $label" >>"$LOG"
  env "$@" "$RUN" "$ART" --backend vulkan --params "$CKPT" --batch "$W/submit.jsonl" \
    --stats >"$W/submit.out" 2>"$W/submit.err"
  cat "$W/submit.err" | grep -E '^stats' >>"$LOG"
  python3 - "$label" "$W/submit.out" "$W/submit.err" <<'EOF' | tee -a "$TABLE"
import json, re, statistics, sys
label, out, err = sys.argv[1:]
rows = [json.loads(l) for l in open(out) if l.strip()]
dec = [(r["generated_tokens"] - 1) * 1e3 / r["decode_ms"] for r in rows
       if r.get("id") == "decode64" and r.get("generated_tokens", 0) > 1]
text = open(err).read()
def last(pattern):  # the batch's --stats are running totals: the last request's own share
    v = [float(x) for x in re.findall(pattern, text)]
    return v[-1] - v[-2] if len(v) >= 2 else float("nan")
print("3B   %-32s decode %7.1f tok/s  last request (prefill 64 + 32 steps): submits %4d, "
      "GPU %6.1f ms, recording %5.1f ms" % (
    label, statistics.median(dec) if dec else float("nan"), last(r"(\d+) submits"),
    last(r"([\d.]+) ms GPU time"), last(r"([\d.]+) ms of host time recording")))
EOF
}

# floor_mode LABEL ENV...: the demo model's decode of 64 tokens under ENV; one table line.
floor_mode() {
  local label=$1
  shift
  echo "== demo $label" >>"$LOG"
  env "$@" "$RUN" "$H/demo-vk-f16.vlmc" --backend vulkan --params assets/shapes-vl \
    -p "a red circle and a blue square" -n 64 --ignore-eos --stats --quiet 2>"$W/floor.err" >/dev/null
  grep -E '^stats' "$W/floor.err" >>"$LOG"
  python3 - "$label" "$W/floor.err" <<'EOF' | tee -a "$TABLE"
import re, sys
label, err = sys.argv[1:]
text = open(err).read()
def num(pattern):
    m = re.search(pattern, text)
    return float(m.group(1)) if m else float("nan")
calls, gpu = num(r"(\d+) kernel calls"), num(r"([\d.]+) ms GPU time")
print("demo %-32s decode %7.1f tok/s  submits %5d  GPU %8.1f ms  %5.2f us a dispatch" % (
    label, num(r"decode \d+ tokens in [\d.]+ ms \(([\d.]+) tokens/s"), num(r"(\d+) submits"),
    gpu, gpu * 1e3 / calls if calls else float("nan")))
EOF
}

: >"$TABLE"
if [ -n "$COMPARE" ]; then
  for name in $COMPARE; do  # unpacked here: h200_lib.sh unpacked what was there when sourced
    [ -e "$H/$name.vlmc" ] || xz -dk "$H/$name.vlmc.xz" || exit 1
  done
  ART=$H/$(set -- $COMPARE; echo "$1").vlmc
  run_mode "warm-up (default)"
  for round in 1 2 3; do
    for name in $COMPARE; do
      ART=$H/$name.vlmc
      run_mode "$name, round $round"
    done
  done
  for name in $COMPARE; do
    echo "== profile: $name (decode64 request, VLMC_VULKAN_PROFILE=1)" | tee -a "$TABLE"
    head -1 "$W/submit.jsonl" >"$W/profile.jsonl"
    sed -n 2p "$W/submit.jsonl" >>"$W/profile.jsonl"
    VLMC_VULKAN_PROFILE=1 "$RUN" "$H/$name.vlmc" --backend vulkan --params "$CKPT" \
      --batch "$W/profile.jsonl" --quiet 2>&1 >/dev/null | grep -v '^weights' | head -13 |
      tee -a "$TABLE"
  done
  echo "== done ($(date +%T))"
  exit 0
fi
# A warm-up of each (the first run of an artifact on a machine also creates its pipelines).
floor_mode "warm-up (default)"
run_mode "warm-up (default)"
for mode in $MODES; do
  floor_mode "chunk $mode" VLMC_VULKAN_CHUNK=$mode
  floor_mode "chunk $mode, full barriers" VLMC_VULKAN_CHUNK=$mode VLMC_VULKAN_FULL_BARRIERS=1
done
floor_mode "default, no push descriptors" VLMC_VULKAN_NO_PUSH_DESCRIPTOR=1
for mode in $MODES; do
  run_mode "chunk $mode" VLMC_VULKAN_CHUNK=$mode
  run_mode "chunk $mode, full barriers" VLMC_VULKAN_CHUNK=$mode VLMC_VULKAN_FULL_BARRIERS=1
done
run_mode "default, no push descriptors" VLMC_VULKAN_NO_PUSH_DESCRIPTOR=1
echo "== done ($(date +%T))"
