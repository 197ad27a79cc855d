/* The cpu target's machine table (codegen/targets/cpu/machine.h) and its choice through the
 * lowerer (lower.h): each --cpu level's vector width and register count, exact feature
 * matching in LLVM's feature strings, cache sizes, and `native` on this host agreeing with
 * what /proc/cpuinfo says it has (AVX-512: 16 lanes; AVX2: 8). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/targets/cpu/lower.h"
#include "codegen/targets/cpu/machine.h"
#include "test.h"

static void test_levels(void) {
  vlmc_cpu_machine_t m = vlmc_cpu_machine_for("x86-64", "", 0, 0);
  EXPECT_EQ_INT(m.vector_width, 4);
  EXPECT_EQ_INT(m.vector_registers, 16);
  EXPECT_EQ_INT(m.l1d_bytes, VLMC_CPU_DEFAULT_L1D);
  EXPECT_EQ_INT(m.l2_bytes, VLMC_CPU_DEFAULT_L2);
  EXPECT_TRUE(!m.bf16_dot);
  m = vlmc_cpu_machine_for("x86-64-v2", "", 0, 0);
  EXPECT_EQ_INT(m.vector_width, 4);
  m = vlmc_cpu_machine_for("x86-64-v3", "", 0, 0);
  EXPECT_EQ_INT(m.vector_width, 8);
  EXPECT_EQ_INT(m.vector_registers, 16);
  m = vlmc_cpu_machine_for("x86-64-v4", "", 0, 0);
  EXPECT_EQ_INT(m.vector_width, 16);
  EXPECT_EQ_INT(m.vector_registers, 32);
  EXPECT_TRUE(!m.bf16_dot); /* v4 does not include AVX512_BF16 */
}

static void test_features(void) {
  /* A host string as LLVM writes it: enabled and disabled features, names that share a
   * prefix with another (avx512fp16 is not avx512f). */
  vlmc_cpu_machine_t m = vlmc_cpu_machine_for("znver5", "+avx2,-avx512f,+avx512fp16,+sse4.2", 49152, 1048576);
  EXPECT_EQ_INT(m.vector_width, 8);
  EXPECT_EQ_INT(m.vector_registers, 16);
  EXPECT_EQ_INT(m.l1d_bytes, 49152);
  EXPECT_EQ_INT(m.l2_bytes, 1048576);
  m = vlmc_cpu_machine_for("znver5", "+avx2,+avx512f,+avx512bf16", 0, 0);
  EXPECT_EQ_INT(m.vector_width, 16);
  EXPECT_EQ_INT(m.vector_registers, 32);
  EXPECT_TRUE(m.bf16_dot);
  m = vlmc_cpu_machine_for("haswell", "+avx2,+avx512bf16", 0, 0); /* bf16 needs AVX-512 */
  EXPECT_TRUE(!m.bf16_dot);
  EXPECT_TRUE(vlmc_cpu_has_feature("+a,+b", "b"));
  EXPECT_TRUE(!vlmc_cpu_has_feature("+ab", "a"));
  EXPECT_TRUE(!vlmc_cpu_has_feature("-a", "a"));
  EXPECT_TRUE(!vlmc_cpu_has_feature("", "a"));
}

/* A 16-lane FMA kernel, as the templates write them at x86-64-v4. */
static const char kWideKernel[] =
    "func.func @wide_body(%b0: memref<?xf32>, %out: memref<?xf32>, %lo: index, %hi: index) {\n"
    "  %v = vector.load %b0[%lo] : memref<?xf32>, vector<16xf32>\n"
    "  %w = vector.fma %v, %v, %v : vector<16xf32>\n"
    "  vector.store %w, %out[%lo] : memref<?xf32>, vector<16xf32>\n"
    "  return\n"
    "}\n";

/* The assembly `cpu` (and the vector-width option, NULL for none) makes of kWideKernel. */
static char *wide_assembly(const char *cpu, const char *lanes) {
  char dir[] = "/tmp/vlmc-cpu-machine-XXXXXX";
  if (!mkdtemp(dir)) return NULL;
  vlmc_cpu_lowerer_t *l = NULL;
  EXPECT_OK(vlmc_cpu_lowerer_create(cpu, dir, &l));
  char *text = NULL;
  if (l && lanes) EXPECT_OK(vlmc_cpu_lowerer_set_vector_width(l, lanes));
  if (l) EXPECT_OK(vlmc_cpu_lowerer_add(l, "wide", kWideKernel));
  vlmc_cpu_lowerer_destroy(l);
  static const char *kSuffixes[] = {".mlir", ".lowered.mlir", ".ll", ".s"};
  for (size_t i = 0; i < sizeof kSuffixes / sizeof kSuffixes[0]; ++i) {
    char path[128];
    snprintf(path, sizeof path, "%s/wide%s", dir, kSuffixes[i]);
    if (!strcmp(kSuffixes[i], ".s")) {
      FILE *f = fopen(path, "r");
      if (f) {
        text = calloc(1, 1 << 16);
        if (text) fread(text, 1, (1 << 16) - 1, f);
        fclose(f);
      }
    }
    unlink(path);
  }
  rmdir(dir);
  return text;
}

/* x86-64-v4 keeps the templates' 512-bit vectors whole (one zmm FMA, not two ymm halves);
 * the same text for x86-64-v3 at vector-width=16 is split into AVX2 registers. Only code
 * generation: it runs on any CPU. */
static void test_wide_code(void) {
  char *v4 = wide_assembly("x86-64-v4", NULL);
  EXPECT_TRUE(v4 && strstr(v4, "vfmadd") && strstr(v4, "zmm"));
  free(v4);
  char *v3 = wide_assembly("x86-64-v3", "16");
  EXPECT_TRUE(v3 && strstr(v3, "vfmadd") && strstr(v3, "ymm") && !strstr(v3, "zmm"));
  free(v3);
  vlmc_cpu_lowerer_t *l = NULL;
  EXPECT_OK(vlmc_cpu_lowerer_create("portable", NULL, &l));
  if (l) {
    EXPECT_ERROR(vlmc_cpu_lowerer_set_vector_width(l, "12"), "expected 4, 8 or 16");
    EXPECT_OK(vlmc_cpu_lowerer_set_vector_width(l, "16"));
    EXPECT_EQ_INT(vlmc_cpu_lowerer_machine(l)->vector_width, 16);
    EXPECT_EQ_INT(vlmc_cpu_lowerer_machine(l)->vector_registers, 32);
  }
  vlmc_cpu_lowerer_destroy(l);
}

/* Whether /proc/cpuinfo's flags line lists `flag` (a word of it). */
static int cpuinfo_has(const char *flag) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return -1;
  char line[8192];
  int found = 0;
  size_t n = strlen(flag);
  while (!found && fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5)) continue;
    for (char *p = strstr(line, flag); p && !found; p = strstr(p + 1, flag))
      found = (p[-1] == ' ' || p[-1] == '\t') && (p[n] == ' ' || p[n] == '\n');
    break;
  }
  fclose(f);
  return found;
}

static void test_lowerer_levels(void) {
  static const struct { const char *cpu; int width; } kLevels[] = {
      {"portable", 4}, {"x86-64-v2", 4}, {"x86-64-v3", 8}, {"x86-64-v4", 16}};
  for (size_t i = 0; i < sizeof kLevels / sizeof kLevels[0]; ++i) {
    vlmc_cpu_lowerer_t *l = NULL;
    EXPECT_OK(vlmc_cpu_lowerer_create(kLevels[i].cpu, NULL, &l));
    if (!l) continue;
    EXPECT_EQ_INT(vlmc_cpu_lowerer_vector_width(l), kLevels[i].width);
    EXPECT_EQ_INT(vlmc_cpu_lowerer_machine(l)->vector_width, kLevels[i].width);
    vlmc_cpu_lowerer_destroy(l);
  }
  vlmc_cpu_lowerer_t *l = NULL;
  EXPECT_ERROR(vlmc_cpu_lowerer_create("x86-64-v5", NULL, &l), "x86-64-v4");
}

static void test_native_matches_host(void) {
  int avx512 = cpuinfo_has("avx512f"), avx2 = cpuinfo_has("avx2"), bf16 = cpuinfo_has("avx512_bf16");
  if (avx512 < 0) {
    printf("skipped: no /proc/cpuinfo to compare `native` with\n");
    return;
  }
  vlmc_cpu_lowerer_t *l = NULL;
  EXPECT_OK(vlmc_cpu_lowerer_create("native", NULL, &l));
  if (!l) return;
  const vlmc_cpu_machine_t *m = vlmc_cpu_lowerer_machine(l);
  EXPECT_EQ_INT(m->vector_width, avx512 ? 16 : avx2 ? 8 : 4);
  EXPECT_EQ_INT(m->vector_registers, avx512 ? 32 : 16);
  EXPECT_EQ_INT(m->bf16_dot, avx512 && bf16);
  EXPECT_TRUE(m->l1d_bytes >= 4096 && m->l2_bytes >= m->l1d_bytes);
  printf("native: %s, %d-wide f32 vectors, %d registers, L1d %lld, L2 %lld bytes, bf16 dot %s\n",
         vlmc_cpu_lowerer_cpu(l), m->vector_width, m->vector_registers, (long long)m->l1d_bytes,
         (long long)m->l2_bytes, m->bf16_dot ? "yes" : "no");
  vlmc_cpu_lowerer_destroy(l);
}

int main(void) {
  RUN_TEST(test_levels);
  RUN_TEST(test_features);
  RUN_TEST(test_lowerer_levels);
  RUN_TEST(test_native_matches_host);
  RUN_TEST(test_wide_code);
  return TEST_SUMMARY();
}
