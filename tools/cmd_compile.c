/* vlmc compile CKPT_DIR -o model.vlmc: a checkpoint folder into a deployable artifact. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/compile.h"
#include "codegen/target.h"
#include "support/strbuf.h"
#include "tools/commands.h"
#include "tools/pass_flags.h"

enum { MAX_IMAGES = 16 };

static void print_help(FILE *out) {
  fprintf(out,
          "usage: vlmc compile CKPT_DIR -o model.vlmc [options]\n"
          "  CKPT_DIR                  a HuggingFace Qwen2.5-VL folder (config.json, safetensors,\n"
          "                            tokenizer.json[.gz], chat template, processor config)\n"
          "  -o FILE                   the artifact to write\n"
          "  --target LIST             backends to carry code for (default ref,cpu);\n"
          "                            --target help lists the targets and their options\n"
          "  --cpu CPU                 cpu kernels for: portable (default, any x86-64),\n"
          "                            x86-64-v2, x86-64-v3 or native (this machine);\n"
          "                            the same as --target-option cpu=CPU\n"
          "  --target-option KEY=VALUE a target's option (repeatable)\n"
          "  --dump-kernels DIR        write each cpu kernel's MLIR (before and after\n"
          "                            lowering), LLVM IR and assembly into DIR\n"
          "  --precision P             auto (target default), f32, f16 or bf16\n"
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
    if (!strcmp(a, "--allow-nonfinite")) {
      o.allow_nonfinite = true;
      continue;
    }
    if (vlmc_tool_pass_flag(argc, argv, &i, &o.debug) ||
        vlmc_tool_flag_value(argc, argv, &i, "-o", &o.output_path) ||
        vlmc_tool_flag_value(argc, argv, &i, "--target", &o.target) ||
        vlmc_tool_flag_value(argc, argv, &i, "--dump-kernels", &o.dump_kernels) ||
        vlmc_tool_flag_value(argc, argv, &i, "--precision", &o.precision) ||
        vlmc_tool_flag_value(argc, argv, &i, "--passes", &o.passes) ||
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
