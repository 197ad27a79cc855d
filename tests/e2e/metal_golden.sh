#!/usr/bin/env bash
# Golden text of a few metal kernels (issue 18): the MSL the metal target writes for
# tests/kernels/NAME.vir at N = 37 against tests/metal/golden/NAME.metal, so that a change to
# the emitter (the vulkan target's SPIR-V, SPIRV-Cross's translation, the metal target's
# options) shows as a diff in review. Chosen to cover the kinds of kernel: elementwise with
# broadcasting, a cast with f16 rounding, a row reduction through simd_sum and threadgroup
# memory, and the vision tower's 2-D rope.
#   usage: metal_golden.sh VLMC          compare
#          metal_golden.sh VLMC --update rewrite the golden files (then review the diff)
set -euo pipefail
VLMC=$1
UPDATE=${2:-}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/lib.sh"
GOLDEN=tests/metal/golden

for name in elementwise_broadcast cast_round norm_rms_rows rope_vision_2d; do
  if ! "$VLMC" kernel-test --target metal --sizes 37 --save "$WORK" --no-run \
       "tests/kernels/$name.vir" >"$WORK/$name.log" 2>&1; then
    fail "$name: $(tail -2 "$WORK/$name.log")"
    continue
  fi
  got=$WORK/$name.37/kernels.metal
  if [ "$UPDATE" = "--update" ]; then
    cp "$got" "$GOLDEN/$name.metal"
    ok "$name: $GOLDEN/$name.metal rewritten"
  elif diff -u -a "$GOLDEN/$name.metal" "$got" >"$WORK/$name.diff"; then
    ok "$name: the MSL is the golden text ($(wc -c <"$got") bytes)"
  else
    head -40 "$WORK/$name.diff"
    fail "$name: the MSL differs from $GOLDEN/$name.metal (if the change is meant, rerun" \
         "with --update and commit the diff)"
  fi
done
summary
