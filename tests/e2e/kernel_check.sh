#!/usr/bin/env bash
# Saved kernel-test cases run without the compiler: `vlmc kernel-test --save DIR` writes each
# (file, size) as a folder, and `vlmc-kernel-check` (runtime only: no LLVM or MLIR linked)
# runs them against the reference executor, on the cpu and vulkan (lavapipe) targets, every
# variant class of the table; a kernel broken after saving fails there, and a folder that is
# not a saved case is refused by name. This is how the conformance suite runs on the GPU
# machine, where the compiler does not build (bench/vulkan_h200.sh).
#   usage: kernel_check.sh VLMC VLMC_KERNEL_CHECK
set -euo pipefail
VLMC=$1
CHECK=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/lib.sh"

if ldd "$CHECK" | grep -qiE 'llvm|mlir'; then fail "vlmc-kernel-check links LLVM/MLIR"; else
  ok "vlmc-kernel-check links no LLVM/MLIR"; fi

for target in cpu vulkan; do
  dir=$WORK/$target
  "$VLMC" kernel-test --target "$target" --sizes 37,1 --save "$dir" tests/kernels/linear_f16_tiles.vir \
    tests/kernels/attention_segments.vir >"$WORK/$target.test.txt"
  same "$target: saved cases" "$(ls "$dir" | tr '\n' ' ')" \
    "attention_segments.1 attention_segments.37 linear_f16_tiles.1 linear_f16_tiles.37 "
  rc=0
  "$CHECK" "$dir"/* >"$WORK/$target.check.txt" || rc=$?
  same "$target: vlmc-kernel-check exit status" "$rc" 0
  same "$target: one ok line per case" "$(grep -c '^ok ' "$WORK/$target.check.txt")" 4
done
# A saved case keeps the random state its inputs started from: on the cpu target (the same
# kernels, the same inputs) vlmc-kernel-check finds kernel-test's errors to the digit.
errors() { # FILE: "NAME.N ERROR" per ok line, sorted
  sed -nE 's|^ok   tests/kernels/([a-z0-9_]+)\.vir N=([0-9]+): max rel error ([^,]*),.*|\1.\2 \3|p;
           s|^ok   .*/([a-z0-9_]+)\.[0-9]+/case\.vir N=([0-9]+): max rel error ([^,]*),.*|\1.\2 \3|p' "$1" | sort
}
same "cpu: the same errors from the saved cases" "$(errors "$WORK/cpu.check.txt" | tr '\n' ' ')" \
  "$(errors "$WORK/cpu.test.txt" | tr '\n' ' ')"
# The vulkan table has variants (lanes for CPU devices, cooperative matrices for GPUs): every
# class runs from the saved case too.
expect_in "vulkan: kernel-test ran every variant class" "variants run: main,cpu,gpu" \
  "$(cat "$WORK/vulkan.test.txt")"
# lavapipe has no cooperative matrices: the gpu run of an f16 linear falls back to the main
# kernel, and the line says so (on the H200 it says "gpu 1").
expect_in "vulkan: the gpu run on lavapipe used no variant" "variant kernels used: cpu 1, gpu 0" \
  "$(grep 'linear_f16_tiles.37/' "$WORK/vulkan.check.txt")"
variant_runs() { # FILE: "NAME.N CLASSES" per ok line, sorted
  grep -o '^ok   .*variants run: [a-z,]*' "$1" |
    sed -E 's|^ok   tests/kernels/([a-z0-9_]+)\.vir N=([0-9]+):.*variants run: |\1.\2 |;
            s|^ok   .*/([a-z0-9_]+)\.[0-9]+/case\.vir N=([0-9]+):.*variants run: |\1.\2 |' | sort
}
same "vulkan: vlmc-kernel-check ran the same variant classes per case" \
  "$(variant_runs "$WORK/vulkan.check.txt" | tr '\n' ' ')" "$(variant_runs "$WORK/vulkan.test.txt" | tr '\n' ' ')"

# A kernel table that no longer matches its module (a work count off by one) fails the case.
sizeless=$WORK/sizeless
cp -r "$WORK/cpu/linear_f16_tiles.37" "$sizeless"
sed -i 's/"units_per_group": [0-9]*/"units_per_group": 0/' "$WORK/vulkan/linear_f16_tiles.37/kernels.vulkan.json"
rc=0
out=$("$CHECK" "$WORK/vulkan/linear_f16_tiles.37" 2>&1) || rc=$?
same "an edited table fails" "$rc" 1
expect_in "... naming the field" "target.units_per_group = 0" "$out"

# Not a case: no case-size, no kernel table, no folder.
sed -i '/case-size/d' "$sizeless/case.vir"
out=$("$CHECK" "$sizeless" 2>&1 || true)
expect_in "a case without its size is refused" "no \`// case-size: N\` line" "$out"
mkdir "$WORK/empty"
out=$("$CHECK" "$WORK/empty" 2>&1 || true)
expect_in "a folder without a kernel table is refused" "no kernels.<target>.json" "$out"
out=$("$CHECK" "$WORK/missing" 2>&1 || true)
expect_in "a missing folder is refused" "not a saved case folder" "$out"
rc=0
"$CHECK" >/dev/null 2>&1 || rc=$?
same "no arguments: usage, exit 2" "$rc" 2
summary
