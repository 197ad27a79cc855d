#!/usr/bin/env bash
# The kernel conformance suite on the GPU machine (an H200): every tests/kernels case, compiled
# here for vulkan and saved by bench/vulkan_h200.sh (`vlmc kernel-test --save .h200/kcases
# --no-run`, packed as .h200/kcases.tar.xz), run there by vlmc-kernel-check against the
# reference executor with the main kernels and then each variant class the case's table has
# ("cpu": the lanes variants; "gpu": the cooperative-matrix ones, which only a GPU with
# VK_KHR_cooperative_matrix runs). Its own device call, apart from bench/vulkan_h200_device.sh,
# so that neither outgrows a call's limit.
#
#   bench/vulkan_h200_kernels.sh     (through the device tool, carrying .h200 and .gl)
#
# Writes to $OUT (or ./h200-out): kernel_check.txt, one line per case (a case whose gpu run
# took the cooperative-matrix variant says "variant kernels used: ..., gpu 1"), the exit
# status last.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/h200_lib.sh  # H, W, the environment; h200_vulkan
OUT=${OUT:-$PWD/h200-out}
mkdir -p "$OUT"
rm -rf "$W/kcases" && tar -C "$W" -xJf "$H/kcases.tar.xz" || exit 1
K=$W/kcases
h200_vulkan >"$OUT/vulkan_setup.txt" 2>&1
"$H/vlmc-run" --list-devices 2>&1 | tee "$OUT/devices.txt"
echo "== vlmc-kernel-check: $(ls -d "$K"/* | wc -l) cases ($(date +%T))"
"$H/vlmc-kernel-check" "$K"/* >"$OUT/kernel_check.txt" 2>&1
echo "vlmc-kernel-check exit status $?" >>"$OUT/kernel_check.txt"
grep -E '^FAIL|^kernel-check|exit status' "$OUT/kernel_check.txt" | tail -30
echo "f16 linear cases whose gpu run took the cooperative-matrix variant:" \
  "$(grep -c '^ok .*/linear_f16_.*gpu 1' "$OUT/kernel_check.txt") of $(ls -d "$K"/linear_f16_* | wc -l)"
echo "== done ($(date +%T))"
