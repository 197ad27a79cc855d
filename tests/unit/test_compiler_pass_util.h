/* Running a pipeline of vlmc's passes plus the domain passes (mrope-layout, window-reorder,
 * precision) on a module in a test, with the remarks collected into one string. */
#ifndef VLMC_TESTS_UNIT_TEST_COMPILER_PASS_UTIL_H
#define VLMC_TESTS_UNIT_TEST_COMPILER_PASS_UTIL_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/ir.h"
#include "passes/pass.h"
#include "support/strbuf.h"

/* Defined in passes/mrope_layout.c, passes/window_reorder.c, passes/precision.c. */
extern const vlmc_pass_t vlmc_pass_mrope_layout;
extern const vlmc_pass_t vlmc_pass_window_reorder;
extern const vlmc_pass_t vlmc_pass_precision;

static inline void remark_to_buf(void *user, const char *pass, const char *message) {
  vlmc_strbuf_printf(user, "[%s] %s\n", pass, message);
}

/* Adds the domain passes unless the builtin registration already has them. */
static inline vlmc_status_t domain_registry(vlmc_pass_registry_t *registry) {
  vlmc_pass_registry_init(registry);
  VLMC_RETURN_IF_ERROR(vlmc_pass_registry_add_builtin(registry));
  const vlmc_pass_t *domain[3] = {&vlmc_pass_mrope_layout, &vlmc_pass_window_reorder,
                                  &vlmc_pass_precision};
  for (int i = 0; i < 3; ++i)
    if (!vlmc_pass_registry_find(registry, domain[i]->name))
      VLMC_RETURN_IF_ERROR(vlmc_pass_registry_add(registry, domain[i]));
  return NULL;
}

/* Removes a dump directory (flat: the pass manager writes NN-<pass>.vir files only). */
static inline void remove_dump_dir(const char *dir) {
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  if (d) closedir(d);
  rmdir(dir);
}

/* Runs `pipeline` (verifier after every pass); remarks are appended to `remarks` (may be
 * NULL). The stage dumps, and the IR of a failing pass, go to a temporary directory that is
 * removed afterwards (tests expect some passes to fail). */
static inline vlmc_status_t run_passes(vlmc_module_t *module, const char *pipeline_text,
                                       vlmc_strbuf_t *remarks) {
  vlmc_pass_registry_t registry;
  VLMC_RETURN_IF_ERROR(domain_registry(&registry));
  vlmc_pass_pipeline_t *pipeline;
  VLMC_RETURN_IF_ERROR(vlmc_pass_pipeline_parse(&registry, pipeline_text, &pipeline));
  char dir[] = "/tmp/vlmc-test-passes-XXXXXX";
  vlmc_pass_manager_options_t options;
  memset(&options, 0, sizeof options);
  options.log = remarks ? remark_to_buf : NULL;
  options.user = remarks;
  options.dump_dir = mkdtemp(dir);
  vlmc_status_t st = vlmc_pass_manager_run(pipeline, &options, module);
  vlmc_pass_pipeline_destroy(pipeline);
  if (options.dump_dir) remove_dump_dir(dir);
  return st;
}

/* Parses text (the test's own IR) and verifies it; NULL on failure (reported). */
static inline vlmc_module_t *parse_module(const char *text) {
  vlmc_module_t *module = NULL;
  vlmc_parse_options_t options = {"test.vir", 0};
  vlmc_status_t st = vlmc_module_parse(text, strlen(text), &options, &module);
  if (!st) st = vlmc_module_verify(module);
  if (st) {
    fprintf(stderr, "parse_module: %s\n", vlmc_status_message(st));
    vlmc_status_free(st);
    vlmc_module_destroy(module);
    return NULL;
  }
  return module;
}

static inline vlmc_op_t *find_op(const vlmc_func_t *func, vlmc_op_kind_t kind, int nth) {
  for (vlmc_op_t *op = func->body.first; op; op = op->next)
    if (op->kind == kind && nth-- == 0) return op;
  return NULL;
}

#endif
