#!/usr/bin/env bash
# kernel_cpu_level.sh VLMC FLAG CPU FILE.vir: `vlmc kernel-test FILE.vir` with the cpu target's
# options CPU (VLMC_KERNEL_TEST_CPU, e.g. "x86-64-v4", "x86-64-v3,vector-width=16" or "native"), when
# this CPU has FLAG (a /proc/cpuinfo flag: avx512f for x86-64-v4, avx2 for x86-64-v3,
# avx512_bf16 for the native bf16 dot products); else it
# prints why and exits 77, which ctest reports as skipped (SKIP_RETURN_CODE).
set -euo pipefail
vlmc=$1 flag=$2 cpu=$3 file=$4
if ! grep -qw -- "$flag" /proc/cpuinfo 2>/dev/null; then
  echo "skipped: this CPU has no $flag (/proc/cpuinfo): kernels for cpu=$cpu cannot run here"
  exit 77
fi
VLMC_KERNEL_TEST_CPU=$cpu exec "$vlmc" kernel-test "$file"
