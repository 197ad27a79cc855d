#define _POSIX_C_SOURCE 200809L
#include "codegen/compile.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend/chat_template.h"
#include "frontend/checkpoint.h"
#include "frontend/config.h"
#include "codegen/calibrate.h"
#include "codegen/target.h"
#include "models/family.h"
#include "passes/quantize.h"
#include "reference/tensor.h"
#include "artifact/artifact.h"
#include "artifact/manifest.h"
#include "support/file.h"
#include "support/hash.h"
#include "support/strbuf.h"

#define VLMC_PRODUCER "vlmc 0.1"

typedef struct {
  const vlmc_compile_options_t *o;
  vlmc_checkpoint_t *checkpoint;
  const vlmc_model_family_t *family; /* the checkpoint's, by its config.json model_type */
  vlmc_module_t *module;
  vlmc_manifest_t manifest;
  vlmc_chat_template_source_t chat_template;
  bool has_chat_template;
  vlmc_chat_template_t recognized_template;
  vlmc_tokenizer_t *tokenizer;       /* kept for the calibration requests */
  /* The pass manager's options with log and print routed through compile_log/compile_print
   * (which forward to the caller's): the precision pass's upcast remarks are collected. */
  vlmc_pass_manager_options_t debug;
  vlmc_strbuf_t statistics;          /* every pipeline run's "pass: stat = N" lines */
  vlmc_strbuf_t calibrated_modules;  /* "a,b": the modules of the calibration upcasts */
  char *tokenizer_bytes;
  size_t tokenizer_len;
  vlmc_artifact_writer_t *writer;
  vlmc_target_list_t targets;
  /* Per target: what it is given, and the sections it made (none for ref). */
  vlmc_target_config_t target_config[VLMC_TARGET_MAX_LIST];
  char *dump_dir[VLMC_TARGET_MAX_LIST];
  vlmc_target_output_t target_output[VLMC_TARGET_MAX_LIST];
  /* The last tensor quantized for the artifact (its three parts are written one after the
   * other): source name, bits, group and the parts' bytes. */
  struct {
    char source[512];
    int64_t rows;
    vlmc_quant_layout_t layout; /* bits, group, cols and the row's words and groups */
    void *parts[3];
    size_t sizes[3];
  } quantized;
  int64_t quant_bits, quant_group; /* --quantize's, 0 when none */
} compile_t;

static void progress(const compile_t *c, const char *fmt, ...) VLMC_PRINTF(2, 3);
static void progress(const compile_t *c, const char *fmt, ...) {
  if (!c->o->progress) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  c->o->progress(c->o->progress_user, line);
}

vlmc_status_t vlmc_compile_default_pipeline(const char *target, const char *precision,
                                            vlmc_strbuf_t *out) {
  vlmc_target_list_t list;
  VLMC_RETURN_IF_ERROR(vlmc_target_list_parse(target, &list));
  return vlmc_target_list_pipeline(&list, precision, out);
}

/* ---- the module ---- */

static vlmc_status_t read_program(compile_t *c) {
  char *text = NULL;
  size_t len = 0;
  VLMC_RETURN_IF_ERROR(vlmc_file_read_all(c->o->program_path, &text, &len));
  vlmc_parse_options_t po = {.filename = c->o->program_path, .first_line = 1};
  vlmc_status_t status = vlmc_module_parse(text, len, &po, &c->module);
  free(text);
  if (!status) status = vlmc_module_verify(c->module);
  if (!status) progress(c, "compile: program from %s", c->o->program_path);
  return status;
}

/* ---- precision ---- */

/* The precision pass's remarks name each calibration upcast's module in parentheses:
 * "upcast: @f: op #3 'mul' %x (visual.blocks.3.mlp) kept in f32: ..." (passes/precision.h). */
static void note_upcast_module(compile_t *c, const char *message) {
  const char *end = strstr(message, ") kept in f32");
  if (strncmp(message, "upcast: ", 8) != 0 || !end) return;
  const char *open = end;
  while (open > message && !(open[0] == '(' && open[-1] == ' ')) --open;
  if (open == message) return;
  size_t len = (size_t)(end - open - 1);
  const char *list = vlmc_strbuf_cstr(&c->calibrated_modules);
  for (const char *p = list; *p;) { /* each module once */
    size_t n = strcspn(p, ",");
    if (n == len && !strncmp(p, open + 1, len)) return;
    p += n + (p[n] == ',');
  }
  vlmc_strbuf_printf(&c->calibrated_modules, "%s%.*s", list[0] ? "," : "", (int)len, open + 1);
}

static void compile_log(void *user, const char *pass, const char *message) {
  compile_t *c = user;
  if (!strcmp(pass, "precision")) note_upcast_module(c, message);
  if (c->o->debug.log) c->o->debug.log(c->o->debug.user, pass, message);
}

static void compile_print(void *user, const char *header, const char *ir) {
  compile_t *c = user;
  if (c->o->debug.print) c->o->debug.print(c->o->debug.user, header, ir);
}

/* A pipeline split at its precision pass: "a,b{x=1}" / "precision{target=f16}" / "c,d". */
typedef struct {
  vlmc_strbuf_t before, item, after;
  bool found;
  char target[16];      /* the item's target option; "ref" (f32) when absent */
  bool has_calibration; /* the item names a ranges file itself */
} pipeline_split_t;

static void split_deinit(pipeline_split_t *s) {
  vlmc_strbuf_deinit(&s->before);
  vlmc_strbuf_deinit(&s->item);
  vlmc_strbuf_deinit(&s->after);
}

/* The value of `key=` among the item's options "{k=v,key=value}", or "" into out. */
static void item_option(const char *item, size_t len, const char *key, char *out, size_t size) {
  out[0] = '\0';
  size_t n = strlen(key);
  for (size_t i = 0; i + n < len; ++i) {
    if ((item[i] != '{' && item[i] != ',') || strncmp(item + i + 1, key, n) != 0 ||
        item[i + 1 + n] != '=')
      continue;
    const char *v = item + i + 2 + n;
    size_t vlen = strcspn(v, ",}");
    snprintf(out, size, "%.*s", (int)vlen, v);
    return;
  }
}

static void split_item(pipeline_split_t *s, const char *item, size_t len) {
  while (len && isspace((unsigned char)*item)) ++item, --len;
  while (len && isspace((unsigned char)item[len - 1])) --len;
  size_t name = 0;
  while (name < len && item[name] != '{' && !isspace((unsigned char)item[name])) ++name;
  vlmc_strbuf_t *into = s->found ? &s->after : &s->before;
  if (!s->found && name == strlen("precision") && !strncmp(item, "precision", name)) {
    s->found = true;
    into = &s->item;
    item_option(item, len, "target", s->target, sizeof s->target);
    if (!s->target[0]) snprintf(s->target, sizeof s->target, "ref");
    char calibration[8];
    item_option(item, len, "calibration", calibration, sizeof calibration);
    s->has_calibration = calibration[0] != '\0';
  }
  vlmc_strbuf_printf(into, "%s%.*s", into->len ? "," : "", (int)len, item);
}

static void split_pipeline(const char *text, pipeline_split_t *s) {
  memset(s, 0, sizeof *s);
  vlmc_strbuf_init(&s->before);
  vlmc_strbuf_init(&s->item);
  vlmc_strbuf_init(&s->after);
  int depth = 0;
  const char *start = text;
  for (const char *p = text;; ++p) {
    if (*p == '{') ++depth;
    else if (*p == '}') --depth;
    if (*p == '\0' || (*p == ',' && depth == 0)) {
      if (p > start) split_item(s, start, (size_t)(p - start));
      if (*p == '\0') break;
      start = p + 1;
    }
  }
}

static vlmc_status_t run_pipeline(compile_t *c, const char *text, const char *dump_dir) {
  vlmc_pass_registry_t registry;
  vlmc_pass_registry_init(&registry);
  VLMC_RETURN_IF_ERROR(vlmc_pass_registry_add_builtin(&registry));
  vlmc_pass_pipeline_t *pipeline = NULL;
  VLMC_RETURN_IF_ERROR(vlmc_pass_pipeline_parse(&registry, text, &pipeline));
  vlmc_pass_manager_options_t debug = c->debug;
  debug.dump_dir = dump_dir;
  vlmc_status_t status = vlmc_pass_manager_run(pipeline, &debug, c->module);
  vlmc_pass_pipeline_print_statistics(pipeline, &c->statistics);
  vlmc_pass_pipeline_destroy(pipeline);
  return status;
}

/* A statistic of the pipelines run so far ("precision: rule-upcasts"), 0 when none. */
static unsigned long long statistic(const compile_t *c, const char *name) {
  char key[128];
  snprintf(key, sizeof key, "%s = ", name);
  unsigned long long total = 0;
  const char *text = vlmc_strbuf_cstr(&c->statistics);
  for (const char *p = text; (p = strstr(p, key)); p += strlen(key))
    if (p == text || p[-1] == '\n') total += strtoull(p + strlen(key), NULL, 10);
  return total;
}

/* A temporary ranges file for the pass's calibration= option (its value must not hold the
 * pipeline syntax's , { } =). */
static vlmc_status_t write_ranges(const vlmc_precision_calibration_t *cal, char *path,
                                  size_t size) {
  const char *dir = getenv("TMPDIR");
  if (!dir || !dir[0] || strpbrk(dir, ",{}= ")) dir = "/tmp";
  snprintf(path, size, "%s/vlmc-calibration-XXXXXX", dir);
  int fd = mkstemp(path);
  if (fd < 0)
    return vlmc_status_make(VLMC_IO_ERROR, "--calibrate: cannot create %s: %s", path,
                            strerror(errno));
  close(fd);
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  vlmc_precision_calibration_print(cal, &text);
  vlmc_status_t status = text.failed ? vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory")
                                     : vlmc_file_write_all(path, text.data, text.len);
  vlmc_strbuf_deinit(&text);
  if (status) unlink(path);
  return status;
}

static vlmc_status_t check_calibratable(const pipeline_split_t *s) {
  if (!s->found)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "--calibrate: the pipeline has no precision pass; nothing would "
                            "read the ranges");
  if (!strcmp(s->target, "ref") || !strcmp(s->target, "bf16-matmul"))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "--calibrate: the program's activations are f32 (--precision %s), "
                            "so no value can overflow and there is nothing to calibrate; use "
                            "--precision f16 or bf16",
                            !strcmp(s->target, "ref") ? "f32, or what auto means for these "
                            "targets" : "bf16-matmul");
  if (s->has_calibration)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "--calibrate: the pipeline's precision pass already names a ranges "
                            "file (calibration=...); give one or the other");
  return NULL;
}

/* Runs the passes before precision, the calibration requests on that IR, then precision with
 * the measured ranges and the rest. */
static vlmc_status_t calibrate_and_lower(compile_t *c, const pipeline_split_t *s) {
  VLMC_RETURN_IF_ERROR(check_calibratable(s));
  VLMC_RETURN_IF_ERROR(run_pipeline(c, vlmc_strbuf_cstr(&s->before), c->o->debug.dump_dir));
  const vlmc_model_config_t *cfg = vlmc_checkpoint_config(c->checkpoint);
  const vlmc_manifest_t *m = &c->manifest;
  vlmc_compile_sample_source_t source = {
      .tokenizer = c->tokenizer,
      .chat_template = c->has_chat_template ? &c->recognized_template : NULL,
      .preprocess = &m->preprocess,
      .image_token_id = m->image_token_id,
      .video_token_id = m->video_token_id,
      .vision_start_token_id = m->vision_start_token_id,
      .vision_end_token_id = m->vision_end_token_id,
      .merge_size = m->merge_size};
  vlmc_calibration_run_t run = {c->module, c->checkpoint, &c->family->convention, &source, c->o,
                                cfg->text.vocab_size};
  progress(c, "calibrate: %zu image%s through the f32 program (reference executor), %u decode "
           "steps each", c->o->num_calibrate_images, c->o->num_calibrate_images == 1 ? "" : "s",
           c->o->calibrate_decode_steps);
  vlmc_precision_calibration_t cal;
  vlmc_precision_calibration_init(&cal);
  vlmc_status_t status = vlmc_compile_calibrate(&run, &cal);
  char path[512] = "";
  if (!status) status = write_ranges(&cal, path, sizeof path);
  vlmc_precision_calibration_deinit(&cal);
  if (status) return status;
  /* precision{target=f16} -> precision{target=f16,calibration=PATH}; "precision" alone gets
   * braces. The rest of the pipeline follows. */
  vlmc_strbuf_t rest;
  vlmc_strbuf_init(&rest);
  const char *item = vlmc_strbuf_cstr(&s->item);
  size_t len = strlen(item);
  if (len && item[len - 1] == '}')
    vlmc_strbuf_printf(&rest, "%.*s,calibration=%s}", (int)(len - 1), item, path);
  else vlmc_strbuf_printf(&rest, "%s{calibration=%s}", item, path);
  if (s->after.len) vlmc_strbuf_printf(&rest, ",%s", vlmc_strbuf_cstr(&s->after));
  /* The second run's dumps go beside the first's, not over them. */
  vlmc_strbuf_t dump;
  vlmc_strbuf_init(&dump);
  if (c->o->debug.dump_dir) vlmc_strbuf_printf(&dump, "%s/calibrated", c->o->debug.dump_dir);
  status = rest.failed || dump.failed ? vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory")
                                      : run_pipeline(c, vlmc_strbuf_cstr(&rest),
                                                     c->o->debug.dump_dir ? dump.data : NULL);
  unlink(path);
  vlmc_strbuf_deinit(&rest);
  vlmc_strbuf_deinit(&dump);
  return status;
}

/* The summary line and the manifest's record of what the precision pass did. */
static vlmc_status_t record_precision(compile_t *c, const pipeline_split_t *s) {
  if (!s->found) return NULL; /* a --passes pipeline without it: nothing to record */
  const char *compute = strcmp(s->target, "ref") ? s->target : "f32";
  unsigned long long rule = statistic(c, "precision: rule-upcasts");
  unsigned long long calibrated = statistic(c, "precision: calibration-upcasts");
  unsigned long long readers = statistic(c, "precision: f32-readers");
  bool measured = c->o->num_calibrate_images > 0 || s->has_calibration;
  if (!strcmp(compute, "f32")) {
    progress(c, "precision f32: every value is f32 (nothing to upcast)");
  } else if (!strcmp(compute, "bf16-matmul")) {
    progress(c, "precision bf16-matmul: activations f32; %llu linears read their input rounded "
             "to bf16 (their weights are bf16)", statistic(c, "precision: bf16-matmul-inputs"));
  } else if (measured) {
    const char *modules = vlmc_strbuf_cstr(&c->calibrated_modules);
    char more[96] = "";
    if (readers)
      snprintf(more, sizeof more, "; %llu more compute in f32 because they read those values",
               readers);
    progress(c, "precision %s: %llu ops upcast to f32 by calibration (%s), %llu by rule%s",
             compute, calibrated, modules[0] ? modules : "none", rule, more);
  } else {
    progress(c, "precision %s: rule-based policy only (%llu ops in f32 by rule); no "
             "calibration was done (--calibrate IMG to measure ranges)", compute, rule);
  }
  vlmc_manifest_t *m = &c->manifest;
  m->precision.compute = strdup(compute);
  m->precision.calibrated = measured;
  m->precision.upcasts_rule = (int64_t)rule;
  m->precision.upcasts_calibrated = (int64_t)calibrated;
  m->precision.calibrated_modules = strdup(vlmc_strbuf_cstr(&c->calibrated_modules));
  if (!m->precision.compute || !m->precision.calibrated_modules)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  return NULL;
}

/* --quantize's spec: "q4" or "q8", optionally ":gN". */
static vlmc_status_t parse_quantize(compile_t *c) {
  const char *spec = c->o->quantize;
  if (!spec) return NULL;
  char tail = 0;
  long long bits = 0, group = 64;
  int n = 0;
  bool ok = sscanf(spec, "q%lld%n", &bits, &n) == 1 && (bits == 4 || bits == 8);
  if (ok && spec[n] == ':') ok = sscanf(spec + n, ":g%lld%c", &group, &tail) == 1;
  else if (ok) ok = spec[n] == '\0';
  if (!ok || group < 32 / bits || group > 4096 || group % (32 / bits))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "--quantize %s: expected q4 or q8, optionally with :gN, a group size "
                            "that is a multiple of %d from %d to 4096 (e.g. q4:g32; the default "
                            "group is 64)", spec, bits == 8 ? 4 : 8, bits == 8 ? 4 : 8);
  if (c->o->params_external)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "--quantize writes the quantized weights into the artifact; it cannot "
                            "be combined with --params external");
  c->quant_bits = bits;
  c->quant_group = group;
  return NULL;
}

/* The quantize pass (and the dce that drops the weights it replaced) before precision. */
static vlmc_status_t insert_quantize(compile_t *c, vlmc_strbuf_t *pipeline) {
  const char *text = vlmc_strbuf_cstr(pipeline), *at = strstr(text, "precision{");
  if (!at) return vlmc_status_make(VLMC_INTERNAL, "the default pipeline has no precision pass");
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  vlmc_strbuf_printf(&out, "%.*squantize{bits=%lld,group=%lld,skip=%s},dce{prune-params=true},%s",
                     (int)(at - text), text, (long long)c->quant_bits, (long long)c->quant_group,
                     c->o->quantize_vision ? "none" : "encode_image", at);
  vlmc_strbuf_deinit(pipeline);
  *pipeline = out;
  return out.failed ? vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory") : NULL;
}

/* The manifest's quantization object: what made the dequantize ops (--quantize, or the
 * checkpoint's own), their bits and group, and how many tensors they read. */
static vlmc_status_t record_quantization(compile_t *c) {
  const vlmc_op_t *any = NULL;
  for (uint32_t f = 0; f < c->module->num_funcs && !any; ++f)
    for (const vlmc_op_t *op = c->module->funcs[f]->body.first; op && !any; op = op->next)
      if (op->kind == VLMC_OP_DEQUANTIZE) any = op;
  if (!any) return NULL;
  int64_t bits = vlmc_op_attr_int(any, "bits"), group = vlmc_op_attr_int(any, "group");
  /* each function reads its own dequantize of a weight: count the packed parameters; names
   * made by the quantize pass (passes/quantize.h) say vlmc made them, also in a program read
   * back with --program */
  int64_t packed = 0;
  bool derived = false;
  for (uint32_t i = 0; i < c->module->num_params; ++i) {
    const vlmc_param_t *param = c->module->params[i];
    if (param->type.dtype != VLMC_DTYPE_U32) continue;
    char source[512];
    int64_t b, g;
    vlmc_quant_part_t part;
    derived |= vlmc_quantized_param_parse(param->name, source, sizeof source, &b, &g, &part);
    ++packed;
  }
  vlmc_manifest_t *m = &c->manifest;
  m->quantization.source = strdup(derived ? "vlmc" : "checkpoint");
  m->quantization.bits = bits;
  m->quantization.group = group;
  m->quantization.tensors = packed;
  if (!m->quantization.source) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  progress(c, "quantization: %lld tensors at %lld bits in groups of %lld (%s)", (long long)packed,
           (long long)bits, (long long)group, derived ? "--quantize" : "the checkpoint's");
  return NULL;
}

static vlmc_status_t build_and_lower(compile_t *c) {
  const char *pipeline_text = c->o->passes;
  if (c->o->program_path) {
    VLMC_RETURN_IF_ERROR(read_program(c));
    if (!pipeline_text && c->o->num_calibrate_images)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "--calibrate with --program: give the "
                              "pipeline with --passes (it must hold the precision pass)");
    if (!pipeline_text) return NULL;
  } else {
    vlmc_model_build_options_t mo = {.grid = c->o->grid, .num_images = c->o->num_images,
                                      .taps = true};
    VLMC_RETURN_IF_ERROR(c->family->build_from_checkpoint(c->checkpoint, &mo, &c->module));
  }
  vlmc_strbuf_t default_pipeline;
  vlmc_strbuf_init(&default_pipeline);
  vlmc_status_t status = NULL;
  if (!pipeline_text) {
    status = vlmc_target_list_pipeline(&c->targets, c->o->precision, &default_pipeline);
    if (!status && c->quant_bits) status = insert_quantize(c, &default_pipeline);
    pipeline_text = vlmc_strbuf_cstr(&default_pipeline);
  } else if (c->quant_bits) {
    status = vlmc_status_make(VLMC_INVALID_ARGUMENT, "--quantize with --passes: put "
                              "quantize{bits=B,group=G},dce{prune-params=true} before precision "
                              "in --passes instead");
  }
  pipeline_split_t split;
  split_pipeline(pipeline_text, &split);
  if (!status) {
    progress(c, "compile: %u functions, pipeline %s", c->module->num_funcs, pipeline_text);
    status = c->o->num_calibrate_images ? calibrate_and_lower(c, &split)
                                        : run_pipeline(c, pipeline_text, c->o->debug.dump_dir);
  }
  if (!status) status = record_precision(c, &split);
  split_deinit(&split);
  vlmc_strbuf_deinit(&default_pipeline);
  return status;
}

/* ---- kernels ---- */

static size_t count_kernel_targets(const vlmc_target_list_t *list) {
  size_t n = 0;
  for (size_t i = 0; i < list->count; ++i) n += list->targets[i]->emit_region != NULL;
  return n;
}

/* --dump-kernels DIR for target i: DIR itself when one target writes kernels, DIR/<target>
 * when several do (their kernels' file names may be the same). */
static vlmc_status_t pick_dump_dir(compile_t *c, size_t i) {
  const char *dir = c->o->dump_kernels;
  if (!dir || count_kernel_targets(&c->targets) < 2) {
    c->target_config[i].dump_dir = dir;
    return NULL;
  }
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return vlmc_status_make(VLMC_IO_ERROR, "--dump-kernels %s: %s", dir, strerror(errno));
  vlmc_strbuf_t path;
  vlmc_strbuf_init(&path);
  vlmc_strbuf_printf(&path, "%s/%s", dir, c->targets.targets[i]->name);
  c->dump_dir[i] = vlmc_strbuf_take(&path);
  if (!c->dump_dir[i]) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  c->target_config[i].dump_dir = c->dump_dir[i];
  return NULL;
}

/* The target list and, for each target, its options (o->target_options) and dump folder. */
static vlmc_status_t configure_targets(compile_t *c) {
  VLMC_RETURN_IF_ERROR(vlmc_target_list_parse(c->o->target, &c->targets));
  for (size_t i = 0; i < c->targets.count; ++i) {
    vlmc_target_config_t *config = &c->target_config[i];
    VLMC_RETURN_IF_ERROR(vlmc_target_config_set_options(config, c->o->target_options));
    VLMC_RETURN_IF_ERROR(pick_dump_dir(c, i));
    config->progress = c->o->progress;
    config->progress_user = c->o->progress_user;
  }
  return NULL;
}

static vlmc_status_t generate_kernels(compile_t *c) {
  for (size_t i = 0; i < c->targets.count; ++i)
    VLMC_RETURN_IF_ERROR(vlmc_target_generate(c->targets.targets[i], c->module,
                                              &c->target_config[i], &c->target_output[i]));
  return NULL;
}

static vlmc_status_t write_target_sections(compile_t *c) {
  for (size_t i = 0; i < c->targets.count; ++i) {
    const vlmc_target_sections_t *sections = &c->target_output[i].sections;
    for (size_t k = 0; k < sections->count; ++k) {
      const vlmc_target_section_t *s = &sections->items[k];
      VLMC_RETURN_IF_ERROR(vlmc_artifact_writer_add(c->writer, s->name, s->data, s->len,
                                                    s->alignment, 0));
    }
  }
  return NULL;
}

/* ---- parameters ---- */

/* A NaN or an infinity in a weight poisons every output it reaches; a checkpoint damaged in
 * training or conversion is refused by tensor and element here, not discovered as garbage text
 * at run time. --allow-nonfinite turns the refusal into a warning. */
static vlmc_status_t check_finite(const compile_t *c, const vlmc_st_tensor_t *t) {
  uint64_t index;
  bool is_nan;
  if (!vlmc_st_tensor_find_nonfinite(t, &index, &is_nan)) return NULL;
  const char *what = is_nan ? "a NaN" : "an infinity";
  if (c->o->allow_nonfinite) {
    progress(c, "compile: warning: tensor '%s': element %llu is %s (kept: --allow-nonfinite)",
             t->name, (unsigned long long)index, what);
    return NULL;
  }
  return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                          "tensor '%s': element %llu is %s; the checkpoint is damaged (vlmc "
                          "compile --allow-nonfinite compiles it anyway)",
                          t->name, (unsigned long long)index, what);
}

/* Quantizes checkpoint tensor `source` ([rows, cols] floats) into c->quantized, unless it
 * holds it already (passes/quantize.h: the parts of one tensor are written in a row). */
static vlmc_status_t quantize_tensor(compile_t *c, const char *source, int64_t bits,
                                     int64_t group) {
  if (!strcmp(c->quantized.source, source) && c->quantized.layout.bits == bits &&
      c->quantized.layout.group == group)
    return NULL;
  const vlmc_st_tensor_t *t;
  VLMC_RETURN_IF_ERROR(vlmc_checkpoint_get(c->checkpoint, source, &t));
  VLMC_RETURN_IF_ERROR(check_finite(c, t));
  if (t->rank != 2)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "quantize: tensor '%s' has rank %d; only 2-D "
                            "weights are quantized", source, t->rank);
  if (bits != 4 && bits != 8)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "quantize: %lld-bit parts of '%s' (4 or 8)",
                            (long long)bits, source);
  int64_t rows = t->shape[0], cols = t->shape[1];
  vlmc_quant_layout_t layout = vlmc_quant_layout(bits, group, cols);
  int64_t words = layout.words, groups = layout.groups;
  for (int i = 0; i < 3; ++i) free(c->quantized.parts[i]);
  memset(&c->quantized, 0, sizeof c->quantized);
  c->quantized.sizes[VLMC_QUANT_PACKED] = (size_t)(rows * words) * 4;
  c->quantized.sizes[VLMC_QUANT_SCALES] = c->quantized.sizes[VLMC_QUANT_BIASES] =
      (size_t)(rows * groups) * 2;
  float *row = malloc((size_t)cols * sizeof *row);
  for (int i = 0; i < 3; ++i) c->quantized.parts[i] = malloc(c->quantized.sizes[i] ? c->quantized.sizes[i] : 1);
  vlmc_status_t st = NULL;
  if (!row || !c->quantized.parts[0] || !c->quantized.parts[1] || !c->quantized.parts[2])
    st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "quantize: out of memory for tensor '%s'", source);
  for (int64_t r = 0; !st && r < rows; ++r) {
    vlmc_st_tensor_t view = *t; /* row r as a tensor of its own */
    view.rank = 1;
    view.shape[0] = cols;
    size_t row_bytes = t->nbytes / (size_t)rows; /* rows >= 1 here: the loop ran */
    view.data = (const unsigned char *)t->data + (size_t)r * row_bytes;
    view.nbytes = row_bytes;
    st = vlmc_st_tensor_to_f32(&view, row, (size_t)cols);
    if (!st && !vlmc_quantize_affine_row(row, cols, (int)bits, group,
                                         (uint32_t *)c->quantized.parts[0] + r * words,
                                         (uint16_t *)c->quantized.parts[1] + r * groups,
                                         (uint16_t *)c->quantized.parts[2] + r * groups))
      st = vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "quantize: tensor '%s' row %lld has a group whose values exceed f16's "
                            "range (the scales and biases are f16); compile without --quantize",
                            source, (long long)r);
  }
  free(row);
  if (!st) {
    snprintf(c->quantized.source, sizeof c->quantized.source, "%s", source);
    c->quantized.rows = rows;
    c->quantized.layout = layout;
  }
  return st;
}

/* A parameter the quantize pass added (passes/quantize.h): its bytes made from the checkpoint
 * tensor it names. */
static vlmc_status_t derived_param_entry(compile_t *c, const vlmc_param_t *param,
                                         const void **out_data, vlmc_manifest_param_t *out) {
  char source[512];
  int64_t bits, group;
  vlmc_quant_part_t part;
  if (!vlmc_quantized_param_parse(param->name, source, sizeof source, &bits, &group, &part))
    return NULL;
  if (group < 1 || group > 4096)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "parameter '%s': group %lld (1 to 4096)",
                            param->name, (long long)group);
  VLMC_RETURN_IF_ERROR(quantize_tensor(c, source, bits, group));
  /* A program read back (--program) may declare the part otherwise: refuse, by name. */
  int64_t rows = c->quantized.rows;
  int64_t want = part == VLMC_QUANT_PACKED ? c->quantized.layout.words : c->quantized.layout.groups;
  vlmc_dtype_t want_dtype = part == VLMC_QUANT_PACKED ? VLMC_DTYPE_U32 : VLMC_DTYPE_F16;
  if (param->type.rank != 2 || param->type.dtype != want_dtype ||
      !vlmc_dim_is_static(param->type.dims[0]) || param->type.dims[0].off != rows ||
      !vlmc_dim_is_static(param->type.dims[1]) || param->type.dims[1].off != want)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "parameter '%s': quantizing '%s' at %lld bits in groups of %lld makes "
                            "%s[%lld, %lld]; the program declares it otherwise", param->name,
                            source, (long long)bits, (long long)group,
                            vlmc_dtype_info(want_dtype)->name, (long long)rows, (long long)want);
  memset(out, 0, sizeof *out);
  out->name = (char *)param->name;
  out->dtype = param->type.dtype;
  out->rank = param->type.rank;
  for (uint32_t i = 0; i < out->rank; ++i) out->shape[i] = param->type.dims[i].off;
  out->nbytes = c->quantized.sizes[part];
  *out_data = c->quantized.parts[part];
  out->checksum = vlmc_xxh64(*out_data, out->nbytes, 0);
  return NULL;
}

static vlmc_status_t param_entry(compile_t *c, const vlmc_param_t *param,
                                 const vlmc_st_tensor_t **out_tensor,
                                 vlmc_manifest_param_t *out) {
  const vlmc_st_tensor_t *t;
  VLMC_RETURN_IF_ERROR(vlmc_checkpoint_get(c->checkpoint, param->name, &t));
  VLMC_RETURN_IF_ERROR(check_finite(c, t));
  memset(out, 0, sizeof *out);
  out->name = (char *)param->name;
  if (!vlmc_st_dtype_to_ir(t->dtype, &out->dtype))
    return vlmc_status_make(VLMC_UNSUPPORTED, "tensor '%s': dtype %s is not supported",
                            param->name, vlmc_st_dtype_name(t->dtype));
  out->rank = (uint32_t)t->rank;
  for (int i = 0; i < t->rank; ++i) out->shape[i] = t->shape[i];
  out->nbytes = t->nbytes;
  out->checksum = vlmc_xxh64(t->data, t->nbytes, 0);
  *out_tensor = t;
  return NULL;
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

static vlmc_status_t write_params(compile_t *c) {
  static const unsigned char zeros[64];
  const vlmc_st_archive_t *archive = vlmc_checkpoint_archive(c->checkpoint);
  bool external = c->o->params_external;
  c->manifest.params_external = external;
  if (!external)
    VLMC_RETURN_IF_ERROR(vlmc_artifact_writer_begin(c->writer, "params", 64,
                                                    VLMC_SECTION_LAZY_VERIFY));
  uint64_t total = 0;
  for (uint32_t i = 0; i < c->module->num_params; ++i) {
    const vlmc_st_tensor_t *t = NULL;
    const void *derived = NULL;
    vlmc_manifest_param_t p;
    VLMC_RETURN_IF_ERROR(derived_param_entry(c, c->module->params[i], &derived, &p));
    if (derived) {
      if (external)
        return vlmc_status_make(VLMC_INVALID_ARGUMENT, "parameter '%s' is made by the compiler "
                                "(quantized); --params external cannot reference it",
                                c->module->params[i]->name);
      uint64_t at = vlmc_artifact_writer_section_offset(c->writer);
      if (at % 64) VLMC_RETURN_IF_ERROR(vlmc_artifact_writer_append(c->writer, zeros, 64 - at % 64));
      p.offset = vlmc_artifact_writer_section_offset(c->writer);
      VLMC_RETURN_IF_ERROR(vlmc_artifact_writer_append(c->writer, derived, p.nbytes));
      total += p.nbytes;
      VLMC_RETURN_IF_ERROR(vlmc_manifest_add_param(&c->manifest, &p));
      continue;
    }
    VLMC_RETURN_IF_ERROR(param_entry(c, c->module->params[i], &t, &p));
    if (external) {
      p.file = (char *)base_name(vlmc_st_archive_shard_path(archive, t->shard));
    } else {
      uint64_t at = vlmc_artifact_writer_section_offset(c->writer);
      if (at % 64) VLMC_RETURN_IF_ERROR(vlmc_artifact_writer_append(c->writer, zeros, 64 - at % 64));
      p.offset = vlmc_artifact_writer_section_offset(c->writer);
      VLMC_RETURN_IF_ERROR(vlmc_artifact_writer_append(c->writer, t->data, t->nbytes));
    }
    total += p.nbytes;
    VLMC_RETURN_IF_ERROR(vlmc_manifest_add_param(&c->manifest, &p));
  }
  if (!external) VLMC_RETURN_IF_ERROR(vlmc_artifact_writer_end(c->writer));
  progress(c, "compile: %u parameters, %.1f MB %s", c->module->num_params, (double)total / 1e6,
           external ? "referenced in the checkpoint (--params external)" : "inline");
  return NULL;
}

/* ---- tokenizer, template, manifest ---- */

/* Any kind of file counts: a FIFO or a folder named tokenizer.json is then refused by name
 * when it is read ("not a regular file"), rather than skipped as if it were absent. */
static bool path_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static vlmc_status_t read_tokenizer(compile_t *c) {
  static const char *const names[] = {"tokenizer.json", "tokenizer.json.gz"};
  for (size_t i = 0; i < 2; ++i) {
    vlmc_strbuf_t path;
    vlmc_strbuf_init(&path);
    vlmc_strbuf_printf(&path, "%s/%s", c->o->checkpoint_dir, names[i]);
    vlmc_status_t status = NULL;
    if (path_exists(vlmc_strbuf_cstr(&path))) {
      status = vlmc_file_read_all(vlmc_strbuf_cstr(&path), &c->tokenizer_bytes, &c->tokenizer_len);
      /* Load it once now, so that a broken tokenizer fails the compile, not the deployment. */
      if (!status) status = vlmc_tokenizer_create_from_file(vlmc_strbuf_cstr(&path), &c->tokenizer);
      vlmc_strbuf_deinit(&path);
      return status;
    }
    vlmc_strbuf_deinit(&path);
  }
  progress(c, "compile: warning: %s has no tokenizer.json; the artifact will take token ids only",
           c->o->checkpoint_dir);
  return NULL;
}

static vlmc_status_t read_chat_template(compile_t *c) {
  vlmc_status_t status = vlmc_chat_template_source_load(c->o->checkpoint_dir, &c->chat_template);
  if (vlmc_status_code(status) == VLMC_NOT_FOUND) {
    vlmc_status_free(status);
    progress(c, "compile: warning: %s has no chat template; prompts need token ids",
             c->o->checkpoint_dir);
    return NULL;
  }
  VLMC_RETURN_IF_ERROR(status);
  c->has_chat_template = true;
  return vlmc_chat_template_recognize(c->chat_template.source_path, c->chat_template.text,
                                      c->chat_template.len, &c->recognized_template);
}

static char *copy_or_empty(const char *s) { return strdup(s ? s : ""); }

static vlmc_status_t fill_preprocess(const vlmc_preprocessor_config_t *pc,
                                     vlmc_preprocess_params_t *p) {
  vlmc_preprocess_params_init(p);
  if (!pc) return NULL; /* the Qwen2.5-VL checkpoints' values (spec §1.4) */
  /* The runtime always resizes, rescales, normalizes and converts to RGB, as every released
   * Qwen2.5-VL processor config asks; a config that turns one off is refused, not ignored. */
  const char *off = !pc->do_resize      ? "do_resize"
                    : !pc->do_rescale   ? "do_rescale"
                    : !pc->do_normalize ? "do_normalize"
                    : !pc->do_convert_rgb ? "do_convert_rgb"
                                          : NULL;
  if (off)
    return vlmc_status_make(VLMC_UNSUPPORTED, "%s: %s is false; vlmc supports only true",
                            pc->source, off);
  p->min_pixels = pc->min_pixels;
  p->max_pixels = pc->max_pixels;
  p->patch_size = (int32_t)pc->patch_size;
  p->temporal_patch_size = (int32_t)pc->temporal_patch_size;
  p->merge_size = (int32_t)pc->merge_size;
  memcpy(p->image_mean, pc->image_mean, sizeof p->image_mean);
  memcpy(p->image_std, pc->image_std, sizeof p->image_std);
  p->rescale_factor = pc->rescale_factor;
  return NULL;
}

/* generation_config.json's sampling fields, with transformers' GenerationConfig defaults for
 * those it lacks; nothing when it set none (vlmc-run then decodes greedily, as transformers'
 * default do_sample=False does). */
static void fill_generation(const vlmc_generation_config_t *gen, vlmc_manifest_t *m) {
  if (!gen || !(gen->has_do_sample || gen->has_temperature || gen->has_top_k || gen->has_top_p ||
                gen->has_repetition_penalty))
    return;
  m->generation.present = true;
  m->generation.do_sample = gen->has_do_sample && gen->do_sample;
  m->generation.temperature = gen->has_temperature ? gen->temperature : 1.0;
  m->generation.top_k = gen->has_top_k ? gen->top_k : 50;
  if (m->generation.top_k > (1 << 30)) m->generation.top_k = 0; /* past any vocabulary: none */
  m->generation.top_p = gen->has_top_p ? gen->top_p : 1.0;
  m->generation.repetition_penalty = gen->has_repetition_penalty ? gen->repetition_penalty : 1.0;
}

static vlmc_status_t fill_manifest(compile_t *c) {
  const vlmc_model_config_t *cfg = vlmc_checkpoint_config(c->checkpoint);
  vlmc_manifest_t *m = &c->manifest;
  m->model_family = copy_or_empty(c->family->name);
  m->producer = copy_or_empty(VLMC_PRODUCER);
  m->compile_options = copy_or_empty(c->o->command_line);
  m->targets = copy_or_empty(c->o->target ? c->o->target : "ref");
  m->chat_template_source =
      copy_or_empty(c->has_chat_template ? base_name(c->chat_template.source_path) : "");
  m->vocab_size = cfg->text.vocab_size;
  m->max_positions = cfg->text.max_position_embeddings; /* 0 when the config has none */
  m->image_token_id = cfg->image_token_id;
  m->video_token_id = cfg->video_token_id;
  m->vision_start_token_id = cfg->vision_start_token_id;
  m->vision_end_token_id = cfg->vision_end_token_id;
  m->merge_size = cfg->vision.spatial_merge_size;
  const vlmc_generation_config_t *gen = vlmc_checkpoint_generation(c->checkpoint);
  fill_generation(gen, m);
  if (gen && gen->eos_count > 0) {
    m->eos_count = gen->eos_count < VLMC_MANIFEST_MAX_EOS ? gen->eos_count : VLMC_MANIFEST_MAX_EOS;
    memcpy(m->eos_token_ids, gen->eos_token_ids, (size_t)m->eos_count * sizeof(int64_t));
  } else if (cfg->text.has_eos_token_id) {
    m->eos_count = 1;
    m->eos_token_ids[0] = cfg->text.eos_token_id;
  }
  VLMC_RETURN_IF_ERROR(fill_preprocess(vlmc_checkpoint_preprocessor(c->checkpoint),
                                       &m->preprocess));
  /* The family's calling convention: how the runtime drives this program. */
  const vlmc_model_convention_t *cc = &c->family->convention;
  /* A model with an image encoder and no processor config: say which values images will get,
   * since transformers' defaults for another family may differ (issue 20). */
  if (cc->encode_image && *cc->encode_image && !vlmc_checkpoint_preprocessor(c->checkpoint))
    progress(c, "compile: warning: %s has no preprocessor_config.json or "
             "processor_config.json: images get Qwen2.5-VL's processor defaults (min_pixels "
             "%lld, max_pixels %lld, patch %d, CLIP mean and std); add the checkpoint's "
             "processor config if it has other values",
             c->o->checkpoint_dir, (long long)m->preprocess.min_pixels,
             (long long)m->preprocess.max_pixels, (int)m->preprocess.patch_size);
  m->convention.encode_image = copy_or_empty(cc->encode_image);
  m->convention.prefill = copy_or_empty(cc->prefill);
  m->convention.decode = copy_or_empty(cc->decode);
  m->convention.positions = copy_or_empty(cc->positions);
  if (!m->model_family || !m->producer || !m->compile_options || !m->targets ||
      !m->chat_template_source || !m->convention.encode_image || !m->convention.prefill ||
      !m->convention.decode || !m->convention.positions)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  return vlmc_preprocess_params_check(&m->preprocess);
}

static vlmc_status_t write_artifact(compile_t *c) {
  VLMC_RETURN_IF_ERROR(vlmc_artifact_writer_create(c->o->output_path, &c->writer));
  char *program = vlmc_module_to_string(c->module);
  if (!program) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory printing the program");
  vlmc_status_t status = vlmc_artifact_writer_add(c->writer, "program", program, strlen(program),
                                                  8, 0);
  free(program);
  VLMC_RETURN_IF_ERROR(status);
  if (c->tokenizer_bytes)
    VLMC_RETURN_IF_ERROR(vlmc_artifact_writer_add(c->writer, "tokenizer", c->tokenizer_bytes,
                                                  c->tokenizer_len, 8, 0));
  if (c->has_chat_template)
    VLMC_RETURN_IF_ERROR(vlmc_artifact_writer_add(c->writer, "chat_template",
                                                  c->chat_template.text, c->chat_template.len,
                                                  8, 0));
  VLMC_RETURN_IF_ERROR(write_target_sections(c));
  VLMC_RETURN_IF_ERROR(write_params(c));
  vlmc_strbuf_t json;
  vlmc_strbuf_init(&json);
  status = vlmc_manifest_to_json(&c->manifest, &json);
  if (!status)
    status = vlmc_artifact_writer_add(c->writer, "manifest", vlmc_strbuf_cstr(&json), json.len,
                                      8, 0);
  vlmc_strbuf_deinit(&json);
  VLMC_RETURN_IF_ERROR(status);
  vlmc_artifact_writer_t *w = c->writer;
  c->writer = NULL;
  return vlmc_artifact_writer_finish(w);
}

vlmc_status_t vlmc_compile(const vlmc_compile_options_t *o) {
  compile_t c;
  memset(&c, 0, sizeof c);
  c.o = o;
  c.debug = o->debug;
  c.debug.log = compile_log;
  c.debug.print = o->debug.print ? compile_print : NULL;
  c.debug.user = &c;
  vlmc_strbuf_init(&c.statistics);
  vlmc_strbuf_init(&c.calibrated_modules);
  vlmc_manifest_init(&c.manifest);
  vlmc_status_t status = parse_quantize(&c);
  if (!status)
    status = vlmc_model_family_open_checkpoint(o->checkpoint_dir, &c.family, &c.checkpoint);
  if (!status) status = read_tokenizer(&c);
  if (!status) status = read_chat_template(&c);
  if (!status) status = configure_targets(&c);
  /* The manifest first: calibration requests need its preprocessing settings and token ids. */
  if (!status) status = fill_manifest(&c);
  if (!status) status = build_and_lower(&c);
  if (!status) status = record_quantization(&c);
  if (!status) status = generate_kernels(&c);
  if (!status) status = write_artifact(&c);
  if (c.writer) vlmc_artifact_writer_abort(c.writer);
  if (c.has_chat_template) vlmc_chat_template_source_deinit(&c.chat_template);
  vlmc_manifest_deinit(&c.manifest);
  for (size_t i = 0; i < VLMC_TARGET_MAX_LIST; ++i) {
    vlmc_target_output_free(&c.target_output[i]);
    free(c.dump_dir[i]);
  }
  free(c.tokenizer_bytes);
  vlmc_tokenizer_destroy(c.tokenizer);
  vlmc_strbuf_deinit(&c.statistics);
  vlmc_strbuf_deinit(&c.calibrated_modules);
  vlmc_module_destroy(c.module);
  vlmc_checkpoint_destroy(c.checkpoint);
  for (int i = 0; i < 3; ++i) free(c.quantized.parts[i]);
  if (!status) progress(&c, "compile: wrote %s", o->output_path);
  return status;
}
