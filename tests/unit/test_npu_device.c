/* The NPU device table (artifact/npu_device.h): both devices are found by name, every number
 * carries a source, the shapes match ../shared/NPU.md, parameters are overridden by
 * name=value within their range and refused by name outside it, and the text table lists
 * every fact with its source. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact/npu_device.h"
#include "support/file.h"
#include "tests/unit/test.h"

static void test_devices_found(void) {
  const vlmc_npu_device_t *npu1 = vlmc_npu_device_find("npu1");
  const vlmc_npu_device_t *npu2 = vlmc_npu_device_find("npu2");
  EXPECT_TRUE(npu1 && npu2);
  if (!npu1 || !npu2) return;
  EXPECT_STREQ(npu1->arch, "AIE2");
  EXPECT_STREQ(npu2->arch, "AIE2P");
  EXPECT_TRUE(vlmc_npu_device_find("npu3") == NULL);
  EXPECT_TRUE(vlmc_npu_device_find(NULL) == NULL);
  EXPECT_TRUE(vlmc_npu_device_at(0) == npu1 && vlmc_npu_device_at(1) == npu2);
  EXPECT_TRUE(vlmc_npu_device_at(2) == NULL && vlmc_npu_device_at(-1) == NULL);
}

static void test_every_fact_has_a_source(void) {
  for (int d = 0; vlmc_npu_device_at(d); ++d) {
    const vlmc_npu_device_t *dev = vlmc_npu_device_at(d);
    for (int i = 0; i < VLMC_NPU_FACT_COUNT; ++i) {
      const vlmc_npu_fact_t *f = &dev->facts[i];
      if (!f->source || !f->source[0])
        TEST_FAIL_("%s: %s has no source", dev->name, vlmc_npu_fact_name(i));
      if (f->parameter && !(f->min <= f->value && f->value <= f->max)) {
        TEST_FAIL_("%s: parameter %s default outside its range", dev->name, vlmc_npu_fact_name(i));
      }
      EXPECT_TRUE(vlmc_npu_fact_name(i) && vlmc_npu_fact_unit(i));
      EXPECT_EQ_INT(vlmc_npu_fact_lookup(vlmc_npu_fact_name(i), strlen(vlmc_npu_fact_name(i))), i);
    }
  }
}

static void test_shapes_and_limits(void) {
  const vlmc_npu_device_t *npu1 = vlmc_npu_device_find("npu1"),
                          *npu2 = vlmc_npu_device_find("npu2");
  EXPECT_EQ_INT(vlmc_npu_device_int(npu1, VLMC_NPU_COLUMNS), 4);
  EXPECT_EQ_INT(vlmc_npu_device_int(npu2, VLMC_NPU_COLUMNS), 8);
  EXPECT_EQ_INT(vlmc_npu_device_rows(npu2), 6);
  EXPECT_EQ_INT(vlmc_npu_device_tile_int(npu2, VLMC_NPU_TILE_COMPUTE, VLMC_NPU_TILE_MEMORY_BYTES),
                65536);
  EXPECT_EQ_INT(vlmc_npu_device_tile_int(npu2, VLMC_NPU_TILE_MEMORY, VLMC_NPU_TILE_MEMORY_BYTES),
                524288);
  EXPECT_EQ_INT(vlmc_npu_device_tile_int(npu2, VLMC_NPU_TILE_SHIM, VLMC_NPU_TILE_MEMORY_BYTES), 0);
  EXPECT_EQ_INT(vlmc_npu_device_tile_int(npu2, VLMC_NPU_TILE_COMPUTE, VLMC_NPU_TILE_LOCKS), 16);
  EXPECT_EQ_INT(vlmc_npu_device_tile_int(npu2, VLMC_NPU_TILE_MEMORY, VLMC_NPU_TILE_LOCKS), 64);
  EXPECT_EQ_INT(vlmc_npu_device_tile_int(npu2, VLMC_NPU_TILE_MEMORY, VLMC_NPU_TILE_BDS), 48);
  EXPECT_EQ_INT(vlmc_npu_device_tile_int(npu2, VLMC_NPU_TILE_SHIM, VLMC_NPU_TILE_BDS), 16);
  EXPECT_EQ_INT(vlmc_npu_device_tile_int(npu2, VLMC_NPU_TILE_MEMORY, VLMC_NPU_TILE_DMA_IN), 6);
  EXPECT_EQ_INT(vlmc_npu_device_tile_int(npu2, VLMC_NPU_TILE_COMPUTE, VLMC_NPU_TILE_DMA_OUT), 2);
  EXPECT_EQ_INT(vlmc_npu_device_int(npu2, VLMC_NPU_BD_MAX_SIZE), 1023);
  EXPECT_EQ_INT(vlmc_npu_device_int(npu2, VLMC_NPU_BD_MAX_REPEAT), 64);
  EXPECT_EQ_INT(vlmc_npu_device_int(npu2, VLMC_NPU_BD_MAX_STRIDE), 1 << 20);
  EXPECT_EQ_INT(vlmc_npu_device_int(npu2, VLMC_NPU_LOCK_MAX_VALUE), 63);
  EXPECT_EQ_INT(vlmc_npu_device_int(npu1, VLMC_NPU_STREAM_BYTES_PER_CYCLE), 4);
  EXPECT_EQ_INT(vlmc_npu_device_int(npu2, VLMC_NPU_STREAM_BYTES_PER_CYCLE), 8);
  EXPECT_EQ_INT(vlmc_npu_device_int(npu2, VLMC_NPU_MACS_INT8), 512);
  EXPECT_EQ_INT(vlmc_npu_device_int(npu1, VLMC_NPU_MACS_BF16), 128);
  EXPECT_NEAR(vlmc_npu_device_value(npu2, VLMC_NPU_L3_GBPS), 45, 0);
  EXPECT_NEAR(vlmc_npu_device_value(npu2, VLMC_NPU_COMMAND_OVERHEAD_US), 37, 0);
  EXPECT_NEAR(vlmc_npu_device_value(npu2, VLMC_NPU_CLOCK_GHZ), 1.8, 1e-12);
  EXPECT_TRUE(npu2->facts[VLMC_NPU_MACS_BF16].parameter);
  EXPECT_TRUE(!npu2->facts[VLMC_NPU_MACS_INT8].parameter);
}

static void test_row_kinds(void) {
  const vlmc_npu_device_t *npu2 = vlmc_npu_device_find("npu2");
  vlmc_npu_tile_kind_t kind;
  EXPECT_TRUE(vlmc_npu_device_row_kind(npu2, 0, &kind) && kind == VLMC_NPU_TILE_SHIM);
  EXPECT_TRUE(vlmc_npu_device_row_kind(npu2, 1, &kind) && kind == VLMC_NPU_TILE_MEMORY);
  EXPECT_TRUE(vlmc_npu_device_row_kind(npu2, 2, &kind) && kind == VLMC_NPU_TILE_COMPUTE);
  EXPECT_TRUE(vlmc_npu_device_row_kind(npu2, 5, &kind) && kind == VLMC_NPU_TILE_COMPUTE);
  EXPECT_TRUE(!vlmc_npu_device_row_kind(npu2, 6, &kind));
  EXPECT_TRUE(!vlmc_npu_device_row_kind(npu2, -1, &kind));
  EXPECT_TRUE(vlmc_npu_tile_kind_lookup("memory", 6, &kind) && kind == VLMC_NPU_TILE_MEMORY);
  EXPECT_TRUE(!vlmc_npu_tile_kind_lookup("mem", 3, &kind));
}

static void test_parameter_overrides(void) {
  vlmc_npu_device_t dev = *vlmc_npu_device_find("npu2");
  EXPECT_OK(vlmc_npu_device_set_param(&dev, "l3_gbps=60"));
  EXPECT_NEAR(vlmc_npu_device_value(&dev, VLMC_NPU_L3_GBPS), 60, 0);
  EXPECT_OK(vlmc_npu_device_set_param(&dev, "macs.bf16=128"));
  EXPECT_EQ_INT(vlmc_npu_device_int(&dev, VLMC_NPU_MACS_BF16), 128);
  EXPECT_OK(vlmc_npu_device_set_param(&dev, "clock_ghz=1.5"));
  EXPECT_OK(vlmc_npu_device_set_param(&dev, "command_overhead_us=0"));
  /* the built-in table is untouched */
  EXPECT_NEAR(vlmc_npu_device_value(vlmc_npu_device_find("npu2"), VLMC_NPU_L3_GBPS), 45, 0);
  EXPECT_ERROR(vlmc_npu_device_set_param(&dev, "l3_gbps=1000"),
               "parameter 'l3_gbps' = 1000 is outside 1..500");
  EXPECT_ERROR(vlmc_npu_device_set_param(&dev, "clock_ghz=0"),
               "parameter 'clock_ghz' = 0 is outside");
  EXPECT_ERROR(vlmc_npu_device_set_param(&dev, "macs.bf16=-1"),
               "parameter 'macs.bf16' = -1 is outside");
  EXPECT_ERROR(vlmc_npu_device_set_param(&dev, "columns=16"),
               "'columns' is a fixed fact of the device");
  EXPECT_ERROR(vlmc_npu_device_set_param(&dev, "bandwidth=40"), "no parameter named 'bandwidth'");
  EXPECT_ERROR(vlmc_npu_device_set_param(&dev, "l3_gbps=fast"),
               "parameter 'l3_gbps': 'fast' is not a number");
  EXPECT_ERROR(vlmc_npu_device_set_param(&dev, "l3_gbps=nan"), "is not a number");
  EXPECT_ERROR(vlmc_npu_device_set_param(&dev, "l3_gbps=50x"), "is not a number");
  EXPECT_ERROR(vlmc_npu_device_set_param(&dev, "l3_gbps"), "expected name=value");
  EXPECT_NEAR(vlmc_npu_device_value(&dev, VLMC_NPU_L3_GBPS), 60, 0); /* refusals change nothing */
}

static void test_print_lists_sources(void) {
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  vlmc_npu_device_print(vlmc_npu_device_find("npu2"), &out);
  const char *text = vlmc_strbuf_cstr(&out);
  EXPECT_TRUE(strstr(text, "device npu2 (AIE2P") != NULL);
  EXPECT_TRUE(strstr(text, "simulated, no NPU hardware") != NULL);
  EXPECT_TRUE(strstr(text, "macs.bf16") && strstr(text, "(parameter, 32..1024)"));
  EXPECT_TRUE(strstr(text, "[NPU.md A.2: AM020/UG1603") != NULL);
  int lines = 0;
  for (const char *c = text; *c; ++c) lines += *c == '\n';
  EXPECT_EQ_INT(lines, 1 + VLMC_NPU_FACT_COUNT);
  vlmc_strbuf_deinit(&out);
}

/* docs/npu.md's device table has a row for every fact. */
static void test_docs_list_every_fact(void) {
  char *docs = NULL;
  size_t len = 0;
  EXPECT_OK(vlmc_file_read_all("docs/npu.md", &docs, &len));
  for (int i = 0; docs && i < VLMC_NPU_FACT_COUNT; ++i) {
    char quoted[64];
    snprintf(quoted, sizeof quoted, "| `%s` |", vlmc_npu_fact_name(i));
    if (!strstr(docs, quoted)) TEST_FAIL_("docs/npu.md has no row %s", quoted);
  }
  free(docs);
}

int main(void) {
  RUN_TEST(test_devices_found);
  RUN_TEST(test_every_fact_has_a_source);
  RUN_TEST(test_shapes_and_limits);
  RUN_TEST(test_row_kinds);
  RUN_TEST(test_parameter_overrides);
  RUN_TEST(test_print_lists_sources);
  RUN_TEST(test_docs_list_every_fact);
  return TEST_SUMMARY();
}
