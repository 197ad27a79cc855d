/* vlmc compile as a library call: a checkpoint folder in, one artifact out.
 *
 *   checkpoint ──models/──▶ module ──target pipeline──▶ module ──▶ artifact
 *                                                                 (program, params,
 *                                                                  tokenizer, template,
 *                                                                  manifest)
 * The tool (tools/cmd_compile.c) only parses flags into these options. */
#ifndef VLMC_CODEGEN_COMPILE_H
#define VLMC_CODEGEN_COMPILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "passes/pass.h"
#include "support/status.h"
#include "support/strbuf.h"

typedef struct {
  const char *checkpoint_dir;
  const char *output_path;
  const char *target;      /* comma-separated registered targets (codegen/target.h): "ref,cpu";
                              NULL: "ref" */
  /* key=value,... for the targets, e.g. "cpu=native" (`vlmc compile --target help` lists the
   * keys); NULL: none. */
  const char *target_options;
  const char *dump_kernels; /* folder for per-kernel MLIR / LLVM IR / assembly, or NULL */
  const char *precision;   /* "auto" (the target's default), "f32", "f16", "bf16" */
  const char *passes;      /* NULL: the target's default pipeline */
  /* Use this IR file (e.g. an edited --dump-dir dump) as the program instead of building the
   * model and running the pipeline; `passes`, when given, still runs on it. Its parameters are
   * read from the checkpoint by name. For debugging and for tests that plant a defect. */
  const char *program_path;
  bool params_external;    /* reference the checkpoint's safetensors instead of copying */
  /* Compile weights holding a NaN or an infinity (a warning each) instead of refusing them. */
  bool allow_nonfinite;
  /* A fixed image grid (rows of t, h, w in patches): the window order folds to constants.
   * NULL: any image size at run time. */
  const int64_t *grid;
  size_t num_images;
  /* Printing and dumps (print callback included); NULL fields mean off. */
  vlmc_pass_manager_options_t debug;
  const char *command_line; /* recorded in the manifest */
  /* Called with progress lines ("compile: 3 functions, 12 passes"); may be NULL. */
  void (*progress)(void *user, const char *line);
  void *progress_user;
} vlmc_compile_options_t;

/* The default pass pipeline for a target list and precision into out ("ref", "auto" ->
 * "mrope-layout,..."; a list with a kernel target ends with its tail, "fuse,memory-plan").
 * Error for unknown targets or precisions, naming the known ones. */
vlmc_status_t vlmc_compile_default_pipeline(const char *target, const char *precision,
                                            vlmc_strbuf_t *out_pipeline);

vlmc_status_t vlmc_compile(const vlmc_compile_options_t *options);

#endif
