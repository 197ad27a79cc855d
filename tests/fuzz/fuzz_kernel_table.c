/* Fuzzes the cpu kernel table parser (section "kernels.cpu.json", runtime/cpu_backend.c)
 * against a small fused program: a table either checks out or fails with a status naming the
 * section. No code is loaded (vlmc_cpu_table_check). */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "runtime/backends/cpu/cpu_backend.h"
#include "tests/unit/cpu_table_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static vlmc_module_t *module;
  if (!module) {
    vlmc_parse_options_t po = {.filename = "program", .first_line = 1};
    vlmc_status_t st = vlmc_module_parse(kTableProgram, strlen(kTableProgram), &po, &module);
    assert(!st);
    (void)st;
  }
  vlmc_status_t st = vlmc_cpu_table_check("fuzz.vlmc", (const char *)data, size, module);
  if (st) {
    assert(strstr(vlmc_status_message(st), "kernels.cpu.json") != NULL);
    vlmc_status_free(st);
  }
  return 0;
}
