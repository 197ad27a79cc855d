/* The pass layer's one public header: pass descriptors, an explicit registry, pipelines given as
 * text, and the pass manager with its debugging aids (print before/after, dump directory,
 * verifier after every pass, the IR that went into a failing pass written out).
 *
 * A pass lives in one file (passes/<name>.c) that exports one `const vlmc_pass_t`; its header
 * comment says what the pass requires and what it invalidates. No global mutable state: the
 * registry is an object the tool creates, and options reach a pass through its context. */
#ifndef VLMC_PASSES_PASS_H
#define VLMC_PASSES_PASS_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"
#include "support/status.h"
#include "support/strbuf.h"

typedef enum {
  VLMC_PASS_OPTION_INT,
  VLMC_PASS_OPTION_BOOL,
  VLMC_PASS_OPTION_STRING,
} vlmc_pass_option_kind_t;

typedef struct {
  const char *name;          /* as written in a pipeline: "canonicalize{max-iterations=4}" */
  vlmc_pass_option_kind_t kind;
  const char *default_value; /* text, parsed like a pipeline value */
  const char *help;
} vlmc_pass_option_t;

typedef struct vlmc_pass_context_s vlmc_pass_context_t;

typedef struct {
  const char *name;    /* registry key and pipeline name, e.g. "cse" */
  const char *summary; /* one line */
  const vlmc_pass_option_t *options;
  uint32_t num_options;
  const char *const *statistics; /* names of the counters the pass bumps */
  uint32_t num_statistics;
  /* Transforms the module in place. An error means the pass could not do its job (the
   * manager then writes out the IR that went in and names the file in the error). */
  vlmc_status_t (*run)(vlmc_pass_context_t *ctx, vlmc_module_t *module);
} vlmc_pass_t;

/* ---- what a running pass can ask its context ---- */

int64_t vlmc_pass_option_int(const vlmc_pass_context_t *ctx, const char *name);
bool vlmc_pass_option_bool(const vlmc_pass_context_t *ctx, const char *name);
const char *vlmc_pass_option_string(const vlmc_pass_context_t *ctx, const char *name);
/* Adds n to statistic `index` (an index into the pass's statistics array). */
void vlmc_pass_stat_add(vlmc_pass_context_t *ctx, uint32_t index, uint64_t n);
/* A remark for the person debugging ("upcast %x to f32: softmax rule"); goes to the
 * manager's log callback, if any. */
void vlmc_pass_remark(vlmc_pass_context_t *ctx, const char *fmt, ...) VLMC_PRINTF(2, 3);

/* ---- the registry ---- */

enum { VLMC_PASS_REGISTRY_CAPACITY = 64 };

typedef struct {
  const vlmc_pass_t *passes[VLMC_PASS_REGISTRY_CAPACITY];
  uint32_t count;
} vlmc_pass_registry_t;

void vlmc_pass_registry_init(vlmc_pass_registry_t *registry);
/* Error when the name is taken or the registry is full. */
vlmc_status_t vlmc_pass_registry_add(vlmc_pass_registry_t *registry, const vlmc_pass_t *pass);
/* Registers every pass of this layer (canonicalize, cse, dce, mrope-layout, ...). */
vlmc_status_t vlmc_pass_registry_add_builtin(vlmc_pass_registry_t *registry);
const vlmc_pass_t *vlmc_pass_registry_find(const vlmc_pass_registry_t *registry, const char *name);
/* "canonicalize, cse, dce" (registration order) into out. */
void vlmc_pass_registry_list(const vlmc_pass_registry_t *registry, vlmc_strbuf_t *out);

/* The passes of this layer (vlmc_pass_registry_add_builtin registers them in this order:
 * the general ones, then the domain passes). */
extern const vlmc_pass_t vlmc_pass_canonicalize;
extern const vlmc_pass_t vlmc_pass_cse;
extern const vlmc_pass_t vlmc_pass_dce;
extern const vlmc_pass_t vlmc_pass_mrope_layout;
extern const vlmc_pass_t vlmc_pass_window_reorder;
extern const vlmc_pass_t vlmc_pass_quantize;
extern const vlmc_pass_t vlmc_pass_precision;
extern const vlmc_pass_t vlmc_pass_fuse;
extern const vlmc_pass_t vlmc_pass_memory_plan;

/* ---- pipelines ---- */

typedef struct vlmc_pass_pipeline_s vlmc_pass_pipeline_t;

/* Parses "canonicalize,dce,cse" or "canonicalize{max-iterations=2},cse" against the registry.
 * Unknown passes are errors that list the registered ones; unknown options list the pass's
 * options. An empty text is an empty pipeline. */
vlmc_status_t vlmc_pass_pipeline_parse(const vlmc_pass_registry_t *registry, const char *text,
                                       vlmc_pass_pipeline_t **out_pipeline);
void vlmc_pass_pipeline_destroy(vlmc_pass_pipeline_t *pipeline);
uint32_t vlmc_pass_pipeline_size(const vlmc_pass_pipeline_t *pipeline);
/* Statistics accumulated by vlmc_pass_manager_run, one line per non-zero counter:
 * "cse: ops-eliminated = 3". */
void vlmc_pass_pipeline_print_statistics(const vlmc_pass_pipeline_t *pipeline, vlmc_strbuf_t *out);

/* ---- the pass manager ---- */

typedef struct {
  /* Comma-separated pass names; each must be registered. NULL or "" for none. */
  const char *print_ir_before;
  const char *print_ir_after;
  bool print_ir_before_all;
  bool print_ir_after_all;
  /* Print after a pass only when the IR text changed. Alone: after every pass that changed
   * it; with print_ir_after(_all): restricts those to the passes that changed it. */
  bool print_ir_after_change;
  /* Writes 00-input.vir and then NN-<pass>.vir after pass NN (created if missing). */
  const char *dump_dir;
  /* The verifier runs after every pass unless this is set. */
  bool skip_verify;
  /* Receives each printed IR with its header line ("// -----// IR Dump After cse //----- //").
   * NULL: printing options have no effect. */
  void (*print)(void *user, const char *header, const char *ir);
  /* Receives pass remarks. NULL: remarks are dropped. */
  void (*log)(void *user, const char *pass, const char *message);
  void *user;
} vlmc_pass_manager_options_t;

/* Runs the pipeline on the module. On a pass error or a verifier error after a pass, the IR
 * that went into the pass is written to the dump directory (or a new temporary directory) and
 * the error names the file. */
vlmc_status_t vlmc_pass_manager_run(vlmc_pass_pipeline_t *pipeline,
                                    const vlmc_pass_manager_options_t *options,
                                    vlmc_module_t *module);

#endif
