#define _POSIX_C_SOURCE 200809L
#include "runtime/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <zlib.h>

#include "frontend/chat_template.h"
#include "frontend/safetensors.h"
#include "frontend/tokenizer.h"
#include "reference/executor.h"
#include "reference/mrope_positions.h"
#include "runtime/artifact.h"
#include "runtime/params.h"
#include "runtime/request.h"
#include "support/file.h"
#include "support/strbuf.h"

enum { MAX_TOKENIZER_BYTES = 512 * 1024 * 1024 };

struct vlmc_session_s {
  vlmc_artifact_t *artifact;
  vlmc_manifest_t manifest;
  vlmc_module_t *module;
  vlmc_params_t *params;
  vlmc_tokenizer_t *tokenizer;      /* NULL when the artifact has none */
  bool has_template;
  vlmc_chat_template_t chat_template;
  vlmc_executor_t *executor;
  uint32_t num_layers;              /* KV cache pairs, from decode's signature */
  uint32_t threads;
  double open_ms;
};

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- opening ---- */

static vlmc_status_t gunzip(const char *name, const unsigned char *data, size_t size, char **out,
                            size_t *out_len) {
  z_stream z;
  memset(&z, 0, sizeof z);
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
    return vlmc_status_make(VLMC_INTERNAL, "%s: zlib init failed", name);
  vlmc_strbuf_t buf;
  vlmc_strbuf_init(&buf);
  unsigned char chunk[1 << 16];
  z.next_in = (unsigned char *)data;
  z.avail_in = (uInt)size;
  int rc;
  do {
    z.next_out = chunk;
    z.avail_out = sizeof chunk;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) break;
    vlmc_strbuf_append(&buf, (const char *)chunk, sizeof chunk - z.avail_out);
  } while (rc != Z_STREAM_END && buf.len < MAX_TOKENIZER_BYTES && !buf.failed);
  inflateEnd(&z);
  if (rc != Z_STREAM_END) {
    vlmc_strbuf_deinit(&buf);
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: compressed data is corrupt or too large", name);
  }
  *out_len = buf.len;
  *out = vlmc_strbuf_take(&buf);
  return *out ? NULL : vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", name);
}

static vlmc_status_t load_tokenizer(vlmc_session_t *s) {
  const vlmc_artifact_section_t *sec = vlmc_artifact_find(s->artifact, "tokenizer");
  if (!sec) return NULL; /* explicit token ids only */
  char name[512];
  snprintf(name, sizeof name, "%s: section 'tokenizer'", vlmc_artifact_path(s->artifact));
  char *json = NULL;
  size_t len = 0;
  if (sec->size >= 2 && sec->data[0] == 0x1f && sec->data[1] == 0x8b) {
    VLMC_RETURN_IF_ERROR(gunzip(name, sec->data, (size_t)sec->size, &json, &len));
  } else {
    json = malloc((size_t)sec->size + 1);
    if (!json) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory", name);
    memcpy(json, sec->data, (size_t)sec->size);
    len = (size_t)sec->size;
  }
  vlmc_status_t status = vlmc_tokenizer_create_from_buffer(name, json, len, &s->tokenizer);
  free(json);
  return status;
}

static vlmc_status_t load_chat_template(vlmc_session_t *s) {
  const vlmc_artifact_section_t *sec = vlmc_artifact_find(s->artifact, "chat_template");
  if (!sec) return NULL;
  VLMC_RETURN_IF_ERROR(vlmc_chat_template_recognize(s->manifest.chat_template_source,
                                                    (const char *)sec->data, (size_t)sec->size,
                                                    &s->chat_template));
  s->has_template = true;
  return NULL;
}

static vlmc_status_t load_program(vlmc_session_t *s) {
  const vlmc_artifact_section_t *sec;
  VLMC_RETURN_IF_ERROR(vlmc_artifact_require(s->artifact, "program", "every backend", &sec));
  char name[512];
  snprintf(name, sizeof name, "%s: section 'program'", vlmc_artifact_path(s->artifact));
  vlmc_parse_options_t options = {.filename = name, .first_line = 1};
  VLMC_RETURN_IF_ERROR(
      vlmc_module_parse((const char *)sec->data, (size_t)sec->size, &options, &s->module));
  return vlmc_module_verify(s->module);
}

static vlmc_status_t param_source(void *ctx, const char *name, const vlmc_type_t *type,
                                  vlmc_tensor_t *out_view) {
  vlmc_param_view_t view;
  VLMC_RETURN_IF_ERROR(vlmc_params_get(ctx, name, &view));
  *out_view = vlmc_tensor_view(view.dtype, view.rank, view.shape, view.data);
  return NULL;
}

static vlmc_status_t check_signatures(vlmc_session_t *s) {
  const char *path = vlmc_artifact_path(s->artifact);
  const vlmc_func_t *prefill = vlmc_module_func_find(s->module, "prefill");
  const vlmc_func_t *decode = vlmc_module_func_find(s->module, "decode");
  if (!prefill || !decode)
    return vlmc_status_make(VLMC_NOT_FOUND, "%s: program: functions @prefill and @decode are "
                            "required", path);
  if (prefill->num_args != 3 || decode->num_args < 2 || prefill->num_results < 1 ||
      decode->num_results != decode->num_args - 1 || (decode->num_args - 2) % 2 != 0 ||
      prefill->num_results != decode->num_results)
    return vlmc_status_make(VLMC_PARSE_ERROR,
                            "%s: program: @prefill(ids, image_embeds, positions) -> (logits, "
                            "caches...) and @decode(token, position, caches...) -> (logits, "
                            "caches...) expected; got %u/%u and %u/%u arguments/results",
                            path, prefill->num_args, prefill->num_results, decode->num_args,
                            decode->num_results);
  s->num_layers = (decode->num_args - 2) / 2;
  return NULL;
}

static vlmc_status_t session_open(vlmc_session_t *s, const vlmc_session_options_t *o) {
  if (o->backend && strcmp(o->backend, "ref") != 0)
    return vlmc_status_make(VLMC_UNSUPPORTED, "backend '%s' is not available; available: ref",
                            o->backend);
  VLMC_RETURN_IF_ERROR(vlmc_artifact_open(o->artifact_path, &s->artifact));
  const vlmc_artifact_section_t *sec;
  VLMC_RETURN_IF_ERROR(vlmc_artifact_require(s->artifact, "manifest", "the runtime", &sec));
  VLMC_RETURN_IF_ERROR(vlmc_manifest_from_json(o->artifact_path, (const char *)sec->data,
                                               (size_t)sec->size, &s->manifest));
  VLMC_RETURN_IF_ERROR(load_program(s));
  VLMC_RETURN_IF_ERROR(check_signatures(s));
  VLMC_RETURN_IF_ERROR(vlmc_params_open(s->artifact, &s->manifest, o->params_dir, &s->params));
  if (o->verify_params) VLMC_RETURN_IF_ERROR(vlmc_params_verify_all(s->params));
  VLMC_RETURN_IF_ERROR(load_tokenizer(s));
  VLMC_RETURN_IF_ERROR(load_chat_template(s));
  vlmc_executor_options_t eo = vlmc_executor_options_default();
  eo.get_param = param_source;
  eo.param_ctx = s->params;
  s->threads = o->threads ? o->threads : 1;
  eo.threads = s->threads;
  return vlmc_executor_create(s->module, &eo, &s->executor);
}

vlmc_status_t vlmc_session_open(const vlmc_session_options_t *options, vlmc_session_t **out) {
  *out = NULL;
  double start = now_ms();
  vlmc_session_t *s = calloc(1, sizeof *s);
  if (!s) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_manifest_init(&s->manifest);
  vlmc_status_t status = session_open(s, options);
  if (status) {
    vlmc_session_destroy(s);
    return status;
  }
  s->open_ms = now_ms() - start;
  *out = s;
  return NULL;
}

void vlmc_session_destroy(vlmc_session_t *s) {
  if (!s) return;
  vlmc_executor_destroy(s->executor);
  vlmc_tokenizer_destroy(s->tokenizer);
  vlmc_params_destroy(s->params);
  vlmc_module_destroy(s->module);
  vlmc_manifest_deinit(&s->manifest);
  vlmc_artifact_destroy(s->artifact);
  free(s);
}

const vlmc_manifest_t *vlmc_session_manifest(const vlmc_session_t *s) { return &s->manifest; }
double vlmc_session_open_ms(const vlmc_session_t *s) { return s->open_ms; }

/* ---- taps ---- */

typedef struct {
  char *name;
  vlmc_tensor_t tensor; /* owned copy */
} tap_t;

typedef struct {
  tap_t *items;
  size_t count;
} tap_list_t;

static vlmc_status_t tap_add(tap_list_t *list, const char *name, const vlmc_tensor_t *t) {
  for (size_t i = 0; i < list->count; ++i)
    if (strcmp(list->items[i].name, name) == 0) return NULL; /* first write wins: prefill's */
  tap_t *grown = realloc(list->items, (list->count + 1) * sizeof *grown);
  if (!grown) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "taps: out of memory");
  list->items = grown;
  tap_t *tap = &list->items[list->count];
  memset(tap, 0, sizeof *tap);
  VLMC_RETURN_IF_ERROR(vlmc_tensor_alloc(t->dtype, t->rank, t->shape, &tap->tensor));
  size_t bytes = 0;
  vlmc_tensor_byte_size(t->dtype, t->rank, t->shape, &bytes);
  if (bytes) memcpy(tap->tensor.data, t->data, bytes);
  tap->name = strdup(name);
  ++list->count;
  return tap->name ? NULL : vlmc_status_make(VLMC_OUT_OF_MEMORY, "taps: out of memory");
}

static vlmc_status_t on_tap(void *ctx, const char *name, const vlmc_op_t *op,
                            const vlmc_tensor_t *tensor) {
  return tap_add(ctx, name, tensor);
}

static void tap_list_deinit(tap_list_t *list) {
  for (size_t i = 0; i < list->count; ++i) {
    free(list->items[i].name);
    vlmc_tensor_release(&list->items[i].tensor);
  }
  free(list->items);
  memset(list, 0, sizeof *list);
}

static vlmc_status_t taps_write(const tap_list_t *list, const char *dir) {
  VLMC_RETURN_IF_ERROR(vlmc_file_mkdirs(dir));
  vlmc_st_write_tensor_t *w = calloc(list->count + 1, sizeof *w);
  int64_t(*shapes)[VLMC_IR_MAX_RANK] = calloc(list->count + 1, sizeof *shapes);
  if (!w || !shapes) {
    free(w);
    free(shapes);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "taps: out of memory");
  }
  for (size_t i = 0; i < list->count; ++i) {
    const vlmc_tensor_t *t = &list->items[i].tensor;
    w[i].name = list->items[i].name;
    w[i].dtype = t->dtype == VLMC_DTYPE_I64 ? VLMC_ST_I64 : VLMC_ST_F32;
    w[i].rank = (int)t->rank;
    for (uint32_t d = 0; d < t->rank; ++d) shapes[i][d] = t->shape[d];
    w[i].shape = shapes[i];
    w[i].data = t->data;
  }
  vlmc_strbuf_t path;
  vlmc_strbuf_init(&path);
  vlmc_strbuf_printf(&path, "%s/taps.safetensors", dir);
  vlmc_status_t status = vlmc_st_write_file(vlmc_strbuf_cstr(&path), w, list->count);
  vlmc_strbuf_deinit(&path);
  free(w);
  free(shapes);
  return status;
}

/* ---- inputs ---- */

static vlmc_status_t build_inputs_from_ids(const vlmc_session_t *s,
                                           const vlmc_generate_options_t *o, vlmc_request_t *r) {
  memset(r, 0, sizeof *r);
  if (o->num_images) {
    vlmc_image_t *images = calloc(o->num_images, sizeof *images);
    if (!images) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
    vlmc_status_t status = NULL;
    size_t loaded = 0;
    for (; loaded < o->num_images && !status; ++loaded)
      status = vlmc_image_load(o->image_paths[loaded], &images[loaded]);
    if (!status)
      status = vlmc_preprocess_images(images, o->image_paths, o->num_images,
                                      &s->manifest.preprocess, &r->pixels);
    for (size_t i = 0; i < loaded; ++i) vlmc_image_destroy(&images[i]);
    free(images);
    VLMC_RETURN_IF_ERROR(status);
  }
  r->seq_len = o->num_input_ids;
  r->input_ids = malloc((r->seq_len + 1) * sizeof *r->input_ids);
  r->positions = malloc((3 * r->seq_len + 1) * sizeof *r->positions);
  vlmc_grid_thw_t *grids = calloc(o->num_images + 1, sizeof *grids);
  vlmc_status_t status = NULL;
  if (!r->input_ids || !r->positions || !grids)
    status = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; !status && i < r->seq_len; ++i) {
    if (o->input_ids[i] < 0 || o->input_ids[i] >= s->manifest.vocab_size)
      status = vlmc_status_make(VLMC_INVALID_ARGUMENT, "input id [%zu] = %lld is outside the "
                                "vocabulary (0..%lld)", i, (long long)o->input_ids[i],
                                (long long)s->manifest.vocab_size - 1);
    else
      r->input_ids[i] = o->input_ids[i];
  }
  for (size_t i = 0; !status && i < o->num_images; ++i) {
    grids[i].t = r->pixels.image_grid_thw[3 * i];
    grids[i].h = r->pixels.image_grid_thw[3 * i + 1];
    grids[i].w = r->pixels.image_grid_thw[3 * i + 2];
  }
  vlmc_mrope_config_t mc = {.image_token_id = s->manifest.image_token_id,
                            .video_token_id = s->manifest.video_token_id,
                            .merge = s->manifest.merge_size};
  if (!status)
    status = vlmc_mrope_position_ids(r->input_ids, r->seq_len, grids, o->num_images, mc,
                                     r->positions, &r->rope_delta);
  free(grids);
  return status;
}

static vlmc_status_t build_inputs(const vlmc_session_t *s, const vlmc_generate_options_t *o,
                                  vlmc_request_t *r) {
  if (o->input_ids) return build_inputs_from_ids(s, o, r);
  const char *path = vlmc_artifact_path(s->artifact);
  if (!s->tokenizer)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: the artifact has no tokenizer (its "
                            "checkpoint had no tokenizer.json); give token ids instead", path);
  if (!s->has_template)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: the artifact has no chat template",
                            path);
  vlmc_request_model_t model = {.image_token_id = s->manifest.image_token_id,
                                .video_token_id = s->manifest.video_token_id,
                                .merge_size = s->manifest.merge_size};
  vlmc_request_spec_t spec = {.system_prompt = o->system_prompt, .image_paths = o->image_paths,
                              .num_images = o->num_images, .prompt = o->prompt ? o->prompt : ""};
  return vlmc_request_build(s->tokenizer, &s->chat_template, &s->manifest.preprocess, model,
                            &spec, r);
}

/* ---- running ---- */

typedef struct {
  vlmc_session_t *s;
  const vlmc_generate_options_t *o;
  vlmc_request_t request;
  tap_list_t taps;
  vlmc_tensor_t *state;      /* logits + 2L caches, as the last call returned them */
  uint32_t state_count;
  vlmc_tokenizer_decoder_t decoder;
  vlmc_strbuf_t text;
  bool stop_requested;
} run_t;

static vlmc_status_t encode_images(run_t *run, vlmc_tensor_t *out_embeds) {
  vlmc_session_t *s = run->s;
  const vlmc_preprocess_output_t *px = &run->request.pixels;
  if (px->num_images == 0) {
    /* A text-only prompt scatters no image rows: an empty [0, H] embedding matrix. */
    const vlmc_func_t *prefill = vlmc_module_func_find(s->module, "prefill");
    const vlmc_type_t *t = &prefill->args[1].type;
    if (t->rank != 2 || !vlmc_dim_is_static(t->dims[1]))
      return vlmc_status_make(VLMC_PARSE_ERROR, "@prefill: image_embeds must be [M, H] with a "
                              "static H");
    int64_t shape[2] = {0, t->dims[1].off};
    return vlmc_tensor_alloc(VLMC_DTYPE_F32, 2, shape, out_embeds);
  }
  int64_t pv_shape[2] = {px->num_rows, px->row_width};
  int64_t grid_shape[2] = {(int64_t)px->num_images, 3};
  vlmc_tensor_t args[2] = {vlmc_tensor_view(VLMC_DTYPE_F32, 2, pv_shape, px->pixel_values),
                           vlmc_tensor_view(VLMC_DTYPE_I64, 2, grid_shape, px->image_grid_thw)};
  if (run->o->dump_taps_dir) {
    VLMC_RETURN_IF_ERROR(tap_add(&run->taps, "pixel_values", &args[0]));
    VLMC_RETURN_IF_ERROR(tap_add(&run->taps, "image_grid_thw", &args[1]));
  }
  return vlmc_executor_run(s->executor, "encode_image", args, 2, out_embeds, 1);
}

static void release_state(run_t *run) {
  for (uint32_t i = 0; i < run->state_count; ++i) vlmc_tensor_release(&run->state[i]);
}

static vlmc_status_t prefill(run_t *run, vlmc_tensor_t *embeds) {
  vlmc_request_t *r = &run->request;
  int64_t s_shape[1] = {(int64_t)r->seq_len}, p_shape[2] = {3, (int64_t)r->seq_len};
  vlmc_tensor_t args[3] = {vlmc_tensor_view(VLMC_DTYPE_I64, 1, s_shape, r->input_ids), *embeds,
                           vlmc_tensor_view(VLMC_DTYPE_I64, 2, p_shape, r->positions)};
  *embeds = (vlmc_tensor_t){0}; /* taken by the executor */
  if (run->o->dump_taps_dir) {
    int64_t one = 1;
    vlmc_tensor_t delta = vlmc_tensor_view(VLMC_DTYPE_I64, 1, &one, &r->rope_delta);
    VLMC_RETURN_IF_ERROR(tap_add(&run->taps, "input_ids", &args[0]));
    VLMC_RETURN_IF_ERROR(tap_add(&run->taps, "position_ids", &args[2]));
    VLMC_RETURN_IF_ERROR(tap_add(&run->taps, "rope_deltas", &delta));
  }
  vlmc_status_t status =
      vlmc_executor_run(run->s->executor, "prefill", args, 3, run->state, run->state_count);
  vlmc_tensor_release(&args[1]);
  if (!status && run->o->dump_taps_dir)
    status = tap_add(&run->taps, "logits_last", &run->state[0]);
  return status;
}

static vlmc_status_t decode_step(run_t *run, int64_t token, int64_t position) {
  uint32_t n = run->state_count;
  vlmc_tensor_t *args = calloc(n + 1, sizeof *args);
  if (!args) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  int64_t one = 1, p_shape[2] = {3, 1}, pos[3] = {position, position, position};
  args[0] = vlmc_tensor_view(VLMC_DTYPE_I64, 1, &one, &token);
  args[1] = vlmc_tensor_view(VLMC_DTYPE_I64, 2, p_shape, pos);
  vlmc_tensor_release(&run->state[0]); /* the old logits */
  for (uint32_t i = 1; i < n; ++i) {
    args[i + 1] = run->state[i]; /* the caches are taken and grown in place */
    run->state[i] = (vlmc_tensor_t){0};
  }
  vlmc_status_t status = vlmc_executor_run(run->s->executor, "decode", args, n + 1, run->state, n);
  for (uint32_t i = 0; i < n + 1; ++i) vlmc_tensor_release(&args[i]);
  free(args);
  return status;
}

static bool is_eos(const vlmc_manifest_t *m, int64_t id) {
  for (int i = 0; i < m->eos_count; ++i)
    if (m->eos_token_ids[i] == id) return true;
  return false;
}

static vlmc_status_t emit(run_t *run, int64_t id) {
  if (!run->s->tokenizer || !run->o->on_text) return NULL;
  vlmc_strbuf_clear(&run->text);
  vlmc_status_t status = vlmc_tokenizer_decoder_push(&run->decoder, (int32_t)id, &run->text);
  if (status && vlmc_status_code(status) == VLMC_OUT_OF_RANGE) {
    vlmc_status_free(status); /* an id with no text (padding rows of the vocabulary) */
    return NULL;
  }
  if (!status && run->text.len && !run->o->on_text(run->o->text_ctx, run->text.data, run->text.len))
    run->stop_requested = true;
  return status;
}

static vlmc_status_t check_context(const run_t *run, int max_new) {
  int64_t need = (int64_t)run->request.seq_len + max_new;
  if (run->o->max_context > 0 && need > run->o->max_context)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "the prompt has %zu tokens; with %d new tokens it needs a context of "
                            "%lld, more than --max-context %lld",
                            run->request.seq_len, max_new, (long long)need,
                            (long long)run->o->max_context);
  return NULL;
}

static vlmc_status_t generate(run_t *run, vlmc_generate_result_t *res) {
  const vlmc_generate_options_t *o = run->o;
  int max_new = o->max_new_tokens > 0 ? o->max_new_tokens : 128;
  VLMC_RETURN_IF_ERROR(build_inputs(run->s, o, &run->request));
  VLMC_RETURN_IF_ERROR(check_context(run, max_new));
  res->prompt_tokens = (int64_t)run->request.seq_len;
  res->rope_delta = run->request.rope_delta;
  res->tokens = calloc((size_t)max_new + 1, sizeof *res->tokens);
  if (!res->tokens) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_sampler_t sampler;
  VLMC_RETURN_IF_ERROR(vlmc_sampler_init(&sampler, o->sampling, (size_t)run->s->manifest.vocab_size));
  double t0 = now_ms();
  vlmc_tensor_t embeds = {0};
  vlmc_status_t status = encode_images(run, &embeds);
  double t1 = now_ms();
  if (!status) status = prefill(run, &embeds);
  double t2 = now_ms();
  vlmc_tensor_release(&embeds);
  int64_t cache_len = (int64_t)run->request.seq_len;
  for (int step = 0; !status && step < max_new; ++step) {
    if (vlmc_tensor_count(&run->state[0]) != run->s->manifest.vocab_size) {
      status = vlmc_status_make(VLMC_INTERNAL, "logits have %lld entries, the vocabulary %lld",
                                (long long)vlmc_tensor_count(&run->state[0]),
                                (long long)run->s->manifest.vocab_size);
      break;
    }
    int64_t id = vlmc_sampler_next(&sampler, vlmc_tensor_f32(&run->state[0]));
    res->tokens[res->generated_tokens++] = id;
    if (is_eos(&run->s->manifest, id)) {
      res->stopped_on_eos = true;
      break;
    }
    status = emit(run, id);
    if (status || run->stop_requested || step + 1 == max_new) break;
    status = decode_step(run, id, cache_len + run->request.rope_delta);
    ++cache_len;
  }
  double t3 = now_ms();
  vlmc_sampler_deinit(&sampler);
  res->encode_ms = t1 - t0;
  res->prefill_ms = t2 - t1;
  res->decode_ms = t3 - t2;
  if (!status && run->s->tokenizer && o->on_text) {
    vlmc_strbuf_clear(&run->text);
    vlmc_tokenizer_decoder_finish(&run->decoder, &run->text);
    if (run->text.len) o->on_text(o->text_ctx, run->text.data, run->text.len);
  }
  if (!status && o->dump_taps_dir) status = taps_write(&run->taps, o->dump_taps_dir);
  return status;
}

static vlmc_status_t set_tap_callback(vlmc_session_t *s, tap_list_t *taps) {
  /* Taps are cheap to leave off; recreate the executor only when they are wanted. */
  vlmc_executor_options_t eo = vlmc_executor_options_default();
  eo.get_param = param_source;
  eo.param_ctx = s->params;
  eo.threads = s->threads;
  eo.on_tap = taps ? on_tap : NULL;
  eo.tap_ctx = taps;
  vlmc_executor_destroy(s->executor);
  s->executor = NULL;
  return vlmc_executor_create(s->module, &eo, &s->executor);
}

vlmc_status_t vlmc_session_generate(vlmc_session_t *s, const vlmc_generate_options_t *o,
                                    vlmc_generate_result_t *res) {
  memset(res, 0, sizeof *res);
  run_t run = {.s = s, .o = o};
  run.state_count = 1 + 2 * s->num_layers;
  run.state = calloc(run.state_count, sizeof *run.state);
  if (!run.state) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_strbuf_init(&run.text);
  if (s->tokenizer) vlmc_tokenizer_decoder_init(&run.decoder, s->tokenizer, true);
  vlmc_status_t status = o->dump_taps_dir ? set_tap_callback(s, &run.taps) : NULL;
  if (!status) status = generate(&run, res);
  if (o->dump_taps_dir) {
    vlmc_status_t reset = set_tap_callback(s, NULL);
    if (!status) status = reset;
    else vlmc_status_free(reset);
  }
  release_state(&run);
  free(run.state);
  tap_list_deinit(&run.taps);
  vlmc_strbuf_deinit(&run.text);
  vlmc_request_deinit(&run.request);
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) == 0) res->peak_rss_kb = usage.ru_maxrss;
  if (status) vlmc_generate_result_deinit(res);
  return status;
}

void vlmc_generate_result_deinit(vlmc_generate_result_t *result) {
  free(result->tokens);
  result->tokens = NULL;
}
