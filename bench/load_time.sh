#!/usr/bin/env bash
# Artifact load time against parameter size (issue 5, acceptance 4): opening a .vlmc maps it
# and checks everything but the weights, so a 7.5 GB artifact should open as fast as a 1 MB one.
#
#   bench/load_time.sh [BUILD_DIR]        (default: build; needs ~16 GB free under $TMPDIR)
#
# Makes a random-weight checkpoint from the real 3B config (vlmc random-checkpoint), compiles it
# inline and --params external, and times `vlmc-run --load-only` against three baselines from
# the same run:
#   tiny        tests/fixtures/parity/tiny-vocab512 (2 layers, 1 MB of weights);
#   3B-depth    the 3B config with every width shrunk (36 layers, 32 vision blocks, the same
#               program as 3B up to sizes, ~1000x fewer bytes): separates the cost of the
#               program (it grows with depth) from the cost of the weights;
#   3B --verify the same 3B artifact with every checksum checked at open: what a load that
#               reads the weights costs.
# Each figure is the median of RUNS (default 5) warm runs of the in-process open time that
# `--stats` prints, plus peak RSS. Nothing is written outside a temporary folder, which is
# removed at the end (KEEP=1 keeps it). Not a timed test: run it by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
RUNS=${RUNS:-5}
# Another flat (legacy-layout) config can stand in for the 3B one, e.g. a small one to try the
# script quickly; the labels below still say 3B.
CONFIG=${CONFIG:-tests/fixtures/configs/qwen2_5_vl_3b_config.json}
VLMC=$BUILD/tools/vlmc
RUN=$BUILD/tools/vlmc-run
PY=/usr/bin/python3
[ -x "$VLMC" ] && [ -x "$RUN" ] || { echo "build $BUILD first (vlmc and vlmc-run)" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/vlmc-load-bench.XXXXXX")
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT

# The 3B config with the widths divided down and the depths kept.
$PY - "$CONFIG" "$WORK/depth_config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
         vocab_size=151936)
c["rope_scaling"]["mrope_section"] = [2, 3, 3]
c["vision_config"].update(hidden_size=64, intermediate_size=128, num_heads=4, out_hidden_size=64)
json.dump(c, open(sys.argv[2], "w"), indent=2)
EOF

step() { printf '== %s\n' "$*" >&2; }
timed() { # COMMAND...: runs it, prints the seconds it took; fails when it fails
  local t0 t1
  t0=$(date +%s.%N)
  "$@" || return 1
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }'
}

step "random checkpoints (3B: 7.5 GB of bf16; 3B-depth)"
t_ckpt=$(timed "$VLMC" random-checkpoint --config "$CONFIG" -o "$WORK/ckpt-3b" --seed 1)
"$VLMC" random-checkpoint --config "$WORK/depth_config.json" -o "$WORK/ckpt-depth" --seed 1
step "compile (3B inline copies 7.5 GB)"
t_compile=$(timed "$VLMC" compile "$WORK/ckpt-3b" -o "$WORK/3b.vlmc" 2>/dev/null)
"$VLMC" compile "$WORK/ckpt-3b" -o "$WORK/3b-ext.vlmc" --params external 2>/dev/null
"$VLMC" compile "$WORK/ckpt-depth" -o "$WORK/depth.vlmc" 2>/dev/null
"$VLMC" compile tests/fixtures/parity/tiny-vocab512 -o "$WORK/tiny.vlmc" 2>/dev/null
"$VLMC" compile tests/fixtures/parity/tiny-vocab512 -o "$WORK/tiny-ext.vlmc" --params external \
  2>/dev/null

# median_load ARGS...: prints "load_ms peak_mb" (medians over RUNS runs, after one warm-up);
# stops the benchmark with vlmc-run's error when the artifact does not load.
median_load() {
  local err
  if ! err=$("$RUN" "$@" --load-only 2>&1); then
    echo "vlmc-run $* --load-only failed: $err" >&2
    return 1
  fi
  for _ in $(seq "$RUNS"); do "$RUN" "$@" --load-only --stats 2>&1; done |
    sed -nE 's/^stats: backend [a-z]+ \| load ([0-9.]+) ms \| peak memory ([0-9.]+) MB$/\1 \2/p' |
    $PY -c 'import sys, statistics as s
rows = [tuple(map(float, l.split())) for l in sys.stdin]
print("%.2f %.1f" % (s.median(r[0] for r in rows), s.median(r[1] for r in rows)))'
}

size_of() { stat -c %s "$1"; }
step "load times (median of $RUNS)"
median_load "$WORK/tiny.vlmc" >"$WORK/m"; read -r tiny_ms tiny_mb <"$WORK/m"
median_load "$WORK/depth.vlmc" >"$WORK/m"; read -r depth_ms depth_mb <"$WORK/m"
median_load "$WORK/3b.vlmc" >"$WORK/m"; read -r b3_ms b3_mb <"$WORK/m"
median_load "$WORK/tiny-ext.vlmc" --params tests/fixtures/parity/tiny-vocab512 >"$WORK/m"
read -r tinyx_ms tinyx_mb <"$WORK/m"
median_load "$WORK/3b-ext.vlmc" --params "$WORK/ckpt-3b" >"$WORK/m"
read -r b3x_ms b3x_mb <"$WORK/m"
RUNS=1 median_load "$WORK/3b.vlmc" --verify >"$WORK/m"; read -r b3v_ms b3v_mb <"$WORK/m"

$PY - "$tiny_ms" "$depth_ms" "$b3_ms" "$tinyx_ms" "$b3x_ms" "$b3v_ms" \
  "$tiny_mb" "$depth_mb" "$b3_mb" "$tinyx_mb" "$b3x_mb" "$b3v_mb" \
  "$(size_of "$WORK/tiny.vlmc")" "$(size_of "$WORK/depth.vlmc")" "$(size_of "$WORK/3b.vlmc")" \
  "$(size_of "$WORK/tiny-ext.vlmc")" "$(size_of "$WORK/3b-ext.vlmc")" "$t_ckpt" "$t_compile" <<'EOF'
import sys
a = sys.argv[1:]
ms = list(map(float, a[0:6])); mb = list(map(float, a[6:12])); size = list(map(int, a[12:17]))
size.append(size[2])
names = ["tiny (inline)", "3B-depth, tiny widths (inline)", "3B (inline)",
         "tiny (--params external)", "3B (--params external)", "3B (inline) with --verify"]
print("artifact load time (vlmc-run --load-only, warm page cache, median)")
print("  %-32s %14s %10s %9s %12s" % ("artifact", "file bytes", "load ms", "x tiny", "peak RSS MB"))
for i, n in enumerate(names):
    base = ms[3] if "external" in n else ms[0]
    print("  %-32s %14d %10.2f %9.2f %12.1f" % (n, size[i], ms[i], ms[i] / base, mb[i]))
print("ratios: 3B / 3B-depth load %.2f (same program, %.0fx the bytes); 3B / tiny %.2f "
      "(%.0fx the bytes); 3B --verify / 3B %.0f" % (ms[2] / ms[1], size[2] / size[1],
      ms[2] / ms[0], size[2] / size[0], ms[5] / ms[2]))
print("making the 3B checkpoint took %s s, compiling it inline %s s" % (a[17], a[18]))
EOF
