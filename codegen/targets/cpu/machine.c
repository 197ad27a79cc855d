/* The cpu target's machine table (codegen/targets/cpu/machine.h). */
#include "codegen/targets/cpu/machine.h"

#include <string.h>

bool vlmc_cpu_has_feature(const char *features, const char *name) {
  size_t len = strlen(name);
  for (const char *p = features; p && *p;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == len + 1 && p[0] == '+' && !strncmp(p + 1, name, len)) return true;
    p = end ? end + 1 : NULL;
  }
  return false;
}

vlmc_cpu_machine_t vlmc_cpu_machine_for(const char *cpu, const char *features, int64_t l1d,
                                        int64_t l2) {
  vlmc_cpu_machine_t m = {4, 16, l1d > 0 ? l1d : VLMC_CPU_DEFAULT_L1D,
                          l2 > 0 ? l2 : VLMC_CPU_DEFAULT_L2, false};
  bool v4 = !strcmp(cpu, "x86-64-v4"), v3 = v4 || !strcmp(cpu, "x86-64-v3");
  if (v4 || vlmc_cpu_has_feature(features, "avx512f")) {
    m.vector_width = 16;
    m.vector_registers = 32;
  } else if (v3 || vlmc_cpu_has_feature(features, "avx2")) {
    m.vector_width = 8;
  }
  /* x86-64-v4 does not include AVX512_BF16: only a feature string (native) says so. */
  m.bf16_dot = m.vector_width == 16 && vlmc_cpu_has_feature(features, "avx512bf16");
  return m;
}
