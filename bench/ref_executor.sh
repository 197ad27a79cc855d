#!/usr/bin/env bash
# Benchmarks the reference executor on the demo model, before and after: the working tree's
# executor ("new") against the executor files of a git revision ("base", default HEAD), in one
# run, on one artifact and one prompt, through `vlmc-run --stats`. Runs alternate between the
# two so that a busy machine slows both alike; the best of N runs per phase is reported with
# the ratio base / new. Both must print the same text and write the same taps, bit for bit.
#
#   bench/ref_executor.sh [--base REV] [--runs N] [--threads "1 2"] [--work DIR]
#
# Only reference/executor.c, reference/exec_*.c and reference/exec_internal.h come from REV;
# everything else (runtime, tokenizer, compiler) is the working tree's in both builds, so the
# difference is the executor's alone. Builds go to DIR (default build-bench-ref/, reused by
# later runs: ninja rebuilds what changed).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BASE=HEAD
RUNS=5
THREADS="1 2"
WORK=$ROOT/build-bench-ref
MODEL=assets/shapes-vl
IMAGE=tests/fixtures/test_image_shapes.png
PROMPT="What shapes and colors are in this image? Answer briefly."

while [ $# -gt 0 ]; do
  case $1 in
    --base) BASE=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    *) echo "usage: $0 [--base REV] [--runs N] [--threads \"1 2\"] [--work DIR]" >&2; exit 2 ;;
  esac
done
JOBS=${JOBS:-2}
mkdir -p "$WORK"

# The working tree as git sees it (tracked and untracked files, not ignored ones), with the
# executor's own files taken from $BASE.
make_base_tree() {
  local src=$WORK/base-src
  rm -rf "$src"
  mkdir -p "$src"
  git ls-files -co --exclude-standard -z | xargs -0 tar -cf - 2>/dev/null | tar -xf - -C "$src"
  rm -f "$src"/reference/executor.c "$src"/reference/exec_*.c "$src"/reference/exec_internal.h
  local f
  for f in $(git ls-tree --name-only "$BASE" reference/ |
             grep -E '^reference/(executor\.c|exec_[a-z_]+\.c|exec_internal\.h)$'); do
    git show "$BASE:$f" >"$src/$f"
  done
}

build() { # build <source> <dir> <compiler: ON|OFF> <targets...>
  local src=$1 dir=$2 compiler=$3
  shift 3
  cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DVLMC_COMPILER="$compiler" >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log" >&2; exit 1; }
  cmake --build "$dir" -j"$JOBS" --target "$@" >"$dir.build.log" 2>&1 ||
    { tail -30 "$dir.build.log" >&2; exit 1; }
}

echo "bench: building new (working tree) and base ($BASE executor) in $WORK ..."
make_base_tree
build "$ROOT" "$WORK/new" ON vlmc vlmc-run
build "$WORK/base-src" "$WORK/base" OFF vlmc-run
ART=$WORK/shapes.vlmc
"$WORK/new/tools/vlmc" compile "$MODEL" -o "$ART" >"$WORK/compile.log" 2>&1 ||
  { cat "$WORK/compile.log" >&2; exit 1; }

# One run: prints "load encode prefill decode decode_tokens peak_mb" from the stats line.
run_once() { # run_once <vlmc-run> <threads> [more vlmc-run arguments]
  local bin=$1 threads=$2
  shift 2
  local line
  line=$("$bin" "$ART" --image "$IMAGE" -p "$PROMPT" --stats --threads "$threads" "$@" \
         2>&1 >/dev/null | grep 'stats:' | tail -1)
  field() { sed -nE "s/.*$1.*/\\1/p" <<<"$line"; }
  echo "$(field 'load ([0-9.]+) ms') $(field 'image encode ([0-9.]+) ms')" \
       "$(field 'prefill [0-9]+ tokens in ([0-9.]+) ms') $(field 'decode [0-9]+ tokens in ([0-9.]+) ms')" \
       "$(field 'decode ([0-9]+) tokens') $(field 'peak memory ([0-9.]+) MB')"
}

min() { awk 'NR == 1 || $1 < m { m = $1 } END { printf "%.1f", m }'; }

check_same_output() { # the text and every tap, bit for bit
  local threads=$1 t
  for t in base new; do
    rm -rf "$WORK/taps-$t"
    "$WORK/$t/tools/vlmc-run" "$ART" --image "$IMAGE" -p "$PROMPT" --threads "$threads" \
      --dump-taps "$WORK/taps-$t" >"$WORK/text-$t.txt" 2>/dev/null
  done
  if cmp -s "$WORK/text-base.txt" "$WORK/text-new.txt" &&
     cmp -s "$WORK/taps-base/taps.safetensors" "$WORK/taps-new/taps.safetensors"; then
    echo "same text and taps (bit for bit): yes -- \"$(cat "$WORK/text-new.txt")\""
  else
    echo "same text and taps (bit for bit): NO" >&2
    return 1
  fi
}

status=0
for threads in $THREADS; do
  echo
  echo "== threads $threads, best of $RUNS runs (ms; ratio = base / new) =="
  check_same_output "$threads" || status=1
  : >"$WORK/times-base" && : >"$WORK/times-new"
  for _ in $(seq "$RUNS"); do
    run_once "$WORK/base/tools/vlmc-run" "$threads" >>"$WORK/times-base"
    run_once "$WORK/new/tools/vlmc-run" "$threads" >>"$WORK/times-new"
  done
  tokens=$(awk '{ print $5; exit }' "$WORK/times-new")
  printf '%-22s %10s %10s %8s\n' phase base new ratio
  col=1
  for phase in load "image encode" "prefill" "decode ($tokens tokens)" "peak memory (MB)"; do
    [ $col -eq 5 ] && col=6
    b=$(awk -v c=$col '{ print $c }' "$WORK/times-base" | min)
    n=$(awk -v c=$col '{ print $c }' "$WORK/times-new" | min)
    printf '%-22s %10s %10s %7sx\n' "$phase" "$b" "$n" "$(awk -v b="$b" -v n="$n" \
      'BEGIN { if (n > 0) printf "%.2f", b / n; else print "?" }')"
    col=$((col + 1))
  done
  b=$(awk '{ print $4 }' "$WORK/times-base" | min)
  n=$(awk '{ print $4 }' "$WORK/times-new" | min)
  awk -v t="$tokens" -v b="$b" -v n="$n" 'BEGIN {
    printf "%-22s %10.1f %10.1f %7.2fx\n", "decode tokens/s", 1000 * t / b, 1000 * t / n, b / n }'
done
exit $status
