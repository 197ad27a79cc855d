/* vlmc compile CKPT_DIR -o model.vlmc: a checkpoint folder into a deployable artifact. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "codegen/compile.h"
#include "codegen/target.h"
#include "frontend/image.h"
#include "reference/mrope_positions.h"
#include "runtime/request.h"
#include "support/strbuf.h"
#include "tools/commands.h"
#include "tools/pass_flags.h"

enum { MAX_IMAGES = 16, MAX_CALIBRATION_IMAGES = 64, CALIBRATION_DECODE_STEPS = 2 };

static void print_help(FILE *out) {
  fprintf(out,
          "usage: vlmc compile CKPT_DIR -o model.vlmc [options]\n"
          "  CKPT_DIR                  a HuggingFace Qwen2.5-VL folder (config.json, safetensors,\n"
          "                            tokenizer.json[.gz], chat template, processor config)\n"
          "  -o FILE                   the artifact to write\n"
          "  --target LIST             backends to carry code for (default ref,cpu);\n"
          "                            --target help lists the targets and their options\n"
          "  --cpu CPU                 cpu kernels for: portable (default, any x86-64),\n"
          "                            x86-64-v2, x86-64-v3, x86-64-v4 or native (this machine);\n"
          "                            the same as --target-option cpu=CPU\n"
          "  --target-option KEY=VALUE\n"
          "                            a target's option (repeatable)\n"
          "  --dump-kernels DIR        write each cpu kernel's MLIR (before and after\n"
          "                            lowering), LLVM IR and assembly into DIR\n"
          "  --precision P             auto (target default), f32, f16, bf16 or bf16-matmul\n"
          "                            (f32 activations; linears with bf16 weights read their\n"
          "                            input rounded to bf16: a bf16 dot product on AVX512_BF16)\n"
          "  --calibrate IMG [IMG...]  with f16/bf16: run these images through the f32\n"
          "                            program first (reference executor) and keep in f32\n"
          "                            every value whose |x| passed the dtype's max / 4\n"
          "  --calibrate-prompt TEXT   the calibration prompt (default \"Describe this\n"
          "                            image.\"; needs the checkpoint's tokenizer)\n"
          "  --quantize q4[:gN]        4-bit affine group quantization of the language model's\n"
          "                            linears (q8: 8-bit), groups of N weights along the input\n"
          "                            (default 64: MLX's, 4.5 bits a weight with f16 scale and\n"
          "                            bias); written into the artifact (docs/quantization.md)\n"
          "  --quantize-vision         with --quantize: the vision tower's linears too\n"
          "  --passes LIST             replace the target's pipeline\n"
          "  --params inline|external  copy the weights into the artifact (default), or\n"
          "                            reference them by name and checksum in CKPT_DIR\n"
          "  --image-size WxH          compile for this image size (repeat for several images\n"
          "                            per prompt): the window order folds to constants\n"
          "  --program FILE.vir        take the program from this IR file (an edited dump)\n"
          "                            instead of building the model; weights from CKPT_DIR\n"
          "  --allow-nonfinite         compile weights holding a NaN or an infinity (a\n"
          "                            warning each); by default they are refused by name\n"
          "%s",
          vlmc_tool_pass_flags_help);
}

static void print_progress(void *user, const char *line) { fprintf(stderr, "%s\n", line); }

/* ---- calibration requests ----
 * Built as vlmc-run builds a request (runtime/request.c: chat template, preprocessing, M-RoPE
 * positions). A checkpoint without a tokenizer or chat template (test checkpoints) gets the
 * image's own tokens as the prompt: <|vision_start|>, one pad per merged patch,
 * <|vision_end|>. */
typedef struct {
  vlmc_request_t request;          /* with a tokenizer and template */
  vlmc_preprocess_output_t pixels; /* without: the image alone */
  int64_t *ids, *positions;
  char description[256];
} calibration_request_t;

static void fill_sample(const int64_t *ids, size_t seq_len, const int64_t *positions,
                        int64_t rope_delta, const vlmc_preprocess_output_t *px,
                        vlmc_compile_sample_t *out) {
  out->input_ids = ids;
  out->seq_len = seq_len;
  out->positions = positions;
  out->rope_delta = rope_delta;
  out->pixel_values = px->pixel_values;
  out->num_rows = px->num_rows;
  out->row_width = px->row_width;
  out->image_grid_thw = px->image_grid_thw;
  out->num_images = px->num_images;
}

static vlmc_status_t image_only_request(const vlmc_compile_sample_source_t *src,
                                        const char *image_path, calibration_request_t *r,
                                        vlmc_compile_sample_t *out) {
  vlmc_image_t image;
  VLMC_RETURN_IF_ERROR(vlmc_image_load(image_path, &image));
  vlmc_status_t st = vlmc_preprocess_images(&image, &image_path, 1, src->preprocess, &r->pixels);
  vlmc_image_destroy(&image);
  VLMC_RETURN_IF_ERROR(st);
  const int64_t *g = r->pixels.image_grid_thw;
  int64_t merge = src->merge_size > 0 ? src->merge_size : 1;
  size_t pads = (size_t)(g[0] * g[1] * g[2] / (merge * merge)), n = pads + 2;
  r->ids = malloc(n * sizeof *r->ids);
  r->positions = malloc(3 * n * sizeof *r->positions);
  if (!r->ids || !r->positions) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  r->ids[0] = src->vision_start_token_id;
  for (size_t i = 0; i < pads; ++i) r->ids[1 + i] = src->image_token_id;
  r->ids[n - 1] = src->vision_end_token_id;
  vlmc_grid_thw_t grid = {g[0], g[1], g[2]};
  vlmc_mrope_config_t config = {src->image_token_id, src->video_token_id, merge};
  int64_t delta = 0;
  VLMC_RETURN_IF_ERROR(vlmc_mrope_position_ids(r->ids, n, &grid, 1, config, r->positions, &delta));
  fill_sample(r->ids, n, r->positions, delta, &r->pixels, out);
  snprintf(r->description, sizeof r->description,
           "%zu tokens, the image alone (the checkpoint has no tokenizer or chat template)", n);
  return NULL;
}

static vlmc_status_t build_sample(void *user, const vlmc_compile_sample_source_t *src,
                                  const char *image_path, const char *prompt,
                                  vlmc_compile_sample_t *out) {
  calibration_request_t *r = calloc(1, sizeof *r);
  if (!r) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  out->owner = r;
  if (!src->tokenizer || !src->chat_template) {
    vlmc_status_t st = image_only_request(src, image_path, r, out);
    out->description = r->description;
    return st;
  }
  vlmc_request_model_t model = {src->image_token_id, src->video_token_id, src->merge_size};
  vlmc_request_spec_t spec = {.image_paths = &image_path, .num_images = 1, .prompt = prompt};
  VLMC_RETURN_IF_ERROR(vlmc_request_build(src->tokenizer, src->chat_template, src->preprocess,
                                          model, &spec, &r->request));
  fill_sample(r->request.input_ids, r->request.seq_len, r->request.positions,
              r->request.rope_delta, &r->request.pixels, out);
  snprintf(r->description, sizeof r->description, "%zu prompt tokens (chat template, \"%.60s\")",
           r->request.seq_len, prompt);
  out->description = r->description;
  return NULL;
}

static void release_sample(void *user, vlmc_compile_sample_t *sample) {
  calibration_request_t *r = sample->owner;
  if (!r) return;
  vlmc_request_deinit(&r->request);
  if (r->pixels.pixel_values || r->pixels.image_grid_thw)
    vlmc_preprocess_output_destroy(&r->pixels);
  free(r->ids);
  free(r->positions);
  free(r);
  sample->owner = NULL;
}

/* --calibrate takes the arguments after it up to the next option; a folder ends the list too
 * (it is the checkpoint: `vlmc compile --calibrate a.png CKPT -o out`). */
static bool is_folder(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int take_calibration_images(int argc, char **argv, int *i, const char **images,
                                   size_t *count) {
  size_t before = *count;
  while (*i + 1 < argc && argv[*i + 1][0] != '-' && !is_folder(argv[*i + 1])) {
    if (*count == MAX_CALIBRATION_IMAGES) {
      fprintf(stderr, "error: --calibrate: at most %d images\n", MAX_CALIBRATION_IMAGES);
      return 2;
    }
    images[(*count)++] = argv[++*i];
  }
  if (*count == before) {
    fprintf(stderr, "error: --calibrate: expected one or more image files (PNG or JPEG)\n");
    return 2;
  }
  return 0;
}

/* --target help: every registered target with its summary and options. */
static void print_targets(FILE *out) {
  fprintf(out, "targets (vlmc compile --target A,B; default ref,cpu):\n");
  for (size_t i = 0; i < vlmc_target_count(); ++i) {
    const vlmc_target_t *t = vlmc_target_at(i);
    fprintf(out, "  %-8s %s\n", t->name, t->summary);
    for (size_t k = 0; k < t->num_options; ++k)
      fprintf(out, "           --target-option %s=...: %s\n", t->options[k].key,
              t->options[k].help);
  }
}

/* Appends KEY=VALUE to the comma-separated target options. */
static void add_target_option(vlmc_strbuf_t *options, const char *key, const char *value) {
  vlmc_strbuf_printf(options, "%s%s%s%s", options->len ? "," : "", key ? key : "", key ? "=" : "",
                     value);
}

/* WxH in pixels into a (1, H/14, W/14) grid row, after the processor's rounding rules are
 * satisfied: the size must already be a multiple of 28 (patch * merge). */
static bool parse_image_size(const char *text, int64_t *grid) {
  long w, h;
  char tail;
  if (sscanf(text, "%ldx%ld%c", &w, &h, &tail) != 2 || w <= 0 || h <= 0 || w % 28 || h % 28 ||
      w > 100000 || h > 100000)
    return false;
  grid[0] = 1;
  grid[1] = h / 14;
  grid[2] = w / 14;
  return true;
}

int vlmc_cmd_compile(int argc, char **argv) {
  vlmc_compile_options_t o;
  memset(&o, 0, sizeof o);
  o.target = "ref,cpu";
  o.precision = "auto";
  o.progress = print_progress;
  vlmc_tool_pass_flags_init(&o.debug);
  int64_t grid[3 * MAX_IMAGES];
  const char *params = "inline", *size = NULL, *value = NULL;
  const char *calibration_images[MAX_CALIBRATION_IMAGES];
  o.calibrate_images = calibration_images;
  o.calibrate_decode_steps = CALIBRATION_DECODE_STEPS;
  o.sampler = (vlmc_compile_sampler_t){build_sample, release_sample, NULL};
  vlmc_strbuf_t target_options;
  vlmc_strbuf_init(&target_options);
  vlmc_strbuf_t command_line;
  vlmc_strbuf_init(&command_line);
  for (int i = 1; i < argc; ++i)
    vlmc_strbuf_printf(&command_line, "%s%s", i > 1 ? " " : "", argv[i]);
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      print_help(stdout);
      vlmc_strbuf_deinit(&target_options);
      vlmc_strbuf_deinit(&command_line);
      return 0;
    }
    if (!strcmp(a, "--quantize-vision")) {
      o.quantize_vision = true;
      continue;
    }
    if (!strcmp(a, "--allow-nonfinite")) {
      o.allow_nonfinite = true;
      continue;
    }
    if (!strcmp(a, "--calibrate")) {
      int bad = take_calibration_images(argc, argv, &i, calibration_images,
                                        &o.num_calibrate_images);
      if (bad) {
        vlmc_strbuf_deinit(&target_options);
        vlmc_strbuf_deinit(&command_line);
        return bad;
      }
      continue;
    }
    if (vlmc_tool_pass_flag(argc, argv, &i, &o.debug) ||
        vlmc_tool_flag_value(argc, argv, &i, "-o", &o.output_path) ||
        vlmc_tool_flag_value(argc, argv, &i, "--target", &o.target) ||
        vlmc_tool_flag_value(argc, argv, &i, "--dump-kernels", &o.dump_kernels) ||
        vlmc_tool_flag_value(argc, argv, &i, "--precision", &o.precision) ||
        vlmc_tool_flag_value(argc, argv, &i, "--calibrate-prompt", &o.calibrate_prompt) ||
        vlmc_tool_flag_value(argc, argv, &i, "--passes", &o.passes) ||
        vlmc_tool_flag_value(argc, argv, &i, "--quantize", &o.quantize) ||
        vlmc_tool_flag_value(argc, argv, &i, "--program", &o.program_path) ||
        vlmc_tool_flag_value(argc, argv, &i, "--params", &params))
      continue;
    if (vlmc_tool_flag_value(argc, argv, &i, "--cpu", &value)) {
      add_target_option(&target_options, "cpu", value);
      continue;
    }
    if (vlmc_tool_flag_value(argc, argv, &i, "--target-option", &value)) {
      add_target_option(&target_options, NULL, value);
      continue;
    }
    if (vlmc_tool_flag_value(argc, argv, &i, "--image-size", &size)) {
      if (o.num_images == MAX_IMAGES || !parse_image_size(size, &grid[3 * o.num_images])) {
        fprintf(stderr, "error: --image-size %s: expected WxH in pixels, both multiples of 28 "
                "(at most %d images)\n", size, MAX_IMAGES);
        vlmc_strbuf_deinit(&target_options);
        vlmc_strbuf_deinit(&command_line);
        return 2;
      }
      ++o.num_images;
      continue;
    }
    if (a[0] != '-' && !o.checkpoint_dir) {
      o.checkpoint_dir = a;
      continue;
    }
    fprintf(stderr, "error: vlmc compile: unexpected argument '%s' (see vlmc compile --help)\n", a);
    vlmc_strbuf_deinit(&target_options);
    vlmc_strbuf_deinit(&command_line);
    return 2;
  }
  int rc = 0;
  if (!strcmp(o.target, "help")) {
    print_targets(stdout);
  } else if (!o.checkpoint_dir || !o.output_path) {
    fprintf(stderr, "error: vlmc compile: need a checkpoint folder and -o FILE\n");
    rc = 2;
  } else if (o.num_calibrate_images &&
             (!strcmp(o.precision, "f32") || !strcmp(o.precision, "bf16-matmul"))) {
    fprintf(stderr, "error: --calibrate with --precision %s: every activation is f32, nothing "
            "can overflow, so there is nothing to calibrate (use --precision f16 or bf16)\n",
            o.precision);
    rc = 2;
  } else if (o.calibrate_prompt && !o.num_calibrate_images) {
    fprintf(stderr, "error: --calibrate-prompt needs --calibrate IMG\n");
    rc = 2;
  } else if (strcmp(params, "inline") != 0 && strcmp(params, "external") != 0) {
    fprintf(stderr, "error: --params %s: expected inline or external\n", params);
    rc = 2;
  } else {
    o.params_external = strcmp(params, "external") == 0;
    o.grid = o.num_images ? grid : NULL;
    o.command_line = vlmc_strbuf_cstr(&command_line);
    o.target_options = target_options.len ? vlmc_strbuf_cstr(&target_options) : NULL;
    rc = vlmc_status_report(vlmc_compile(&o));
  }
  vlmc_strbuf_deinit(&target_options);
  vlmc_strbuf_deinit(&command_line);
  return rc;
}
