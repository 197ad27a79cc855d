#!/usr/bin/env bash
# The kernel conformance suite on the GPU machine (an H200): every tests/kernels case, compiled
# here for vulkan and saved by bench/vulkan_h200.sh (`vlmc kernel-test --save .h200/kcases
# --no-run`, packed as .h200/kcases.tar.xz), run there by vlmc-kernel-check against the
# reference executor with the main kernels and then each variant class the case's table has ("cpu": the lanes variants; "gpu":
# the cooperative-matrix ones, which only a GPU with VK_KHR_cooperative_matrix runs). Its own
# device call, apart from bench/vulkan_h200_device.sh, so that neither outgrows a call's limit.
#
#   bench/vulkan_h200_kernels.sh     (through the device tool, carrying .h200 and .gl)
#
# Writes to $OUT (or ./h200-out): kernel_check.txt (one line per case, the exit status last)
# and kernel_check_coop.txt (the f16 linear cases again with VLMC_VULKAN_PROFILE=1: a case
# whose gpu run took the cooperative-matrix variant says "1 kernel run as the variant for gpu
# devices").
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
echo "== the f16 linear cases with VLMC_VULKAN_PROFILE=1 ($(date +%T))"
for c in "$K"/linear_f16_*; do
  VLMC_VULKAN_PROFILE=1 "$H/vlmc-kernel-check" "$c" 2>&1 | grep -E '^(ok|FAIL)|variant for gpu'
done >"$OUT/kernel_check_coop.txt"
echo "gpu-variant runs among $(ls -d "$K"/linear_f16_* | wc -l) f16 linear cases:" \
  "$(grep -c 'run as the variant for gpu devices' "$OUT/kernel_check_coop.txt")"
grep FAIL "$OUT/kernel_check_coop.txt" | head
echo "== done ($(date +%T))"
