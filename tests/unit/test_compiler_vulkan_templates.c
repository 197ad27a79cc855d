/* The vulkan target's hot templates keep their GPU structure (codegen/targets/vulkan/
 * kernel_linear.c, kernel_linear_tiles.c, kernel_norm.c, kernel_attention.c, kernel_attention_decode.c): the workgroup shapes and units per
 * group their comments promise, subgroup reductions where they reduce (the table's
 * subgroupArithmetic feature comes from the SPIR-V capabilities actually used), workgroup
 * memory where they tile, and at most the 16 KiB of workgroup memory every Vulkan device has,
 * for the Qwen2.5-VL shapes (vision window attention: 16 heads of 80 over segments; a decode
 * step: 16 query heads over 2 kv heads of 128). Numerical correctness is the kernel tests'
 * (the tests/kernels files, `kernel.vulkan.NAME` in ctest). */
#include <string.h>

#include "artifact/kernel_table.h"
#include "codegen/target.h"
#include "ir/ir.h"
#include "test.h"

static const char kProgram[] =
    "param @w : bf16[40,300]\n"
    "param @g : f32[300]\n"
    "func @k(%x: f32[S,300], %q: f32[S,16,80], %kk: f32[S,16,80], %v: f32[S,16,80],\n"
    "        %cu: i64[W], %dq: f32[1,16,128], %dk: f32[T,2,128], %dv: f32[T,2,128],\n"
    "        %m: f32[S,7,9], %a: f32[S,5], %b: f32[5,6], %dx: f32[1,300])\n"
    "    -> (f32[S,40], f32[S,16,80], f32[1,16,128], f32[S,7,9], f32[S,6], f32[1,40]) {\n"
    "  %0 = param @g : f32[300]\n"
    "  %1 = rms_norm %x, %0 {eps=1e-6} : f32[S,300]\n"
    "  %2 = param @w : bf16[40,300]\n"
    "  %3 = cast %2 {dtype=f32} : f32[40,300]\n"
    "  %4 = linear %1, %3 : f32[S,40]\n"
    "  %5 = attention %q, %kk, %v, %cu : f32[S,16,80]\n"
    "  %6 = attention %dq, %dk, %dv {causal=true} : f32[1,16,128]\n"
    "  %7 = softmax %m {axis=1} : f32[S,7,9]\n"
    "  %8 = matmul %a, %b : f32[S,6]\n"
    "  %9 = linear %dx, %3 : f32[1,40]\n"
    "  return %4, %5, %6, %7, %8, %9\n"
    "}\n";

static int64_t int_field(const vlmc_kernel_table_kernel_t *k, const char *key) {
  const vlmc_kernel_table_field_t *f = vlmc_kernel_table_kernel_field(k, key);
  EXPECT_TRUE(f && !f->string);
  return f && !f->string ? f->integer : -1;
}

static bool has_feature(const vlmc_kernel_table_kernel_t *k, const char *name) {
  const vlmc_kernel_table_field_t *f = vlmc_kernel_table_kernel_field(k, "features");
  return f && f->string && strstr(f->string, name) != NULL;
}

/* The kernel of template `name` reading `inputs` region inputs, or NULL. */
static const vlmc_kernel_table_kernel_t *find(const vlmc_kernel_table_t *t, const char *name,
                                              uint32_t inputs) {
  for (size_t i = 0; i < t->num_kernels; ++i)
    if (!strcmp(t->kernels[i].template_name, name) && t->kernels[i].num_inputs == inputs)
      return &t->kernels[i];
  return NULL;
}

/* Workgroup [x, 1, 1], units per group, whether it uses subgroup reductions, and whether
 * its workgroup memory is above `min_shared` bytes and within 16 KiB. */
static void expect_shape(const vlmc_kernel_table_kernel_t *k, const char *what, int64_t x,
                         int64_t units, bool subgroups, int64_t min_shared) {
  EXPECT_TRUE(k != NULL);
  if (!k) {
    fprintf(stderr, "no kernel for %s\n", what);
    return;
  }
  EXPECT_EQ_INT(int_field(k, "workgroup_x"), x);
  EXPECT_EQ_INT(int_field(k, "workgroup_y"), 1);
  EXPECT_EQ_INT(int_field(k, "units_per_group"), units);
  EXPECT_EQ_INT(has_feature(k, "subgroupArithmetic"), subgroups);
  int64_t shared = int_field(k, "shared_bytes");
  EXPECT_TRUE(shared > min_shared && shared <= 16384);
  if (!(shared > min_shared && shared <= 16384))
    fprintf(stderr, "%s: %lld bytes of workgroup memory\n", what, (long long)shared);
}

static void test_hot_templates_keep_their_gpu_structure(void) {
  vlmc_module_t *m = NULL;
  vlmc_parse_options_t po = {.filename = "vulkan_templates.vir", .first_line = 1};
  EXPECT_OK(vlmc_module_parse(kProgram, strlen(kProgram), &po, &m));
  if (!m) return;
  EXPECT_OK(vlmc_module_verify(m));
  EXPECT_OK(vlmc_target_run_tail(&vlmc_target_vulkan, m));
  vlmc_target_config_t config;
  memset(&config, 0, sizeof config);
  vlmc_target_output_t out;
  EXPECT_OK(vlmc_target_generate(&vlmc_target_vulkan, m, &config, &out));
  const vlmc_target_section_t *json = vlmc_target_output_section(&out, "kernels.vulkan.json");
  EXPECT_TRUE(json != NULL);
  vlmc_kernel_table_t t;
  memset(&t, 0, sizeof t);
  if (json) {
    EXPECT_OK(vlmc_kernel_table_parse("test", "vulkan", json->data, json->len, &t));
    EXPECT_OK(vlmc_kernel_table_check(&t, m));
    /* a row per 128-invocation workgroup; partials reduced by subgroup, then in memory */
    expect_shape(find(&t, "rms_norm", 2), "rms_norm", 128, 1, true, 0);
    expect_shape(find(&t, "softmax", 1), "softmax", 128, 1, true, 0);
    /* 64 x 64 output tiles by 256 invocations, a quarter tile's units a group; the x and W
     * tiles of 16 k (stride 65) in memory */
    expect_shape(find(&t, "linear_tiles", 2), "linear_tiles", 256, 64 * 64 / 4 / 4, false,
                 4 * 2 * 16 * 65 - 1);
    /* the decode GEMV: a unit (4 features) per 128 invocations, the subgroups' partials in
     * memory */
    expect_shape(find(&t, "linear", 2), "decode linear", 128, 1, true, 4 * 2 * 4 * 128 - 1);
    /* vision: an invocation per (row, head) slot, 64 query rows share each K/V tile (24 keys
     * of 80 + 80) of one kv head: 64 units a workgroup */
    expect_shape(find(&t, "attention", 4), "vision attention", 64, 64, false,
                 4 * 16 * (80 + 80));
    /* decode (kernel_attention_decode.c): one (row, kv head) unit per workgroup of 8 query
     * heads x 32 invocations; the max partials and the weights of a chunk of 32 keys, and its
     * K rows in two parts of 64 columns (stride 65) in memory */
    expect_shape(find(&t, "attention", 3), "decode attention", 256, 1, false,
                 4 * (256 + 8 * 32 + 32 * 65) - 1);
    expect_shape(find(&t, "matmul", 2), "matmul", 64, 1, false, 0);
  }
  vlmc_kernel_table_deinit(&t);
  vlmc_target_output_free(&out);
  vlmc_module_destroy(m);
}

int main(void) {
  RUN_TEST(test_hot_templates_keep_their_gpu_structure);
  return TEST_SUMMARY();
}
