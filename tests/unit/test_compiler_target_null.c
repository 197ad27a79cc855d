/* The target interface (codegen/target.h) through its skeleton, the null target: the registry,
 * target lists, the default pipeline from the targets' precision policy and pipeline tail,
 * target options, and the driver refusing a region the target does not support, by name. */
#include <stdlib.h>
#include <string.h>

#include "codegen/target.h"
#include "ir/ir.h"
#include "passes/pass.h"
#include "support/strbuf.h"
#include "test.h"

/* A small decode step: a linear whose weight is widened from bf16 as it loads (a prologue),
 * then a residual add (an epilogue); fuse makes it one region, dispatch 1, anchored at the
 * linear. */
static const char kProgram[] =
    "param @w : bf16[4,8]\n"
    "func @decode(%x: f32[1,8], %r: f32[1,4]) -> f32[1,4] {\n"
    "  %0 = param @w : bf16[4,8]\n"
    "  %1 = cast %0 {dtype=f32} : f32[4,8]\n"
    "  %2 = linear %x, %1 : f32[1,4]\n"
    "  %3 = add %2, %r : f32[1,4]\n"
    "  return %3\n"
    "}\n";

static vlmc_module_t *parse_program(void) {
  vlmc_module_t *m = NULL;
  vlmc_parse_options_t po = {.filename = "target_null_program.vir", .first_line = 1};
  EXPECT_OK(vlmc_module_parse(kProgram, strlen(kProgram), &po, &m));
  if (m) EXPECT_OK(vlmc_module_verify(m));
  return m;
}


static void test_registry(void) {
  EXPECT_EQ_INT(vlmc_target_count(), 5);
  EXPECT_TRUE(vlmc_target_find("ref") == &vlmc_target_ref);
  EXPECT_TRUE(vlmc_target_find("cpu") == &vlmc_target_cpu);
  EXPECT_TRUE(vlmc_target_find("null") == &vlmc_target_null);
  EXPECT_TRUE(vlmc_target_find("vulkan") == &vlmc_target_vulkan);
  EXPECT_TRUE(vlmc_target_find("metal") == &vlmc_target_metal);
  EXPECT_TRUE(vlmc_target_find("npu") == NULL);
  for (size_t i = 0; i < vlmc_target_count(); ++i) {
    const vlmc_target_t *t = vlmc_target_at(i);
    EXPECT_TRUE(t->name && t->summary && t->precisions && t->precision_note);
    /* A target writes kernels with all five kernel entries or with none (ref). */
    bool any = t->supports || t->create || t->emit_region || t->finish || t->destroy;
    bool all = t->supports && t->create && t->emit_region && t->finish && t->destroy;
    EXPECT_TRUE(any == all);
  }
  vlmc_strbuf_t names;
  vlmc_strbuf_init(&names);
  vlmc_target_names(&names);
  EXPECT_STREQ(vlmc_strbuf_cstr(&names), "ref, cpu, null, vulkan, metal");
  vlmc_strbuf_deinit(&names);
}

static void test_lists(void) {
  vlmc_target_list_t list;
  EXPECT_OK(vlmc_target_list_parse("ref,cpu", &list));
  EXPECT_EQ_INT(list.count, 2);
  EXPECT_OK(vlmc_target_list_parse(NULL, &list));
  EXPECT_TRUE(list.count == 1 && list.targets[0] == &vlmc_target_ref);
  EXPECT_ERROR(vlmc_target_list_parse("ref,npu", &list),
               "--target ref,npu: unknown target 'npu'; targets: ref, cpu, null, vulkan, metal");
}

static void expect_pipeline(const char *targets, const char *precision, const char *expected) {
  vlmc_target_list_t list;
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  EXPECT_OK(vlmc_target_list_parse(targets, &list));
  EXPECT_OK(vlmc_target_list_pipeline(&list, precision, &out));
  EXPECT_STREQ(vlmc_strbuf_cstr(&out), expected);
  vlmc_strbuf_deinit(&out);
}

static vlmc_status_t pipeline_error(const char *targets, const char *precision) {
  vlmc_target_list_t list;
  VLMC_RETURN_IF_ERROR(vlmc_target_list_parse(targets, &list));
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  vlmc_status_t st = vlmc_target_list_pipeline(&list, precision, &out);
  vlmc_strbuf_deinit(&out);
  return st;
}

static void test_default_pipeline(void) {
  const char *common = "mrope-layout,window-reorder,canonicalize,cse,dce,";
  char expected[256];
  snprintf(expected, sizeof expected, "%sprecision{target=ref}", common);
  expect_pipeline("ref", "auto", expected);
  snprintf(expected, sizeof expected, "%sprecision{target=f16}", common);
  expect_pipeline("ref", "f16", expected);
  snprintf(expected, sizeof expected, "%sprecision{target=ref},fuse,memory-plan", common);
  expect_pipeline("ref,cpu", "auto", expected);
  expect_pipeline("ref,null", "f32", expected);
  /* fusions: on where every kernel target serves them (vulkan and metal fold a one-row norm
   * into its linears; cpu does not: an artifact with both fuses as cpu can run) */
  snprintf(expected, sizeof expected, "%sprecision{target=f16},fuse{norm-prologue=true},memory-plan",
           common);
  expect_pipeline("ref,vulkan", "f16", expected);
  expect_pipeline("vulkan,metal", "f16", expected);
  snprintf(expected, sizeof expected, "%sprecision{target=ref},fuse,memory-plan", common);
  expect_pipeline("cpu,vulkan", "f32", expected);
  expect_pipeline("vulkan,null", "f32", expected);
  EXPECT_ERROR(pipeline_error("ref,cpu", "bf16"),
               "--precision bf16 with --target cpu: cpu kernels compute in f32 (weights stay "
               "in their bf16 / f16 storage), or with bf16-matmul in f32 with linears on "
               "bf16-rounded inputs (a bf16 dot product where the CPU has AVX512_BF16); use "
               "--precision f32 or bf16-matmul, or --target ref");
  EXPECT_ERROR(pipeline_error("ref,null", "f16"),
               "--precision f16 with --target null: the null target is a skeleton and computes "
               "nothing; use --precision f32, or --target ref");
  EXPECT_ERROR(pipeline_error("ref", "f8"),
               "--precision f8: expected auto, f32, f16, bf16 or bf16-matmul");
}

static void test_options(void) {
  vlmc_target_config_t config;
  memset(&config, 0, sizeof config);
  EXPECT_OK(vlmc_target_config_set_options(&config, "cpu=x86-64-v3,cpu=native"));
  EXPECT_STREQ(vlmc_target_config_option(&config, "cpu"), "native"); /* the later one wins */
  EXPECT_TRUE(vlmc_target_config_option(&config, "arch") == NULL);
  EXPECT_ERROR(vlmc_target_config_set_options(&config, "arch=sm_90"),
               "target option 'arch': no target takes it; options: cpu (target cpu)");
  EXPECT_ERROR(vlmc_target_config_set_options(&config, "cpu"), "expected key=value");
}

/* The null target refuses the fused program's region by function, id and anchor. */
static void test_null_refuses_region_by_name(void) {
  vlmc_module_t *m = parse_program();
  if (!m) return;
  EXPECT_OK(vlmc_target_run_tail(&vlmc_target_null, m));
  vlmc_target_config_t config;
  memset(&config, 0, sizeof config);
  vlmc_target_output_t out;
  EXPECT_ERROR(vlmc_target_generate(&vlmc_target_null, m, &config, &out),
               "target null: @decode dispatch 1 (linear) is not supported");
  EXPECT_TRUE(out.state == NULL && out.sections.count == 0); /* freed on the error */
  vlmc_module_destroy(m);
}

/* Without the fuse pass there are no regions to hand a kernel target: said at compile time. */
static void test_unfused_program_is_refused(void) {
  vlmc_module_t *m = parse_program();
  if (!m) return;
  vlmc_target_config_t config;
  memset(&config, 0, sizeof config);
  vlmc_target_output_t out;
  EXPECT_ERROR(vlmc_target_generate(&vlmc_target_null, m, &config, &out),
               "@decode: 'cast' (line 4) is in no dispatch region: the null target needs the "
               "fuse pass at the end of the pipeline");
  vlmc_module_destroy(m);
}

/* ref carries the program only: no regions needed, no sections made. */
static void test_ref_makes_no_sections(void) {
  vlmc_module_t *m = parse_program();
  if (!m) return;
  vlmc_target_config_t config;
  memset(&config, 0, sizeof config);
  vlmc_target_output_t out;
  EXPECT_OK(vlmc_target_generate(&vlmc_target_ref, m, &config, &out));
  EXPECT_EQ_INT(out.sections.count, 0);
  EXPECT_TRUE(vlmc_target_output_section(&out, "kernels.cpu") == NULL);
  vlmc_target_output_free(&out);
  vlmc_module_destroy(m);
}

int main(void) {
  RUN_TEST(test_registry);
  RUN_TEST(test_lists);
  RUN_TEST(test_default_pipeline);
  RUN_TEST(test_options);
  RUN_TEST(test_null_refuses_region_by_name);
  RUN_TEST(test_unfused_program_is_refused);
  RUN_TEST(test_ref_makes_no_sections);
  return TEST_SUMMARY();
}
