/* Fuzzes the .vir parser, and through it the verifier and the printer. Properties checked on
 * every input:
 *   - parsing never crashes (malformed input is an error status);
 *   - whatever parses, verified or not, prints, and the print parses back and prints the
 *     same bytes (print(parse(x)) is a fixed point of print . parse);
 *   - what verifies still verifies after the round trip.
 * A violated property aborts, which libFuzzer and the corpus replay both report. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static void fail(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_ir_parser: %s\n%s\n", what, detail ? detail : "");
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vlmc_parse_options_t options = {"fuzz.vir", 1};
  vlmc_module_t *module;
  vlmc_status_t st = vlmc_module_parse((const char *)data, size, &options, &module);
  if (st) {
    if (!strstr(vlmc_status_message(st), "error")) fail("a parse error without 'error'", NULL);
    vlmc_status_free(st);
    return 0;
  }
  vlmc_status_t verified = vlmc_module_verify(module);
  char *first = vlmc_module_to_string(module);
  if (!first) fail("printing failed", NULL);

  vlmc_module_t *again;
  options.filename = "fuzz-printed.vir";
  st = vlmc_module_parse(first, strlen(first), &options, &again);
  if (st) fail(vlmc_status_message(st), first);
  char *second = vlmc_module_to_string(again);
  if (!second || strcmp(first, second) != 0) fail("printing is not stable; first print:", first);
  if (!verified) {
    vlmc_status_t st2 = vlmc_module_verify(again);
    if (st2) fail(vlmc_status_message(st2), first);
  }
  vlmc_status_free(verified);
  free(first);
  free(second);
  vlmc_module_destroy(module);
  vlmc_module_destroy(again);
  return 0;
}
