#!/usr/bin/env bash
# One build of vlmc against another, in one run on one machine: the cpu backend's prefill and
# decode on a 3B-shaped checkpoint with random weights (and the demo model), for the working
# tree and for a baseline revision (default: the last commit before the backend interface,
# 1749370), with the after/before ratio of each figure. For changes that must not cost speed
# (a refactor): ratios within the run-to-run noise, which the script also prints (the spread
# of each build's rounds). Not a timed test: run it by hand.
#
#   bench/before_after.sh [--baseline REV] [--models "tiny 3b"] [--rounds N] [--threads N]
#                         [--prefill-tokens N] [--decode-tokens N] [--checkpoint-3b DIR]
#
#   --baseline REV       the revision to compare with (built in a git worktree under $TMPDIR)
#   --models LIST        tiny and/or 3b (default both)
#   --rounds N           rounds (default 3); each round runs the baseline, then the working
#                        tree, so that a slow phase of a noisy machine hits both alike
#   --threads N          vlmc-run --threads (default $(nproc))
#   --prefill-tokens N   prompt length (default 64: llama.cpp's figure on this machine is for 64)
#   --decode-tokens N    decode steps after the prompt (default 32; one more is fed)
#   --checkpoint-3b DIR  use this 3B-shaped checkpoint instead of making one (7.5 GB)
#
# Each figure comes from `vlmc-run --stats` as in bench/cpu_backend.sh: prefill is the first
# turn's "prefill N tokens in T ms" (random text ids, no image), decode the second turn's (its
# N+1 tokens go through @decode one call per token). The table gives each build's median over
# the rounds, its min..max, and after/before of the medians (>1: the working tree is faster).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BASELINE=1749370
MODELS="tiny 3b"
ROUNDS=3
THREADS=$(nproc)
PREFILL=64
DECODE=32
CKPT_3B=
PY=/usr/bin/python3
CONFIG_3B=${CONFIG_3B:-tests/fixtures/configs/qwen2_5_vl_3b_config.json}
help() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
while [ $# -gt 0 ]; do
  case $1 in
    --baseline) BASELINE=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --prefill-tokens) PREFILL=$2; shift 2 ;;
    --decode-tokens) DECODE=$2; shift 2 ;;
    --checkpoint-3b) CKPT_3B=$2; shift 2 ;;
    -h|--help) help; exit 0 ;;
    *) help | sed -n '/^  bench/,/^$/p' >&2; exit 2 ;;
  esac
done
WORK=$(mktemp -d)
cleanup() {
  git -C "$ROOT" worktree remove --force "$WORK/base-src" 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
step() { printf '== %s\n' "$*" >&2; }

# build SRC DIR: a Release build of vlmc and vlmc-run.
build() {
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$2.configure.log" 2>&1 ||
    { cat "$2.configure.log" >&2; exit 1; }
  ninja -C "$2" vlmc vlmc-run >"$2.build.log" 2>&1 || { tail -30 "$2.build.log" >&2; exit 1; }
}
step "build the working tree and $BASELINE (Release)"
git worktree add --detach -q "$WORK/base-src" "$BASELINE"
build "$ROOT" "$WORK/after"
build "$WORK/base-src" "$WORK/before"

ids() {
  $PY - "$1" "$2" "$3" <<'EOF'
import json, random, sys
r = random.Random(int(sys.argv[3]))
json.dump([r.randrange(1000, 30000) for _ in range(int(sys.argv[2]))], open(sys.argv[1], "w"))
EOF
}
ids "$WORK/prompt.json" "$PREFILL" 1
ids "$WORK/decode.json" "$DECODE" 2

RESULTS=$WORK/results.tsv
: >"$RESULTS"
# bench_model NAME CKPT: each build compiles its own artifact, then the rounds alternate.
bench_model() {
  local name=$1 ckpt=$2 b r log
  for b in before after; do
    step "$name: compile with the $b build (--target ref,cpu --cpu native)"
    "$WORK/$b/tools/vlmc" compile "$ckpt" -o "$WORK/$name.$b.vlmc" --target ref,cpu \
      --cpu native >"$WORK/$name.$b.compile.log" 2>&1 ||
      { tail -5 "$WORK/$name.$b.compile.log" >&2; exit 1; }
  done
  for r in $(seq "$ROUNDS"); do
    for b in before after; do
      log=$WORK/$name.$b.$r.log
      "$WORK/$b/tools/vlmc-run" "$WORK/$name.$b.vlmc" --threads "$THREADS" --stats --ids \
        --input-ids "$WORK/prompt.json" -n 1 -i <"$WORK/decode.json" >/dev/null 2>"$log" ||
        { tail -3 "$log" >&2; exit 1; }
      printf '%s\t%s\t%s\n' "$name" "$b" "$log" >>"$RESULTS"
      grep '^stats: backend' "$log" | sed "s/^/   $b round $r: /" >&2
    done
  done
  rm -f "$WORK/$name.before.vlmc" "$WORK/$name.after.vlmc"
}

for m in $MODELS; do
  case $m in
    tiny) bench_model tiny assets/shapes-vl ;;
    3b)
      if [ -z "$CKPT_3B" ]; then
        step "random 3B-shaped checkpoint (7.5 GB of bf16)"
        CKPT_3B=$WORK/ckpt-3b
        "$WORK/after/tools/vlmc" random-checkpoint --config "$CONFIG_3B" -o "$CKPT_3B" \
          --seed 1 2>&1 | tail -1 >&2
      fi
      bench_model 3b "$CKPT_3B" ;;
    *) echo "unknown model '$m' (tiny, 3b)" >&2; exit 2 ;;
  esac
done

step "table"
echo "vlmc before/after: $BASELINE vs the working tree ($(git -C "$ROOT" rev-parse --short HEAD)" \
  "+ changes), $(date '+%Y-%m-%d %H:%M'), $(nproc) cores, --threads $THREADS, $ROUNDS rounds"
$PY - "$RESULTS" <<'EOF'
import re, statistics, sys
runs = {}
for row in open(sys.argv[1]):
    name, build, log = row.rstrip("\n").split("\t")
    turns = [l for l in open(log) if l.startswith("stats: backend")]
    for what, line in zip(("prefill", "decode"), turns):
        m = re.search(r"prefill (\d+) tokens in ([\d.]+) ms", line)
        runs.setdefault((name, what), {}).setdefault(build, []).append(
            int(m.group(1)) * 1e3 / float(m.group(2)))
print("%-5s %-22s %26s %26s %12s" % ("model", "figure", "before (median, min..max)",
                                      "after (median, min..max)", "after/before"))
for (name, what), by in runs.items():
    cells = []
    for b in ("before", "after"):
        v = by.get(b, [])
        cells.append("%8.1f (%.1f..%.1f)" % (statistics.median(v), min(v), max(v)) if v else "-")
    ratio = statistics.median(by["after"]) / statistics.median(by["before"]) \
        if by.get("after") and by.get("before") else float("nan")
    label = "%s tokens/s" % what
    print("%-5s %-22s %26s %26s %11.2fx" % (name, label, cells[0], cells[1], ratio))
EOF
