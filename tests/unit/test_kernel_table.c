/* The kernel-table schema (artifact/kernel_table.h, section "kernels.cpu.json"): a valid table
 * parses and checks out against its program; every malformed one is refused with a message
 * naming the section, the field and what was expected; a program region without exactly one
 * kernel is refused (never run by the interpreter); and what the writer writes reads back to
 * the same bytes. */
#include <stdlib.h>
#include <string.h>

#include "artifact/kernel_table.h"
#include "tests/unit/kernel_table_util.h"
#include "tests/unit/test.h"

static vlmc_module_t *parse_program(const char *text) {
  vlmc_module_t *m = NULL;
  vlmc_parse_options_t po = {.filename = "program", .first_line = 1};
  EXPECT_OK(vlmc_module_parse(text, strlen(text), &po, &m));
  return m;
}

/* Parse + check, as the runtime does before it loads any code. */
static vlmc_status_t parse_and_check(const vlmc_module_t *m, const char *text) {
  vlmc_kernel_table_t table;
  vlmc_status_t st = vlmc_kernel_table_parse("m.vlmc", "cpu", text, strlen(text), &table);
  if (!st) st = vlmc_kernel_table_check(&table, m);
  vlmc_kernel_table_deinit(&table);
  return st;
}

/* kernel_table_text of kTableProgram, made by main. */
static char *kValidTable;

/* The valid table with `from` replaced by `to` (which must occur). */
static vlmc_status_t check_edited(const vlmc_module_t *m, const char *from, const char *to) {
  const char *at = strstr(kValidTable, from);
  EXPECT_TRUE(at != NULL);
  if (!at) return vlmc_status_make(VLMC_INTERNAL, "test bug: '%s' not in the table", from);
  size_t n = strlen(kValidTable) + strlen(to) + 1;
  char *text = malloc(n);
  size_t head = (size_t)(at - kValidTable);
  memcpy(text, kValidTable, head);
  strcpy(text + head, to);
  strcat(text, at + strlen(from));
  vlmc_status_t st = parse_and_check(m, text);
  free(text);
  return st;
}

static void test_valid_table(void) {
  vlmc_module_t *m = parse_program(kTableProgram);
  vlmc_kernel_table_t t;
  EXPECT_OK(vlmc_kernel_table_parse("m.vlmc", "cpu", kValidTable, strlen(kValidTable), &t));
  EXPECT_OK(vlmc_kernel_table_check(&t, m));
  EXPECT_EQ_INT(t.format, 2);
  EXPECT_TRUE(t.abi == NULL);
  const vlmc_kernel_table_field_t *cpu = vlmc_kernel_table_field(&t, "cpu");
  EXPECT_TRUE(cpu && cpu->string && !strcmp(cpu->string, "x86-64"));
  EXPECT_EQ_INT(t.num_kernels, 2);
  EXPECT_EQ_INT(t.num_dispatches, 2);
  if (t.num_kernels == 2 && t.num_dispatches == 2) {
    EXPECT_STREQ(t.kernels[0].symbol, "vk0");
    EXPECT_STREQ(t.kernels[0].template_name, "elementwise");
    EXPECT_EQ_INT(t.kernels[0].num_inputs, 2);
    EXPECT_EQ_INT(t.kernels[0].num_syms, 1);
    EXPECT_EQ_INT(t.kernels[0].sym_ids[0], 1); /* S, resolved by the check */
    EXPECT_EQ_INT(t.kernels[1].cost, 1);
    EXPECT_STREQ(t.dispatches[0].work.sym, "S");
    EXPECT_EQ_INT(t.dispatches[0].work.num, 4);
    EXPECT_EQ_INT(t.dispatches[0].work.sym_id, 1);
    EXPECT_STREQ(t.dispatches[1].work.sym, "S");
    EXPECT_EQ_INT(t.dispatches[1].work.off, 0);
    EXPECT_EQ_INT(t.dispatches[1].kernel, 1);
    EXPECT_EQ_INT(t.dispatches[1].func_index, 0);
  }
  vlmc_kernel_table_deinit(&t);
  vlmc_module_destroy(m);
}

static void test_malformed_tables(void) {
  vlmc_module_t *m = parse_program(kTableProgram);
  static const struct { const char *from, *to, *needle; } cases[] = {
      {"\"format\": 2", "\"format\": 1",
       "format: kernel table format 1; this runtime reads format 2 only: recompile"},
      {"\"format\": 2", "\"format\": 3", "kernel table format 3"},
      {"\"format\": 2", "\"formt\": 2", "format"},
      {"[\"f32\", \"f32\"]", "[\"f32\", \"q4\"]", "expected f32, bf16, f16, i64 or u32, got 'q4'"},
      {"[\"f32\", \"f32\"]", "[\"f32\", 3]", "kernels[0].inputs[1]: expected a string"},
      {"\"output\": \"f32\", \"syms\": [\"S\"]", "\"output\": 7, \"syms\": [\"S\"]", "output"},
      {"\"syms\": [\"S\"]", "\"syms\": [\"T\"]", "symbol 'T' is not in the program"},
      {"\"syms\": [\"S\"]", "\"syms\": \"S\"", "kernels[0].syms: expected an array"},
      {"\"cost\": 2", "\"cost\": -2", "cost"},
      {"\"cost\": 2", "\"cost\": 2, \"target\": [1]", "kernels[0].target: expected an object"},
      {"\"symbol\": \"vk1\", ", "", "kernels[1].symbol is missing"},
      {"\"func\": \"k\", \"dispatch\": 1", "\"func\": \"q\", \"dispatch\": 1", "no function @q"},
      {"\"dispatch\": 2", "\"dispatch\": 3", "dispatch"},
      {"\"dispatch\": 2", "\"dispatch\": 3", "@k has no dispatch region 3"},
      {"\"kernel\": 1", "\"kernel\": 5", "kernel"},
      {"\"kernel\": 1", "\"kernel\": 0", "kernel vk0 takes 2 inputs, @k dispatch 2 has 1"},
      {"\"den\": 1, \"off\": 0", "\"den\": 0, \"off\": 0", "den"},
      {"\"scale\": 1}},", "\"scale\": \"1\"}},", "scale"},
      {"\"sym\": \"S\"", "\"sym\": \"T\"",
       "dispatches[0].work.sym: symbol 'T' is not in the program"},
      {"\"kernels\": [", "\"kernels\": {", "kernels"},
      {"\"dispatches\": [", "\"dispatches\": 1, \"x\": [", "dispatches: expected an array"},
      {"\"format\": 2,", "\"format\": 2, \"format\": 2,", "given twice"},
      /* What the program determines is recomputed and compared, never taken on trust. */
      {"\"signature\": \"", "\"signature\": \"x", "kernels[0].signature: expected 16 hex"},
      {"\"signature\": \"", "\"sig\": \"", "kernels[0].signature is missing"},
      {"\"inputs\": [\"f32\", \"f32\"]", "\"inputs\": [\"f32\", \"bf16\"]",
       "dispatches[0]: kernel vk0 reads input 1 as bf16; @k dispatch 1 stores it as f32"},
      {"\"output\": \"f32\", \"syms\": [\"S\"]", "\"output\": \"i64\", \"syms\": [\"S\"]",
       "dispatches[0]: kernel vk0 writes i64; @k dispatch 1's output is stored as f32"},
      {"\"num\": 4, \"den\": 1, \"off\": 0, \"scale\": 1}},",
       "\"num\": 8, \"den\": 1, \"off\": 0, \"scale\": 1}},",
       "@k dispatch 1: work 8*S x 1, the region's output implies 4*S x 1 (template elementwise)"},
      {"\"sym\": \"S\", \"num\": 4, \"den\": 1, \"off\": 0, \"scale\": 1}},",
       "\"sym\": null, \"num\": 0, \"den\": 1, \"off\": 4096, \"scale\": 1}},",
       "@k dispatch 1: work 4096 x 1, the region's output implies 4*S x 1"},
      {"\"off\": 0, \"scale\": 1}},", "\"off\": 0, \"scale\": 2}},",
       "@k dispatch 1: work 4*S x 2, the region's output implies 4*S x 1"},
      {"\"template\": \"elementwise\"", "\"template\": \"linear\"",
       "@k dispatch 1: kernel vk0: template 'linear' does not take this region (its anchor "
       "'add' is written by 'elementwise')"},
      /* Both entries name dispatch 1: one region has two kernels (and dispatch 2 none). */
      {"\"dispatch\": 2", "\"dispatch\": 1", "@k dispatch 1 already has an entry (dispatches[0])"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    vlmc_status_t st = check_edited(m, cases[i].from, cases[i].to);
    const char *msg = st ? vlmc_status_message(st) : "(accepted)";
    if (!st || !strstr(msg, cases[i].needle) || !strstr(msg, "m.vlmc: section 'kernels.cpu.json'"))
      TEST_FAIL_("case %zu (%s -> %s): got \"%s\", expected a refusal naming '%s'", i,
                 cases[i].from, cases[i].to, msg, cases[i].needle);
    vlmc_status_free(st);
  }
  vlmc_module_destroy(m);
}

/* The valid table plus kernel vk2, a variant of vk1 for cpu devices (malloc'd). */
static char *variant_table(void) {
  const char *sig = strstr(strstr(kValidTable, "\"symbol\": \"vk1\""), "\"signature\": \"");
  const char *tail = strstr(kValidTable, "\"cost\": 1}],");
  if (!sig || !tail) return NULL;
  char variant[512];
  snprintf(variant, sizeof variant, "\"cost\": 1},\n {\"symbol\": \"vk2\", \"template\": "
           "\"elementwise\", %.31s, \"inputs\": [\"f32\"], \"output\": \"f32\", \"syms\": "
           "[\"S\"], \"cost\": 3, \"variant_of\": 1, \"for_devices\": \"cpu\"}],", sig);
  size_t head = (size_t)(tail - kValidTable);
  char *text = malloc(strlen(kValidTable) + strlen(variant) + 1);
  if (!text) return NULL;
  memcpy(text, kValidTable, head);
  strcpy(text + head, variant);
  strcat(text, tail + strlen("\"cost\": 1}],"));
  return text;
}

/* A variant (artifact/kernel_table.h, "Variants") serves its main kernel's regions: it parses,
 * checks, says which devices it is for and writes back the same; one that does not match its
 * main kernel, points nowhere, or is named by a dispatch is refused by name. */
static void test_variants(void) {
  vlmc_module_t *m = parse_program(kTableProgram);
  char *text = variant_table();
  EXPECT_TRUE(text != NULL);
  vlmc_kernel_table_t t;
  EXPECT_OK(vlmc_kernel_table_parse("m.vlmc", "cpu", text, strlen(text), &t));
  EXPECT_OK(vlmc_kernel_table_check(&t, m));
  EXPECT_EQ_INT(t.num_kernels, 3);
  if (t.num_kernels == 3) {
    EXPECT_TRUE(!t.kernels[1].is_variant && t.kernels[2].is_variant);
    EXPECT_EQ_INT(t.kernels[2].variant_of, 1);
    EXPECT_TRUE(vlmc_kernel_table_variant_is_for(&t.kernels[2], "cpu"));
    EXPECT_TRUE(!vlmc_kernel_table_variant_is_for(&t.kernels[2], "gpu"));
    EXPECT_TRUE(!vlmc_kernel_table_variant_is_for(&t.kernels[1], "cpu"));
    EXPECT_EQ_INT(t.kernels[2].sym_ids[0], 1); /* its own syms, resolved */
    vlmc_strbuf_t out;
    vlmc_strbuf_init(&out);
    EXPECT_OK(vlmc_kernel_table_to_json(&t, &out));
    vlmc_kernel_table_t again;
    EXPECT_OK(vlmc_kernel_table_parse("m.vlmc", "cpu", out.data, out.len, &again));
    EXPECT_TRUE(again.num_kernels == 3 && again.kernels[2].is_variant &&
                again.kernels[2].variant_of == 1 && !strcmp(again.kernels[2].for_devices, "cpu"));
    vlmc_kernel_table_deinit(&again);
    vlmc_strbuf_deinit(&out);
  }
  vlmc_kernel_table_deinit(&t);
  static const struct { const char *from, *to, *needle; } cases[] = {
      {"\"variant_of\": 1", "\"variant_of\": 7", "kernels[2].variant_of: 7 is not another kernel"},
      {"\"variant_of\": 1", "\"variant_of\": 2", "kernels[2].variant_of: 2 is not another kernel"},
      {"\"variant_of\": 1", "\"variant_of\": -1", "variant_of"},
      {"\"variant_of\": 1", "\"variant_of\": 0",
       "kernels[2] (vk2, elementwise) is a variant of vk0 (elementwise) but differs"},
      {"\"variant_of\": 1, ", "", "for_devices without variant_of"},
      {", \"for_devices\": \"cpu\"", "", "kernels[2].for_devices is missing"},
      {"\"for_devices\": \"cpu\"", "\"for_devices\": \"\"", "kernels[2].for_devices: expected"},
      {"\"for_devices\": \"cpu\"", "\"for_devices\": \"cpu,\"", "kernels[2].for_devices"},
      {"\"for_devices\": \"cpu\"", "\"for_devices\": \"CPU!\"", "kernels[2].for_devices"},
      {"\"for_devices\": \"cpu\"", "\"for_devices\": 3", "for_devices: expected a string"},
      {"\"cost\": 3, \"variant_of\": 1", "\"cost\": 3, \"variant_of\": 1, \"x\": 0",
       NULL}, /* unknown kernel keys are ignored, as always */
      {"\"kernel\": 1,", "\"kernel\": 2,",
       "dispatches[1].kernel: kernel vk2 is a variant of kernels[1]; a dispatch names a main"},
  };
  for (size_t i = 0; text && i < sizeof cases / sizeof cases[0]; ++i) {
    const char *at = strstr(text, cases[i].from);
    EXPECT_TRUE(at != NULL);
    if (!at) continue;
    char *edited = malloc(strlen(text) + strlen(cases[i].to) + 1);
    memcpy(edited, text, (size_t)(at - text));
    strcpy(edited + (at - text), cases[i].to);
    strcat(edited, at + strlen(cases[i].from));
    vlmc_status_t st = parse_and_check(m, edited);
    const char *msg = st ? vlmc_status_message(st) : "(accepted)";
    if (cases[i].needle ? !st || !strstr(msg, cases[i].needle) : st != NULL)
      TEST_FAIL_("variant case %zu (%s -> %s): got \"%s\", expected %s%s", i, cases[i].from,
                 cases[i].to, msg, cases[i].needle ? "a refusal naming " : "acceptance",
                 cases[i].needle ? cases[i].needle : "");
    vlmc_status_free(st);
    free(edited);
  }
  free(text);
  vlmc_module_destroy(m);
}

/* A table that leaves a region without a kernel is refused when it is loaded. */
static void test_uncovered_region_is_refused(void) {
  vlmc_module_t *m = parse_program(kTableProgram);
  const char *cut = strstr(kValidTable, ",\n {\"func\": \"k\", \"dispatch\": 2");
  size_t head = (size_t)(cut - kValidTable);
  char text[4096];
  snprintf(text, sizeof text, "%.*s]}", (int)head, kValidTable);
  vlmc_status_t st = parse_and_check(m, text);
  EXPECT_TRUE(st && strstr(vlmc_status_message(st), "no kernel for @k dispatch 2"));
  vlmc_status_free(st);
  vlmc_module_destroy(m);
}

/* What the code generator writes (abi, target fields, kernels, dispatches) parses back into
 * the same table and writes the same bytes again. */
static void test_write_parse_round_trip(void) {
  vlmc_module_t *m = parse_program(kTableProgram);
  vlmc_kernel_table_t t;
  EXPECT_OK(vlmc_kernel_table_init(&t, "cpu"));
  EXPECT_OK(vlmc_kernel_table_set_abi(&t, "void k(void *const *buffers)"));
  EXPECT_OK(vlmc_kernel_table_add_string_field(&t, "cpu", "x86-64-v3"));
  EXPECT_OK(vlmc_kernel_table_add_int_field(&t, "vector_width", 8));
  vlmc_dtype_t two[] = {VLMC_DTYPE_F32, VLMC_DTYPE_BF16}, one[] = {VLMC_DTYPE_F32};
  char *syms[] = {"S"};
  vlmc_kernel_table_kernel_t k0 = {.symbol = "vk0", .template_name = "elementwise",
                                   .signature = 0x0123456789abcdefull,
                                   .inputs = two, .num_inputs = 2, .output = VLMC_DTYPE_F32,
                                   .syms = syms, .num_syms = 1, .cost = 2};
  vlmc_kernel_table_kernel_t k1 = {.symbol = "vk1", .template_name = "elementwise \"q\"",
                                   .inputs = one, .num_inputs = 1, .output = VLMC_DTYPE_F32,
                                   .cost = 1};
  EXPECT_OK(vlmc_kernel_table_kernel_add_string_field(&k1, "entry", "vk1"));
  EXPECT_OK(vlmc_kernel_table_kernel_add_int_field(&k1, "workgroup_x", 64));
  EXPECT_OK(vlmc_kernel_table_add_kernel(&t, &k0));
  EXPECT_OK(vlmc_kernel_table_add_kernel(&t, &k1));
  vlmc_kernel_table_kernel_fields_free(&k1); /* add_kernel copied them */
  vlmc_kernel_table_dispatch_t d1 = {.func = "k", .dispatch = 1, .kernel = 0,
                                     .work = {.sym = "S", .num = 4, .den = 1, .scale = 1}};
  vlmc_kernel_table_dispatch_t d2 = {.func = "k", .dispatch = 2, .kernel = 1,
                                     .work = {.den = 1, .off = 16, .scale = 2}};
  EXPECT_OK(vlmc_kernel_table_add_dispatch(&t, &d1));
  EXPECT_OK(vlmc_kernel_table_add_dispatch(&t, &d2));
  /* Not this program's table (another signature, bf16 where it stores f32, an unknown
   * template, work 16 x 2): the schema round-trips it all the same; the check refuses it. */
  EXPECT_ERROR(vlmc_kernel_table_check(&t, m), "kernel vk0 (elementwise) was made for a region "
               "of signature 0123456789abcdef");
  vlmc_strbuf_t first, second;
  vlmc_strbuf_init(&first);
  vlmc_strbuf_init(&second);
  EXPECT_OK(vlmc_kernel_table_to_json(&t, &first));
  EXPECT_TRUE(strstr(vlmc_strbuf_cstr(&first), "{\n  \"format\": 2,\n  \"abi\": ") != NULL);
  EXPECT_TRUE(strstr(vlmc_strbuf_cstr(&first), "\"signature\": \"0123456789abcdef\"") != NULL);
  static const char kLastDispatch[] =
      "\n    {\"func\": \"k\", \"dispatch\": 2, \"kernel\": 1, \"work\": {\"sym\": null, "
      "\"num\": 0, \"den\": 1, \"off\": 16, \"scale\": 2}}\n  ]\n}\n";
  EXPECT_TRUE(strstr(vlmc_strbuf_cstr(&first), kLastDispatch) != NULL);
  vlmc_kernel_table_t back;
  EXPECT_OK(vlmc_kernel_table_parse("m.vlmc", "cpu", first.data, first.len, &back));
  EXPECT_TRUE(back.kernels[0].signature == 0x0123456789abcdefull);
  EXPECT_STREQ(back.kernels[1].template_name, "elementwise \"q\"");
  EXPECT_EQ_INT(back.kernels[0].inputs[1], VLMC_DTYPE_BF16);
  const vlmc_kernel_table_field_t *width = vlmc_kernel_table_field(&back, "vector_width");
  EXPECT_TRUE(width && !width->string && width->integer == 8);
  /* A kernel's own fields ("target": {...}) round-trip; a kernel without them has none. */
  EXPECT_TRUE(strstr(vlmc_strbuf_cstr(&first), "\"target\": {\"entry\": \"vk1\", "
                     "\"workgroup_x\": 64}") != NULL);
  const vlmc_kernel_table_field_t *entry = vlmc_kernel_table_kernel_field(&back.kernels[1], "entry");
  const vlmc_kernel_table_field_t *wgx = vlmc_kernel_table_kernel_field(&back.kernels[1],
                                                                        "workgroup_x");
  EXPECT_TRUE(entry && entry->string && strcmp(entry->string, "vk1") == 0);
  EXPECT_TRUE(wgx && !wgx->string && wgx->integer == 64);
  EXPECT_EQ_INT(back.kernels[0].num_fields, 0);
  EXPECT_OK(vlmc_kernel_table_to_json(&back, &second));
  EXPECT_STREQ(vlmc_strbuf_cstr(&second), vlmc_strbuf_cstr(&first));
  vlmc_strbuf_deinit(&first);
  vlmc_strbuf_deinit(&second);
  vlmc_kernel_table_deinit(&back);
  vlmc_kernel_table_deinit(&t);
  vlmc_module_destroy(m);
}

/* A table built through the API (as the code generator builds one) with the program's
 * signatures, storage and work checks out, and the check resolves its symbols. */
static void test_built_table_checks(void) {
  vlmc_module_t *m = parse_program(kTableProgram);
  vlmc_kernel_table_t t;
  EXPECT_OK(vlmc_kernel_table_init(&t, "cpu"));
  char sig1[17], sig2[17];
  kernel_table_signature(m, 1, sig1);
  kernel_table_signature(m, 2, sig2);
  vlmc_dtype_t two[] = {VLMC_DTYPE_F32, VLMC_DTYPE_F32}, one[] = {VLMC_DTYPE_F32};
  char *syms[] = {"S"};
  vlmc_kernel_table_kernel_t k0 = {.symbol = "vk0", .template_name = "elementwise",
                                   .signature = strtoull(sig1, NULL, 16), .inputs = two,
                                   .num_inputs = 2, .output = VLMC_DTYPE_F32, .syms = syms,
                                   .num_syms = 1, .cost = 2};
  vlmc_kernel_table_kernel_t k1 = {.symbol = "vk1", .template_name = "elementwise",
                                   .signature = strtoull(sig2, NULL, 16), .inputs = one,
                                   .num_inputs = 1, .output = VLMC_DTYPE_F32, .cost = 1};
  EXPECT_OK(vlmc_kernel_table_add_kernel(&t, &k0));
  EXPECT_OK(vlmc_kernel_table_add_kernel(&t, &k1));
  for (uint32_t id = 1; id <= 2; ++id) {
    vlmc_kernel_table_dispatch_t d = {.func = "k", .dispatch = id, .kernel = id - 1,
                                      .work = {.sym = "S", .num = 4, .den = 1, .scale = 1}};
    EXPECT_OK(vlmc_kernel_table_add_dispatch(&t, &d));
  }
  EXPECT_OK(vlmc_kernel_table_check(&t, m));
  EXPECT_EQ_INT(t.kernels[0].sym_ids[0], 1);
  EXPECT_EQ_INT(t.dispatches[1].work.sym_id, 1);
  /* The same table with the two dispatches' kernels swapped: refused by signature (the
   * input counts differ here too, so swap the second dispatch's only). */
  t.dispatches[1].kernel = 0;
  EXPECT_ERROR(vlmc_kernel_table_check(&t, m), "kernel vk0 takes 2 inputs, @k dispatch 2 has 1");
  t.dispatches[1].kernel = 1;
  t.kernels[1].signature ^= 1;
  EXPECT_ERROR(vlmc_kernel_table_check(&t, m), "kernel vk1 (elementwise) was made for a region "
               "of signature");
  vlmc_kernel_table_deinit(&t);
  vlmc_module_destroy(m);
}

/* A storage dtype the schema has no name for is refused by the writer, not spelled "f32". */
static void test_writer_refuses_unnamed_storage(void) {
  vlmc_kernel_table_t t;
  EXPECT_OK(vlmc_kernel_table_init(&t, "cpu"));
  vlmc_dtype_t in[] = {VLMC_DTYPE_I8};
  vlmc_kernel_table_kernel_t k = {.symbol = "vk0", .template_name = "elementwise", .inputs = in,
                                  .num_inputs = 1, .output = VLMC_DTYPE_F32, .cost = 1};
  EXPECT_OK(vlmc_kernel_table_add_kernel(&t, &k));
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  EXPECT_ERROR(vlmc_kernel_table_to_json(&t, &out), "storage dtype i8");
  vlmc_strbuf_deinit(&out);
  vlmc_kernel_table_deinit(&t);
}

int main(void) {
  vlmc_module_t *m = parse_program(kTableProgram);
  kValidTable = m ? kernel_table_text(m) : NULL;
  vlmc_module_destroy(m);
  if (!kValidTable) return 1;
  RUN_TEST(test_valid_table);
  RUN_TEST(test_malformed_tables);
  RUN_TEST(test_uncovered_region_is_refused);
  RUN_TEST(test_write_parse_round_trip);
  RUN_TEST(test_writer_refuses_unnamed_storage);
  RUN_TEST(test_built_table_checks);
  RUN_TEST(test_variants);
  free(kValidTable);
  return TEST_SUMMARY();
}
