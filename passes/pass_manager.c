/* The pass manager: runs a pipeline over a module with the verifier after every pass, prints
 * the IR before/after the passes asked for, keeps a dump directory, and when a pass fails (or
 * leaves invalid IR) writes out the IR that went into it, like MLIR's crash reproducer. */
#define _POSIX_C_SOURCE 200809L
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "passes/internal.h"
#include "support/file.h"

/* ---- pass-name sets from option text ---- */

static bool name_in_list(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; p && *p;) {
    while (*p == ' ' || *p == ',') ++p;
    const char *end = p;
    while (*end && *end != ',' && *end != ' ') ++end;
    if ((size_t)(end - p) == n && memcmp(p, name, n) == 0) return true;
    p = end;
  }
  return false;
}

static vlmc_status_t check_name_list(const vlmc_pass_registry_t *registry, const char *list,
                                     const char *flag) {
  for (const char *p = list; p && *p;) {
    while (*p == ' ' || *p == ',') ++p;
    const char *end = p;
    while (*end && *end != ',' && *end != ' ') ++end;
    if (end == p) break;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(end - p), p);
    if (!vlmc_pass_registry_find(registry, name)) {
      vlmc_strbuf_t known;
      vlmc_strbuf_init(&known);
      vlmc_pass_registry_list(registry, &known);
      vlmc_status_t st = vlmc_status_make(VLMC_NOT_FOUND, "%s: unknown pass '%s'; registered "
                                          "passes: %s", flag, name, vlmc_strbuf_cstr(&known));
      vlmc_strbuf_deinit(&known);
      return st;
    }
    p = end;
  }
  return NULL;
}

/* ---- printing and files ---- */

static void emit(const vlmc_pass_manager_options_t *options, const char *when, const char *pass,
                 const char *ir) {
  if (!options->print) return;
  char header[256];
  snprintf(header, sizeof header, "// -----// IR Dump %s %s //----- //", when, pass);
  options->print(options->user, header, ir);
}

static vlmc_status_t dump_path(const char *dir, uint32_t index, const char *name,
                               const char *suffix, char **out_path) {
  size_t need = strlen(dir) + strlen(name) + strlen(suffix) + 32;
  *out_path = malloc(need);
  if (!*out_path) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  snprintf(*out_path, need, "%s/%02u-%s%s.vir", dir, index, name, suffix);
  return NULL;
}

static vlmc_status_t write_dump(const char *dir, uint32_t index, const char *name,
                                const char *suffix, const char *text, char **out_path) {
  char *path;
  VLMC_RETURN_IF_ERROR(dump_path(dir, index, name, suffix, &path));
  vlmc_status_t st = vlmc_file_write_all(path, text, strlen(text));
  if (st || !out_path) free(path);
  else *out_path = path;
  return st;
}

/* The directory for a failure's files: the dump directory, or a fresh temporary one. */
static vlmc_status_t failure_dir(const vlmc_pass_manager_options_t *options, char **out_dir) {
  if (options->dump_dir) {
    *out_dir = strdup(options->dump_dir);
    return *out_dir ? NULL : vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !tmp[0]) tmp = "/tmp";
  size_t need = strlen(tmp) + 32;
  char *dir = malloc(need);
  if (!dir) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  snprintf(dir, need, "%s/vlmc-failure-XXXXXX", tmp);
  if (!mkdtemp(dir)) {
    free(dir);
    return vlmc_status_make(VLMC_IO_ERROR, "cannot create a directory under %s", tmp);
  }
  *out_dir = dir;
  return NULL;
}

/* Writes the pass's input (and, when given, its invalid output) and adds their paths to the
 * error as notes, after the diagnostic itself. Consumes `error`. */
static vlmc_status_t report_failure(const vlmc_pass_manager_options_t *options, uint32_t index,
                                    const char *pass, const char *what, const char *input,
                                    const char *output, vlmc_status_t error) {
  char *dir = NULL, *input_path = NULL, *output_path = NULL;
  vlmc_status_t st = failure_dir(options, &dir);
  if (!st) st = write_dump(dir, index, pass, ".input", input, &input_path);
  if (!st && output) st = write_dump(dir, index, pass, ".invalid-output", output, &output_path);
  vlmc_status_t located;
  if (st)
    located = vlmc_status_make(vlmc_status_code(error), "%s\nnote: %s '%s'; could not save its "
                               "input: %s", vlmc_status_message(error), what, pass,
                               vlmc_status_message(st));
  else
    located = vlmc_status_make(
        vlmc_status_code(error), "%s\nnote: %s '%s'; the IR that went into it is in %s%s%s\n"
        "note: reproduce with: vlmc opt %s --passes=%s", vlmc_status_message(error), what, pass,
        input_path, output ? "; its invalid output is in " : "", output ? output_path : "",
        input_path, pass);
  vlmc_status_free(st);
  vlmc_status_free(error);
  free(dir);
  free(input_path);
  free(output_path);
  return located;
}

/* ---- running ---- */

typedef struct {
  vlmc_pass_pipeline_t *pipeline;
  const vlmc_pass_manager_options_t *options;
  vlmc_module_t *module;
  char *before; /* the module's text before the current pass */
} run_state_t;

static vlmc_status_t module_text(const vlmc_module_t *module, char **out) {
  *out = vlmc_module_to_string(module);
  return *out ? NULL : vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory printing the IR");
}

static bool wants_after(const vlmc_pass_manager_options_t *o, const char *name, bool changed) {
  bool selected = o->print_ir_after_all || name_in_list(o->print_ir_after, name);
  bool restricted = o->print_ir_after_all || (o->print_ir_after && o->print_ir_after[0]);
  if (o->print_ir_after_change) return changed && (selected || !restricted);
  return selected;
}

static vlmc_status_t run_one(run_state_t *state, uint32_t index) {
  const vlmc_pass_manager_options_t *o = state->options;
  vlmc_pass_instance_t *inst = &state->pipeline->instances[index];
  const char *name = inst->pass->name;
  if (o->print_ir_before_all || name_in_list(o->print_ir_before, name))
    emit(o, "Before", name, state->before);
  vlmc_pass_context_t ctx = {inst, o};
  vlmc_status_t st = inst->pass->run(&ctx, state->module);
  if (st) return report_failure(o, index + 1, name, "while running pass", state->before, NULL, st);
  char *after;
  VLMC_RETURN_IF_ERROR(module_text(state->module, &after));
  st = o->skip_verify ? NULL : vlmc_module_verify(state->module);
  if (st) {
    st = report_failure(o, index + 1, name, "the IR is invalid after pass", state->before, after,
                        st);
    free(after);
    return st;
  }
  if (wants_after(o, name, strcmp(after, state->before) != 0)) emit(o, "After", name, after);
  if (o->dump_dir) st = write_dump(o->dump_dir, index + 1, name, "", after, NULL);
  free(state->before);
  state->before = after;
  return st;
}

/* A pass dump's name: NN-NAME.vir (write_dump's). */
static bool is_dump_name(const char *name) {
  size_t n = strlen(name);
  return n > 7 && isdigit((unsigned char)name[0]) && isdigit((unsigned char)name[1]) &&
         name[2] == '-' && !strcmp(name + n - 4, ".vir");
}

/* A reused --dump-dir loses the dumps of an earlier run first, so that every dump in it is
 * this run's (a pass that did not run this time leaves no stale file behind). Only files
 * named like dumps go; anything else in the folder stays. */
static vlmc_status_t remove_stale_dumps(const vlmc_pass_manager_options_t *o) {
  DIR *d = opendir(o->dump_dir);
  if (!d) return NULL; /* just made, or unreadable: write_dump reports what matters */
  int removed = 0;
  vlmc_status_t st = NULL;
  for (struct dirent *e; !st && (e = readdir(d)) != NULL;) {
    if (!is_dump_name(e->d_name)) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", o->dump_dir, e->d_name);
    if (unlink(path) == 0) removed++;
    else st = vlmc_status_make(VLMC_IO_ERROR, "--dump-dir %s: cannot remove the earlier dump %s",
                               o->dump_dir, e->d_name);
  }
  closedir(d);
  if (!st && removed && o->log) {
    char line[160];
    snprintf(line, sizeof line, "removed %d dump%s of an earlier run from %s", removed,
             removed == 1 ? "" : "s", o->dump_dir);
    o->log(o->user, "dump-dir", line);
  }
  return st;
}

vlmc_status_t vlmc_pass_manager_run(vlmc_pass_pipeline_t *pipeline,
                                    const vlmc_pass_manager_options_t *options,
                                    vlmc_module_t *module) {
  vlmc_pass_manager_options_t none;
  if (!options) {
    memset(&none, 0, sizeof none);
    options = &none;
  }
  VLMC_RETURN_IF_ERROR(
      check_name_list(pipeline->registry, options->print_ir_before, "--print-ir-before"));
  VLMC_RETURN_IF_ERROR(
      check_name_list(pipeline->registry, options->print_ir_after, "--print-ir-after"));
  run_state_t state = {pipeline, options, module, NULL};
  VLMC_RETURN_IF_ERROR(module_text(module, &state.before));
  vlmc_status_t st = NULL;
  if (options->dump_dir) {
    st = vlmc_file_mkdirs(options->dump_dir);
    if (!st) st = remove_stale_dumps(options);
    if (!st) st = write_dump(options->dump_dir, 0, "input", "", state.before, NULL);
  }
  for (uint32_t i = 0; !st && i < pipeline->count; ++i) st = run_one(&state, i);
  free(state.before);
  return st;
}
