/* The vulkan target (codegen/targets/vulkan/): a small program's regions become SPIR-V
 * kernels that SPIRV-Tools accepts under Vulkan 1.1 rules, packed back to back in
 * "kernels.vulkan"; the table "kernels.vulkan.json" says what docs/vulkan.md's ABI says
 * (abi, entry = symbol, offsets and sizes inside the section, workgroup size, units per group,
 * push words = 1 + syms, features from the capabilities); an op without a template is refused
 * by name. */
#include <stdlib.h>
#include <string.h>

/* libspirv.h defines a const with external linkage when compiled as C, and the codegen
 * library's copy (codegen/targets/vulkan/lower.c) is linked in too: rename this one. */
#define kDefaultMaxIdBound test_kDefaultMaxIdBound
#include <spirv-tools/libspirv.h>
#undef kDefaultMaxIdBound

#include "artifact/kernel_table.h"
#include "codegen/target.h"
#include "ir/ir.h"
#include "support/strbuf.h"
#include "test.h"

/* A decode-like step over T tokens (a symbolic dim): a linear with a bf16 weight and a
 * residual add (one region), an rms_norm, a silu, and an argmax (i64 output). */
static const char kProgram[] =
    "param @w : bf16[4,8]\n"
    "param @g : f32[4]\n"
    "func @decode(%x: f32[T,8], %r: f32[T,4]) -> (f32[T,4], i64[T]) {\n"
    "  %0 = param @w : bf16[4,8]\n"
    "  %1 = cast %0 {dtype=f32} : f32[4,8]\n"
    "  %2 = linear %x, %1 : f32[T,4]\n"
    "  %3 = add %2, %r : f32[T,4]\n"
    "  %4 = param @g : f32[4]\n"
    "  %5 = rms_norm %3, %4 {eps=1e-6} : f32[T,4]\n"
    "  %6 = silu %5 : f32[T,4]\n"
    "  %7 = argmax %6 {axis=1} : i64[T]\n"
    "  return %6, %7\n"
    "}\n";

static vlmc_module_t *parse(const char *text) {
  vlmc_module_t *m = NULL;
  vlmc_parse_options_t po = {.filename = "target_vulkan.vir", .first_line = 1};
  EXPECT_OK(vlmc_module_parse(text, strlen(text), &po, &m));
  if (m) EXPECT_OK(vlmc_module_verify(m));
  return m;
}

static int64_t int_field(const vlmc_kernel_table_kernel_t *k, const char *key) {
  const vlmc_kernel_table_field_t *f = vlmc_kernel_table_kernel_field(k, key);
  EXPECT_TRUE(f && !f->string);
  return f && !f->string ? f->integer : -1;
}

static const char *string_field(const vlmc_kernel_table_kernel_t *k, const char *key) {
  const vlmc_kernel_table_field_t *f = vlmc_kernel_table_kernel_field(k, key);
  EXPECT_TRUE(f && f->string);
  return f && f->string ? f->string : "";
}

/* One kernel's table entry against its module in the section. */
static void check_kernel(const vlmc_kernel_table_kernel_t *k, const vlmc_target_section_t *code,
                         spv_context spirv) {
  EXPECT_STREQ(string_field(k, "entry"), k->symbol);
  int64_t offset = int_field(k, "spirv_offset"), size = int_field(k, "spirv_size");
  EXPECT_TRUE(offset >= 0 && offset % 4 == 0 && size > 20 && size % 4 == 0);
  EXPECT_TRUE(offset + size <= (int64_t)code->len);
  int64_t x = int_field(k, "workgroup_x"), y = int_field(k, "workgroup_y");
  int64_t z = int_field(k, "workgroup_z");
  EXPECT_TRUE(x >= 1 && y >= 1 && z >= 1 && x * y * z <= 1024);
  EXPECT_TRUE(int_field(k, "units_per_group") >= 1);
  EXPECT_EQ_INT(int_field(k, "push_words"), 1 + (int64_t)k->num_syms);
  EXPECT_TRUE(int_field(k, "shared_bytes") >= 0);
  if (offset < 0 || size <= 20 || offset + size > (int64_t)code->len) return;
  uint32_t *words = malloc((size_t)size);
  if (!words) return;
  memcpy(words, (const char *)code->data + offset, (size_t)size);
  EXPECT_EQ_INT(words[0], 0x07230203); /* the SPIR-V magic: a module starts here */
  spv_diagnostic diag = NULL;
  EXPECT_EQ_INT(spvValidateBinary(spirv, words, (size_t)size / 4, &diag), SPV_SUCCESS);
  if (diag) fprintf(stderr, "spirv-val: %s\n", diag->error);
  spvDiagnosticDestroy(diag);
  /* The argmax computes in i64 (Int64); the rest needs nothing beyond Vulkan 1.1. */
  const char *features = string_field(k, "features");
  if (!strcmp(k->template_name, "argmax")) EXPECT_TRUE(strstr(features, "shaderInt64") != NULL);
  EXPECT_TRUE(strstr(features, "shaderInt16") == NULL); /* bf16 is read as 32-bit words */
  free(words);
}

static void test_kernels_lower_validate_and_match_the_abi(void) {
  vlmc_module_t *m = parse(kProgram);
  if (!m) return;
  EXPECT_OK(vlmc_target_run_tail(&vlmc_target_vulkan, m));
  vlmc_target_config_t config;
  memset(&config, 0, sizeof config);
  vlmc_target_output_t out;
  EXPECT_OK(vlmc_target_generate(&vlmc_target_vulkan, m, &config, &out));
  const vlmc_target_section_t *code = vlmc_target_output_section(&out, "kernels.vulkan");
  const vlmc_target_section_t *json = vlmc_target_output_section(&out, "kernels.vulkan.json");
  EXPECT_TRUE(code && json);
  vlmc_kernel_table_t t;
  memset(&t, 0, sizeof t);
  if (code && json) {
    EXPECT_OK(vlmc_kernel_table_parse("test", "vulkan", json->data, json->len, &t));
    EXPECT_OK(vlmc_kernel_table_check(&t, m));
    EXPECT_STREQ(t.abi ? t.abi : "", "vulkan-spirv-1");
    const vlmc_kernel_table_field_t *version = vlmc_kernel_table_field(&t, "spirv_version");
    EXPECT_TRUE(version && version->string && !strcmp(version->string, "1.3"));
    /* The linear, attention, norm and rope regions also get a variant for CPU devices
     * (lavapipe; templates.c, vlmc_vk_variants_for). */
    size_t mains = 0, variants = 0;
    for (size_t i = 0; i < t.num_kernels; ++i) {
      const vlmc_kernel_table_kernel_t *k = &t.kernels[i];
      if (!k->is_variant) {
        ++mains;
        continue;
      }
      ++variants;
      EXPECT_TRUE(vlmc_kernel_table_variant_is_for(k, "cpu"));
      static const char *const kWithVariants[] = {"linear", "linear_tiles", "attention", "rms_norm",
                                                  "layer_norm", "rope_heads"};
      bool known = false;
      for (size_t n = 0; n < sizeof kWithVariants / sizeof kWithVariants[0]; ++n)
        known = known || !strcmp(k->template_name, kWithVariants[n]);
      EXPECT_TRUE(known);
    }
    EXPECT_TRUE(mains >= 3 && t.num_dispatches >= mains);
    EXPECT_TRUE(variants >= 1);
    spv_context spirv = spvContextCreate(SPV_ENV_VULKAN_1_1);
    int64_t covered = 0;
    bool reads_t = false;
    for (size_t i = 0; i < t.num_kernels; ++i) {
      check_kernel(&t.kernels[i], code, spirv);
      covered += int_field(&t.kernels[i], "spirv_size");
      for (uint32_t s = 0; s < t.kernels[i].num_syms; ++s)
        reads_t |= !strcmp(t.kernels[i].syms[s], "T");
    }
    EXPECT_EQ_INT(covered, (int64_t)code->len); /* back to back, nothing else */
    EXPECT_TRUE(reads_t); /* T travels as a push constant */
    spvContextDestroy(spirv);
  }
  vlmc_kernel_table_deinit(&t);
  vlmc_target_output_free(&out);
  vlmc_module_destroy(m);
}

/* window_attention has no template (window-reorder lowers it before codegen in a real
 * pipeline): the driver refuses its region by function, id and op. */
static void test_unsupported_op_is_refused_by_name(void) {
  vlmc_module_t *m = parse(
      "func @direct(%q: f32[P, 2, 8], %k: f32[P, 2, 8], %v: f32[P, 2, 8], %grid: i64[N, 3]) ->"
      " f32[P, 2, 8] {\n"
      "  %y = window_attention %q, %k, %v, %grid {window = 112, patch = 14, merge = 2} :"
      " f32[P, 2, 8]\n"
      "  return %y\n"
      "}\n");
  if (!m) return;
  EXPECT_OK(vlmc_target_run_tail(&vlmc_target_vulkan, m));
  vlmc_target_config_t config;
  memset(&config, 0, sizeof config);
  vlmc_target_output_t out;
  EXPECT_ERROR(vlmc_target_generate(&vlmc_target_vulkan, m, &config, &out),
               "target vulkan: @direct dispatch 1 (window_attention) is not supported");
  vlmc_module_destroy(m);
}

/* The precision policy: f32 and f16, f32 by default; bf16 refused with the target's note. */
static void test_precisions(void) {
  vlmc_target_list_t list;
  EXPECT_OK(vlmc_target_list_parse("ref,vulkan", &list));
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  EXPECT_OK(vlmc_target_list_pipeline(&list, "f16", &out));
  EXPECT_TRUE(strstr(vlmc_strbuf_cstr(&out), "precision{target=f16}") != NULL);
  vlmc_strbuf_clear(&out);
  EXPECT_ERROR(vlmc_target_list_pipeline(&list, "bf16", &out), "--precision bf16 with --target vulkan");
  vlmc_strbuf_deinit(&out);
}

int main(void) {
  RUN_TEST(test_kernels_lower_validate_and_match_the_abi);
  RUN_TEST(test_unsupported_op_is_refused_by_name);
  RUN_TEST(test_precisions);
  return TEST_SUMMARY();
}
