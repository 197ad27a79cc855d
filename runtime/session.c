#define _POSIX_C_SOURCE 200809L
#include "runtime/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "frontend/chat_template.h"
#include "frontend/gunzip.h"
#include "frontend/safetensors.h"
#include "frontend/tokenizer.h"
#include "reference/mrope_positions.h"
#include "artifact/artifact.h"
#include "runtime/backend.h"
#include "runtime/params.h"
#include "runtime/program.h"
#include "runtime/request.h"
#include "runtime/stop_text.h"
#include "runtime/validate.h"
#include "support/file.h"
#include "support/strbuf.h"

enum { MAX_TOKENIZER_BYTES = 512 * 1024 * 1024 };

struct vlmc_session_s {
  vlmc_progress_fn progress; /* NULL: none */
  void *progress_ctx;
  vlmc_artifact_t *artifact;
  vlmc_manifest_t manifest;
  vlmc_module_t *module;
  vlmc_params_t *params;
  vlmc_tokenizer_t *tokenizer;      /* NULL when the artifact has none */
  bool has_template;
  vlmc_chat_template_t chat_template;
  vlmc_backend_t *backend;          /* runs the program's regions (or functions) */
  vlmc_program_t *program;          /* walks the program on the backend */
  /* The calling convention: which functions encode images, prefill and decode, and the
   * positions they take (the manifest's, written by the model family). */
  struct {
    const char *encode_image, *prefill, *decode, *positions;
  } convention;
  uint32_t num_layers;              /* KV cache pairs, from decode's signature */
  /* encode_image's results, which prefill takes between the ids and the positions: the image
   * embeddings, then any per-image-token features (Qwen3-VL's deepstack), from prefill's
   * signature */
  uint32_t num_image_inputs;
  uint32_t threads;
  uint32_t device; /* the device backend's device index */
  double open_ms;
};

/* At most this many image inputs of prefill (the embeddings and their features). */
enum { MAX_IMAGE_INPUTS = 64 };

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- opening ---- */

static vlmc_status_t load_tokenizer(vlmc_session_t *s) {
  const vlmc_artifact_section_t *sec = vlmc_artifact_find(s->artifact, "tokenizer");
  if (!sec) return NULL; /* explicit token ids only */
  char name[512];
  snprintf(name, sizeof name, "%s: section 'tokenizer'", vlmc_artifact_path(s->artifact));
  char *json = NULL;
  size_t len = 0;
  if (vlmc_is_gzip(sec->data, (size_t)sec->size)) {
    VLMC_RETURN_IF_ERROR(vlmc_gunzip(name, sec->data, (size_t)sec->size, MAX_TOKENIZER_BYTES,
                                     &json, &len));
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

static vlmc_status_t param_source(void *ctx, const char *name, const vlmc_type_t *type,
                                  vlmc_tensor_t *out_view) {
  vlmc_param_view_t view;
  VLMC_RETURN_IF_ERROR(vlmc_params_get(ctx, name, &view));
  *out_view = vlmc_tensor_view(view.dtype, view.rank, view.shape, view.data);
  return NULL;
}

/* The functions the generation loop calls and their positions' layout. */
static vlmc_status_t load_convention(vlmc_session_t *s) {
  s->convention.encode_image = s->manifest.convention.encode_image;
  s->convention.prefill = s->manifest.convention.prefill;
  s->convention.decode = s->manifest.convention.decode;
  s->convention.positions = s->manifest.convention.positions;
  if (strcmp(s->convention.positions, "mrope") != 0)
    return vlmc_status_make(VLMC_UNSUPPORTED, "%s: manifest: calling_convention.positions '%s': "
                            "this runtime computes only M-RoPE positions (mrope)",
                            vlmc_artifact_path(s->artifact), s->convention.positions);
  return NULL;
}

static vlmc_status_t check_signatures(vlmc_session_t *s) {
  const char *path = vlmc_artifact_path(s->artifact);
  const char *pn = s->convention.prefill, *dn = s->convention.decode;
  const vlmc_func_t *prefill = vlmc_module_func_find(s->module, pn);
  const vlmc_func_t *decode = vlmc_module_func_find(s->module, dn);
  if (!prefill || !decode)
    return vlmc_status_make(VLMC_NOT_FOUND, "%s: program: functions @%s and @%s are required",
                            path, pn, dn);
  if (prefill->num_args < 3 || prefill->num_args > 2 + MAX_IMAGE_INPUTS || decode->num_args < 2 ||
      prefill->num_results < 1 ||
      decode->num_results != decode->num_args - 1 || (decode->num_args - 2) % 2 != 0 ||
      prefill->num_results != decode->num_results)
    return vlmc_status_make(VLMC_PARSE_ERROR,
                            "%s: program: @%s(ids, image_embeds, [features...,] positions) -> "
                            "(logits, caches...) and @%s(token, position, caches...) -> "
                            "(logits, caches...) expected; got %u/%u and %u/%u "
                            "arguments/results",
                            path, pn, dn, prefill->num_args, prefill->num_results,
                            decode->num_args, decode->num_results);
  s->num_layers = (decode->num_args - 2) / 2;
  s->num_image_inputs = prefill->num_args - 2;
  for (uint32_t i = 0; i < s->num_image_inputs; ++i) {
    const vlmc_type_t *t = &prefill->args[1 + i].type;
    if (t->rank != 2 || !vlmc_dim_is_static(t->dims[1]))
      return vlmc_status_make(VLMC_PARSE_ERROR, "%s: program: @%s's argument %u (image features) "
                              "must be [M, H] with a static H", path, pn, 1 + i);
  }
  const char *en = s->convention.encode_image;
  const vlmc_func_t *encode = en[0] ? vlmc_module_func_find(s->module, en) : NULL;
  if (en[0] && !encode)
    return vlmc_status_make(VLMC_NOT_FOUND, "%s: program: function @%s (the image encoder) is "
                            "required", path, en);
  if (encode && (encode->num_args != 2 || encode->num_results != s->num_image_inputs))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: program: @%s(pixel_values, grid) must return "
                            "the %u image inputs @%s takes; it has %u arguments and %u results",
                            path, en, s->num_image_inputs, pn, encode->num_args,
                            encode->num_results);
  return NULL;
}

/* The inline params section is flagged LAZY_VERIFY so that opening does not read the weights.
 * Its checksum is checked once, before the first forward pass (or at open with
 * verify_params): the per-tensor checksums cover each weight, this also covers the alignment
 * padding between them, so that every damaged byte of the file is refused by name. It costs
 * one XXH64 pass over the weights, which the first forward pass reads anyway. */
static vlmc_status_t verify_params_section(const vlmc_session_t *s) {
  const vlmc_artifact_section_t *sec = vlmc_artifact_find(s->artifact, "params");
  return sec ? vlmc_artifact_section_verify(s->artifact, sec) : NULL;
}

/* The artifact's sections, for the backends. */
static const void *find_section(void *ctx, const char *name, size_t *out_size) {
  const vlmc_artifact_section_t *sec = vlmc_artifact_find(ctx, name);
  *out_size = sec ? (size_t)sec->size : 0;
  return sec ? sec->data : NULL;
}

/* The backend asked for, else the registry's first choice for this artifact's sections. */
static vlmc_status_t pick_backend(const vlmc_session_t *s, const char *asked,
                                  const vlmc_backend_iface_t **out) {
  char names[256];
  vlmc_backend_names(names, sizeof names);
  *out = asked ? vlmc_backend_find(asked)
               : vlmc_backend_pick_default(find_section, (void *)s->artifact);
  if (!*out && asked)
    return vlmc_status_make(VLMC_UNSUPPORTED, "backend '%s' is not available; backends: %s",
                            asked, names);
  if (!*out)
    return vlmc_status_make(VLMC_UNSUPPORTED, "%s: no backend can run this artifact; backends: "
                            "%s", vlmc_artifact_path(s->artifact), names);
  if (!vlmc_backend_has_sections(*out, find_section, (void *)s->artifact))
    return vlmc_status_make(VLMC_UNSUPPORTED, "%s: --backend %s: the artifact lacks the sections "
                            "it needs (compile it with --target ref,%s)",
                            vlmc_artifact_path(s->artifact), (*out)->name, (*out)->name);
  return NULL;
}

/* Backends that stream the weights through their kernels get them resident; the interpreter,
 * which keeps converted copies of its own, reads them from the mapping. */
static vlmc_status_t set_weights(vlmc_session_t *s, const char *weights,
                                 const vlmc_backend_iface_t *backend) {
  if (!weights) weights = backend->caps & VLMC_BACKEND_STREAMS_WEIGHTS ? "resident" : "mapped";
  if (strcmp(weights, "resident") != 0 && strcmp(weights, "mapped") != 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "--weights %s: expected resident or mapped",
                            weights);
  vlmc_params_set_resident(s->params, strcmp(weights, "resident") == 0);
  return NULL;
}

/* Uploading the weights at open, reported to the session's progress display. */
static void report_upload(void *ctx, const char *name, size_t done, size_t total) {
  (void)name;
  const vlmc_session_t *s = ctx;
  s->progress(s->progress_ctx, "weights uploaded", done, total, "bytes");
}

static vlmc_status_t open_backend(vlmc_session_t *s, const vlmc_backend_iface_t *backend) {
  vlmc_backend_open_params_t bp = {.source = vlmc_artifact_path(s->artifact),
                                   .module = s->module,
                                   .section = find_section,
                                   .section_ctx = s->artifact,
                                   .get_param = param_source,
                                   .param_ctx = s->params,
                                   .threads = s->threads,
                                   .device = s->device};
  VLMC_RETURN_IF_ERROR(backend->open(&bp, &s->backend));
  VLMC_RETURN_IF_ERROR(
      vlmc_program_create(s->module, s->backend, param_source, s->params, &s->program));
  if (!(backend->caps & VLMC_BACKEND_PRELOADS_PARAMS)) return NULL;
  if (!s->progress) return vlmc_program_preload_params(s->program, NULL, NULL);
  s->progress(s->progress_ctx, "weights uploaded", 0, 0, "bytes");
  vlmc_status_t st = vlmc_program_preload_params(s->program, report_upload, s);
  s->progress(s->progress_ctx, "weights uploaded", 1, 1, "bytes"); /* stored sizes may end short */
  return st;
}

static void report_weights(void *ctx, uint64_t done, uint64_t total) {
  const vlmc_session_t *s = ctx;
  s->progress(s->progress_ctx, "weights loaded", done, total, "bytes");
}

/* Every weight verified (and, resident, copied) now, reported to the progress display. */
static vlmc_status_t load_weights(vlmc_session_t *s, uint32_t threads) {
  if (!s->progress) return vlmc_params_verify_all_threads(s->params, threads);
  s->progress(s->progress_ctx, "weights loaded", 0, 0, "bytes");
  return vlmc_params_verify_all_progress(s->params, threads, report_weights, s);
}

/* --min-pixels / --max-pixels over the artifact's processor settings. */
static vlmc_status_t set_pixel_limits(vlmc_session_t *s, int64_t min_pixels, int64_t max_pixels) {
  if (!min_pixels && !max_pixels) return NULL;
  if (!s->convention.encode_image[0])
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "--min-pixels/--max-pixels: this model takes "
                            "no images");
  vlmc_preprocess_params_t p = s->manifest.preprocess;
  if (min_pixels) p.min_pixels = min_pixels;
  if (max_pixels) p.max_pixels = max_pixels;
  vlmc_status_t st = vlmc_preprocess_params_check(&p);
  if (st)
    return vlmc_status_annotate(st, "--min-pixels %lld --max-pixels %lld (the artifact's: %lld "
                                "and %lld): ", (long long)p.min_pixels, (long long)p.max_pixels,
                                (long long)s->manifest.preprocess.min_pixels,
                                (long long)s->manifest.preprocess.max_pixels);
  s->manifest.preprocess = p;
  return NULL;
}

static vlmc_status_t session_open(vlmc_session_t *s, const vlmc_session_options_t *o) {
  const char *not_built = vlmc_backend_not_built(o->backend);
  if (not_built) return vlmc_status_make(VLMC_UNSUPPORTED, "backend '%s': %s", o->backend, not_built);
  if (o->backend && !vlmc_backend_find(o->backend)) {
    char names[256];
    vlmc_backend_names(names, sizeof names);
    return vlmc_status_make(VLMC_UNSUPPORTED, "backend '%s' is not available; backends: %s",
                            o->backend, names);
  }
  VLMC_RETURN_IF_ERROR(vlmc_artifact_open(o->artifact_path, &s->artifact));
  /* Every cross-reference of the file is checked before anything below uses one. */
  VLMC_RETURN_IF_ERROR(vlmc_artifact_validate(s->artifact, &s->manifest, &s->module));
  VLMC_RETURN_IF_ERROR(load_convention(s));
  VLMC_RETURN_IF_ERROR(check_signatures(s));
  VLMC_RETURN_IF_ERROR(set_pixel_limits(s, o->min_pixels, o->max_pixels));
  VLMC_RETURN_IF_ERROR(vlmc_params_open(s->artifact, &s->manifest, o->params_dir, &s->params));
  const vlmc_backend_iface_t *backend;
  VLMC_RETURN_IF_ERROR(pick_backend(s, o->backend, &backend));
  VLMC_RETURN_IF_ERROR(set_weights(s, o->weights, backend));
  /* Resident weights are copied (and so checked) at open: load time, not the first prompt's. */
  if (o->verify_params || vlmc_params_resident(s->params)) {
    VLMC_RETURN_IF_ERROR(verify_params_section(s));
    VLMC_RETURN_IF_ERROR(load_weights(s, o->threads ? o->threads : 1));
  }
  VLMC_RETURN_IF_ERROR(load_tokenizer(s));
  VLMC_RETURN_IF_ERROR(load_chat_template(s));
  s->threads = o->threads ? o->threads : 1;
  s->device = o->device;
  return open_backend(s, backend);
}

vlmc_status_t vlmc_session_open(const vlmc_session_options_t *options, vlmc_session_t **out) {
  *out = NULL;
  double start = now_ms();
  vlmc_session_t *s = calloc(1, sizeof *s);
  if (!s) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_manifest_init(&s->manifest);
  s->progress = options->progress;
  s->progress_ctx = options->progress_ctx;
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
  vlmc_program_destroy(s->program);
  if (s->backend) s->backend->iface->destroy(s->backend);
  vlmc_tokenizer_destroy(s->tokenizer);
  vlmc_params_destroy(s->params);
  vlmc_module_destroy(s->module);
  vlmc_manifest_deinit(&s->manifest);
  vlmc_artifact_destroy(s->artifact);
  free(s);
}

const vlmc_manifest_t *vlmc_session_manifest(const vlmc_session_t *s) { return &s->manifest; }

vlmc_sampler_options_t vlmc_session_default_sampling(const vlmc_session_t *s) {
  vlmc_sampler_options_t o = {.temperature = 0, .top_k = 0, .top_p = 1, .repetition_penalty = 1};
  const vlmc_manifest_t *m = &s->manifest;
  if (!m->generation.present) return o;
  /* top_k and top_p as recorded even when greedy: a caller that asks to sample gets them */
  o.repetition_penalty = (float)m->generation.repetition_penalty;
  o.top_k = (int)m->generation.top_k;
  o.top_p = (float)m->generation.top_p;
  if (m->generation.do_sample) o.temperature = (float)m->generation.temperature;
  return o;
}
const char *vlmc_session_backend(const vlmc_session_t *s) { return s->backend->iface->name; }

void vlmc_session_stats(const vlmc_session_t *s, vlmc_session_stats_t *out) {
  memset(out, 0, sizeof *out);
  if (s->backend->iface->counters) s->backend->iface->counters(s->backend, &out->backend);
  vlmc_program_memory(s->program, &out->memory);
  out->transfers = vlmc_program_transfers(s->program, &out->num_transfers);
  out->host_memory = (s->backend->iface->caps & VLMC_BACKEND_HOST_MEMORY) != 0;
  for (size_t i = 0; i < s->manifest.num_params; ++i) {
    out->weight_bytes += s->manifest.params[i].nbytes;
    if (s->manifest.params[i].dtype == VLMC_DTYPE_U32)
      out->packed_weight_bytes += s->manifest.params[i].nbytes;
  }
}
double vlmc_session_open_ms(const vlmc_session_t *s) { return s->open_ms; }
bool vlmc_session_has_tokenizer(const vlmc_session_t *s) { return s->tokenizer != NULL; }

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

static vlmc_status_t on_tap(void *ctx, const char *name, const vlmc_tensor_t *tensor) {
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
    if (!vlmc_st_dtype_from_ir(t->dtype, &w[i].dtype)) {
      free(w);
      free(shapes);
      return vlmc_status_make(VLMC_INTERNAL, "tap %s: %s has no safetensors dtype",
                              list->items[i].name, vlmc_dtype_info(t->dtype)->name);
    }
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

static vlmc_status_t check_ids(const vlmc_session_t *s, const int64_t *ids, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= s->manifest.vocab_size)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "input id [%zu] = %lld is outside the "
                              "vocabulary (0..%lld)", i, (long long)ids[i],
                              (long long)s->manifest.vocab_size - 1);
  return NULL;
}

static vlmc_status_t preprocess_images(const vlmc_session_t *s, const char *const *paths,
                                       size_t count, vlmc_preprocess_output_t *out) {
  if (!count) return NULL;
  if (!s->convention.encode_image[0]) /* before any image is read or any position computed */
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: this model takes no images (its calling "
                            "convention has no image encoder)", vlmc_artifact_path(s->artifact));
  vlmc_image_t *images = calloc(count, sizeof *images);
  if (!images) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_status_t status = NULL;
  size_t loaded = 0;
  for (; loaded < count && !status; ++loaded)
    status = vlmc_image_load(paths[loaded], &images[loaded]);
  if (!status) status = vlmc_preprocess_images(images, paths, count, &s->manifest.preprocess, out);
  for (size_t i = 0; i < loaded; ++i) vlmc_image_destroy(&images[i]);
  free(images);
  return status;
}

/* A first prompt given as token ids (models without a tokenizer): the ids as they are, the
 * images preprocessed, the M-RoPE positions computed from the ids and the grids. */
static vlmc_status_t build_inputs_from_ids(const vlmc_session_t *s, const char *const *paths,
                                           size_t num_images, const int64_t *ids, size_t n,
                                           vlmc_request_t *r) {
  memset(r, 0, sizeof *r);
  VLMC_RETURN_IF_ERROR(check_ids(s, ids, n));
  VLMC_RETURN_IF_ERROR(preprocess_images(s, paths, num_images, &r->pixels));
  r->seq_len = n;
  r->input_ids = malloc((n + 1) * sizeof *r->input_ids);
  r->positions = malloc((3 * n + 1) * sizeof *r->positions);
  vlmc_grid_thw_t *grids = calloc(num_images + 1, sizeof *grids);
  vlmc_status_t status = NULL;
  if (!r->input_ids || !r->positions || !grids)
    status = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  if (!status && n) memcpy(r->input_ids, ids, n * sizeof *ids);
  for (size_t i = 0; !status && i < num_images; ++i) {
    grids[i].t = r->pixels.image_grid_thw[3 * i];
    grids[i].h = r->pixels.image_grid_thw[3 * i + 1];
    grids[i].w = r->pixels.image_grid_thw[3 * i + 2];
  }
  vlmc_mrope_config_t mc = {.image_token_id = s->manifest.image_token_id,
                            .video_token_id = s->manifest.video_token_id,
                            .merge = s->manifest.merge_size};
  if (!status)
    status = vlmc_mrope_position_ids(r->input_ids, r->seq_len, grids, num_images, mc,
                                     r->positions, &r->rope_delta);
  free(grids);
  return status;
}

static vlmc_status_t require_template(const vlmc_session_t *s) {
  const char *path = vlmc_artifact_path(s->artifact);
  if (!s->tokenizer)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: the artifact has no tokenizer (its "
                            "checkpoint had no tokenizer.json); give token ids instead", path);
  if (!s->has_template)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: the artifact has no chat template",
                            path);
  return NULL;
}

/* What the chat template renders after an answer for one more user message: the part that
 * [system, user, assistant "", user PROMPT] renders beyond [system, user], both with the
 * generation prompt. The template renders each message on its own, so this part is the same
 * after any answer, and it comes from the template rather than from strings written here. */
static vlmc_status_t render_continuation(const vlmc_session_t *s, const char *prompt,
                                         vlmc_strbuf_t *head, vlmc_strbuf_t *all) {
  vlmc_chat_message_t m[4];
  memset(m, 0, sizeof m);
  m[0] = (vlmc_chat_message_t){.role = "system", .text = "s", .text_len = 1};
  m[1] = (vlmc_chat_message_t){.role = "user", .text = "u", .text_len = 1};
  m[2] = (vlmc_chat_message_t){.role = "assistant", .text = "", .text_len = 0};
  m[3] = (vlmc_chat_message_t){.role = "user", .text = prompt, .text_len = strlen(prompt)};
  vlmc_chat_render_options_t ro = {.add_generation_prompt = true, .add_vision_id = false};
  VLMC_RETURN_IF_ERROR(vlmc_chat_template_render(&s->chat_template, m, 2, &ro, head));
  VLMC_RETURN_IF_ERROR(vlmc_chat_template_render(&s->chat_template, m, 4, &ro, all));
  if (all->len < head->len || memcmp(vlmc_strbuf_cstr(all), vlmc_strbuf_cstr(head), head->len))
    return vlmc_status_make(VLMC_INTERNAL, "chat template: a conversation with one more turn "
                            "does not extend the rendering of the shorter one");
  return NULL;
}

/* The token ids of one more user message in a conversation held by the template. */
static vlmc_status_t tokenize_continuation(const vlmc_session_t *s, const char *prompt,
                                           int64_t **out_ids, size_t *out_n) {
  VLMC_RETURN_IF_ERROR(require_template(s));
  vlmc_strbuf_t head, all;
  vlmc_strbuf_init(&head);
  vlmc_strbuf_init(&all);
  vlmc_chat_prompt_t tokens = {0};
  vlmc_status_t status = render_continuation(s, prompt, &head, &all);
  if (!status)
    status = vlmc_chat_prompt_tokenize(s->tokenizer, vlmc_strbuf_cstr(&all) + head.len,
                                       all.len - head.len, NULL, 0, NULL, 0,
                                       s->manifest.merge_size, &tokens);
  vlmc_strbuf_deinit(&head);
  vlmc_strbuf_deinit(&all);
  if (status) return status;
  *out_ids = malloc((tokens.len + 1) * sizeof **out_ids);
  if (!*out_ids) status = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; !status && i < tokens.len; ++i) (*out_ids)[i] = tokens.ids[i];
  *out_n = status ? 0 : tokens.len;
  vlmc_chat_prompt_deinit(&tokens);
  return status;
}

/* ---- the conversation ---- */

static void set_tap_callback(vlmc_session_t *s, tap_list_t *taps) {
  vlmc_program_set_tap(s->program, taps ? on_tap : NULL, taps);
}

struct vlmc_chat_s {
  vlmc_session_t *s;
  vlmc_chat_options_t options;
  bool context_is_default;    /* options.max_context is the model's positions (none was given) */
  vlmc_sampler_t sampler;
  vlmc_rt_value_t *state;     /* logits + 2L caches, as the last call returned them */
  vlmc_tensor_t logits;       /* state[0] on the host (a view, or a downloaded copy) */
  uint32_t state_count;
  bool started;               /* the first turn's prefill ran */
  bool failed;                /* a turn failed while running: the cache is gone */
  bool has_pending;           /* the last conversation token is not in the cache yet */
  int64_t cache_len;          /* rows in each KV cache */
  int64_t rope_delta;         /* of the first prompt; positions continue from it */
  int64_t *tokens;            /* the conversation */
  size_t num_tokens, capacity;
  tap_list_t *taps;           /* the first turn's taps, with options.dump_taps_dir */
  const vlmc_chat_turn_options_t *turn; /* the turn running now */
  vlmc_tokenizer_decoder_t decoder;
  vlmc_strbuf_t text;      /* the decoder's latest piece */
  vlmc_strbuf_t released;  /* what the stop strings let out of it */
  vlmc_stop_text_t stop;   /* the turn's stop strings */
  bool stop_requested;
};

/* What a turn feeds before it generates: the first turn's request, or later turns' ids. */
typedef struct {
  vlmc_request_t request;
  int64_t *ids;
  size_t num_ids;
} turn_input_t;

static vlmc_status_t conversation_append(vlmc_chat_t *c, const int64_t *ids, size_t n) {
  if (c->num_tokens + n > c->capacity) {
    size_t capacity = c->capacity ? c->capacity : 256;
    while (capacity < c->num_tokens + n) capacity *= 2;
    int64_t *grown = realloc(c->tokens, capacity * sizeof *grown);
    if (!grown) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
    c->tokens = grown;
    c->capacity = capacity;
  }
  if (n) memcpy(c->tokens + c->num_tokens, ids, n * sizeof *ids);
  c->num_tokens += n;
  return NULL;
}

vlmc_status_t vlmc_chat_create(vlmc_session_t *s, const vlmc_chat_options_t *options,
                               vlmc_chat_t **out) {
  *out = NULL;
  vlmc_chat_t *c = calloc(1, sizeof *c);
  if (!c) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  c->s = s;
  c->options = *options;
  /* by default a conversation fits the positions the model was trained for */
  c->context_is_default = c->options.max_context <= 0 && s->manifest.max_positions > 0;
  if (c->context_is_default) c->options.max_context = s->manifest.max_positions;
  c->state_count = 1 + 2 * s->num_layers;
  c->state = calloc(c->state_count, sizeof *c->state);
  vlmc_strbuf_init(&c->text);
  vlmc_strbuf_init(&c->released);
  vlmc_stop_text_init(&c->stop, NULL, 0);
  vlmc_status_t status =
      c->state ? vlmc_sampler_init(&c->sampler, options->sampling,
                                   (size_t)s->manifest.vocab_size)
               : vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  if (status) {
    free(c->state);
    free(c);
    return status;
  }
  if (options->dump_taps_dir) {
    c->taps = calloc(1, sizeof *c->taps);
    if (c->taps) set_tap_callback(s, c->taps);
    else status = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  if (status) {
    vlmc_chat_destroy(c);
    return status;
  }
  *out = c;
  return NULL;
}

/* Writes the first turn's taps and turns taps off. */
static vlmc_status_t taps_finish(vlmc_chat_t *c, bool write) {
  vlmc_status_t status = write ? taps_write(c->taps, c->options.dump_taps_dir) : NULL;
  set_tap_callback(c->s, NULL);
  tap_list_deinit(c->taps);
  free(c->taps);
  c->taps = NULL;
  return status;
}

void vlmc_chat_destroy(vlmc_chat_t *c) {
  if (!c) return;
  if (c->taps) vlmc_status_free(taps_finish(c, false));
  vlmc_tensor_release(&c->logits);
  for (uint32_t i = 0; c->state && i < c->state_count; ++i)
    vlmc_program_release(c->s->program, &c->state[i]);
  free(c->state);
  free(c->tokens);
  vlmc_sampler_deinit(&c->sampler);
  vlmc_strbuf_deinit(&c->text);
  vlmc_strbuf_deinit(&c->released);
  vlmc_stop_text_deinit(&c->stop);
  free(c);
}

const int64_t *vlmc_chat_tokens(const vlmc_chat_t *c, size_t *out_count) {
  *out_count = c->num_tokens;
  return c->tokens;
}

int64_t vlmc_chat_cache_length(const vlmc_chat_t *c) { return c->cache_len; }

const float *vlmc_chat_logits(const vlmc_chat_t *c, size_t *out_count) {
  bool ready = c->started && !c->failed && c->logits.data;
  *out_count = ready ? (size_t)vlmc_tensor_count(&c->logits) : 0;
  return ready ? vlmc_tensor_f32(&c->logits) : NULL;
}

/* ---- running ---- */

/* The logits of the last call on the host: the only value a generation step reads back. */
static vlmc_status_t read_logits(vlmc_chat_t *c) {
  vlmc_tensor_release(&c->logits);
  return vlmc_program_read(c->s->program, &c->state[0], &c->logits);
}

/* Host data as a program argument (borrowed: it must outlive the call). */
static vlmc_status_t import(vlmc_chat_t *c, vlmc_dtype_t dtype, uint32_t rank,
                            const int64_t *shape, const void *data, vlmc_rt_value_t *out) {
  vlmc_tensor_t host = vlmc_tensor_view(dtype, rank, shape, data);
  return vlmc_program_import(c->s->program, &host, out);
}

static void release_values(vlmc_chat_t *c, vlmc_rt_value_t *values, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) vlmc_program_release(c->s->program, &values[i]);
}

static void report_encode_step(void *ctx, uint32_t done, uint32_t total) {
  const vlmc_session_t *s = ctx;
  s->progress(s->progress_ctx, "image encode", done, total, "steps");
}

/* @encode_image, its steps reported to the progress display while it runs. */
static vlmc_status_t run_encode(vlmc_session_t *s, vlmc_rt_value_t *args, vlmc_rt_value_t *out) {
  const char *func = s->convention.encode_image;
  uint32_t n = s->num_image_inputs;
  if (!s->progress) return vlmc_program_run(s->program, func, args, 2, out, n);
  s->progress(s->progress_ctx, "image encode", 0, 0, "steps");
  vlmc_program_set_step_hook(s->program, report_encode_step, s);
  vlmc_status_t st = vlmc_program_run(s->program, func, args, 2, out, n);
  vlmc_program_set_step_hook(s->program, NULL, NULL);
  return st;
}

/* The image inputs of prefill (s->num_image_inputs of them, into out_embeds[]). */
static vlmc_status_t encode_images(vlmc_chat_t *c, const vlmc_preprocess_output_t *px,
                                   vlmc_rt_value_t *out_embeds) {
  vlmc_session_t *s = c->s;
  if (px->num_images == 0) {
    /* A text-only prompt scatters no image rows: empty [0, H] matrices (the signatures were
     * checked at open: [M, H] with a static H). */
    const vlmc_func_t *prefill = vlmc_module_func_find(s->module, s->convention.prefill);
    static const float none;
    vlmc_status_t st = NULL;
    for (uint32_t i = 0; !st && i < s->num_image_inputs; ++i) {
      int64_t shape[2] = {0, prefill->args[1 + i].type.dims[1].off};
      st = import(c, VLMC_DTYPE_F32, 2, shape, &none, &out_embeds[i]);
    }
    if (st) release_values(c, out_embeds, s->num_image_inputs);
    return st;
  }
  if (!s->convention.encode_image[0])
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: this model takes no images (its calling "
                            "convention has no image encoder)", vlmc_artifact_path(s->artifact));
  int64_t pv_shape[2] = {px->num_rows, px->row_width};
  int64_t grid_shape[2] = {(int64_t)px->num_images, 3};
  if (c->taps) {
    vlmc_tensor_t pv = vlmc_tensor_view(VLMC_DTYPE_F32, 2, pv_shape, px->pixel_values);
    vlmc_tensor_t grid = vlmc_tensor_view(VLMC_DTYPE_I64, 2, grid_shape, px->image_grid_thw);
    VLMC_RETURN_IF_ERROR(tap_add(c->taps, "pixel_values", &pv));
    VLMC_RETURN_IF_ERROR(tap_add(c->taps, "image_grid_thw", &grid));
  }
  vlmc_rt_value_t args[2] = {{0}};
  vlmc_status_t st = import(c, VLMC_DTYPE_F32, 2, pv_shape, px->pixel_values, &args[0]);
  if (!st) st = import(c, VLMC_DTYPE_I64, 2, grid_shape, px->image_grid_thw, &args[1]);
  if (!st) return run_encode(s, args, out_embeds);
  release_values(c, args, 2);
  return st;
}

/* prefill(ids, the image inputs, positions); the image inputs are taken by the call. */
static vlmc_status_t prefill(vlmc_chat_t *c, vlmc_request_t *r, vlmc_rt_value_t *embeds) {
  int64_t s_shape[1] = {(int64_t)r->seq_len}, p_shape[2] = {3, (int64_t)r->seq_len};
  uint32_t features = c->s->num_image_inputs, num_args = features + 2;
  vlmc_rt_value_t args[MAX_IMAGE_INPUTS + 2] = {{0}};
  for (uint32_t i = 0; i < features; ++i) {
    args[1 + i] = embeds[i];
    memset(&embeds[i], 0, sizeof embeds[i]);
  }
  vlmc_status_t status = import(c, VLMC_DTYPE_I64, 1, s_shape, r->input_ids, &args[0]);
  if (!status) status = import(c, VLMC_DTYPE_I64, 2, p_shape, r->positions, &args[num_args - 1]);
  if (!status && c->taps) {
    int64_t one = 1;
    vlmc_tensor_t ids = vlmc_tensor_view(VLMC_DTYPE_I64, 1, s_shape, r->input_ids);
    vlmc_tensor_t positions = vlmc_tensor_view(VLMC_DTYPE_I64, 2, p_shape, r->positions);
    vlmc_tensor_t delta = vlmc_tensor_view(VLMC_DTYPE_I64, 1, &one, &r->rope_delta);
    status = tap_add(c->taps, "input_ids", &ids);
    if (!status) status = tap_add(c->taps, "position_ids", &positions);
    if (!status) status = tap_add(c->taps, "rope_deltas", &delta);
  }
  if (status) {
    release_values(c, args, num_args);
    return status;
  }
  status = vlmc_program_run(c->s->program, c->s->convention.prefill, args, num_args, c->state,
                            c->state_count);
  if (!status) status = read_logits(c);
  if (!status && c->taps) status = tap_add(c->taps, "logits_last", &c->logits);
  return status;
}

/* Feeds one token at the next cache row: position cache_len + rope_delta on all three planes,
 * as M-RoPE gives every text token after the prompt's images. */
static vlmc_status_t decode_step(vlmc_chat_t *c, int64_t token) {
  uint32_t n = c->state_count;
  vlmc_rt_value_t *args = calloc(n + 1, sizeof *args);
  if (!args) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  int64_t position = c->cache_len + c->rope_delta;
  int64_t one = 1, p_shape[2] = {3, 1}, pos[3] = {position, position, position};
  vlmc_status_t status = import(c, VLMC_DTYPE_I64, 1, &one, &token, &args[0]);
  if (!status) status = import(c, VLMC_DTYPE_I64, 2, p_shape, pos, &args[1]);
  vlmc_tensor_release(&c->logits);
  vlmc_program_release(c->s->program, &c->state[0]); /* the old logits */
  for (uint32_t i = 1; i < n; ++i) {
    args[i + 1] = c->state[i]; /* the caches are taken and grown in place */
    memset(&c->state[i], 0, sizeof c->state[i]);
  }
  if (!status)
    status = vlmc_program_run(c->s->program, c->s->convention.decode, args, n + 1, c->state, n);
  else release_values(c, args, n + 1);
  free(args);
  if (!status) status = read_logits(c);
  if (!status) ++c->cache_len;
  return status;
}

static bool is_eos(const vlmc_manifest_t *m, int64_t id) {
  for (int i = 0; i < m->eos_count; ++i)
    if (m->eos_token_ids[i] == id) return true;
  return false;
}

static vlmc_status_t emit(vlmc_chat_t *c, int64_t id) {
  if (!c->s->tokenizer || !c->turn->on_text) return NULL;
  vlmc_strbuf_clear(&c->text);
  vlmc_status_t status = vlmc_tokenizer_decoder_push(&c->decoder, (int32_t)id, &c->text);
  if (status && vlmc_status_code(status) == VLMC_OUT_OF_RANGE) {
    vlmc_status_free(status); /* an id with no text (padding rows of the vocabulary) */
    return NULL;
  }
  if (status || !c->text.len) return status;
  vlmc_strbuf_clear(&c->released);
  if (vlmc_stop_text_push(&c->stop, c->text.data, c->text.len, &c->released))
    c->stop_requested = true; /* a stop string: what came before it goes out, then the end */
  if (c->released.len &&
      !c->turn->on_text(c->turn->text_ctx, c->released.data, c->released.len))
    c->stop_requested = true;
  return NULL;
}

static void emit_finish(vlmc_chat_t *c) {
  if (!c->s->tokenizer || !c->turn->on_text) return;
  vlmc_strbuf_clear(&c->text);
  vlmc_tokenizer_decoder_finish(&c->decoder, &c->text);
  vlmc_strbuf_clear(&c->released);
  vlmc_stop_text_push(&c->stop, c->text.data ? c->text.data : "", c->text.len, &c->released);
  vlmc_stop_text_finish(&c->stop, &c->released);
  if (c->released.len) c->turn->on_text(c->turn->text_ctx, c->released.data, c->released.len);
}

/* A turn needs room for the conversation so far, its new tokens and its longest answer. */
static vlmc_status_t context_error(const vlmc_chat_t *c, size_t adds, int max_new) {
  int64_t need = (int64_t)c->num_tokens + (int64_t)adds + max_new;
  if (c->options.max_context <= 0 || need <= c->options.max_context) return NULL;
  char limit[160];
  if (c->context_is_default)
    snprintf(limit, sizeof limit, "more than the model's %lld positions (config.json's "
             "max_position_embeddings; --max-context N sets another limit)",
             (long long)c->options.max_context);
  else
    snprintf(limit, sizeof limit, "more than --max-context %lld",
             (long long)c->options.max_context);
  if (!c->started)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "the prompt has %zu tokens; with %d new tokens it needs a context of "
                            "%lld, %s", adds, max_new, (long long)need, limit);
  return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                          "the conversation holds %lld tokens and this message adds %zu; with %d "
                          "new tokens it needs a context of %lld, %s",
                          (long long)c->num_tokens, adds, max_new, (long long)need, limit);
}

/* Everything a turn needs before it touches the cache; errors here leave the chat usable. */
static vlmc_status_t prepare_turn(vlmc_chat_t *c, const vlmc_chat_turn_options_t *o, int max_new,
                                  turn_input_t *in) {
  vlmc_session_t *s = c->s;
  if (c->started && o->messages)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "a conversation of messages is the first "
                            "turn of a chat only; later turns take one message");
  if (!c->started) {
    if (o->input_ids)
      VLMC_RETURN_IF_ERROR(build_inputs_from_ids(s, c->options.image_paths, c->options.num_images,
                                                 o->input_ids, o->num_input_ids, &in->request));
    else {
      VLMC_RETURN_IF_ERROR(require_template(s));
      vlmc_request_model_t model = {.image_token_id = s->manifest.image_token_id,
                                    .video_token_id = s->manifest.video_token_id,
                                    .merge_size = s->manifest.merge_size};
      vlmc_request_spec_t spec = {.system_prompt = c->options.system_prompt,
                                  .image_paths = c->options.image_paths,
                                  .num_images = c->options.num_images,
                                  .prompt = o->prompt ? o->prompt : "",
                                  .messages = o->messages,
                                  .num_messages = o->num_messages};
      VLMC_RETURN_IF_ERROR(vlmc_request_build(s->tokenizer, &s->chat_template,
                                              &s->manifest.preprocess, model, &spec,
                                              &in->request));
    }
    return context_error(c, in->request.seq_len, max_new);
  }
  if (o->input_ids) {
    VLMC_RETURN_IF_ERROR(check_ids(s, o->input_ids, o->num_input_ids));
    in->ids = malloc((o->num_input_ids + 1) * sizeof *in->ids);
    if (!in->ids) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
    if (o->num_input_ids) memcpy(in->ids, o->input_ids, o->num_input_ids * sizeof *in->ids);
    in->num_ids = o->num_input_ids;
  } else {
    VLMC_RETURN_IF_ERROR(tokenize_continuation(s, o->prompt ? o->prompt : "", &in->ids,
                                               &in->num_ids));
  }
  return context_error(c, in->num_ids, max_new);
}

static vlmc_status_t run_first_prompt(vlmc_chat_t *c, vlmc_request_t *r,
                                      vlmc_generate_result_t *res) {
  VLMC_RETURN_IF_ERROR(verify_params_section(c->s));
  double t0 = now_ms();
  vlmc_rt_value_t embeds[MAX_IMAGE_INPUTS] = {{0}};
  vlmc_status_t status = encode_images(c, &r->pixels, embeds);
  double t1 = now_ms();
  if (!status) status = prefill(c, r, embeds);
  for (uint32_t i = 0; i < c->s->num_image_inputs; ++i)
    vlmc_program_release(c->s->program, &embeds[i]);
  res->encode_ms = t1 - t0;
  res->prefill_ms = now_ms() - t1;
  VLMC_RETURN_IF_ERROR(status);
  c->started = true;
  c->cache_len = (int64_t)r->seq_len;
  c->rope_delta = r->rope_delta;
  res->prompt_tokens = (int64_t)r->seq_len;
  return conversation_append(c, r->input_ids, r->seq_len);
}

/* A later turn's tokens go through decode one by one (see session.h for why and the cost);
 * first the previous answer's last token when the token limit cut it before it was fed. */
static vlmc_status_t run_next_prompt(vlmc_chat_t *c, const turn_input_t *in,
                                     vlmc_generate_result_t *res) {
  double t0 = now_ms();
  int64_t before = c->cache_len;
  if (c->has_pending) {
    VLMC_RETURN_IF_ERROR(decode_step(c, c->tokens[c->num_tokens - 1]));
    c->has_pending = false;
  }
  VLMC_RETURN_IF_ERROR(conversation_append(c, in->ids, in->num_ids));
  for (size_t i = 0; i < in->num_ids; ++i) VLMC_RETURN_IF_ERROR(decode_step(c, in->ids[i]));
  res->prompt_tokens = c->cache_len - before;
  res->prefill_ms = now_ms() - t0;
  return NULL;
}

static vlmc_status_t answer(vlmc_chat_t *c, int max_new, vlmc_generate_result_t *res) {
  const vlmc_manifest_t *m = &c->s->manifest;
  res->tokens = calloc((size_t)max_new + 1, sizeof *res->tokens);
  if (!res->tokens) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (int step = 0; step < max_new; ++step) {
    if (vlmc_tensor_count(&c->logits) != m->vocab_size || c->logits.dtype != VLMC_DTYPE_F32)
      return vlmc_status_make(VLMC_INTERNAL, "logits have %lld entries, the vocabulary %lld",
                              (long long)vlmc_tensor_count(&c->logits),
                              (long long)m->vocab_size);
    int64_t id = vlmc_sampler_next(&c->sampler, vlmc_tensor_f32(&c->logits), c->tokens,
                                   c->num_tokens);
    res->tokens[res->generated_tokens++] = id;
    if (is_eos(m, id) && !c->options.ignore_eos) {
      res->stopped_on_eos = true;
      return NULL;
    }
    VLMC_RETURN_IF_ERROR(conversation_append(c, &id, 1));
    c->has_pending = true;
    VLMC_RETURN_IF_ERROR(emit(c, id));
    if (c->stop_requested || step + 1 == max_new) return NULL;
    VLMC_RETURN_IF_ERROR(decode_step(c, id));
    c->has_pending = false;
  }
  return NULL;
}

static vlmc_status_t run_turn(vlmc_chat_t *c, turn_input_t *in, int max_new,
                              vlmc_generate_result_t *res) {
  if (c->started) VLMC_RETURN_IF_ERROR(run_next_prompt(c, in, res));
  else VLMC_RETURN_IF_ERROR(run_first_prompt(c, &in->request, res));
  res->context_tokens = c->cache_len;
  res->rope_delta = c->rope_delta;
  if (c->s->tokenizer) vlmc_tokenizer_decoder_init(&c->decoder, c->s->tokenizer, true);
  double t0 = now_ms();
  vlmc_status_t status = answer(c, max_new, res);
  res->decode_ms = now_ms() - t0;
  if (!status) emit_finish(c);
  if (!status && c->taps) status = taps_finish(c, true);
  return status;
}

vlmc_status_t vlmc_chat_turn(vlmc_chat_t *c, const vlmc_chat_turn_options_t *o,
                             vlmc_generate_result_t *res) {
  memset(res, 0, sizeof *res);
  if (c->failed)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "the conversation ended with an error in an "
                            "earlier turn; start a new one");
  int max_new = o->max_new_tokens > 0 ? o->max_new_tokens : 128;
  const char *bad_stop = vlmc_stop_text_check(o->stop_strings, o->num_stop_strings);
  if (bad_stop) return vlmc_status_make(VLMC_INVALID_ARGUMENT, "stop strings: %s", bad_stop);
  c->turn = o;
  c->stop_requested = false;
  vlmc_stop_text_deinit(&c->stop);
  vlmc_stop_text_init(&c->stop, o->stop_strings, o->num_stop_strings);
  turn_input_t in;
  memset(&in, 0, sizeof in);
  vlmc_status_t status = prepare_turn(c, o, max_new, &in);
  if (!status) {
    status = run_turn(c, &in, max_new, res);
    c->failed = status != NULL;
    res->stopped_on_string = c->stop.stopped;
  }
  vlmc_request_deinit(&in.request);
  free(in.ids);
  c->turn = NULL;
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) == 0) res->peak_rss_kb = usage.ru_maxrss;
  if (status) vlmc_generate_result_deinit(res);
  return status;
}

/* ---- one-shot generation: a chat of one turn ---- */

vlmc_status_t vlmc_session_generate(vlmc_session_t *s, const vlmc_generate_options_t *o,
                                    vlmc_generate_result_t *res) {
  memset(res, 0, sizeof *res);
  vlmc_chat_options_t co = {.system_prompt = o->system_prompt, .image_paths = o->image_paths,
                            .num_images = o->num_images, .max_context = o->max_context,
                            .sampling = o->sampling, .dump_taps_dir = o->dump_taps_dir};
  vlmc_chat_t *chat = NULL;
  VLMC_RETURN_IF_ERROR(vlmc_chat_create(s, &co, &chat));
  vlmc_chat_turn_options_t turn = {.prompt = o->prompt, .input_ids = o->input_ids,
                                   .num_input_ids = o->num_input_ids, .messages = o->messages,
                                   .num_messages = o->num_messages,
                                   .max_new_tokens = o->max_new_tokens, .on_text = o->on_text,
                                   .text_ctx = o->text_ctx, .stop_strings = o->stop_strings,
                                   .num_stop_strings = o->num_stop_strings};
  vlmc_status_t status = vlmc_chat_turn(chat, &turn, res);
  vlmc_chat_destroy(chat);
  return status;
}

void vlmc_generate_result_deinit(vlmc_generate_result_t *result) {
  free(result->tokens);
  result->tokens = NULL;
}
