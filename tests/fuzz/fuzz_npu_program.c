/* Fuzzes the npu tile program's parser, static checker and printer (artifact/npu_program.c):
 * any text either parses or fails with a message naming the file and line; a parsed program
 * checks against both devices without a crash (a refusal names its rule), and its canonical
 * print parses back and prints the same bytes. */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "artifact/npu_program.h"

static void check_on_both_devices(const vlmc_npu_program_t *p) {
  for (int d = 0; vlmc_npu_device_at(d); ++d) {
    vlmc_npu_rule_t rule = VLMC_NPU_RULE_COUNT;
    vlmc_status_t st = vlmc_npu_program_check(p, vlmc_npu_device_at(d), &rule);
    assert((st == NULL) == (rule == VLMC_NPU_RULE_NONE));
    if (st) {
      assert(strstr(vlmc_status_message(st), "fuzz.npu:") != NULL);
      assert(strstr(vlmc_status_message(st), vlmc_npu_rule_name(rule)) != NULL);
      vlmc_status_free(st);
    }
  }
}

/* print(parse(print(p))) == print(p) */
static void check_round_trip(const vlmc_npu_program_t *p) {
  vlmc_strbuf_t first, second;
  vlmc_strbuf_init(&first);
  vlmc_strbuf_init(&second);
  vlmc_npu_program_print(p, &first);
  vlmc_npu_program_t again;
  vlmc_npu_program_init(&again);
  vlmc_status_t st =
      vlmc_npu_program_parse("fuzz.npu", vlmc_strbuf_cstr(&first), first.len, &again);
  assert(st == NULL);
  vlmc_status_free(st);
  vlmc_npu_program_print(&again, &second);
  assert(first.len == second.len &&
         memcmp(vlmc_strbuf_cstr(&first), vlmc_strbuf_cstr(&second), first.len) == 0);
  vlmc_npu_program_deinit(&again);
  vlmc_strbuf_deinit(&first);
  vlmc_strbuf_deinit(&second);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vlmc_npu_program_t p;
  vlmc_npu_program_init(&p);
  vlmc_status_t st = vlmc_npu_program_parse("fuzz.npu", (const char *)data, size, &p);
  if (st) {
    assert(strstr(vlmc_status_message(st), "fuzz.npu:") != NULL);
    vlmc_status_free(st);
  } else {
    check_on_both_devices(&p);
    check_round_trip(&p);
  }
  vlmc_npu_program_deinit(&p);
  return 0;
}
