/* Code generation targets behind one interface. A target is a const table (vlmc_target_t) in
 * its own folder, codegen/targets/<name>/, listed once in codegen/target_registry.c; compile.c
 * and `vlmc kernel-test` know targets only through this header. To add one, copy
 * codegen/targets/null (its README.md says what each entry must do).
 *
 * What compile does with a list of targets ("ref,cpu"):
 *   1. the default pipeline: the common passes, precision{target=...} from the targets'
 *      precision policy, then the pipeline tail the kernel targets need ("fuse,memory-plan");
 *   2. per target with kernels: create, then every dispatch region of every function is
 *      checked with `supports` (an unsupported one is refused by name) and given to
 *      `emit_region`; `finish` hands back the artifact sections the target owns; `destroy`.
 * The program, parameters, tokenizer and manifest sections are compile.c's own. */
#ifndef VLMC_CODEGEN_TARGET_H
#define VLMC_CODEGEN_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir/dispatch.h"
#include "ir/ir.h"
#include "support/status.h"
#include "support/strbuf.h"

enum { VLMC_TARGET_MAX_SECTIONS = 8, VLMC_TARGET_MAX_OPTIONS = 16, VLMC_TARGET_MAX_LIST = 8 };

/* A target option, given as key=value (`vlmc compile --cpu native` is cpu=native). Keys are
 * unique over all registered targets, so one options list serves a whole target list. */
typedef struct {
  const char *key;
  const char *help; /* one line, for `vlmc compile --target help` */
} vlmc_target_option_t;

/* What a target is given when it starts. */
typedef struct {
  struct {
    char key[32];
    char value[128];
  } options[VLMC_TARGET_MAX_OPTIONS];
  size_t num_options;
  /* --dump-kernels: a folder for the target's per-kernel files (sources before and after
   * lowering, assembly), written as it emits; NULL for none. */
  const char *dump_dir;
  void (*progress)(void *user, const char *line); /* may be NULL */
  void *progress_user;
} vlmc_target_config_t;

/* One artifact section a target owns ("kernels.cpu"): bytes owned by the target's state. */
typedef struct {
  const char *name;
  const void *data;
  size_t len;
  uint32_t alignment; /* of the section's start in the artifact file */
} vlmc_target_section_t;

typedef struct {
  vlmc_target_section_t items[VLMC_TARGET_MAX_SECTIONS];
  size_t count;
} vlmc_target_sections_t;

typedef struct vlmc_target_s vlmc_target_t;

struct vlmc_target_s {
  const char *name;    /* --target name, e.g. "cpu" */
  const char *summary; /* one line, for `vlmc compile --target help` */
  const vlmc_target_option_t *options;
  size_t num_options;
  /* The target whose kernels this one's are, translated (metal: "vulkan"); NULL for its own.
   * Kernel tests apply that target's directives to this one (tools/cmd_kernel_test.c). */
  const char *kernels_from;

  /* ---- its default pipeline ---- */
  /* The --precision values its kernels can compute in, comma-separated ("f32"; "f32,f16,bf16";
   * "bf16-matmul": f32 activations, linears with bf16 weights on bf16-rounded inputs).
   * Any other is refused: "--precision P with --target NAME: <precision_note>; use ...". */
  const char *precisions;
  const char *precision_note;
  /* What --precision auto means for it ("f32"); NULL: no preference (the program only). */
  const char *default_precision;
  /* The passes it needs at the end of the pipeline, with their options, e.g.
   * "fuse,memory-plan" (regions and activation slots); NULL: none. Kernel targets of one
   * artifact must agree on it: they run the same regions. */
  const char *pipeline_tail;
  /* The fuse pass's boolean options its kernels can serve, comma-separated ("norm-prologue":
   * passes/fuse.c), NULL for none. The tail turns on those that every kernel target of the
   * artifact lists (they run the same regions): a vulkan artifact gets norm prologues, a
   * cpu,vulkan one does not. */
  const char *fusions;

  /* ---- its kernels (all NULL for a target that adds no sections, like ref) ---- */
  /* Whether it can write a kernel for the region (anchor: region->ops[anchor_index]). The
   * driver refuses an unsupported one by name: "target T: @f dispatch 3 (linear) is not
   * supported". */
  bool (*supports)(const vlmc_dispatch_region_t *region, const vlmc_op_t *anchor);
  /* Starts code generation for a module (config and module stay alive until destroy). */
  vlmc_status_t (*create)(const vlmc_target_config_t *config, const vlmc_module_t *module,
                          void **out_state);
  /* One kernel for a supported region; regions with the same kernel text share one kernel. */
  vlmc_status_t (*emit_region)(void *state, const vlmc_func_t *func,
                               const vlmc_dispatch_region_t *region);
  /* After the last region: the sections it owns (their bytes stay the state's). */
  vlmc_status_t (*finish)(void *state, vlmc_target_sections_t *out);
  void (*destroy)(void *state);
};

/* ---- the registry (codegen/target_registry.c) ---- */

size_t vlmc_target_count(void);
const vlmc_target_t *vlmc_target_at(size_t index); /* registration order */
const vlmc_target_t *vlmc_target_find(const char *name); /* NULL when unknown */
/* "ref, cpu, null" (registration order) into out. */
void vlmc_target_names(vlmc_strbuf_t *out);

/* ---- target lists and options (codegen/target.c) ---- */

typedef struct {
  const vlmc_target_t *targets[VLMC_TARGET_MAX_LIST];
  size_t count;
} vlmc_target_list_t;

/* "ref,cpu" into targets; an unknown name is refused listing the registered targets. NULL
 * or "" is "ref". */
vlmc_status_t vlmc_target_list_parse(const char *text, vlmc_target_list_t *out);
/* The default pipeline for the list and a --precision ("auto", "f32", "f16", "bf16",
 * "bf16-matmul"). */
vlmc_status_t vlmc_target_list_pipeline(const vlmc_target_list_t *list, const char *precision,
                                        vlmc_strbuf_t *out);
/* The pipeline tail the list's kernel targets need ("" for none), with the fusions they all
 * serve as the fuse pass's options, into out. */
vlmc_status_t vlmc_target_list_tail(const vlmc_target_list_t *list, vlmc_strbuf_t *out);
/* Runs one target's pipeline tail on a module (kernel tests: a program as it reaches the
 * target's code generator). */
vlmc_status_t vlmc_target_run_tail(const vlmc_target_t *target, vlmc_module_t *module);

/* "cpu=native,key=value" (NULL or "" for none) into config->options; a key no registered
 * target takes is refused, naming the keys there are. */
vlmc_status_t vlmc_target_config_set_options(vlmc_target_config_t *config, const char *text);
/* The value given for key, or NULL. */
const char *vlmc_target_config_option(const vlmc_target_config_t *config, const char *key);

/* ---- running one target (codegen/target.c) ---- */

typedef struct {
  const vlmc_target_t *target;
  void *state;
  vlmc_target_sections_t sections; /* valid until vlmc_target_output_free */
} vlmc_target_output_t;

/* Runs the target over every dispatch region of the module (which must stay alive until
 * the output is freed). A target without kernels gives no sections. Every compute op must be
 * in a region (the pipeline tail's fuse pass puts them there). */
vlmc_status_t vlmc_target_generate(const vlmc_target_t *target, const vlmc_module_t *module,
                                   const vlmc_target_config_t *config,
                                   vlmc_target_output_t *out);
void vlmc_target_output_free(vlmc_target_output_t *output);
/* The section of that name in an output, or NULL. */
const vlmc_target_section_t *vlmc_target_output_section(const vlmc_target_output_t *output,
                                                        const char *name);

/* The built-in targets (one folder each under codegen/targets/). */
extern const vlmc_target_t vlmc_target_ref;
extern const vlmc_target_t vlmc_target_cpu;
extern const vlmc_target_t vlmc_target_null;
extern const vlmc_target_t vlmc_target_vulkan;
extern const vlmc_target_t vlmc_target_metal;

#endif
