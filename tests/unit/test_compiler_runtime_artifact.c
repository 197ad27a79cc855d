/* compile -> artifact -> run (issue 5, acceptance 1), in process: the tiny checkpoint compiled
 * with its parameters inline and with --params external, each artifact opened by the runtime
 * and run on three oracle cases (one image, two images, text only), against
 *   - the in-process reference run: the model built from the checkpoint and lowered by the
 *     target's default pipeline in this process (no artifact), weights read from the
 *     checkpoint, run by the reference executor with transformers' position ids and its own
 *     decode loop: the same prefill logits, bit for bit, and the same greedy tokens;
 *   - transformers' greedy tokens (expected.json);
 *   - each other: inline and external give identical logits and tokens.
 * The command-line form of the same (vlmc compile, vlmc inspect, vlmc-run) is
 * tests/e2e/artifact_tiny.sh. */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codegen/compile.h"
#include "frontend/checkpoint.h"
#include "frontend/image.h"
#include "frontend/preprocess.h"
#include "frontend/safetensors.h"
#include "models/qwen2_5_vl.h"
#include "reference/executor.h"
#include "artifact/artifact.h"
#include "runtime/session.h"
#include "support/file.h"
#include "tests/unit/test.h"
#include "tests/unit/test_compiler_pass_util.h"

static const char *kCheckpoint = "tests/fixtures/parity/tiny-vocab512";
static char inline_path[128], external_path[128];

enum { MAX_TOKENS = 16 };

typedef struct {
  const char *name;
  int64_t *input_ids;
  size_t num_ids;
  const char *images[2];
  size_t num_images;
  int64_t tokens[MAX_TOKENS];
  size_t num_tokens;
} case_t;

static bool case_load(const char *name, case_t *c) {
  memset(c, 0, sizeof *c);
  c->name = name;
  char path[256], *text = NULL;
  size_t len = 0;
  snprintf(path, sizeof path, "tests/fixtures/parity/%s/expected.json", name);
  vlmc_status_t s = vlmc_file_read_all(path, &text, &len);
  if (s) {
    TEST_FAIL_("%s", vlmc_status_message(s));
    vlmc_status_free(s);
    return false;
  }
  cJSON *root = cJSON_ParseWithLength(text, len);
  free(text);
  const cJSON *ids = cJSON_GetObjectItem(root, "input_ids");
  const cJSON *tokens = cJSON_GetObjectItem(root, "greedy_tokens");
  const cJSON *images = cJSON_GetObjectItem(root, "images");
  c->num_ids = (size_t)cJSON_GetArraySize(ids);
  c->input_ids = calloc(c->num_ids + 1, sizeof *c->input_ids);
  for (size_t i = 0; c->input_ids && i < c->num_ids; ++i)
    c->input_ids[i] = (int64_t)cJSON_GetArrayItem(ids, (int)i)->valuedouble;
  c->num_tokens = (size_t)cJSON_GetArraySize(tokens);
  if (c->num_tokens > MAX_TOKENS) c->num_tokens = MAX_TOKENS;
  for (size_t i = 0; i < c->num_tokens; ++i)
    c->tokens[i] = (int64_t)cJSON_GetArrayItem(tokens, (int)i)->valuedouble;
  static char image_paths[8][256];
  static int next_path;
  c->num_images = (size_t)cJSON_GetArraySize(images);
  for (size_t i = 0; i < c->num_images && i < 2; ++i) {
    char *slot = image_paths[next_path++ % 8];
    snprintf(slot, 256, "%s", cJSON_GetArrayItem(images, (int)i)->valuestring);
    c->images[i] = slot;
  }
  cJSON_Delete(root);
  return c->input_ids != NULL && c->num_images <= 2;
}

/* ---- the in-process reference run ---- */

static vlmc_status_t checkpoint_param(void *ctx, const char *name, const vlmc_type_t *type,
                                      vlmc_tensor_t *out_view) {
  const vlmc_st_tensor_t *t;
  VLMC_RETURN_IF_ERROR(vlmc_checkpoint_get(ctx, name, &t));
  vlmc_dtype_t dtype;
  if (!vlmc_st_dtype_to_ir(t->dtype, &dtype))
    return vlmc_status_make(VLMC_UNSUPPORTED, "%s: no IR dtype for %s", name,
                            vlmc_st_dtype_name(t->dtype));
  *out_view = vlmc_tensor_view(dtype, (uint32_t)t->rank, t->shape, t->data);
  return NULL;
}

typedef struct {
  vlmc_checkpoint_t *checkpoint;
  vlmc_module_t *module;
  vlmc_executor_t *executor;
  uint32_t layers;
} reference_t;

static vlmc_status_t reference_init(reference_t *r) {
  memset(r, 0, sizeof *r);
  VLMC_RETURN_IF_ERROR(vlmc_model_family_open_checkpoint(kCheckpoint, NULL, &r->checkpoint));
  VLMC_RETURN_IF_ERROR(vlmc_qwen2_5_vl_build_from_checkpoint(r->checkpoint, NULL, &r->module));
  vlmc_strbuf_t pipeline;
  vlmc_strbuf_init(&pipeline);
  vlmc_status_t st = vlmc_compile_default_pipeline("ref", "auto", &pipeline);
  if (!st) st = run_passes(r->module, vlmc_strbuf_cstr(&pipeline), NULL);
  vlmc_strbuf_deinit(&pipeline);
  VLMC_RETURN_IF_ERROR(st);
  const vlmc_func_t *decode = vlmc_module_func_find(r->module, "decode");
  r->layers = (decode->num_args - 2) / 2;
  vlmc_executor_options_t eo = vlmc_executor_options_default();
  eo.get_param = checkpoint_param;
  eo.param_ctx = r->checkpoint;
  eo.threads = 2;
  return vlmc_executor_create(r->module, &eo, &r->executor);
}

static void reference_deinit(reference_t *r) {
  vlmc_executor_destroy(r->executor);
  vlmc_module_destroy(r->module);
  vlmc_checkpoint_destroy(r->checkpoint);
}

static vlmc_status_t reference_embeds(reference_t *r, const case_t *c, vlmc_tensor_t *out) {
  if (c->num_images == 0) {
    int64_t shape[2] = {0, 64};
    return vlmc_tensor_alloc(VLMC_DTYPE_F32, 2, shape, out);
  }
  vlmc_image_t images[2];
  memset(images, 0, sizeof images);
  vlmc_status_t s = NULL;
  for (size_t i = 0; !s && i < c->num_images; ++i) s = vlmc_image_load(c->images[i], &images[i]);
  vlmc_preprocess_params_t params;
  vlmc_preprocess_params_init(&params);
  vlmc_preprocess_output_t px;
  memset(&px, 0, sizeof px);
  if (!s) s = vlmc_preprocess_images(images, c->images, c->num_images, &params, &px);
  for (size_t i = 0; i < c->num_images; ++i) vlmc_image_destroy(&images[i]);
  if (!s) {
    int64_t pshape[2] = {px.num_rows, px.row_width}, gshape[2] = {(int64_t)px.num_images, 3};
    vlmc_tensor_t args[2] = {vlmc_tensor_view(VLMC_DTYPE_F32, 2, pshape, px.pixel_values),
                             vlmc_tensor_view(VLMC_DTYPE_I64, 2, gshape, px.image_grid_thw)};
    s = vlmc_executor_run(r->executor, "encode_image", args, 2, out, 1);
  }
  if (px.pixel_values) vlmc_preprocess_output_destroy(&px);
  return s;
}

/* Greedy generation with transformers' position ids and rope delta (the fixture's taps);
 * *out_logits receives prefill's logits (owned). */
static vlmc_status_t reference_generate(reference_t *r, const case_t *c, int64_t *out_tokens,
                                        vlmc_tensor_t *out_logits) {
  char path[256];
  snprintf(path, sizeof path, "tests/fixtures/parity/%s/taps.safetensors", c->name);
  vlmc_st_archive_t *taps = NULL;
  VLMC_RETURN_IF_ERROR(vlmc_st_archive_open(path, &taps));
  const vlmc_st_tensor_t *pos = vlmc_st_archive_find(taps, "position_ids");
  const vlmc_st_tensor_t *delta = vlmc_st_archive_find(taps, "rope_deltas");
  uint32_t n = 1 + 2 * r->layers;
  vlmc_tensor_t *state = calloc(n + 2, sizeof *state);
  vlmc_tensor_t embeds = {0};
  vlmc_status_t s = !pos || !delta || !state
                        ? vlmc_status_make(VLMC_NOT_FOUND, "%s: position_ids, rope_deltas", path)
                        : reference_embeds(r, c, &embeds);
  int64_t ids_shape[1] = {(int64_t)c->num_ids};
  vlmc_tensor_t args[3] = {vlmc_tensor_view(VLMC_DTYPE_I64, 1, ids_shape, c->input_ids), embeds,
                           pos ? vlmc_tensor_view(VLMC_DTYPE_I64, 2, pos->shape, pos->data)
                               : (vlmc_tensor_t){0}};
  embeds = (vlmc_tensor_t){0}; /* owned by args[1] now: the executor may take it */
  if (!s) s = vlmc_executor_run(r->executor, "prefill", args, 3, state, n);
  vlmc_tensor_release(&args[1]);
  if (!s) s = vlmc_tensor_alloc(VLMC_DTYPE_F32, 1, state[0].shape, out_logits);
  if (!s) memcpy(out_logits->data, state[0].data, (size_t)state[0].shape[0] * sizeof(float));
  int64_t rope_delta = delta ? *(const int64_t *)delta->data : 0;
  for (size_t step = 0; !s && step < c->num_tokens; ++step) {
    int64_t token = vlmc_argmax_f32(vlmc_tensor_f32(&state[0]), (size_t)state[0].shape[0]);
    out_tokens[step] = token;
    if (step + 1 == c->num_tokens) break;
    int64_t p = (int64_t)(c->num_ids + step) + rope_delta, position[3] = {p, p, p}, one = 1;
    int64_t pshape[2] = {3, 1};
    vlmc_tensor_t *dargs = calloc(n + 1, sizeof *dargs);
    if (!dargs) {
      s = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
      break;
    }
    dargs[0] = vlmc_tensor_view(VLMC_DTYPE_I64, 1, &one, &token);
    dargs[1] = vlmc_tensor_view(VLMC_DTYPE_I64, 2, pshape, position);
    for (uint32_t j = 1; j < n; ++j) {
      dargs[j + 1] = state[j]; /* taken */
      state[j] = (vlmc_tensor_t){0};
    }
    vlmc_tensor_release(&state[0]);
    s = vlmc_executor_run(r->executor, "decode", dargs, n + 1, state, n);
    free(dargs);
  }
  for (uint32_t j = 0; state && j < n; ++j) vlmc_tensor_release(&state[j]);
  free(state);
  vlmc_st_archive_destroy(taps);
  return s;
}

/* ---- the runtime ---- */

typedef struct {
  int64_t tokens[MAX_TOKENS];
  int64_t count;
  float *first_logits; /* malloc'd */
} run_t;

/* Runs a case through a session: one turn of 1 token for prefill's logits, then a one-shot
 * greedy run for the tokens (the runtime stops at eos; transformers' fixture does not). */
static bool session_run(vlmc_session_t *session, const case_t *c, run_t *out) {
  memset(out, 0, sizeof *out);
  vlmc_chat_options_t co = {.image_paths = c->images, .num_images = c->num_images,
                            .sampling = {.top_p = 1}};
  vlmc_chat_turn_options_t t = {.input_ids = c->input_ids, .num_input_ids = c->num_ids,
                                .max_new_tokens = 1};
  vlmc_chat_t *chat = NULL;
  vlmc_generate_result_t r;
  memset(&r, 0, sizeof r);
  vlmc_status_t s = vlmc_chat_create(session, &co, &chat);
  if (!s) s = vlmc_chat_turn(chat, &t, &r);
  vlmc_generate_result_deinit(&r);
  size_t n = 0;
  const float *logits = s ? NULL : vlmc_chat_logits(chat, &n);
  if (logits && (out->first_logits = malloc(n * sizeof *logits)))
    memcpy(out->first_logits, logits, n * sizeof *logits);
  vlmc_chat_destroy(chat);
  vlmc_generate_options_t g = {.input_ids = c->input_ids, .num_input_ids = c->num_ids,
                               .image_paths = c->images, .num_images = c->num_images,
                               .max_new_tokens = (int)c->num_tokens, .sampling = {.top_p = 1}};
  if (!s) s = vlmc_session_generate(session, &g, &r);
  if (s) {
    TEST_FAIL_("%s: %s", c->name, vlmc_status_message(s));
    vlmc_status_free(s);
    return false;
  }
  out->count = r.generated_tokens;
  memcpy(out->tokens, r.tokens, (size_t)r.generated_tokens * sizeof *r.tokens);
  vlmc_generate_result_deinit(&r);
  return out->first_logits != NULL;
}

static double relative_error(const float *a, const float *b, size_t n) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    double d = fabs((double)a[i] - (double)b[i]);
    worst = d > worst || isnan(d) ? (isnan(d) ? INFINITY : d) : worst;
    scale = fmax(scale, fabs((double)b[i]));
  }
  return worst / (scale > 0 ? scale : 1);
}

static void expect_tokens(const char *what, const case_t *c, const int64_t *got, int64_t count,
                          const int64_t *want) {
  /* The runtime stops at an eos id, which must then be its last token. */
  EXPECT_TRUE(count >= 1 && (size_t)count <= c->num_tokens);
  for (int64_t i = 0; i < count && (size_t)i < c->num_tokens; ++i)
    if (got[i] != want[i]) {
      TEST_FAIL_("%s: %s: token %lld is %lld, expected %lld", c->name, what, (long long)i,
                 (long long)got[i], (long long)want[i]);
      return;
    }
}

static void test_artifacts_match_the_reference(void) {
  vlmc_session_options_t oi = {.artifact_path = inline_path, .threads = 2};
  vlmc_session_options_t oe = {.artifact_path = external_path, .params_dir = kCheckpoint,
                               .threads = 2};
  vlmc_session_t *si = NULL, *se = NULL;
  reference_t ref;
  EXPECT_OK(vlmc_session_open(&oi, &si));
  EXPECT_OK(vlmc_session_open(&oe, &se));
  EXPECT_OK(reference_init(&ref));
  static const char *const cases[] = {"img336", "two_images", "text_only"};
  for (size_t k = 0; si && se && ref.executor && k < 3; ++k) {
    case_t c;
    if (!case_load(cases[k], &c)) continue;
    int64_t ref_tokens[MAX_TOKENS];
    vlmc_tensor_t ref_logits = {0};
    run_t ri, re;
    EXPECT_OK(reference_generate(&ref, &c, ref_tokens, &ref_logits));
    bool ok_i = session_run(si, &c, &ri), ok_e = session_run(se, &c, &re);
    if (ok_i && ok_e && ref_logits.data) {
      expect_tokens("reference run vs transformers", &c, ref_tokens, (int64_t)c.num_tokens,
                    c.tokens);
      expect_tokens("inline artifact vs the reference run", &c, ri.tokens, ri.count, ref_tokens);
      expect_tokens("external artifact vs the inline one", &c, re.tokens, re.count, ri.tokens);
      EXPECT_EQ_INT(re.count, ri.count);
      double vs_ref = relative_error(ri.first_logits, vlmc_tensor_f32(&ref_logits), 512);
      double ext = relative_error(re.first_logits, ri.first_logits, 512);
      if (!(vs_ref == 0)) TEST_FAIL_("%s: prefill logits differ by %.3g", c.name, vs_ref);
      if (!(ext == 0)) TEST_FAIL_("%s: external params change the logits by %.3g", c.name, ext);
      printf("  %-10s %lld greedy tokens equal (transformers, reference, inline, external); "
             "prefill logits equal\n", c.name, (long long)ri.count);
    }
    vlmc_tensor_release(&ref_logits);
    free(ri.first_logits);
    free(re.first_logits);
    free(c.input_ids);
  }
  reference_deinit(&ref);
  vlmc_session_destroy(si);
  vlmc_session_destroy(se);
}

static void test_external_artifact_holds_no_weights(void) {
  vlmc_artifact_t *a = NULL, *b = NULL;
  EXPECT_OK(vlmc_artifact_open(inline_path, &a));
  EXPECT_OK(vlmc_artifact_open(external_path, &b));
  if (a && b) {
    EXPECT_TRUE(vlmc_artifact_find(a, "params") != NULL);
    EXPECT_TRUE(vlmc_artifact_find(b, "params") == NULL);
    EXPECT_TRUE(vlmc_artifact_find(b, "program") != NULL);
    struct stat si, se;
    EXPECT_TRUE(stat(inline_path, &si) == 0 && stat(external_path, &se) == 0 &&
                se.st_size * 10 < si.st_size);
  }
  vlmc_artifact_destroy(a);
  vlmc_artifact_destroy(b);
  /* Without the checkpoint folder, or with one it does not need, the runtime says so. */
  vlmc_session_options_t o = {.artifact_path = external_path};
  vlmc_session_t *s = NULL;
  EXPECT_ERROR(vlmc_session_open(&o, &s), "give the checkpoint folder with --params DIR");
  o = (vlmc_session_options_t){.artifact_path = inline_path, .params_dir = kCheckpoint};
  EXPECT_ERROR(vlmc_session_open(&o, &s), "the parameters are inline");
}

int main(void) {
  snprintf(inline_path, sizeof inline_path, "/tmp/vlmc-artifact-%d.vlmc", (int)getpid());
  snprintf(external_path, sizeof external_path, "/tmp/vlmc-artifact-ext-%d.vlmc", (int)getpid());
  vlmc_compile_options_t o = {.checkpoint_dir = kCheckpoint, .output_path = inline_path,
                              .target = "ref", .precision = "auto", .command_line = "test"};
  vlmc_status_t s = vlmc_compile(&o);
  o.output_path = external_path;
  o.params_external = true;
  if (!s) s = vlmc_compile(&o);
  if (s) {
    fprintf(stderr, "compile: %s\n", vlmc_status_message(s));
    vlmc_status_free(s);
    return 1;
  }
  RUN_TEST(test_external_artifact_holds_no_weights);
  RUN_TEST(test_artifacts_match_the_reference);
  unlink(inline_path);
  unlink(external_path);
  return TEST_SUMMARY();
}
