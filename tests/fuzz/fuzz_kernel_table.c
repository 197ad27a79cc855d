/* Fuzzes the kernel table parser and check (section "kernels.cpu.json",
 * artifact/kernel_table.c) against a small fused program: a table either checks out or fails
 * with a status naming the section. No code is loaded. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "artifact/kernel_table.h"
#include "ir/ir.h"
#include "tests/unit/kernel_table_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static vlmc_module_t *module;
  if (!module) {
    vlmc_parse_options_t po = {.filename = "program", .first_line = 1};
    vlmc_status_t st = vlmc_module_parse(kTableProgram, strlen(kTableProgram), &po, &module);
    assert(!st);
    (void)st;
  }
  vlmc_kernel_table_t table;
  vlmc_status_t st = vlmc_kernel_table_parse("fuzz.vlmc", "cpu", (const char *)data, size, &table);
  if (!st) st = vlmc_kernel_table_check(&table, module);
  vlmc_kernel_table_deinit(&table);
  if (st) {
    assert(strstr(vlmc_status_message(st), "kernels.cpu.json") != NULL);
    vlmc_status_free(st);
  }
  return 0;
}
