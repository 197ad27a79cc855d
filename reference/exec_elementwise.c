/* Elementwise ops: binary arithmetic with numpy broadcasting, the unary math functions, gelu,
 * clamp and cast. Float results are computed in f64 where a library function is involved
 * (exp, erf, tanh, ...) and rounded once to f32; + - * / are f32 operations, as in torch.
 * Integer arithmetic wraps to the IR dtype. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "reference/exec_internal.h"

/* ---- broadcasting ---- */

/* Strides (in elements) with which operand `t` is read for each dim of an output of rank
 * `rank`: right-aligned, 0 where the operand has no such dim or has size 1 there. */
static void broadcast_strides(const vlmc_tensor_t *t, uint32_t rank, const int64_t *out_shape,
                              int64_t *out_strides) {
  int64_t own[VLMC_IR_MAX_RANK];
  vlmc_ref_strides(t->shape, t->rank, own);
  uint32_t lead = rank - t->rank;
  for (uint32_t d = 0; d < rank; ++d) {
    if (d < lead || t->shape[d - lead] == 1) {
      out_strides[d] = 0;
      continue;
    }
    assert(t->shape[d - lead] == out_shape[d]);
    out_strides[d] = own[d - lead];
  }
}

typedef enum { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV } binary_kind_t;

static float binary_f32(binary_kind_t kind, float a, float b) {
  switch (kind) {
    case BIN_ADD: return a + b;
    case BIN_SUB: return a - b;
    case BIN_MUL: return a * b;
    default: return a / b;
  }
}

/* Wrapping integer arithmetic (unsigned, so that overflow is defined); division truncates
 * toward zero and the caller has excluded a zero divisor. */
static int64_t binary_i64(binary_kind_t kind, int64_t a, int64_t b) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (kind) {
    case BIN_ADD: return (int64_t)(ua + ub);
    case BIN_SUB: return (int64_t)(ua - ub);
    case BIN_MUL: return (int64_t)(ua * ub);
    default: return b == -1 ? (int64_t)(0 - ua) : a / b;
  }
}

/* Walks every output element with the two operands' offsets; the last dim is the inner loop. */
typedef struct {
  uint32_t rank;
  int64_t shape[VLMC_IR_MAX_RANK];
  int64_t sa[VLMC_IR_MAX_RANK], sb[VLMC_IR_MAX_RANK];
} broadcast_t;

static void broadcast_init(broadcast_t *bc, const vlmc_tensor_t *out, const vlmc_tensor_t *a,
                           const vlmc_tensor_t *b) {
  bc->rank = out->rank;
  memcpy(bc->shape, out->shape, sizeof bc->shape);
  broadcast_strides(a, out->rank, out->shape, bc->sa);
  broadcast_strides(b, out->rank, out->shape, bc->sb);
}

/* Advances the multi-index over all dims but the last; false when done. */
static bool broadcast_next(const broadcast_t *bc, int64_t *index, int64_t *oa, int64_t *ob) {
  for (uint32_t d = bc->rank - 1; d-- > 0;) {
    if (++index[d] < bc->shape[d]) {
      *oa += bc->sa[d];
      *ob += bc->sb[d];
      return true;
    }
    *oa -= bc->sa[d] * (index[d] - 1);
    *ob -= bc->sb[d] * (index[d] - 1);
    index[d] = 0;
  }
  return false;
}

static vlmc_status_t check_divisors(vlmc_ref_ctx_t *ctx, const vlmc_tensor_t *b) {
  const int64_t *y = vlmc_tensor_i64(b);
  for (int64_t i = 0, n = vlmc_tensor_count(b); i < n; ++i)
    if (y[i] == 0)
      return vlmc_ref_fail(ctx, VLMC_INVALID_ARGUMENT, "integer division by zero (divisor index "
                           "%lld)", (long long)i);
  return NULL;
}

static vlmc_status_t eval_binary(vlmc_ref_ctx_t *ctx, binary_kind_t kind) {
  const vlmc_tensor_t *a = ctx->in[0], *b = ctx->in[1];
  bool is_float = a->dtype == VLMC_DTYPE_F32;
  if (!is_float && kind == BIN_DIV) VLMC_RETURN_IF_ERROR(check_divisors(ctx, b));
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  vlmc_tensor_t *out = &ctx->out[0];
  if (vlmc_tensor_count(out) == 0) return NULL;
  vlmc_dtype_t dtype = ctx->op->results[0].type.dtype;
  if (out->rank == 0) { /* scalars: one element, no dims to walk */
    if (is_float) vlmc_tensor_f32(out)[0] = binary_f32(kind, vlmc_tensor_f32(a)[0],
                                                       vlmc_tensor_f32(b)[0]);
    else vlmc_tensor_i64(out)[0] = vlmc_ref_wrap_int(dtype, binary_i64(kind, vlmc_tensor_i64(a)[0],
                                                                       vlmc_tensor_i64(b)[0]));
    return NULL;
  }
  broadcast_t bc;
  broadcast_init(&bc, out, a, b);
  int64_t index[VLMC_IR_MAX_RANK] = {0}, oa = 0, ob = 0, o = 0;
  int64_t inner = bc.shape[bc.rank - 1], sa = bc.sa[bc.rank - 1], sb = bc.sb[bc.rank - 1];
  do {
    for (int64_t i = 0; i < inner; ++i, ++o) {
      int64_t ia = oa + i * sa, ib = ob + i * sb;
      if (is_float)
        vlmc_tensor_f32(out)[o] = binary_f32(kind, vlmc_tensor_f32(a)[ia], vlmc_tensor_f32(b)[ib]);
      else
        vlmc_tensor_i64(out)[o] = vlmc_ref_wrap_int(
            dtype, binary_i64(kind, vlmc_tensor_i64(a)[ia], vlmc_tensor_i64(b)[ib]));
    }
  } while (broadcast_next(&bc, index, &oa, &ob));
  return NULL;
}

vlmc_status_t vlmc_ref_eval_ADD(vlmc_ref_ctx_t *ctx) { return eval_binary(ctx, BIN_ADD); }
vlmc_status_t vlmc_ref_eval_SUB(vlmc_ref_ctx_t *ctx) { return eval_binary(ctx, BIN_SUB); }
vlmc_status_t vlmc_ref_eval_MUL(vlmc_ref_ctx_t *ctx) { return eval_binary(ctx, BIN_MUL); }
vlmc_status_t vlmc_ref_eval_DIV(vlmc_ref_ctx_t *ctx) { return eval_binary(ctx, BIN_DIV); }

/* ---- unary ---- */

typedef double (*unary_fn)(double x, const void *arg);

static vlmc_status_t eval_unary(vlmc_ref_ctx_t *ctx, unary_fn fn, const void *arg) {
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  const float *x = vlmc_tensor_f32(ctx->in[0]);
  float *y = vlmc_tensor_f32(&ctx->out[0]);
  for (int64_t i = 0, n = vlmc_tensor_count(&ctx->out[0]); i < n; ++i) y[i] = (float)fn(x[i], arg);
  return NULL;
}

static double f_exp(double x, const void *arg) { return exp(x); }
static double f_sqrt(double x, const void *arg) { return sqrt(x); }
static double f_rsqrt(double x, const void *arg) { return 1.0 / sqrt(x); }
static double f_tanh(double x, const void *arg) { return tanh(x); }
static double f_erf(double x, const void *arg) { return erf(x); }
static double f_cos(double x, const void *arg) { return cos(x); }
static double f_sin(double x, const void *arg) { return sin(x); }
static double f_sigmoid(double x, const void *arg) { return 1.0 / (1.0 + exp(-x)); }
static double f_silu(double x, const void *arg) { return x / (1.0 + exp(-x)); }

static double f_gelu_erf(double x, const void *arg) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

static double f_gelu_tanh(double x, const void *arg) {
  const double k = 0.7978845608028654; /* sqrt(2 / pi) */
  return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

vlmc_status_t vlmc_ref_eval_EXP(vlmc_ref_ctx_t *ctx) { return eval_unary(ctx, f_exp, NULL); }
vlmc_status_t vlmc_ref_eval_SQRT(vlmc_ref_ctx_t *ctx) { return eval_unary(ctx, f_sqrt, NULL); }
vlmc_status_t vlmc_ref_eval_RSQRT(vlmc_ref_ctx_t *ctx) { return eval_unary(ctx, f_rsqrt, NULL); }
vlmc_status_t vlmc_ref_eval_TANH(vlmc_ref_ctx_t *ctx) { return eval_unary(ctx, f_tanh, NULL); }
vlmc_status_t vlmc_ref_eval_ERF(vlmc_ref_ctx_t *ctx) { return eval_unary(ctx, f_erf, NULL); }
vlmc_status_t vlmc_ref_eval_COS(vlmc_ref_ctx_t *ctx) { return eval_unary(ctx, f_cos, NULL); }
vlmc_status_t vlmc_ref_eval_SIN(vlmc_ref_ctx_t *ctx) { return eval_unary(ctx, f_sin, NULL); }
vlmc_status_t vlmc_ref_eval_SIGMOID(vlmc_ref_ctx_t *ctx) {
  return eval_unary(ctx, f_sigmoid, NULL);
}
vlmc_status_t vlmc_ref_eval_SILU(vlmc_ref_ctx_t *ctx) { return eval_unary(ctx, f_silu, NULL); }

vlmc_status_t vlmc_ref_eval_GELU(vlmc_ref_ctx_t *ctx) {
  bool tanh_form = strcmp(vlmc_op_attr_enum(ctx->op, "approx"), "tanh") == 0;
  return eval_unary(ctx, tanh_form ? f_gelu_tanh : f_gelu_erf, NULL);
}

typedef struct {
  bool has_lo, has_hi;
  double lo, hi;
} clamp_bounds_t;

/* NaN stays NaN (both comparisons are false), as torch.clamp does. */
static double f_clamp(double x, const void *arg) {
  const clamp_bounds_t *b = arg;
  if (b->has_lo && x < b->lo) x = b->lo;
  if (b->has_hi && x > b->hi) x = b->hi;
  return x;
}

vlmc_status_t vlmc_ref_eval_CLAMP(vlmc_ref_ctx_t *ctx) {
  const vlmc_attr_t *lo = vlmc_op_attr(ctx->op, "min"), *hi = vlmc_op_attr(ctx->op, "max");
  clamp_bounds_t b = {lo != NULL, hi != NULL, lo ? lo->v.f : 0, hi ? hi->v.f : 0};
  return eval_unary(ctx, f_clamp, &b);
}

vlmc_status_t vlmc_ref_eval_NEG(vlmc_ref_ctx_t *ctx) {
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  const vlmc_tensor_t *x = ctx->in[0];
  vlmc_tensor_t *y = &ctx->out[0];
  vlmc_dtype_t dtype = ctx->op->results[0].type.dtype;
  for (int64_t i = 0, n = vlmc_tensor_count(y); i < n; ++i) {
    if (x->dtype == VLMC_DTYPE_F32) {
      vlmc_tensor_f32(y)[i] = -vlmc_tensor_f32(x)[i];
      continue;
    }
    int64_t negated = binary_i64(BIN_SUB, 0, vlmc_tensor_i64(x)[i]); /* wraps INT64_MIN */
    vlmc_tensor_i64(y)[i] = vlmc_ref_wrap_int(dtype, negated);
  }
  return NULL;
}

/* ---- cast ---- */

/* The largest magnitude + 1 of each integer dtype, as a double (exact powers of two). */
static double int_limit(vlmc_dtype_t dtype, double *out_min) {
  switch (dtype) {
    case VLMC_DTYPE_I32: *out_min = -0x1p31; return 0x1p31;
    case VLMC_DTYPE_I8: *out_min = -128.0; return 128.0;
    case VLMC_DTYPE_U8: *out_min = 0.0; return 256.0;
    default: *out_min = -0x1p63; return 0x1p63;
  }
}

/* Float to integer truncates toward zero (torch's .to(int)); a value that does not fit, or NaN
 * or inf, is an error rather than undefined behaviour. Bool is "nonzero". */
static vlmc_status_t cast_float_to_int(vlmc_ref_ctx_t *ctx, vlmc_dtype_t to) {
  const float *x = vlmc_tensor_f32(ctx->in[0]);
  int64_t *y = vlmc_tensor_i64(&ctx->out[0]);
  for (int64_t i = 0, n = vlmc_tensor_count(&ctx->out[0]); i < n; ++i) {
    if (to == VLMC_DTYPE_BOOL) {
      y[i] = x[i] != 0.0f;
      continue;
    }
    double lo, hi = int_limit(to, &lo), t = trunc((double)x[i]);
    if (!(t >= lo && t < hi))
      return vlmc_ref_fail(ctx, VLMC_OUT_OF_RANGE, "value %g at index %lld does not fit %s",
                           (double)x[i], (long long)i, vlmc_dtype_info(to)->name);
    y[i] = (int64_t)t;
  }
  return NULL;
}

/* Rounds each block of 32 along the last dim through the quantized format and back. */
static void cast_to_quantized(float *y, int64_t count, vlmc_dtype_t to) {
  uint8_t block[34];
  for (int64_t b = 0; b < count / 32; ++b) {
    if (to == VLMC_DTYPE_Q4_0) {
      vlmc_quantize_q4_0(y + 32 * b, 1, block);
      vlmc_dequantize_q4_0(block, 1, y + 32 * b);
    } else {
      vlmc_quantize_q8_0(y + 32 * b, 1, block);
      vlmc_dequantize_q8_0(block, 1, y + 32 * b);
    }
  }
}

vlmc_status_t vlmc_ref_eval_CAST(vlmc_ref_ctx_t *ctx) {
  const vlmc_tensor_t *x = ctx->in[0];
  vlmc_dtype_t to = ctx->op->results[0].type.dtype;
  /* Float values are held in f32 (or, for a raw parameter, in the f32-exact bf16 / f16 it came
   * in), so a cast to f32 changes no element: pass them on instead of copying (the precision
   * pass puts such a cast after every bf16 weight). */
  if (x->dtype != VLMC_DTYPE_I64 && (to == VLMC_DTYPE_F32 || to == VLMC_DTYPE_F64))
    return vlmc_ref_result_forward(ctx, 0);
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  vlmc_tensor_t *y = &ctx->out[0];
  int64_t n = vlmc_tensor_count(y);
  if (y->dtype == VLMC_DTYPE_I64) {
    if (x->dtype == VLMC_DTYPE_F32) return cast_float_to_int(ctx, to);
    for (int64_t i = 0; i < n; ++i)
      vlmc_tensor_i64(y)[i] = vlmc_ref_wrap_int(to, vlmc_tensor_i64(x)[i]);
    return NULL;
  }
  float *out = vlmc_tensor_f32(y);
  for (int64_t i = 0; i < n; ++i) {
    float v = x->dtype == VLMC_DTYPE_F32 ? vlmc_tensor_f32(x)[i] : (float)vlmc_tensor_i64(x)[i];
    out[i] = vlmc_ref_round(to, v);
  }
  if (vlmc_dtype_info(to)->is_quantized) cast_to_quantized(out, n, to);
  return NULL;
}
