/* The Metal emulation itself (tests/metal/README.md), on hand-written MSL: the SIMD-group
 * reduction over a full and a partial SIMD group, threadgroup memory across a barrier in
 * every threadgroup of a grid, a barrier some threads never reach reported as a hang, and
 * the 8x8 SIMD-group matrices (load, a transposed load, multiply-accumulate, store) against
 * a product in f64. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/metal/emu.h"
#include "tests/unit/test.h"

static vlmc_metal_kernel_t *build(const char *msl, const char *entry) {
  vlmc_metal_kernel_t *k = NULL;
  EXPECT_OK(vlmc_metal_kernel_build(msl, strlen(msl), entry, &k));
  return k;
}

static const char kSimdSum[] =
    "#include <metal_stdlib>\nusing namespace metal;\n"
    "kernel void k_sum(device float* out [[buffer(0)]],\n"
    "                  uint i [[thread_index_in_threadgroup]]) {\n"
    "  out[i] = simd_sum(float(i));\n"
    "  out[64 + i] = simd_max(float(i));\n"
    "}\n";

/* 48 threads: SIMD group 0 has 32 lanes, group 1 the other 16. */
static void test_simd_reductions(void) {
  vlmc_metal_kernel_t *k = build(kSimdSum, "k_sum");
  if (!k) return;
  float out[128] = {0};
  void *buffers[] = {out};
  uint32_t threads[3] = {48, 1, 1}, groups[3] = {1, 1, 1};
  EXPECT_OK(vlmc_metal_kernel_run(k, buffers, threads, groups));
  for (int i = 0; i < 48; ++i) {
    EXPECT_NEAR(out[i], i < 32 ? 496.0 : 632.0, 0);       /* 0+..+31, 32+..+47 */
    EXPECT_NEAR(out[64 + i], i < 32 ? 31.0 : 47.0, 0);
  }
  vlmc_metal_kernel_destroy(k);
}

static const char kReverse[] =
    "#include <metal_stdlib>\nusing namespace metal;\n"
    "kernel void k_rev(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],\n"
    "                  uint i [[thread_position_in_threadgroup]],\n"
    "                  uint g [[threadgroup_position_in_grid]]) {\n"
    "  threadgroup float tg[64];\n"
    "  tg[i] = in[g * 64 + i];\n"
    "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "  out[g * 64 + i] = tg[63 - i];\n"
    "}\n";

static void test_threadgroup_memory(void) {
  vlmc_metal_kernel_t *k = build(kReverse, "k_rev");
  if (!k) return;
  float in[192], out[192];
  for (int i = 0; i < 192; ++i) in[i] = (float)i, out[i] = -1;
  void *buffers[] = {in, out};
  uint32_t threads[3] = {64, 1, 1}, groups[3] = {3, 1, 1};
  EXPECT_OK(vlmc_metal_kernel_run(k, buffers, threads, groups));
  for (int g = 0; g < 3; ++g)
    for (int i = 0; i < 64; ++i) EXPECT_NEAR(out[g * 64 + i], g * 64 + 63 - i, 0);
  vlmc_metal_kernel_destroy(k);
}

static const char kHang[] =
    "#include <metal_stdlib>\nusing namespace metal;\n"
    "kernel void k_hang(device float* out [[buffer(0)]],\n"
    "                   uint i [[thread_position_in_threadgroup]]) {\n"
    "  if (i < 16) threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "  out[i] = 1.0;\n"
    "}\n";

static void test_barrier_not_reached_is_a_hang(void) {
  vlmc_metal_kernel_t *k = build(kHang, "k_hang");
  if (!k) return;
  float out[64] = {0};
  void *buffers[] = {out};
  uint32_t threads[3] = {64, 1, 1}, groups[3] = {1, 1, 1};
  EXPECT_ERROR(vlmc_metal_kernel_run(k, buffers, threads, groups), "hangs");
  vlmc_metal_kernel_destroy(k);
}

/* C (8x8) = A (8x16, rows of 16) x B (16x8), B given as its transpose Bt (8x16); two k steps
 * of 8, the second B block loaded transposed at origin (8, 0), C stored with 8 per row. */
static const char kMatmul[] =
    "#include <metal_stdlib>\nusing namespace metal;\n"
    "kernel void k_mm(device const float* a [[buffer(0)]], device const float* bt [[buffer(1)]],\n"
    "                 device float* c [[buffer(2)]]) {\n"
    "  simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.5f);\n"
    "  for (uint k = 0; k < 16; k += 8) {\n"
    "    simdgroup_float8x8 ma, mb;\n"
    "    simdgroup_load(ma, a, 16, ulong2(k, 0));\n"
    "    simdgroup_load(mb, bt, 16, ulong2(k, 0), true);\n"
    "    simdgroup_multiply_accumulate(acc, ma, mb, acc);\n"
    "  }\n"
    "  simdgroup_store(acc, c, 8);\n"
    "}\n";

static void test_simdgroup_matrix(void) {
  vlmc_metal_kernel_t *k = build(kMatmul, "k_mm");
  if (!k) return;
  float a[128], bt[128], c[64];
  for (int i = 0; i < 128; ++i) {
    a[i] = (float)((i * 37) % 17) / 8.0f - 1.0f;
    bt[i] = (float)((i * 11) % 13) / 6.0f - 1.0f;
  }
  void *buffers[] = {a, bt, c};
  uint32_t threads[3] = {32, 1, 1}, groups[3] = {1, 1, 1};
  EXPECT_OK(vlmc_metal_kernel_run(k, buffers, threads, groups));
  double worst = 0;
  for (int r = 0; r < 8; ++r)
    for (int j = 0; j < 8; ++j) {
      double want = 0.5;
      for (int q = 0; q < 16; ++q) want += (double)a[r * 16 + q] * bt[j * 16 + q];
      worst = fmax(worst, fabs(c[r * 8 + j] - want));
    }
  EXPECT_NEAR(worst, 0, 1e-5);
  vlmc_metal_kernel_destroy(k);
}

int main(void) {
  RUN_TEST(test_simd_reductions);
  RUN_TEST(test_threadgroup_memory);
  RUN_TEST(test_barrier_not_reached_is_a_hang);
  RUN_TEST(test_simdgroup_matrix);
  return TEST_SUMMARY();
}
