/* The vulkan backend's checks of untrusted artifact bytes, no device needed: the bounded
 * SPIR-V walker (runtime/backends/vulkan/spirv_check.h) on a minimal valid module and on one
 * malformation at a time, and the kernel table's vulkan fields (kernels.h: presence, types,
 * ranges, the features list) against a section holding that module. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact/kernel_table.h"
#include "runtime/backends/vulkan/kernels.h"
#include "runtime/backends/vulkan/spirv_check.h"
#include "tests/unit/test.h"

enum { MAX_WORDS = 128 };

typedef struct {
  uint32_t w[MAX_WORDS];
  size_t n;
} words_t;

static void put(words_t *m, uint32_t word) {
  if (m->n < MAX_WORDS) m->w[m->n++] = word;
}

/* One instruction: opcode, the words before a string, the string, the words after. */
static void inst(words_t *m, uint32_t opcode, const uint32_t *pre, size_t npre, const char *str,
                 const uint32_t *post, size_t npost) {
  size_t str_words = str ? strlen(str) / 4 + 1 : 0;
  put(m, (uint32_t)(1 + npre + str_words + npost) << 16 | opcode);
  for (size_t i = 0; i < npre; ++i) put(m, pre[i]);
  if (str) {
    uint32_t packed[16] = {0};
    memcpy(packed, str, strlen(str));
    for (size_t i = 0; i < str_words; ++i) put(m, packed[i]);
  }
  for (size_t i = 0; i < npost; ++i) put(m, post[i]);
}

/* What to break in the module. */
typedef enum {
  VALID,
  BAD_MAGIC,
  SWAPPED_MAGIC,
  VERSION_1_7,
  ZERO_BOUND,
  CAP_KERNEL,
  CAP_FLOAT16,
  CAP_COOP_MATRIX, /* CooperativeMatrixKHR with its extension, as kernel_linear_coop.c's */
  EXT_OTHER,
  IMPORT_OPENCL,
  ENTRY_VERTEX,
  ENTRY_NAMED_MAIN,
  TWO_ENTRIES,
  LOCAL_SIZE_32,
  NO_LOCAL_SIZE,
  MEMORY_MODEL_PHYSICAL,
  ZERO_WORD_COUNT,
  PAST_END,
  UNTERMINATED_NAME,
  COMBINE_ENTRY, /* valid, its entry named vk0_combine: a split kernel's stage 2 */
  BINDING_PAST,  /* a storage buffer at binding 2 of a kernel with 2 (0 and 1) */
  SET_1,         /* a storage buffer in descriptor set 1 */
} defect_t;

static void build(words_t *m, defect_t d) {
  memset(m, 0, sizeof *m);
  put(m, d == BAD_MAGIC ? 0xdeadbeefu : d == SWAPPED_MAGIC ? 0x03022307u : 0x07230203u);
  put(m, d == VERSION_1_7 ? 0x00010700u : 0x00010300u);
  put(m, 0);
  put(m, d == ZERO_BOUND ? 0 : 16);
  put(m, 0);
  inst(m, 17, (uint32_t[]){1}, 1, NULL, NULL, 0); /* OpCapability Shader */
  if (d == CAP_KERNEL) inst(m, 17, (uint32_t[]){6}, 1, NULL, NULL, 0);
  if (d == CAP_FLOAT16) inst(m, 17, (uint32_t[]){9}, 1, NULL, NULL, 0);
  if (d == CAP_COOP_MATRIX) inst(m, 17, (uint32_t[]){6022}, 1, NULL, NULL, 0);
  if (d == CAP_COOP_MATRIX) inst(m, 10, NULL, 0, "SPV_KHR_cooperative_matrix", NULL, 0);
  inst(m, 10, NULL, 0, d == EXT_OTHER ? "SPV_KHR_variable_pointers"
                                      : "SPV_KHR_storage_buffer_storage_class", NULL, 0);
  inst(m, 11, (uint32_t[]){1}, 1, d == IMPORT_OPENCL ? "OpenCL.std" : "GLSL.std.450", NULL, 0);
  inst(m, 14, (uint32_t[]){d == MEMORY_MODEL_PHYSICAL ? 2u : 0u, 1}, 2, NULL, NULL, 0);
  /* OpDecorate %8 DescriptorSet s, OpDecorate %8 Binding b: the module's one buffer (here, not
   * after the entry point as SPIR-V's layout has it, so that every prefix but the whole module
   * without its last instruction still lacks something: the walker takes any order) */
  inst(m, 71, (uint32_t[]){8, 34, d == SET_1 ? 1u : 0u}, 3, NULL, NULL, 0);
  inst(m, 71, (uint32_t[]){8, 33, d == BINDING_PAST ? 2u : 1u}, 3, NULL, NULL, 0);
  if (d == UNTERMINATED_NAME) {
    put(m, 4u << 16 | 15); /* OpEntryPoint GLCompute %2 "vk0v" with no NUL in its word */
    put(m, 5);
    put(m, 2);
    put(m, 0x76306b76u);
  } else {
    inst(m, 15, (uint32_t[]){d == ENTRY_VERTEX ? 0u : 5u, 2}, 2,
         d == ENTRY_NAMED_MAIN ? "main" : d == COMBINE_ENTRY ? "vk0_combine" : "vk0",
         (uint32_t[]){3, 4}, 2);
  }
  if (d == TWO_ENTRIES) inst(m, 15, (uint32_t[]){5, 5}, 2, "vk9", NULL, 0);
  if (d != NO_LOCAL_SIZE)
    inst(m, 16, (uint32_t[]){2, 17, d == LOCAL_SIZE_32 ? 32u : 64u, 1, 1}, 5, NULL, NULL, 0);
  if (d == ZERO_WORD_COUNT) put(m, 0u << 16 | 17);
  if (d == PAST_END) put(m, 9u << 16 | 17);
  inst(m, 19, (uint32_t[]){7}, 1, NULL, NULL, 0); /* OpTypeVoid %7 */
}

static const vlmc_spirv_expect_t kExpect = {"vk0", {64, 1, 1}, 0, 2};

static vlmc_status_t check(defect_t d) {
  words_t m;
  build(&m, d);
  return vlmc_spirv_check("m.vlmc: kernel vk0 (rms_norm)", m.w, 4 * m.n, &kExpect, NULL);
}

static void test_valid_module(void) {
  words_t m;
  build(&m, VALID);
  vlmc_spirv_info_t info;
  EXPECT_OK(vlmc_spirv_check("m", m.w, 4 * m.n, &kExpect, &info));
  EXPECT_EQ_INT(info.version_major, 1);
  EXPECT_EQ_INT(info.version_minor, 3);
  /* Float16 is allowed when the kernel lists shaderFloat16. */
  build(&m, CAP_FLOAT16);
  vlmc_spirv_expect_t with_f16 = kExpect;
  with_f16.features = VLMC_VK_FEATURE_FLOAT16;
  EXPECT_OK(vlmc_spirv_check("m", m.w, 4 * m.n, &with_f16, NULL));
  /* So is CooperativeMatrixKHR (and its extension) when it lists cooperativeMatrix. */
  build(&m, CAP_COOP_MATRIX);
  vlmc_spirv_expect_t with_coop = kExpect;
  with_coop.features = VLMC_VK_FEATURE_COOP_MATRIX;
  EXPECT_OK(vlmc_spirv_check("m", m.w, 4 * m.n, &with_coop, NULL));
}

static void test_malformed_modules(void) {
  EXPECT_ERROR(check(BAD_MAGIC), "m.vlmc: kernel vk0 (rms_norm): not SPIR-V (magic 0xdeadbeef");
  EXPECT_ERROR(check(SWAPPED_MAGIC), "big-endian SPIR-V");
  EXPECT_ERROR(check(VERSION_1_7), "version word 0x00010700");
  EXPECT_ERROR(check(ZERO_BOUND), "id bound 0");
  EXPECT_ERROR(check(CAP_KERNEL), "capability 6 is not one a vlmc kernel uses (allowed: Matrix, "
               "Shader, Float16, Int64, Int16, GroupNonUniform, GroupNonUniformVote, "
               "GroupNonUniformArithmetic, GroupNonUniformBallot, StorageBuffer16BitAccess, "
               "CooperativeMatrixKHR)");
  EXPECT_ERROR(check(CAP_FLOAT16), "capability Float16, which needs device feature shaderFloat16");
  EXPECT_ERROR(check(CAP_COOP_MATRIX), "capability CooperativeMatrixKHR, which needs device "
               "feature cooperativeMatrix");
  EXPECT_ERROR(check(EXT_OTHER), "extension 'SPV_KHR_variable_pointers' is not allowed (only "
               "SPV_KHR_storage_buffer_storage_class, SPV_KHR_16bit_storage, "
               "SPV_KHR_cooperative_matrix)");
  EXPECT_ERROR(check(IMPORT_OPENCL), "extended instruction set 'OpenCL.std'");
  EXPECT_ERROR(check(ENTRY_VERTEX), "execution model 0, expected GLCompute");
  EXPECT_ERROR(check(ENTRY_NAMED_MAIN), "entry point 'main', the table says 'vk0'");
  EXPECT_ERROR(check(TWO_ENTRIES), "more than one entry point");
  EXPECT_ERROR(check(LOCAL_SIZE_32), "LocalSize 32 x 1 x 1, the table says 64 x 1 x 1");
  EXPECT_ERROR(check(NO_LOCAL_SIZE), "0 LocalSize execution modes");
  EXPECT_ERROR(check(MEMORY_MODEL_PHYSICAL), "memory model must be Logical GLSL450");
  EXPECT_ERROR(check(ZERO_WORD_COUNT), "has word count 0");
  EXPECT_ERROR(check(PAST_END), "past the module's end");
  EXPECT_ERROR(check(UNTERMINATED_NAME), "OpEntryPoint at word");
  EXPECT_ERROR(check(BINDING_PAST), "binding 2, but the kernel has 2");
  EXPECT_ERROR(check(SET_1), "descriptor set 1 (the kernel ABI has set 0 only)");
}

/* Every prefix of a valid module, and every odd size, is refused or accepted without a read
 * past the end (ASan watches). */
static void test_truncations(void) {
  words_t m;
  build(&m, VALID);
  size_t bytes = 4 * m.n;
  for (size_t n = 0; n < bytes; ++n) {
    unsigned char *copy = malloc(n ? n : 1); /* exact size: a read past it is an ASan error */
    memcpy(copy, m.w, n);
    vlmc_status_t st = vlmc_spirv_check("m", copy, n, &kExpect, NULL);
    /* Only the prefix ending right before the last instruction (OpTypeVoid) is whole. */
    EXPECT_TRUE((st == NULL) == (n == bytes - 8));
    vlmc_status_free(st);
    free(copy);
  }
  EXPECT_ERROR(vlmc_spirv_check("m", m.w, 4 * m.n - 2, &kExpect, NULL), "not a whole number");
  EXPECT_ERROR(vlmc_spirv_check("m", m.w, 12, &kExpect, NULL), "shorter than its 20-byte header");
}

/* ---- the table's vulkan fields ---- */

/* The section the table's kernels point into: one module, or (split tests) two. */
static words_t g_module_words;

static const char kKernelTemplate[] =
    "{\"format\": 2, \"abi\": \"%s\", \"spirv_version\": \"1.3\", \"kernels\": [\n"
    " {\"symbol\": \"vk0\", \"template\": \"rms_norm\", \"signature\": \"0000000000000000\","
    " \"inputs\": [\"f32\"], \"output\": \"f32\", \"syms\": [\"S\"], \"cost\": 1,"
    " \"target\": {%s}}], \"dispatches\": []}";

static vlmc_status_t read_fields(const char *abi, const char *target) {
  char json[2048];
  snprintf(json, sizeof json, kKernelTemplate, abi, target);
  vlmc_kernel_table_t table;
  vlmc_status_t st = vlmc_kernel_table_parse("m.vlmc", "vulkan", json, strlen(json), &table);
  vlmc_vk_kernel_info_t info[1];
  if (!st)
    st = vlmc_vk_kernels_read("m.vlmc", &table, g_module_words.w, 4 * g_module_words.n, info);
  if (!st) {
    EXPECT_EQ_INT(info[0].units_per_group, 4);
    EXPECT_EQ_INT(info[0].push_words, 2);
    if (strstr(target, "\"split\"")) {
      EXPECT_EQ_INT(info[0].split, 8);
      EXPECT_EQ_INT(info[0].scratch_floats, 130);
      EXPECT_EQ_INT(info[0].combine_workgroup_x, 64);
      /* absent: a workgroup per unit, as artifacts before the field had */
      EXPECT_EQ_INT(info[0].combine_groups, strstr(target, "\"combine_groups\"") ? 4 : 1);
    }
  }
  vlmc_kernel_table_deinit(&table);
  return st;
}

/* The valid target object with `key`'s value replaced by `value` (NULL: key left out). */
static vlmc_status_t with_field(const char *key, const char *value) {
  static const char *const keys[] = {"entry", "spirv_offset", "spirv_size", "workgroup_x",
                                     "workgroup_y", "workgroup_z", "units_per_group",
                                     "push_words", "shared_bytes", "features"};
  char size[16];
  snprintf(size, sizeof size, "%zu", 4 * g_module_words.n);
  const char *values[] = {"\"vk0\"", "0", size, "64", "1", "1", "4", "2", "0",
                          "\"subgroupArithmetic, shaderInt64\""};
  char target[1024] = "";
  size_t used = 0;
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; ++i) {
    const char *v = key && !strcmp(keys[i], key) ? value : values[i];
    if (!v) continue;
    used += (size_t)snprintf(target + used, sizeof target - used, "%s\"%s\": %s",
                             used ? ", " : "", keys[i], v);
  }
  return read_fields("vulkan-spirv-1", target);
}

/* A split kernel's fields (kernels.h): the valid set after the one-stage fields, `key`'s
 * value replaced by `value` (NULL: left out), the section holding both stages' modules. */
static vlmc_status_t with_split_field(const char *key, const char *value) {
  words_t first, combine;
  build(&first, VALID);
  build(&combine, COMBINE_ENTRY);
  g_module_words = first;
  for (size_t i = 0; i < combine.n; ++i) put(&g_module_words, combine.w[i]);
  static const char *const keys[] = {"split", "scratch_floats", "combine_entry",
                                     "combine_spirv_offset", "combine_spirv_size",
                                     "combine_workgroup_x", "combine_shared_bytes",
                                     "combine_groups"};
  char offset[16], size[16], first_size[16];
  snprintf(offset, sizeof offset, "%zu", 4 * first.n);
  snprintf(size, sizeof size, "%zu", 4 * combine.n);
  snprintf(first_size, sizeof first_size, "%zu", 4 * first.n);
  const char *values[] = {"8", "130", "\"vk0_combine\"", offset, size, "64", "0", "4"};
  char target[1024];
  size_t used = (size_t)snprintf(target, sizeof target, "\"entry\": \"vk0\", \"spirv_offset\": 0, "
                                 "\"spirv_size\": %s, \"workgroup_x\": 64, \"workgroup_y\": 1, "
                                 "\"workgroup_z\": 1, \"units_per_group\": 4, \"push_words\": 2, "
                                 "\"shared_bytes\": 0, \"features\": \"\"", first_size);
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; ++i) {
    const char *v = key && !strcmp(keys[i], key) ? value : values[i];
    if (!v) continue;
    used += (size_t)snprintf(target + used, sizeof target - used, ", \"%s\": %s", keys[i], v);
  }
  vlmc_status_t st = read_fields("vulkan-spirv-1", target);
  build(&g_module_words, VALID);
  return st;
}

static void test_split_fields(void) {
  EXPECT_OK(with_split_field(NULL, NULL));
  EXPECT_ERROR(with_split_field("split", "1"), "target.split = 1: expected 2 to 1024");
  EXPECT_ERROR(with_split_field("scratch_floats", NULL), "target.scratch_floats is missing");
  EXPECT_ERROR(with_split_field("scratch_floats", "0"), "target.scratch_floats = 0");
  EXPECT_ERROR(with_split_field("combine_entry", "\"vk0\""),
               "target.combine_entry 'vk0', expected 'vk0_combine'");
  EXPECT_ERROR(with_split_field("combine_spirv_offset", "0"), "its combine stage");
  EXPECT_ERROR(with_split_field("combine_spirv_offset", "2"), "must be multiples of 4");
  EXPECT_ERROR(with_split_field("combine_spirv_size", "4000"), "past the end of section");
  EXPECT_ERROR(with_split_field("combine_workgroup_x", "32"), "LocalSize 64 x 1 x 1, the table says 32");
  EXPECT_ERROR(with_split_field("combine_workgroup_x", "2048"), "target.combine_workgroup_x = 2048");
  EXPECT_ERROR(with_split_field("combine_shared_bytes", NULL), "target.combine_shared_bytes is missing");
  EXPECT_OK(with_split_field("combine_groups", NULL)); /* optional: 1 */
  EXPECT_ERROR(with_split_field("combine_groups", "0"), "target.combine_groups = 0: expected 1 to 1024");
  EXPECT_ERROR(with_split_field("combine_groups", "1025"), "target.combine_groups = 1025");
  EXPECT_ERROR(with_split_field("combine_groups", "\"4\""), "target.combine_groups: expected an integer");
}

static void test_table_fields(void) {
  build(&g_module_words, VALID);
  EXPECT_OK(with_field(NULL, NULL));
  const char *where = "m.vlmc: section 'kernels.vulkan.json': kernels[0] (vk0, rms_norm): ";
  vlmc_status_t st = with_field("entry", NULL);
  EXPECT_TRUE(st && strstr(vlmc_status_message(st), where));
  vlmc_status_free(st);
  EXPECT_ERROR(with_field("entry", NULL), "target.entry is missing");
  EXPECT_ERROR(with_field("entry", "\"vk1\""), "target.entry 'vk1' is not the kernel's symbol");
  EXPECT_ERROR(with_field("spirv_offset", "2"), "must be multiples of 4");
  EXPECT_ERROR(with_field("spirv_offset", "-4"), "target.spirv_offset = -4");
  EXPECT_ERROR(with_field("spirv_offset", "4"), "past the end of section 'kernels.vulkan'");
  EXPECT_ERROR(with_field("spirv_size", "20"), "target.spirv_size = 20: expected 24");
  EXPECT_ERROR(with_field("spirv_size", "\"96\""), "expected an integer, got a string");
  EXPECT_ERROR(with_field("workgroup_y", "32"), "2048 invocations, more than 1024");
  EXPECT_ERROR(with_field("workgroup_z", "0"), "target.workgroup_z = 0");
  EXPECT_ERROR(with_field("units_per_group", "0"), "target.units_per_group = 0");
  EXPECT_ERROR(with_field("push_words", "1"), "push_words 1, expected 1 + 1 syms");
  EXPECT_ERROR(with_field("push_words", "33"), "target.push_words = 33");
  EXPECT_ERROR(with_field("shared_bytes", "-1"), "target.shared_bytes = -1");
  EXPECT_ERROR(with_field("features", "\"shaderFloat64\""), "unknown feature 'shaderFloat64' "
               "(known: shaderFloat16, shaderInt64, shaderInt16, storageBuffer16BitAccess, "
               "subgroupArithmetic, cooperativeMatrix)");
  EXPECT_ERROR(with_field("features", "7"), "target.features: expected a string");
  EXPECT_ERROR(with_field("workgroup_x", "32"), "LocalSize 64 x 1 x 1, the table says 32");
  EXPECT_ERROR(read_fields("cpu-sysv-1", "\"entry\": \"vk0\""), "abi 'cpu-sysv-1'");
}

int main(void) {
  RUN_TEST(test_valid_module);
  RUN_TEST(test_malformed_modules);
  RUN_TEST(test_truncations);
  RUN_TEST(test_table_fields);
  RUN_TEST(test_split_fields);
  return TEST_SUMMARY();
}
