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

#include "frontend/chat_template.h"
#include "frontend/preprocess.h"
#include "frontend/tokenizer.h"
#include "passes/pass.h"
#include "support/status.h"
#include "support/strbuf.h"

/* ---- calibration inputs ----
 * `--calibrate IMG`: each image becomes one request, built the way the runtime builds it
 * (chat template, preprocessing, M-RoPE positions: runtime/request.c), and runs through the
 * program in f32 before the precision pass. The runtime is above this layer, so the caller
 * (tools/cmd_compile.c) supplies the builder; the compiler supplies what it reads from the
 * checkpoint. */
typedef struct {
  const vlmc_tokenizer_t *tokenizer;         /* NULL: the checkpoint has no tokenizer.json */
  const vlmc_chat_template_t *chat_template; /* NULL: no chat template */
  const vlmc_preprocess_params_t *preprocess;
  int64_t image_token_id, video_token_id, vision_start_token_id, vision_end_token_id;
  int64_t merge_size;
} vlmc_compile_sample_source_t;

/* One prompt in the calling convention's terms (what encode_image and prefill take). The
 * builder owns the arrays until its release call. */
typedef struct {
  const int64_t *input_ids;    /* [seq_len] */
  size_t seq_len;
  const int64_t *positions;    /* [3][seq_len], plane-major */
  int64_t rope_delta;
  const float *pixel_values;   /* [num_rows][row_width] */
  int64_t num_rows, row_width;
  const int64_t *image_grid_thw; /* [num_images][3] */
  size_t num_images;
  const char *description;     /* for the progress line: "84 tokens (chat template)" */
  void *owner;                 /* the builder's */
} vlmc_compile_sample_t;

typedef struct {
  vlmc_status_t (*build)(void *user, const vlmc_compile_sample_source_t *source,
                         const char *image_path, const char *prompt, vlmc_compile_sample_t *out);
  void (*release)(void *user, vlmc_compile_sample_t *sample);
  void *user;
} vlmc_compile_sampler_t;

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
  /* --quantize q4[:gN] | q8[:gN]: the quantize pass before precision (passes/quantize.c),
   * the quantized weights written into the artifact; NULL: none. quantize_vision: the vision
   * tower's linears too. */
  const char *quantize;
  bool quantize_vision;
  /* Compile weights holding a NaN or an infinity (a warning each) instead of refusing them. */
  bool allow_nonfinite;
  /* A fixed image grid (rows of t, h, w in patches): the window order folds to constants.
   * NULL: any image size at run time. */
  const int64_t *grid;
  size_t num_images;
  /* Printing and dumps (print callback included); NULL fields mean off. */
  vlmc_pass_manager_options_t debug;
  /* --calibrate: images to run through the program in f32 before the precision pass, whose
   * ranges then keep in f32 every value that leaves the low precision's range with headroom
   * (passes/precision.h). Refused when the program computes in f32. */
  const char *const *calibrate_images;
  size_t num_calibrate_images;
  const char *calibrate_prompt;  /* NULL: "Describe this image." */
  uint32_t calibrate_decode_steps; /* greedy decode steps after prefill (0: none) */
  vlmc_compile_sampler_t sampler;  /* required with calibrate_images */
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
