#!/usr/bin/env bash
# The metal target as a user meets it (issue 18), with its kernels executed on Linux in the
# Metal emulation (tests/metal/README.md; not Apple hardware):
#   - the acceptance command: assets/shapes-vl compiled --target metal,cpu; `vlmc inspect`
#     lists a metal kernel for every dispatch, says plainly that they are executed only in
#     emulation, and the emulated backend checks the table against the program;
#   - every kernel --dump-kernels writes parses with clang++ as C++ against the stand-in
#     <metal_stdlib>, which declares only what the emitter uses;
#   - end to end through the emulation: vlmc-run-metal-emu --backend metal names the three
#     shapes of the bug report's image; the deployable vlmc-run has no metal backend on Linux
#     and says so by name;
#   - a planted emitter bug is caught: the first threadgroup_barrier of a kernel blanked out
#     (the kernel an emitter that forgot it would write) fails its kernel-test case, for a
#     reduction (rms_norm) and a tiled matmul (linear_tiles), while the intact cases pass.
#   usage: metal.sh VLMC VLMC_RUN VLMC_RUN_METAL_EMU VLMC_KERNEL_CHECK CXX
set -euo pipefail
VLMC=$1
RUN=$2
RUN_EMU=$3
KCHECK=$4
CXX=$5
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/lib.sh"

IMAGE=tests/fixtures/test_image_shapes.png
PROMPT="What shapes and colors are in this image? Answer briefly."
ART=$WORK/s.vlmc

compile_or_stop "$VLMC" assets/shapes-vl "$ART" metal,cpu --dump-kernels "$WORK/kernels"

inspect=$("$VLMC" inspect "$ART" 2>&1) || true
expect_in "inspect says where the kernels ran" \
  "Metal kernels are generated, and executed on Linux in emulation; not yet run on Apple hardware" \
  "$inspect"
expect_in "the emulated backend checks the metal table" \
  "backend metal: table checked against the program; every dispatch has a kernel" "$inspect"
# every dispatch of the program has a metal kernel: the kernels' dispatch counts add up
dispatches=$(sed -nE 's/^metal kernels: .* ([0-9]+) kernels serve ([0-9]+) dispatches.*/\2/p' <<<"$inspect")
listed=$(awk '/^[a-z]/ {in_metal = /^metal kernels:/}
              in_metal && /^    vk[0-9]+ / {s += $3} END {print s}' <<<"$inspect")
if [ -n "$dispatches" ] && [ "$dispatches" = "$listed" ]; then
  ok "inspect lists a metal kernel for each of the $dispatches dispatches"
else
  fail "inspect: $dispatches dispatches, kernels listed for '$listed'"
fi
expect_in "inspect lists threadgroup memory" "B threadgroup memory" "$inspect"
expect_in "inspect lists the buffers" "[[buffer(0)]]" "$inspect"

# Each dumped kernel parses as C++17 against the stand-in (kernel functions, address spaces,
# attributes, the math and SIMD-group functions it uses).
n=0 bad=0
for f in "$WORK"/kernels/metal/*.metal; do
  n=$((n + 1))
  if ! "$CXX" -std=c++17 -fsyntax-only -w -x c++ -I tests/metal/include "$f" \
       2>"$WORK/parse.log"; then
    bad=$((bad + 1))
    echo "  $(basename "$f"): $(head -3 "$WORK/parse.log")"
  fi
done
if [ "$n" -gt 0 ] && [ "$bad" -eq 0 ]; then ok "all $n dumped .metal files parse against the stand-in"
else fail "$bad of $n dumped .metal files do not parse against the stand-in"; fi

text=$("$RUN_EMU" "$ART" --backend metal --quiet --image "$IMAGE" -p "$PROMPT" -n 16 \
         2>"$WORK/run.log") || true
if grep -qi "red square" <<<"$text" && grep -qi "green triangle" <<<"$text" &&
   grep -qi "blue circle" <<<"$text"; then
  ok "metal (emulated) names the three shapes: $text"
else
  fail "metal (emulated): '$text' ($(tail -3 "$WORK/run.log"))"
fi
out=$("$RUN" "$ART" --backend metal -p hi 2>&1) && fail "vlmc-run ran --backend metal" ||
  expect_in "vlmc-run has no metal backend here, by name" "the metal backend is built only on macOS" "$out"

# The planted bug.
for name in norm_rms_rows linear_f16_tiles; do
  "$VLMC" kernel-test --target metal --sizes 37 --save "$WORK/cases" --no-run \
    "tests/kernels/$name.vir" >/dev/null
  case=$WORK/cases/$name.37
  if "$KCHECK" "$case" >"$WORK/intact.log" 2>&1; then ok "$name: the intact kernel passes"
  else fail "$name: the intact kernel: $(tail -2 "$WORK/intact.log")"; fi
  cp -r "$case" "$case.planted"
  # blank it to the same length, so that the table's MSL offsets stay right
  python3 - "$case.planted/kernels.metal" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
m = re.search(r"threadgroup_barrier\([^;]*\);", text)
assert m, "no threadgroup_barrier in " + path
open(path, "w").write(text[:m.start()] + " " * (m.end() - m.start()) + text[m.end():])
PY
  if "$KCHECK" "$case.planted" >"$WORK/planted.log" 2>&1; then
    fail "$name without its first threadgroup_barrier still passes"
  else
    ok "$name without its first threadgroup_barrier is caught: $(grep -m1 '^FAIL' "$WORK/planted.log" | cut -c1-160)"
  fi
done
summary
