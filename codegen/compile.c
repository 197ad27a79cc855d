#define _POSIX_C_SOURCE 200809L
#include "codegen/compile.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frontend/chat_template.h"
#include "frontend/checkpoint.h"
#include "frontend/config.h"
#include "codegen/cpu_codegen.h"
#include "models/family.h"
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
  char *tokenizer_bytes;
  size_t tokenizer_len;
  vlmc_artifact_writer_t *writer;
  vlmc_cpu_codegen_result_t cpu; /* the cpu target's kernels, when asked for */
  bool has_cpu;
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

/* The target list: "ref", "cpu" or both, comma-separated. */
static vlmc_status_t parse_targets(const char *list, bool *out_cpu) {
  *out_cpu = false;
  if (!list || !*list) return NULL;
  const char *p = list;
  while (*p) {
    size_t n = strcspn(p, ",");
    if (n == 3 && !strncmp(p, "cpu", 3)) *out_cpu = true;
    else if (!(n == 3 && !strncmp(p, "ref", 3)))
      return vlmc_status_make(VLMC_UNSUPPORTED, "--target %s: unknown target '%.*s'; targets: "
                              "ref, cpu", list, (int)n, p);
    p += n;
    if (*p == ',') ++p;
  }
  return NULL;
}

vlmc_status_t vlmc_compile_default_pipeline(const char *target, const char *precision,
                                            const char **out) {
  bool cpu;
  VLMC_RETURN_IF_ERROR(parse_targets(target, &cpu));
  bool f32 = !precision || !strcmp(precision, "auto") || !strcmp(precision, "f32");
  if (!f32 && strcmp(precision, "f16") != 0 && strcmp(precision, "bf16") != 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "--precision %s: expected auto, f32, f16 or bf16", precision);
  if (cpu && !f32)
    return vlmc_status_make(VLMC_UNSUPPORTED, "--precision %s with --target cpu: cpu kernels "
                            "compute in f32 (weights stay in their bf16 / f16 storage); use "
                            "--precision f32 or --target ref", precision);
  if (f32)
    *out = cpu ? "mrope-layout,window-reorder,canonicalize,cse,dce,precision{target=ref},fuse,"
                 "memory-plan"
               : "mrope-layout,window-reorder,canonicalize,cse,dce,precision{target=ref}";
  else if (!strcmp(precision, "f16"))
    *out = "mrope-layout,window-reorder,canonicalize,cse,dce,precision{target=f16}";
  else
    *out = "mrope-layout,window-reorder,canonicalize,cse,dce,precision{target=bf16}";
  return NULL;
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

static vlmc_status_t build_and_lower(compile_t *c) {
  const char *pipeline_text = c->o->passes;
  if (c->o->program_path) {
    VLMC_RETURN_IF_ERROR(read_program(c));
    if (!pipeline_text) return NULL;
  } else {
    vlmc_model_build_options_t mo = {.grid = c->o->grid, .num_images = c->o->num_images,
                                      .taps = true};
    VLMC_RETURN_IF_ERROR(c->family->build_from_checkpoint(c->checkpoint, &mo, &c->module));
  }
  if (!pipeline_text)
    VLMC_RETURN_IF_ERROR(vlmc_compile_default_pipeline(c->o->target, c->o->precision,
                                                       &pipeline_text));
  vlmc_pass_registry_t registry;
  vlmc_pass_registry_init(&registry);
  VLMC_RETURN_IF_ERROR(vlmc_pass_registry_add_builtin(&registry));
  vlmc_pass_pipeline_t *pipeline = NULL;
  VLMC_RETURN_IF_ERROR(vlmc_pass_pipeline_parse(&registry, pipeline_text, &pipeline));
  progress(c, "compile: %u functions, pipeline %s", c->module->num_funcs, pipeline_text);
  vlmc_status_t status = vlmc_pass_manager_run(pipeline, &c->o->debug, c->module);
  vlmc_pass_pipeline_destroy(pipeline);
  return status;
}

/* ---- kernels ---- */

static vlmc_status_t generate_cpu_kernels(compile_t *c) {
  vlmc_cpu_codegen_options_t co = {.cpu = c->o->cpu, .dump_dir = c->o->dump_kernels,
                                   .progress = c->o->progress,
                                   .progress_user = c->o->progress_user};
  VLMC_RETURN_IF_ERROR(vlmc_cpu_codegen(c->module, &co, &c->cpu));
  progress(c, "compile: cpu: %zu dispatches, %zu distinct kernels, %.1f KB of code%s%s",
           c->cpu.num_dispatches, c->cpu.num_kernels, (double)c->cpu.so_len / 1e3,
           c->o->dump_kernels ? "; kernels dumped to " : "",
           c->o->dump_kernels ? c->o->dump_kernels : "");
  return NULL;
}

/* ---- parameters ---- */

static vlmc_status_t param_entry(compile_t *c, const vlmc_param_t *param,
                                 const vlmc_st_tensor_t **out_tensor,
                                 vlmc_manifest_param_t *out) {
  const vlmc_st_tensor_t *t;
  VLMC_RETURN_IF_ERROR(vlmc_checkpoint_get(c->checkpoint, param->name, &t));
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
    vlmc_manifest_param_t p;
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

static bool file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static vlmc_status_t read_tokenizer(compile_t *c) {
  static const char *const names[] = {"tokenizer.json", "tokenizer.json.gz"};
  for (size_t i = 0; i < 2; ++i) {
    vlmc_strbuf_t path;
    vlmc_strbuf_init(&path);
    vlmc_strbuf_printf(&path, "%s/%s", c->o->checkpoint_dir, names[i]);
    vlmc_status_t status = NULL;
    if (file_exists(vlmc_strbuf_cstr(&path))) {
      status = vlmc_file_read_all(vlmc_strbuf_cstr(&path), &c->tokenizer_bytes, &c->tokenizer_len);
      /* Load it once now, so that a broken tokenizer fails the compile, not the deployment. */
      vlmc_tokenizer_t *tokenizer = NULL;
      if (!status) status = vlmc_tokenizer_create_from_file(vlmc_strbuf_cstr(&path), &tokenizer);
      vlmc_tokenizer_destroy(tokenizer);
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
  vlmc_chat_template_t recognized;
  return vlmc_chat_template_recognize(c->chat_template.source_path, c->chat_template.text,
                                      c->chat_template.len, &recognized);
}

static char *dup(const char *s) { return strdup(s ? s : ""); }

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

static vlmc_status_t fill_manifest(compile_t *c) {
  const vlmc_model_config_t *cfg = vlmc_checkpoint_config(c->checkpoint);
  vlmc_manifest_t *m = &c->manifest;
  m->model_family = dup(c->family->name);
  m->producer = dup(VLMC_PRODUCER);
  m->compile_options = dup(c->o->command_line);
  m->targets = dup(c->o->target ? c->o->target : "ref");
  m->chat_template_source =
      dup(c->has_chat_template ? base_name(c->chat_template.source_path) : "");
  m->vocab_size = cfg->text.vocab_size;
  m->image_token_id = cfg->image_token_id;
  m->video_token_id = cfg->video_token_id;
  m->vision_start_token_id = cfg->vision_start_token_id;
  m->vision_end_token_id = cfg->vision_end_token_id;
  m->merge_size = cfg->vision.spatial_merge_size;
  const vlmc_generation_config_t *gen = vlmc_checkpoint_generation(c->checkpoint);
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
  m->convention.encode_image = dup(cc->encode_image);
  m->convention.prefill = dup(cc->prefill);
  m->convention.decode = dup(cc->decode);
  m->convention.positions = dup(cc->positions);
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
  if (c->has_cpu) {
    VLMC_RETURN_IF_ERROR(vlmc_artifact_writer_add(c->writer, "kernels.cpu", c->cpu.so,
                                                  c->cpu.so_len, 4096, 0));
    VLMC_RETURN_IF_ERROR(vlmc_artifact_writer_add(c->writer, "kernels.cpu.json",
                                                  c->cpu.table_json, strlen(c->cpu.table_json),
                                                  8, 0));
  }
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
  vlmc_manifest_init(&c.manifest);
  vlmc_status_t status = vlmc_model_family_open_checkpoint(o->checkpoint_dir, &c.family,
                                                           &c.checkpoint);
  if (!status) status = read_tokenizer(&c);
  if (!status) status = read_chat_template(&c);
  if (!status) status = parse_targets(o->target, &c.has_cpu);
  if (!status) status = build_and_lower(&c);
  if (!status && c.has_cpu) status = generate_cpu_kernels(&c);
  if (!status) status = fill_manifest(&c);
  if (!status) status = write_artifact(&c);
  if (c.writer) vlmc_artifact_writer_abort(c.writer);
  if (c.has_chat_template) vlmc_chat_template_source_deinit(&c.chat_template);
  vlmc_manifest_deinit(&c.manifest);
  vlmc_cpu_codegen_result_free(&c.cpu);
  free(c.tokenizer_bytes);
  vlmc_module_destroy(c.module);
  vlmc_checkpoint_destroy(c.checkpoint);
  if (!status) progress(&c, "compile: wrote %s", o->output_path);
  return status;
}
