/* Fuzzes the three domain passes (mrope-layout, window-reorder, precision) on whatever IR
 * parses and verifies, and the precision calibration's text parser. Properties checked:
 *   - no pass crashes or trips an assert on verified IR (a refusal is an error status);
 *   - what a pass leaves verifies;
 *   - the calibration parser refuses malformed text with an error, never crashes.
 * Input: the first byte picks the target (even: a .vir module, odd: calibration text, run
 * through precision on a fixed module when it parses); bit 1 picks precision's target.
 * The passes run directly (as the pass manager runs them, without its dump files, so that a
 * fuzzing run writes nothing to disk). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "passes/internal.h"
#include "passes/pass.h"
#include "passes/precision.h"

extern const vlmc_pass_t vlmc_pass_mrope_layout;
extern const vlmc_pass_t vlmc_pass_window_reorder;

static void fail(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_compiler_domain_passes: %s\n%s\n", what, detail ? detail : "");
  abort();
}

/* Runs a pipeline's passes in order, verifying after each; stops at the first refusal. */
static void run_pipeline(vlmc_module_t *module, const char *text) {
  vlmc_pass_registry_t registry;
  vlmc_pass_registry_init(&registry);
  vlmc_status_t st = vlmc_pass_registry_add_builtin(&registry);
  const vlmc_pass_t *domain[3] = {&vlmc_pass_mrope_layout, &vlmc_pass_window_reorder,
                                  &vlmc_pass_precision};
  for (int i = 0; !st && i < 3; ++i)
    if (!vlmc_pass_registry_find(&registry, domain[i]->name))
      st = vlmc_pass_registry_add(&registry, domain[i]);
  vlmc_pass_pipeline_t *pipeline = NULL;
  if (!st) st = vlmc_pass_pipeline_parse(&registry, text, &pipeline);
  if (st) fail("the pipeline does not parse", vlmc_status_message(st));
  vlmc_pass_manager_options_t options;
  memset(&options, 0, sizeof options);
  for (uint32_t i = 0; i < pipeline->count; ++i) {
    vlmc_pass_context_t ctx = {&pipeline->instances[i], &options};
    st = pipeline->instances[i].pass->run(&ctx, module);
    if (st) break; /* refused: fine, with a message */
    st = vlmc_module_verify(module);
    if (st) {
      char *ir = vlmc_module_to_string(module);
      fprintf(stderr, "after %s: %s\n", pipeline->instances[i].pass->name,
              vlmc_status_message(st));
      fail("a pass left invalid IR", ir);
    }
  }
  vlmc_status_free(st);
  vlmc_pass_pipeline_destroy(pipeline);
}

static const char kBlock[] =
    "func @block(%x: f32[S,8], %w: bf16[8,8]) -> f32[S,8] {\n"
    "  %w32 = cast %w {dtype=f32} : f32[8,8]\n"
    "  %y = linear %x, %w32 : f32[S,8]\n"
    "  %z = silu %y : f32[S,8]\n"
    "  %o = add %z, %x : f32[S,8]\n"
    "  return %o\n"
    "}\n";

static void fuzz_calibration(const char *text, size_t len, bool f16) {
  vlmc_precision_calibration_t cal;
  vlmc_precision_calibration_init(&cal);
  vlmc_status_t st = vlmc_precision_calibration_parse(text, len, "fuzz.txt", &cal);
  if (!st) {
    vlmc_parse_options_t options = {"block.vir", 1};
    vlmc_module_t *module = NULL;
    st = vlmc_module_parse(kBlock, strlen(kBlock), &options, &module);
    if (st) fail("the fixed module does not parse", vlmc_status_message(st));
    vlmc_precision_options_t popt = {f16 ? VLMC_PRECISION_F16 : VLMC_PRECISION_BF16, &cal, NULL,
                                     NULL, 1};
    st = vlmc_precision_apply(module, &popt, NULL);
    if (!st) {
      st = vlmc_module_verify(module);
      if (st) fail("precision left invalid IR", vlmc_status_message(st));
    }
    vlmc_module_destroy(module);
  }
  vlmc_status_free(st);
  vlmc_precision_calibration_deinit(&cal);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  bool f16 = data[0] & 2;
  if (data[0] & 1) {
    fuzz_calibration((const char *)data + 1, size - 1, f16);
    return 0;
  }
  vlmc_parse_options_t options = {"fuzz.vir", 1};
  vlmc_module_t *module = NULL;
  vlmc_status_t st = vlmc_module_parse((const char *)data + 1, size - 1, &options, &module);
  if (!st) st = vlmc_module_verify(module);
  if (!st)
    run_pipeline(module, f16 ? "mrope-layout,window-reorder,precision{target=f16}"
                             : "window-reorder,mrope-layout,canonicalize,precision{target=bf16}");
  vlmc_status_free(st);
  vlmc_module_destroy(module);
  return 0;
}
