/* End to end: small programs parsed from text and run by the executor, checked against a
 * straightforward f64 computation written here from the spec (§4.2, §4.3, §4.6), not from the
 * executor's code.
 *   1. a pre-norm attention block: rms_norm, qkv linear with bias, slices, M-RoPE, causal
 *      attention, output projection, residual;
 *   2. a tiny decoder (GQA 4:2, SwiGLU MLP, final norm, lm head): @prefill over 5 tokens, then
 *      3 @decode steps that append to the KV caches handed back owned, with causal attention
 *      over the cache; every step's logits and argmax against the full-sequence computation. */
#include "tests/unit/test_reference_util.h"

/* ---- the independent computation, in f64 ---- */

static void rms_norm_ref(const double *x, const float *w, int n, int h, double *y) {
  for (int r = 0; r < n; ++r) {
    double ss = 0;
    for (int i = 0; i < h; ++i) ss += x[r * h + i] * x[r * h + i];
    double inv = 1.0 / sqrt(ss / h + 1e-6);
    for (int i = 0; i < h; ++i) y[r * h + i] = x[r * h + i] * inv * w[i];
  }
}

static void linear_ref(const double *x, const float *w, const float *b, int n, int in, int out,
                       double *y) {
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < out; ++o) {
      double acc = b ? b[o] : 0;
      for (int k = 0; k < in; ++k) acc += x[r * in + k] * w[o * in + k];
      y[r * out + o] = acc;
    }
}

/* M-RoPE, sections [1, 2, 1] of a head of 8 (spec §4.3): slot 0 reads plane 0, slots 1-2
 * plane 1, slot 3 plane 2; pairs (j, j + 4). In place over [n, heads, 8]. */
static void mrope_ref(double *x, const int64_t *pos, int n, int heads, double theta) {
  static const int plane[4] = {0, 1, 1, 2};
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < heads; ++h) {
      double *v = x + (t * heads + h) * 8;
      for (int j = 0; j < 4; ++j) {
        double a = (double)pos[plane[j] * n + t] * pow(theta, -2.0 * j / 8), c = cos(a), s = sin(a);
        double x1 = v[j], x2 = v[j + 4];
        v[j] = x1 * c - x2 * s;
        v[j + 4] = x2 * c + x1 * s;
      }
    }
}

/* Causal GQA attention, heads of 8, scale 1/sqrt(8): y [n, hq, 8]. */
static void attention_ref(const double *q, const double *k, const double *v, int n, int hq,
                          int hkv, double *y) {
  for (int h = 0; h < hq; ++h) {
    int kh = h / (hq / hkv);
    for (int i = 0; i < n; ++i) {
      double w[64], max = -INFINITY, sum = 0;
      for (int j = 0; j <= i; ++j) {
        double dot = 0;
        for (int c = 0; c < 8; ++c) dot += q[(i * hq + h) * 8 + c] * k[(j * hkv + kh) * 8 + c];
        w[j] = dot / sqrt(8.0);
        max = fmax(max, w[j]);
      }
      for (int j = 0; j <= i; ++j) sum += w[j] = exp(w[j] - max);
      for (int c = 0; c < 8; ++c) {
        double acc = 0;
        for (int j = 0; j <= i; ++j) acc += w[j] / sum * v[(j * hkv + kh) * 8 + c];
        y[(i * hq + h) * 8 + c] = acc;
      }
    }
  }
}

/* ---- 1. the attention block ---- */

static const char *kBlockText =
    "param @norm.weight : f32[16]\n"
    "param @qkv.weight : f32[48, 16]\n"
    "param @qkv.bias : f32[48]\n"
    "param @o.weight : f32[16, 16]\n"
    "func @block(%x: f32[S, 16], %pos: i64[3, S]) -> f32[S, 16] {\n"
    "  %nw = param @norm.weight : f32[16]\n"
    "  %h = rms_norm %x, %nw {eps = 1e-06} : f32[S, 16]\n"
    "  %qkv_w = param @qkv.weight : f32[48, 16]\n"
    "  %qkv_b = param @qkv.bias : f32[48]\n"
    "  %qkv = linear %h, %qkv_w, %qkv_b : f32[S, 48]\n"
    "  %q2 = slice %qkv {axis = 1, start = 0, end = 16} : f32[S, 16]\n"
    "  %k2 = slice %qkv {axis = 1, start = 16, end = 32} : f32[S, 16]\n"
    "  %v2 = slice %qkv {axis = 1, start = 32} : f32[S, 16]\n"
    "  %q = reshape %q2 : f32[S, 2, 8]\n"
    "  %k = reshape %k2 : f32[S, 2, 8]\n"
    "  %v = reshape %v2 : f32[S, 2, 8]\n"
    "  %qr = rope %q, %pos {layout = mrope_sectioned, theta = 10000.0, sections = [1, 2, 1]}"
    " : f32[S, 2, 8]\n"
    "  %kr = rope %k, %pos {layout = mrope_sectioned, theta = 10000.0, sections = [1, 2, 1]}"
    " : f32[S, 2, 8]\n"
    "  %a = attention %qr, %kr, %v {causal = true} : f32[S, 2, 8]\n"
    "  %a2 = reshape %a : f32[S, 16]\n"
    "  %ow = param @o.weight : f32[16, 16]\n"
    "  %o = linear %a2, %ow : f32[S, 16]\n"
    "  %y = add %x, %o : f32[S, 16]\n"
    "  return %y\n"
    "}\n";

static void test_attention_block(void) {
  enum { S = 7 };
  float *x = ref_rand_array(S * 16, 61), *nw = ref_rand_array(16, 62);
  float *qkv_w = ref_rand_array(48 * 16, 63), *qkv_b = ref_rand_array(48, 64);
  float *ow = ref_rand_array(16 * 16, 65);
  int64_t pos[3 * S];
  for (int t = 0; t < S; ++t) { /* an image-like block: planes differ */
    pos[t] = 2;
    pos[S + t] = 2 + t / 3;
    pos[2 * S + t] = 2 + t % 3;
  }
  ref_param_t ps[] = {{"norm.weight", ref_f32(1, SHAPE(16), nw)},
                      {"qkv.weight", ref_f32(2, SHAPE(48, 16), qkv_w)},
                      {"qkv.bias", ref_f32(1, SHAPE(48), qkv_b)},
                      {"o.weight", ref_f32(2, SHAPE(16, 16), ow)}};
  ref_params_t params = {ps, 4, 0};
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.get_param = ref_get_param;
  o.param_ctx = &params;
  vlmc_tensor_t args[] = {ref_f32(2, SHAPE(S, 16), x), ref_i64(2, SHAPE(3, S), pos)}, r[1];
  EXPECT_OK(ref_run(kBlockText, &o, "block", args, 2, r, 1));

  double xd[S * 16], h[S * 16], qkv[S * 48], q[S * 16], k[S * 16], v[S * 16], a[S * 16];
  double proj[S * 16];
  float expected[S * 16];
  for (int i = 0; i < S * 16; ++i) xd[i] = x[i];
  rms_norm_ref(xd, nw, S, 16, h);
  linear_ref(h, qkv_w, qkv_b, S, 16, 48, qkv);
  for (int t = 0; t < S; ++t)
    for (int c = 0; c < 16; ++c) {
      q[t * 16 + c] = qkv[t * 48 + c];
      k[t * 16 + c] = qkv[t * 48 + 16 + c];
      v[t * 16 + c] = qkv[t * 48 + 32 + c];
    }
  mrope_ref(q, pos, S, 2, 1e4);
  mrope_ref(k, pos, S, 2, 1e4);
  attention_ref(q, k, v, S, 2, 2, a);
  linear_ref(a, ow, NULL, S, 16, 16, proj);
  for (int i = 0; i < S * 16; ++i) expected[i] = (float)(xd[i] + proj[i]);
  ref_expect_f32(&r[0], expected, S * 16, 2e-5, "attention block");
  ref_release_all(r, 1);
  free(x);
  free(nw);
  free(qkv_w);
  free(qkv_b);
  free(ow);
}

/* ---- 2. the decoder ---- */

enum { V = 37, H = 32, HQ = 4, HKV = 2, MLP = 40, PROMPT = 5, STEPS = 3, TOTAL = PROMPT + STEPS };

/* One layer and the head, shared by @prefill (S tokens; the caches start as empty constants)
 * and @decode (one token appended to caches of C rows, handed back by the caller). */
static const char *kDecoderParams =
    "param @embed : f32[37, 32]\n"
    "param @ln1 : f32[32]\n"
    "param @wq : f32[32, 32]\n"
    "param @bq : f32[32]\n"
    "param @wk : f32[16, 32]\n"
    "param @bk : f32[16]\n"
    "param @wv : f32[16, 32]\n"
    "param @bv : f32[16]\n"
    "param @wo : f32[32, 32]\n"
    "param @ln2 : f32[32]\n"
    "param @wg : f32[40, 32]\n"
    "param @wu : f32[40, 32]\n"
    "param @wd : f32[32, 40]\n"
    "param @lnf : f32[32]\n"
    "param @lm : f32[37, 32]\n";

static const char *kPrefillHead =
    "func @prefill(%ids: i64[S], %pos: i64[3, S]) ->"
    " (f32[S, 37], i64[S], f32[S, 2, 8], f32[S, 2, 8]) {\n";
static const char *kPrefillCache =
    "  %kempty = constant {value = []} : f32[0, 2, 8]\n"
    "  %vempty = constant {value = []} : f32[0, 2, 8]\n"
    "  %kall = kv_cache_append %kempty, %kr : f32[S, 2, 8]\n"
    "  %vall = kv_cache_append %vempty, %v : f32[S, 2, 8]\n";
static const char *kDecodeHead =
    "func @decode(%ids: i64[1], %pos: i64[3, 1], %kc: f32[C, 2, 8], %vc: f32[C, 2, 8]) ->"
    " (f32[1, 37], i64[1], f32[C+1, 2, 8], f32[C+1, 2, 8]) {\n";
static const char *kDecodeCache =
    "  %kall = kv_cache_append %kc, %kr : f32[C+1, 2, 8]\n"
    "  %vall = kv_cache_append %vc, %v : f32[C+1, 2, 8]\n";

/* The layer before the cache ("[T" is the token count: S or 1) and after it. */
static const char *kLayerBefore =
    "  %E = param @embed : f32[37, 32]\n"
    "  %x = embedding %E, %ids : f32[T, 32]\n"
    "  %ln1 = param @ln1 : f32[32]\n"
    "  %h = rms_norm %x, %ln1 {eps = 1e-06} : f32[T, 32]\n"
    "  %wq = param @wq : f32[32, 32]\n"
    "  %bq = param @bq : f32[32]\n"
    "  %wk = param @wk : f32[16, 32]\n"
    "  %bk = param @bk : f32[16]\n"
    "  %wv = param @wv : f32[16, 32]\n"
    "  %bv = param @bv : f32[16]\n"
    "  %q2 = linear %h, %wq, %bq : f32[T, 32]\n"
    "  %k2 = linear %h, %wk, %bk : f32[T, 16]\n"
    "  %v2 = linear %h, %wv, %bv : f32[T, 16]\n"
    "  %q = reshape %q2 : f32[T, 4, 8]\n"
    "  %k = reshape %k2 : f32[T, 2, 8]\n"
    "  %v = reshape %v2 : f32[T, 2, 8]\n"
    "  %qr = rope %q, %pos {layout = mrope_sectioned, theta = 1000000.0, sections = [1, 2, 1]}"
    " : f32[T, 4, 8]\n"
    "  %kr = rope %k, %pos {layout = mrope_sectioned, theta = 1000000.0, sections = [1, 2, 1]}"
    " : f32[T, 2, 8]\n";
static const char *kLayerAfter =
    "  %a = attention %qr, %kall, %vall {causal = true} : f32[T, 4, 8]\n"
    "  %a2 = reshape %a : f32[T, 32]\n"
    "  %wo = param @wo : f32[32, 32]\n"
    "  %o = linear %a2, %wo : f32[T, 32]\n"
    "  %x1 = add %x, %o : f32[T, 32]\n"
    "  %ln2 = param @ln2 : f32[32]\n"
    "  %h2 = rms_norm %x1, %ln2 {eps = 1e-06} : f32[T, 32]\n"
    "  %wg = param @wg : f32[40, 32]\n"
    "  %wu = param @wu : f32[40, 32]\n"
    "  %wd = param @wd : f32[32, 40]\n"
    "  %g = linear %h2, %wg : f32[T, 40]\n"
    "  %u = linear %h2, %wu : f32[T, 40]\n"
    "  %sg = silu %g : f32[T, 40]\n"
    "  %m = mul %sg, %u : f32[T, 40]\n"
    "  %d = linear %m, %wd : f32[T, 32]\n"
    "  %x2 = add %x1, %d : f32[T, 32]\n"
    "  %lnf = param @lnf : f32[32]\n"
    "  %hf = rms_norm %x2, %lnf {eps = 1e-06} : f32[T, 32]\n"
    "  %lm = param @lm : f32[37, 32]\n"
    "  %logits = linear %hf, %lm : f32[T, 37]\n"
    "  %next = argmax %logits {axis = 1} : i64[T]\n"
    "  return %logits, %next, %kall, %vall\n"
    "}\n";

/* Appends `text` to out with every "[T" replaced by `tokens` ("[S" or "[1"). */
static void append_layer_text(char *out, const char *text, const char *tokens) {
  char *end = out + strlen(out);
  for (const char *p = text; *p;) {
    if (strncmp(p, "[T", 2) == 0) {
      strcpy(end, tokens);
      end += strlen(tokens);
      p += 2;
    } else {
      *end++ = *p++;
    }
  }
  *end = '\0';
}

static char *decoder_text(void) {
  size_t size = strlen(kDecoderParams) + 2 * (strlen(kLayerBefore) + strlen(kLayerAfter)) + 4096;
  char *text = calloc(size, 1);
  if (!text) return NULL;
  strcpy(text, kDecoderParams);
  strcat(text, kPrefillHead);
  append_layer_text(text, kLayerBefore, "[S");
  strcat(text, kPrefillCache);
  append_layer_text(text, kLayerAfter, "[S");
  strcat(text, kDecodeHead);
  append_layer_text(text, kLayerBefore, "[1");
  strcat(text, kDecodeCache);
  append_layer_text(text, kLayerAfter, "[1");
  return text;
}

typedef struct {
  float *embed, *ln1, *wq, *bq, *wk, *bk, *wv, *bv, *wo, *ln2, *wg, *wu, *wd, *lnf, *lm;
} decoder_t;

/* The whole sequence at once: logits [n, V]. */
static void decoder_ref(const decoder_t *w, const int64_t *ids, const int64_t *pos, int n,
                        double *logits) {
  double x[TOTAL * H], h[TOTAL * H], q[TOTAL * H], k[TOTAL * 16], v[TOTAL * 16], a[TOTAL * H];
  double o[TOTAL * H], g[TOTAL * MLP], u[TOTAL * MLP], d[TOTAL * H];
  for (int t = 0; t < n; ++t)
    for (int c = 0; c < H; ++c) x[t * H + c] = w->embed[ids[t] * H + c];
  rms_norm_ref(x, w->ln1, n, H, h);
  linear_ref(h, w->wq, w->bq, n, H, H, q);
  linear_ref(h, w->wk, w->bk, n, H, 16, k);
  linear_ref(h, w->wv, w->bv, n, H, 16, v);
  mrope_ref(q, pos, n, HQ, 1e6);
  mrope_ref(k, pos, n, HKV, 1e6);
  attention_ref(q, k, v, n, HQ, HKV, a);
  linear_ref(a, w->wo, NULL, n, H, H, o);
  for (int i = 0; i < n * H; ++i) x[i] += o[i];
  rms_norm_ref(x, w->ln2, n, H, h);
  linear_ref(h, w->wg, NULL, n, H, MLP, g);
  linear_ref(h, w->wu, NULL, n, H, MLP, u);
  for (int i = 0; i < n * MLP; ++i) g[i] = g[i] / (1 + exp(-g[i])) * u[i];
  linear_ref(g, w->wd, NULL, n, MLP, H, d);
  for (int i = 0; i < n * H; ++i) x[i] += d[i];
  rms_norm_ref(x, w->lnf, n, H, h);
  linear_ref(h, w->lm, NULL, n, H, V, logits);
}

/* Positions of the sequence: an image-like prompt (planes differ), then text steps. */
static void sequence_positions(int n, int64_t *pos) {
  static const int64_t planes[3][TOTAL] = {{0, 1, 1, 1, 3, 4, 5, 6},
                                           {0, 1, 1, 2, 3, 4, 5, 6},
                                           {0, 1, 2, 1, 3, 4, 5, 6}};
  for (int p = 0; p < 3; ++p)
    for (int t = 0; t < n; ++t) pos[p * n + t] = planes[p][t];
}

static void check_logits(const vlmc_tensor_t *logits, const vlmc_tensor_t *next,
                         const double *expected, int rows, const char *what) {
  float e[PROMPT * V];
  int64_t best[PROMPT];
  for (int r = 0; r < rows; ++r) {
    best[r] = 0;
    for (int c = 0; c < V; ++c) {
      e[r * V + c] = (float)expected[r * V + c];
      if (expected[r * V + c] > expected[r * V + best[r]]) best[r] = c;
    }
  }
  ref_expect_f32(logits, e, rows * V, 2e-5, what);
  ref_expect_i64(next, best, rows, what);
}

static void test_decoder_prefill_then_decode_with_cache(void) {
  decoder_t w;
  float **fields[] = {&w.embed, &w.ln1, &w.wq, &w.bq, &w.wk, &w.bk, &w.wv, &w.bv,
                      &w.wo,    &w.ln2, &w.wg, &w.wu, &w.wd, &w.lnf, &w.lm};
  static const int64_t sizes[] = {V * H, H, H * H, H, 16 * H, 16, 16 * H, 16,
                                  H * H, H, MLP * H, MLP * H, H * MLP, H, V * H};
  for (int i = 0; i < 15; ++i) *fields[i] = ref_rand_array(sizes[i], 70 + (uint64_t)i);
  ref_param_t ps[] = {
      {"embed", ref_f32(2, SHAPE(V, H), w.embed)}, {"ln1", ref_f32(1, SHAPE(H), w.ln1)},
      {"wq", ref_f32(2, SHAPE(H, H), w.wq)},       {"bq", ref_f32(1, SHAPE(H), w.bq)},
      {"wk", ref_f32(2, SHAPE(16, H), w.wk)},      {"bk", ref_f32(1, SHAPE(16), w.bk)},
      {"wv", ref_f32(2, SHAPE(16, H), w.wv)},      {"bv", ref_f32(1, SHAPE(16), w.bv)},
      {"wo", ref_f32(2, SHAPE(H, H), w.wo)},       {"ln2", ref_f32(1, SHAPE(H), w.ln2)},
      {"wg", ref_f32(2, SHAPE(MLP, H), w.wg)},     {"wu", ref_f32(2, SHAPE(MLP, H), w.wu)},
      {"wd", ref_f32(2, SHAPE(H, MLP), w.wd)},     {"lnf", ref_f32(1, SHAPE(H), w.lnf)},
      {"lm", ref_f32(2, SHAPE(V, H), w.lm)}};
  ref_params_t params = {ps, 15, 0};
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.get_param = ref_get_param;
  o.param_ctx = &params;
  o.threads = 2;
  int64_t ids[TOTAL] = {3, 36, 0, 17, 5, 9, 22, 30}, pos_all[3 * TOTAL];
  sequence_positions(TOTAL, pos_all);
  double expected[TOTAL * V];
  decoder_ref(&w, ids, pos_all, TOTAL, expected); /* causal: a prefix's rows equal its own run */

  char *text = decoder_text();
  vlmc_module_t *module = text ? ref_parse(text) : NULL;
  free(text);
  vlmc_executor_t *ex = NULL;
  if (module) EXPECT_OK(vlmc_executor_create(module, &o, &ex));
  if (!ex) {
    vlmc_module_destroy(module);
    return;
  }
  int64_t pos[3 * PROMPT];
  sequence_positions(PROMPT, pos);
  vlmc_tensor_t args[] = {ref_i64(1, SHAPE(PROMPT), ids), ref_i64(2, SHAPE(3, PROMPT), pos)};
  vlmc_tensor_t r[4];
  EXPECT_OK(vlmc_executor_run(ex, "prefill", args, 2, r, 4));
  check_logits(&r[0], &r[1], expected, PROMPT, "prefill logits");
  vlmc_tensor_t kc = r[2], vc = r[3];
  vlmc_tensor_release(&r[0]);
  vlmc_tensor_release(&r[1]);
  int steps = 0;
  for (int step = 0; step < STEPS && kc.data; ++step, ++steps) {
    int t = PROMPT + step;
    int64_t step_pos[3] = {pos_all[t], pos_all[TOTAL + t], pos_all[2 * TOTAL + t]};
    vlmc_tensor_t dargs[] = {ref_i64(1, SHAPE(1), &ids[t]), ref_i64(2, SHAPE(3, 1), step_pos), kc,
                             vc};
    vlmc_tensor_t d[4];
    EXPECT_OK(vlmc_executor_run(ex, "decode", dargs, 4, d, 4));
    check_logits(&d[0], &d[1], expected + t * V, 1, "decode logits");
    EXPECT_EQ_INT(d[2].shape[0], t + 1);
    kc = d[2];
    vc = d[3];
    vlmc_tensor_release(&d[0]);
    vlmc_tensor_release(&d[1]);
  }
  EXPECT_EQ_INT(steps, STEPS);
  EXPECT_EQ_INT(kc.shape[0], TOTAL);
  vlmc_tensor_release(&kc);
  vlmc_tensor_release(&vc);
  vlmc_executor_destroy(ex);
  vlmc_module_destroy(module);
  for (int i = 0; i < 15; ++i) free(*fields[i]);
}

int main(void) {
  RUN_TEST(test_attention_block);
  RUN_TEST(test_decoder_prefill_then_decode_with_cache);
  return TEST_SUMMARY();
}
