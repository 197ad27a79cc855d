/* The interpreter loop: prepares a function (op order, last uses), binds the arguments'
 * symbols, evaluates op after op through the table generated from ops.def, rounds f16 / bf16
 * values when emulating, reports ranges and traces, frees each value after its last use, and
 * hands the returned values over. The op evaluations live in exec_*.c. */
#define _POSIX_C_SOURCE 200809L
#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reference/exec_internal.h"
#include "support/checked_math.h"
#include "support/strbuf.h"

enum { MAX_THREADS = 16 };

static const vlmc_ref_eval_fn eval_table[VLMC_OP_COUNT] = {
#define OP(name, mnemonic, min_ops, max_ops, nres, shape, verify, flags, attrs) \
  [VLMC_OP_##name] = vlmc_ref_eval_##name,
#include "ir/ops.def"
#undef OP
};

vlmc_executor_options_t vlmc_executor_options_default(void) {
  vlmc_executor_options_t o;
  memset(&o, 0, sizeof o);
  o.threads = 1;
  return o;
}

/* ---- value conventions ---- */

vlmc_dtype_t vlmc_ref_storage(vlmc_dtype_t ir_dtype) {
  const vlmc_dtype_info_t *info = vlmc_dtype_info(ir_dtype);
  return info->is_float || info->is_quantized ? VLMC_DTYPE_F32 : VLMC_DTYPE_I64;
}

float vlmc_ref_round(vlmc_dtype_t ir_dtype, float value) {
  if (ir_dtype == VLMC_DTYPE_F16) return vlmc_round_f16(value);
  if (ir_dtype == VLMC_DTYPE_BF16) return vlmc_round_bf16(value);
  return value;
}

int64_t vlmc_ref_wrap_int(vlmc_dtype_t ir_dtype, int64_t value) {
  switch (ir_dtype) {
    case VLMC_DTYPE_I32: return (int32_t)(uint32_t)(uint64_t)value;
    case VLMC_DTYPE_I8: return (int8_t)(uint8_t)(uint64_t)value;
    case VLMC_DTYPE_U8: return (uint8_t)(uint64_t)value;
    case VLMC_DTYPE_U32: return (uint32_t)(uint64_t)value;
    case VLMC_DTYPE_BOOL: return value != 0;
    default: return value;
  }
}

void vlmc_ref_strides(const int64_t *shape, uint32_t rank, int64_t *out_strides) {
  int64_t s = 1;
  for (uint32_t i = rank; i-- > 0;) {
    out_strides[i] = s;
    s *= shape[i];
  }
}

/* ---- errors ---- */

vlmc_status_t vlmc_ref_locate(const vlmc_ref_ctx_t *ctx, vlmc_status_t status) {
  return vlmc_op_locate_error(ctx->op, status);
}

vlmc_status_t vlmc_ref_fail(const vlmc_ref_ctx_t *ctx, vlmc_status_code_t code, const char *fmt,
                            ...) {
  va_list ap;
  va_start(ap, fmt);
  vlmc_status_t st = vlmc_status_makev(code, fmt, ap);
  va_end(ap);
  return vlmc_ref_locate(ctx, st);
}

/* ---- results ---- */

vlmc_status_t vlmc_ref_check_bytes(const vlmc_ref_ctx_t *ctx, size_t bytes) {
  size_t limit = ctx->ex->options.max_tensor_bytes;
  if (!limit || bytes <= limit) return NULL;
  return vlmc_ref_fail(ctx, VLMC_OUT_OF_RANGE, "a value of %zu bytes exceeds the limit of %zu",
                       bytes, limit);
}

static void format_shape(const vlmc_tensor_t *t, vlmc_strbuf_t *out) {
  vlmc_strbuf_putc(out, '[');
  for (uint32_t i = 0; i < t->rank; ++i) {
    if (i) vlmc_strbuf_puts(out, ", ");
    if (t->shape[i] < 0) vlmc_strbuf_putc(out, '?');
    else vlmc_strbuf_printf(out, "%lld", (long long)t->shape[i]);
  }
  vlmc_strbuf_putc(out, ']');
}

vlmc_status_t vlmc_ref_result_alloc(vlmc_ref_ctx_t *ctx, uint32_t i) {
  vlmc_tensor_t *t = &ctx->out[i];
  assert(!t->data);
  size_t bytes;
  if (!vlmc_tensor_byte_size(t->dtype, t->rank, t->shape, &bytes)) {
    vlmc_strbuf_t shape;
    vlmc_strbuf_init(&shape);
    format_shape(t, &shape);
    vlmc_status_t st = vlmc_ref_fail(ctx, VLMC_OUT_OF_RANGE,
                                     "result %u has an unknown or too large shape %s", i,
                                     vlmc_strbuf_cstr(&shape));
    vlmc_strbuf_deinit(&shape);
    return st;
  }
  VLMC_RETURN_IF_ERROR(vlmc_ref_check_bytes(ctx, bytes));
  vlmc_tensor_t made;
  vlmc_status_t st = vlmc_tensor_alloc(t->dtype, t->rank, t->shape, &made);
  if (st) return vlmc_ref_locate(ctx, st);
  *t = made;
  return NULL;
}

/* Binds the dim's symbol so that the dim is `value` (when unbound), then checks the dim. */
static bool bind_dim(vlmc_executor_t *ex, vlmc_dim_t d, int64_t value) {
  return vlmc_dim_bind(d, value, ex->symbols, ex->bound, ex->module->num_symbols);
}

vlmc_status_t vlmc_ref_result_set_length(vlmc_ref_ctx_t *ctx, uint32_t i, uint32_t axis,
                                         int64_t length) {
  const vlmc_type_t *type = &ctx->op->results[i].type;
  assert(axis < type->rank);
  vlmc_dim_t d = type->dims[axis];
  bool was_bound = vlmc_dim_is_static(d) || ctx->ex->bound[d.sym - 1];
  if (!bind_dim(ctx->ex, d, length)) {
    vlmc_strbuf_t text;
    vlmc_strbuf_init(&text);
    vlmc_type_print(ctx->ex->module, type, &text);
    vlmc_status_t st;
    if (was_bound && !vlmc_dim_is_static(d))
      st = vlmc_ref_fail(ctx, VLMC_INVALID_ARGUMENT,
                         "computed %lld entries, but the declared type %s has %lld there "
                         "(%s = %lld)", (long long)length, vlmc_strbuf_cstr(&text),
                         (long long)ctx->out[i].shape[axis],
                         vlmc_module_symbol_name(ctx->ex->module, d.sym),
                         (long long)ctx->ex->symbols[d.sym - 1]);
    else
      st = vlmc_ref_fail(ctx, VLMC_INVALID_ARGUMENT,
                         "computed %lld entries, which the declared type %s cannot have",
                         (long long)length, vlmc_strbuf_cstr(&text));
    vlmc_strbuf_deinit(&text);
    return st;
  }
  ctx->out[i].shape[axis] = length;
  return NULL;
}

bool vlmc_ref_operand_take(vlmc_ref_ctx_t *ctx, uint32_t i, vlmc_tensor_t *out) {
  vlmc_tensor_t *t = ctx->in[i];
  if (!ctx->may_take[i] || !t->owned) return false;
  *out = *t;
  memset(t, 0, sizeof *t);
  return true;
}

static vlmc_tensor_t view_of(const vlmc_tensor_t *t) {
  return vlmc_tensor_view(t->dtype, t->rank, t->shape, t->data);
}

/* out[0] becomes `from` in the result's shape. */
static void forward_as_result(vlmc_ref_ctx_t *ctx, vlmc_tensor_t from) {
  from.rank = ctx->out[0].rank;
  memcpy(from.shape, ctx->out[0].shape, sizeof from.shape);
  ctx->out[0] = from;
}

vlmc_status_t vlmc_ref_result_forward(vlmc_ref_ctx_t *ctx, uint32_t i) {
  vlmc_tensor_t *out = &ctx->out[0];
  const vlmc_tensor_t *src = ctx->in[i];
  assert(vlmc_tensor_count(src) == vlmc_tensor_count(out));
  vlmc_tensor_t taken;
  if (!src->owned) {
    forward_as_result(ctx, view_of(src));
    return NULL;
  }
  if (vlmc_ref_operand_take(ctx, i, &taken)) {
    forward_as_result(ctx, taken);
    return NULL;
  }
  assert(src->dtype == out->dtype); /* owned values are F32 or I64, as their type says */
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  size_t bytes;
  bool ok = vlmc_tensor_byte_size(out->dtype, out->rank, out->shape, &bytes);
  assert(ok);
  (void)ok;
  if (bytes) memcpy(out->data, src->data, bytes);
  return NULL;
}

/* ---- threads ---- */

typedef struct {
  vlmc_ref_rows_fn fn;
  void *arg;
  uint32_t worker;
  int64_t begin, end;
} rows_job_t;

static void *rows_thread(void *p) {
  rows_job_t *job = p;
  job->fn(job->arg, job->worker, job->begin, job->end);
  return NULL;
}

uint32_t vlmc_ref_threads(const vlmc_executor_t *ex) {
  uint32_t threads = ex->options.threads;
  return threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
}

int64_t vlmc_ref_min_chunk(int64_t work) {
  const int64_t min_work = 1 << 18; /* multiply-adds; a thread starts in some 20-50 us */
  if (work <= 0 || work >= min_work) return 1;
  return (min_work + work - 1) / work;
}

void vlmc_ref_parallel_rows(const vlmc_executor_t *ex, int64_t rows, int64_t min_chunk,
                            vlmc_ref_rows_fn fn, void *arg) {
  int64_t threads = vlmc_ref_threads(ex);
  if (min_chunk < 1) min_chunk = 1;
  if (threads > rows / min_chunk) threads = rows / min_chunk;
  if (threads <= 1) {
    fn(arg, 0, 0, rows);
    return;
  }
  rows_job_t jobs[MAX_THREADS];
  pthread_t ids[MAX_THREADS];
  bool started[MAX_THREADS] = {false};
  for (int64_t t = 0; t < threads; ++t) {
    jobs[t] = (rows_job_t){fn, arg, (uint32_t)t, rows * t / threads, rows * (t + 1) / threads};
    /* A thread that cannot start leaves its chunk to the caller: slower, still correct. */
    if (t > 0) started[t] = pthread_create(&ids[t], NULL, rows_thread, &jobs[t]) == 0;
  }
  fn(arg, 0, jobs[0].begin, jobs[0].end);
  for (int64_t t = 1; t < threads; ++t) {
    if (started[t]) pthread_join(ids[t], NULL);
    else fn(arg, jobs[t].worker, jobs[t].begin, jobs[t].end);
  }
}

/* ---- input conversion ---- */

static const char *dtype_name(vlmc_dtype_t dtype) {
  return dtype >= 0 && dtype < VLMC_DTYPE_COUNT ? vlmc_dtype_info(dtype)->name : "?";
}

static bool is_float_storage(vlmc_dtype_t d) {
  return d == VLMC_DTYPE_F32 || d == VLMC_DTYPE_F16 || d == VLMC_DTYPE_BF16 ||
         d == VLMC_DTYPE_F64;
}

static bool is_int_storage(vlmc_dtype_t d) {
  return d == VLMC_DTYPE_I64 || d == VLMC_DTYPE_I32 || d == VLMC_DTYPE_I8 ||
         d == VLMC_DTYPE_U8 || d == VLMC_DTYPE_U32 || d == VLMC_DTYPE_BOOL;
}

float vlmc_ref_load_float(const void *data, vlmc_dtype_t dtype, int64_t i) {
  switch (dtype) {
    case VLMC_DTYPE_F32: return ((const float *)data)[i];
    case VLMC_DTYPE_F16: return vlmc_f16_to_f32(((const uint16_t *)data)[i]);
    case VLMC_DTYPE_BF16: return vlmc_bf16_to_f32(((const uint16_t *)data)[i]);
    default: return (float)((const double *)data)[i];
  }
}

static int64_t load_int(const void *data, vlmc_dtype_t dtype, int64_t i) {
  switch (dtype) {
    case VLMC_DTYPE_I64: return ((const int64_t *)data)[i];
    case VLMC_DTYPE_I32: return ((const int32_t *)data)[i];
    case VLMC_DTYPE_I8: return ((const int8_t *)data)[i];
    case VLMC_DTYPE_U32: return ((const uint32_t *)data)[i];
    default: return ((const uint8_t *)data)[i]; /* u8, bool */
  }
}

static vlmc_status_t convert_floats(const vlmc_executor_t *ex, const vlmc_tensor_t *src,
                                    vlmc_dtype_t ir_dtype, vlmc_tensor_t *out) {
  VLMC_RETURN_IF_ERROR(vlmc_tensor_alloc(VLMC_DTYPE_F32, src->rank, src->shape, out));
  float *dst = vlmc_tensor_f32(out);
  bool round = ex->options.emulate_low_precision && src->dtype != ir_dtype;
  for (int64_t i = 0, n = vlmc_tensor_count(src); i < n; ++i) {
    float v = vlmc_ref_load_float(src->data, src->dtype, i);
    dst[i] = round ? vlmc_ref_round(ir_dtype, v) : v;
  }
  return NULL;
}

static vlmc_status_t convert_ints(const vlmc_tensor_t *src, vlmc_dtype_t ir_dtype,
                                  const char *what, vlmc_tensor_t *out) {
  int64_t n = vlmc_tensor_count(src);
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = load_int(src->data, src->dtype, i);
    if (vlmc_ref_wrap_int(ir_dtype, v) != v || (ir_dtype == VLMC_DTYPE_BOOL && v != 0 && v != 1))
      return vlmc_status_make(VLMC_OUT_OF_RANGE, "%s: value %lld at index %lld does not fit %s",
                              what, (long long)v, (long long)i, dtype_name(ir_dtype));
  }
  if (src->dtype == VLMC_DTYPE_I64) return NULL; /* the caller keeps the data as it is */
  VLMC_RETURN_IF_ERROR(vlmc_tensor_alloc(VLMC_DTYPE_I64, src->rank, src->shape, out));
  for (int64_t i = 0; i < n; ++i) vlmc_tensor_i64(out)[i] = load_int(src->data, src->dtype, i);
  return NULL;
}

static vlmc_status_t dequantize(const vlmc_tensor_t *src, vlmc_tensor_t *out) {
  VLMC_RETURN_IF_ERROR(vlmc_tensor_alloc(VLMC_DTYPE_F32, src->rank, src->shape, out));
  size_t blocks = (size_t)vlmc_tensor_count(src) / 32;
  if (src->dtype == VLMC_DTYPE_Q4_0) vlmc_dequantize_q4_0(src->data, blocks, vlmc_tensor_f32(out));
  else vlmc_dequantize_q8_0(src->data, blocks, vlmc_tensor_f32(out));
  return NULL;
}

/* Hands src over unchanged: moved when owned, viewed when borrowed. */
static void pass_through(vlmc_tensor_t *src, vlmc_tensor_t *out) {
  *out = *src;
  if (src->owned) memset(src, 0, sizeof *src);
}

static vlmc_status_t convert_input(const vlmc_executor_t *ex, vlmc_tensor_t *src,
                                   vlmc_dtype_t ir_dtype, const char *what, bool keep_storage,
                                   vlmc_tensor_t *out) {
  const vlmc_dtype_info_t *info = vlmc_dtype_info(ir_dtype);
  size_t bytes;
  memset(out, 0, sizeof *out);
  if (!vlmc_tensor_byte_size(src->dtype, src->rank, src->shape, &bytes))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: invalid %s storage shape", what,
                            dtype_name(src->dtype));
  if (!src->data && bytes)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: no data", what);
  if (info->is_quantized) {
    if (src->dtype != ir_dtype)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: expected %s storage, got %s", what,
                              info->name, dtype_name(src->dtype));
    return dequantize(src, out);
  }
  if (info->is_float) {
    if (!is_float_storage(src->dtype))
      return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                              "%s: expected float storage (f32, f16, bf16 or f64) for %s, got %s",
                              what, info->name, dtype_name(src->dtype));
    bool round = ex->options.emulate_low_precision && src->dtype != ir_dtype &&
                 (ir_dtype == VLMC_DTYPE_F16 || ir_dtype == VLMC_DTYPE_BF16);
    bool kept = src->dtype == VLMC_DTYPE_F32 ||
                (keep_storage && (src->dtype == VLMC_DTYPE_BF16 || src->dtype == VLMC_DTYPE_F16));
    if (kept && !round) {
      pass_through(src, out);
      return NULL;
    }
    return convert_floats(ex, src, ir_dtype, out);
  }
  if (!is_int_storage(src->dtype))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "%s: expected integer storage (i64, i32, i8, u8 or bool) for %s, "
                            "got %s", what, info->name, dtype_name(src->dtype));
  VLMC_RETURN_IF_ERROR(convert_ints(src, ir_dtype, what, out));
  if (src->dtype == VLMC_DTYPE_I64) pass_through(src, out);
  return NULL;
}

vlmc_status_t vlmc_ref_convert_input(const vlmc_executor_t *ex, vlmc_tensor_t *src,
                                     vlmc_dtype_t ir_dtype, const char *what, bool keep_storage,
                                     vlmc_tensor_t *out) {
  VLMC_RETURN_IF_ERROR(convert_input(ex, src, ir_dtype, what, keep_storage, out));
  /* Empty tensors may come without data; the ops still form pointers into theirs. */
  static int64_t no_elements;
  if (!out->data) {
    memset(out, 0, sizeof *out);
    *out = vlmc_tensor_view(vlmc_ref_storage(ir_dtype), src->rank, src->shape, &no_elements);
  }
  return NULL;
}

/* ---- plans ---- */

static void plan_free(vlmc_ref_plan_t *plan) {
  if (!plan) return;
  free(plan->ops);
  free(plan->last_use);
  free(plan->param_index);
  free(plan->is_static);
  free(plan);
}

static int32_t param_position(const vlmc_module_t *module, const vlmc_op_t *op) {
  const vlmc_param_t *param = vlmc_module_param_find(module, vlmc_op_attr(op, "name")->v.symbol);
  for (uint32_t i = 0; param && i < module->num_params; ++i)
    if (module->params[i] == param) return (int32_t)i;
  return -1;
}

static vlmc_status_t plan_build(const vlmc_module_t *module, const vlmc_func_t *func,
                                vlmc_ref_plan_t **out_plan) {
  vlmc_ref_plan_t *plan = calloc(1, sizeof *plan);
  if (!plan) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  plan->func = func;
  for (const vlmc_op_t *op = func->body.first; op; op = op->next) ++plan->num_ops;
  size_t num_values = module->next_value_id ? module->next_value_id : 1;
  plan->ops = calloc(plan->num_ops ? plan->num_ops : 1, sizeof *plan->ops);
  plan->param_index = calloc(plan->num_ops ? plan->num_ops : 1, sizeof *plan->param_index);
  plan->last_use = malloc(num_values * sizeof *plan->last_use);
  plan->is_static = calloc(num_values, sizeof *plan->is_static);
  if (!plan->ops || !plan->param_index || !plan->last_use || !plan->is_static) {
    plan_free(plan);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  for (size_t i = 0; i < num_values; ++i) plan->last_use[i] = UINT32_MAX;
  uint32_t k = 0;
  for (const vlmc_op_t *op = func->body.first; op; op = op->next, ++k) plan->ops[k] = op;
  uint32_t *read_at = malloc((plan->num_ops ? plan->num_ops : 1) * sizeof *read_at);
  vlmc_status_t st = read_at ? NULL : vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (k = 0; !st && k < plan->num_ops; ++k) read_at[k] = k;
  if (st) {
    free(read_at);
    plan_free(plan);
    return st;
  }
  k = 0;
  for (const vlmc_op_t *op = func->body.first; op; op = op->next, ++k) {
    plan->param_index[k] = op->kind == VLMC_OP_PARAM ? param_position(module, op) : -1;
    for (uint32_t i = 0; i < op->num_operands; ++i) {
      uint32_t *last = &plan->last_use[op->operands[i]->id];
      if (*last == UINT32_MAX || read_at[k] > *last) *last = read_at[k];
    }
    bool is_static = vlmc_op_is_static(op, plan->is_static);
    for (uint32_t i = 0; i < op->num_results; ++i) plan->is_static[op->results[i].id] = is_static;
    if (op->num_operands > plan->max_operands) plan->max_operands = op->num_operands;
    if (op->num_results > plan->max_results) plan->max_results = op->num_results;
  }
  free(read_at);
  *out_plan = plan;
  return NULL;
}

/* ---- raw parameters ---- */

/* Whether operand i of op reads its value as a weight: linear's weight, embedding's table. */
static bool reads_as_weight(const vlmc_op_t *op, uint32_t i) {
  return (op->kind == VLMC_OP_LINEAR && i == 1) || (op->kind == VLMC_OP_EMBEDDING && i == 0);
}

/* Ops whose result is their float operand's elements unchanged (vlmc_ref_result_forward). */
static bool forwards_float(const vlmc_op_t *op) {
  if (op->kind == VLMC_OP_RESHAPE) return true;
  vlmc_dtype_t to = op->results[0].type.dtype, from = op->operands[0]->type.dtype;
  return op->kind == VLMC_OP_CAST && vlmc_dtype_info(from)->is_float &&
         (to == VLMC_DTYPE_F32 || to == VLMC_DTYPE_F64);
}

/* Marks in `other_use` (by value id) the values of func that some op reads other than as a
 * weight, directly or through forwarding ops. Walks backwards: every use of a value comes
 * after its definition, so a result is settled before the op's operands are looked at. */
static void mark_other_uses(const vlmc_func_t *func, bool *other_use) {
  for (const vlmc_op_t *op = func->body.last; op; op = op->prev)
    for (uint32_t i = 0; i < op->num_operands; ++i) {
      bool weight = reads_as_weight(op, i) ||
                    (i == 0 && forwards_float(op) && !other_use[op->results[0].id]);
      if (!weight) other_use[op->operands[i]->id] = true;
    }
}

/* A float parameter that only linear and embedding read can stay in its bf16 / f16 storage:
 * they convert as they read. Range recording and tracing see every value in f32, as
 * documented, so they turn this off. */
static vlmc_status_t find_raw_params(vlmc_executor_t *ex) {
  const vlmc_module_t *m = ex->module;
  if (ex->options.on_range || ex->options.on_trace) return NULL;
  bool *other_use = calloc(m->next_value_id ? m->next_value_id : 1, sizeof *other_use);
  if (!other_use) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (uint32_t f = 0; f < m->num_funcs; ++f) mark_other_uses(m->funcs[f], other_use);
  for (uint32_t i = 0; i < m->num_params; ++i) {
    const vlmc_dtype_info_t *info = vlmc_dtype_info(m->params[i]->type.dtype);
    ex->param_raw[i] = info->is_float && !info->is_quantized;
  }
  for (uint32_t f = 0; f < m->num_funcs; ++f)
    for (const vlmc_op_t *op = m->funcs[f]->body.first; op; op = op->next) {
      if (op->kind != VLMC_OP_PARAM || !other_use[op->results[0].id]) continue;
      int32_t index = param_position(m, op);
      if (index >= 0) ex->param_raw[index] = false;
    }
  free(other_use);
  return NULL;
}

/* ---- create / destroy ---- */

vlmc_status_t vlmc_executor_create(const vlmc_module_t *module,
                                   const vlmc_executor_options_t *options,
                                   vlmc_executor_t **out_executor) {
  VLMC_RETURN_IF_ERROR(vlmc_module_verify(module));
  vlmc_executor_t *ex = calloc(1, sizeof *ex);
  if (!ex) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  ex->module = module;
  ex->options = options ? *options : vlmc_executor_options_default();
  size_t np = module->num_params ? module->num_params : 1;
  size_t nf = module->num_funcs ? module->num_funcs : 1;
  size_t ns = module->num_symbols ? module->num_symbols : 1;
  ex->plans = calloc(nf, sizeof *ex->plans);
  ex->params = calloc(np, sizeof *ex->params);
  size_t nv = module->next_value_id ? module->next_value_id : 1;
  ex->param_loaded = calloc(np, sizeof *ex->param_loaded);
  ex->param_raw = calloc(np, sizeof *ex->param_raw);
  ex->statics = calloc(nv, sizeof *ex->statics);
  ex->static_ready = calloc(nv, sizeof *ex->static_ready);
  ex->symbols = calloc(ns, sizeof *ex->symbols);
  ex->bound = calloc(ns, sizeof *ex->bound);
  vlmc_status_t st = NULL;
  if (!ex->plans || !ex->params || !ex->param_loaded || !ex->param_raw || !ex->statics ||
      !ex->static_ready || !ex->symbols || !ex->bound)
    st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  if (!st) st = find_raw_params(ex);
  if (st) {
    vlmc_executor_destroy(ex);
    return st;
  }
  *out_executor = ex;
  return NULL;
}

void vlmc_executor_destroy(vlmc_executor_t *ex) {
  if (!ex) return;
  for (uint32_t i = 0; ex->plans && i < ex->module->num_funcs; ++i) plan_free(ex->plans[i]);
  for (uint32_t i = 0; ex->params && i < ex->module->num_params; ++i)
    vlmc_tensor_release(&ex->params[i]);
  for (uint32_t i = 0; ex->statics && i < ex->module->next_value_id; ++i)
    vlmc_tensor_release(&ex->statics[i]);
  for (size_t i = 0; i < ex->num_packed; ++i) free(ex->packed[i].panels);
  free(ex->plans);
  free(ex->params);
  free(ex->param_loaded);
  free(ex->param_raw);
  free(ex->statics);
  free(ex->static_ready);
  free(ex->packed);
  free(ex->symbols);
  free(ex->bound);
  free(ex);
}

/* ---- arguments ---- */

static void describe_arg(const vlmc_func_t *func, uint32_t i, char *buf, size_t size) {
  const char *name = func->args[i].name;
  if (name) snprintf(buf, size, "argument %u (%%%s)", i, name);
  else snprintf(buf, size, "argument %u", i);
}

static vlmc_status_t arg_shape_error(const vlmc_executor_t *ex, const vlmc_func_t *func,
                                     uint32_t i, const vlmc_tensor_t *arg, const char *why) {
  char what[160];
  describe_arg(func, i, what, sizeof what);
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  vlmc_strbuf_puts(&text, "expected ");
  vlmc_type_print(ex->module, &func->args[i].type, &text);
  vlmc_strbuf_puts(&text, ", got shape ");
  format_shape(arg, &text);
  vlmc_status_t st = vlmc_status_make(VLMC_INVALID_ARGUMENT, "@%s: %s: %s%s", func->name, what,
                                      vlmc_strbuf_cstr(&text), why);
  vlmc_strbuf_deinit(&text);
  return st;
}

/* Binds the symbols of argument i's type from its shape, then checks every dim. */
static vlmc_status_t bind_arg_shape(vlmc_executor_t *ex, const vlmc_func_t *func, uint32_t i,
                                    const vlmc_tensor_t *arg) {
  const vlmc_type_t *type = &func->args[i].type;
  if (arg->rank != type->rank) return arg_shape_error(ex, func, i, arg, " (rank differs)");
  for (uint32_t d = 0; d < type->rank; ++d) {
    vlmc_dim_t dim = type->dims[d];
    bool was_bound = !vlmc_dim_is_static(dim) && ex->bound[dim.sym - 1];
    if (bind_dim(ex, dim, arg->shape[d])) continue;
    char why[160] = "";
    if (was_bound)
      snprintf(why, sizeof why, " (%s = %lld from an earlier dimension)",
               vlmc_module_symbol_name(ex->module, dim.sym), (long long)ex->symbols[dim.sym - 1]);
    else if (!vlmc_dim_is_static(dim))
      snprintf(why, sizeof why, " (no value of %s gives dimension %u = %lld)",
               vlmc_module_symbol_name(ex->module, dim.sym), d, (long long)arg->shape[d]);
    return arg_shape_error(ex, func, i, arg, why);
  }
  return NULL;
}

static vlmc_status_t bind_args(vlmc_executor_t *ex, const vlmc_func_t *func, vlmc_tensor_t *args,
                               vlmc_tensor_t *values) {
  for (uint32_t i = 0; i < func->num_args; ++i) {
    const vlmc_value_t *arg = &func->args[i];
    if (args[i].rank > VLMC_IR_MAX_RANK)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "@%s: argument %u has rank %u > %d",
                              func->name, i, args[i].rank, VLMC_IR_MAX_RANK);
    VLMC_RETURN_IF_ERROR(bind_arg_shape(ex, func, i, &args[i]));
    char what[200], who[160];
    describe_arg(func, i, who, sizeof who);
    snprintf(what, sizeof what, "@%s: %s", func->name, who);
    VLMC_RETURN_IF_ERROR(
        vlmc_ref_convert_input(ex, &args[i], arg->type.dtype, what, false, &values[arg->id]));
  }
  return NULL;
}

/* ---- one op ---- */

/* Sets result i's storage dtype and shape from its type; dims whose symbol nothing has bound
 * yet are -1 (a host op binds them from its data). */
static vlmc_status_t preset_result(vlmc_ref_ctx_t *ctx, uint32_t i) {
  const vlmc_type_t *type = &ctx->op->results[i].type;
  vlmc_tensor_t *t = &ctx->out[i];
  memset(t, 0, sizeof *t);
  t->dtype = vlmc_ref_storage(type->dtype);
  t->rank = type->rank;
  bool host = vlmc_op_info(ctx->op->kind)->flags & VLMC_OP_FLAG_HOST;
  for (uint32_t d = 0; d < type->rank; ++d) {
    vlmc_dim_t dim = type->dims[d];
    if (!vlmc_dim_is_static(dim) && !ctx->ex->bound[dim.sym - 1]) {
      if (!host)
        return vlmc_ref_fail(ctx, VLMC_INVALID_ARGUMENT,
                             "symbol %s of result %u is bound by no argument and no host op",
                             vlmc_module_symbol_name(ctx->ex->module, dim.sym), i);
      t->shape[d] = -1;
      continue;
    }
    vlmc_status_t st = vlmc_dim_eval(dim, ctx->ex->symbols, ctx->ex->module->num_symbols,
                                     &t->shape[d]);
    if (st) return vlmc_ref_locate(ctx, vlmc_status_annotate(st, "result %u dim %u: ", i, d));
  }
  return NULL;
}

/* Ops that only move elements of their own dtype: their results are already rounded, and
 * rounding a grown kv cache again would cost O(cache) per decode step. */

static void round_low_precision(const vlmc_executor_t *ex, const vlmc_op_t *op,
                                const vlmc_value_t *value, vlmc_tensor_t *t) {
  vlmc_dtype_t dtype = value->type.dtype;
  if (!ex->options.emulate_low_precision || !t->owned || vlmc_op_moves_data_only(op->kind)) return;
  if (dtype != VLMC_DTYPE_F16 && dtype != VLMC_DTYPE_BF16) return;
  float *x = vlmc_tensor_f32(t);
  for (int64_t i = 0, n = vlmc_tensor_count(t); i < n; ++i) x[i] = vlmc_ref_round(dtype, x[i]);
}

static void report_range(const vlmc_executor_t *ex, const vlmc_op_t *op, uint32_t i,
                         const vlmc_tensor_t *t) {
  vlmc_value_range_t r;
  memset(&r, 0, sizeof r);
  r.op = op;
  r.result_index = i;
  r.value = &op->results[i];
  r.tensor = t;
  r.count = vlmc_tensor_count(t);
  bool any = false;
  for (int64_t k = 0; k < r.count; ++k) {
    double v = t->dtype == VLMC_DTYPE_F32 ? vlmc_tensor_f32(t)[k] : (double)vlmc_tensor_i64(t)[k];
    if (!isfinite(v)) {
      ++r.nonfinite;
      continue;
    }
    if (!any || v < r.min) r.min = v;
    if (!any || v > r.max) r.max = v;
    if (fabs(v) > r.max_abs) r.max_abs = fabs(v);
    any = true;
  }
  ex->options.on_range(ex->options.range_ctx, &r);
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void release_results(vlmc_ref_ctx_t *ctx) {
  for (uint32_t i = 0; i < ctx->op->num_results; ++i) vlmc_tensor_release(&ctx->out[i]);
}

/* Whether operand i's buffer may be taken: this op uses the value last, in this slot only. */
static bool operand_dies_here(const vlmc_ref_plan_t *plan, uint32_t k, const vlmc_op_t *op,
                              uint32_t i) {
  if (plan->last_use[op->operands[i]->id] != k) return false;
  for (uint32_t j = 0; j < op->num_operands; ++j)
    if (j != i && op->operands[j] == op->operands[i]) return false;
  return true;
}

/* Presets the result shapes, evaluates the op and rounds its f16 / bf16 results when
 * emulating; on error the results are released. */
static vlmc_status_t eval_op(vlmc_ref_ctx_t *ctx) {
  vlmc_status_t st = NULL;
  memset(ctx->out, 0, ctx->op->num_results * sizeof *ctx->out);
  for (uint32_t i = 0; !st && i < ctx->op->num_results; ++i) st = preset_result(ctx, i);
  if (!st) st = eval_table[ctx->op->kind](ctx);
  if (st) {
    release_results(ctx);
    return st;
  }
  for (uint32_t i = 0; i < ctx->op->num_results; ++i) {
    assert(ctx->out[i].data);
    round_low_precision(ctx->ex, ctx->op, &ctx->op->results[i], &ctx->out[i]);
  }
  return NULL;
}

static bool statics_ready(const vlmc_executor_t *ex, const vlmc_op_t *op) {
  for (uint32_t i = 0; i < op->num_results; ++i)
    if (!ex->static_ready[op->results[i].id]) return false;
  return true;
}

/* Moves a static op's fresh results into the executor's cache, leaving views of them in out:
 * views are never taken or freed by later ops, so the cache stays intact. */
static void statics_keep(vlmc_executor_t *ex, const vlmc_op_t *op, vlmc_tensor_t *out) {
  for (uint32_t i = 0; i < op->num_results; ++i) {
    uint32_t id = op->results[i].id;
    ex->statics[id] = out[i];
    ex->static_ready[id] = true;
    out[i] = view_of(&ex->statics[id]);
  }
}

static vlmc_status_t run_op(vlmc_executor_t *ex, const vlmc_ref_plan_t *plan, uint32_t k,
                            vlmc_tensor_t *values, vlmc_tensor_t **in, bool *may_take,
                            vlmc_tensor_t *out) {
  const vlmc_op_t *op = plan->ops[k];
  vlmc_ref_ctx_t ctx = {ex, plan, op, k, in, may_take, out};
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    in[i] = &values[op->operands[i]->id];
    may_take[i] = operand_dies_here(plan, k, op, i);
  }
  bool is_static = op->num_results && plan->is_static[op->results[0].id];
  double start = ex->options.on_trace ? now_seconds() : 0;
  if (is_static && statics_ready(ex, op)) {
    for (uint32_t i = 0; i < op->num_results; ++i)
      out[i] = view_of(&ex->statics[op->results[i].id]);
  } else {
    VLMC_RETURN_IF_ERROR(eval_op(&ctx));
    if (is_static) statics_keep(ex, op, out);
  }
  for (uint32_t i = 0; ex->options.on_range && i < op->num_results; ++i)
    report_range(ex, op, i, &out[i]);
  if (ex->options.on_trace)
    ex->options.on_trace(ex->options.trace_ctx, op, out, op->num_results, now_seconds() - start);
  for (uint32_t i = 0; i < op->num_results; ++i) {
    if (plan->last_use[op->results[i].id] == UINT32_MAX) vlmc_tensor_release(&out[i]);
    else values[op->results[i].id] = out[i];
  }
  for (uint32_t i = 0; i < op->num_operands; ++i)
    if (plan->last_use[op->operands[i]->id] == k) vlmc_tensor_release(in[i]);
  return NULL;
}

/* ---- results ---- */

static vlmc_status_t copy_tensor(const vlmc_tensor_t *src, vlmc_tensor_t *out) {
  VLMC_RETURN_IF_ERROR(vlmc_tensor_alloc(src->dtype, src->rank, src->shape, out));
  size_t bytes;
  bool ok = vlmc_tensor_byte_size(src->dtype, src->rank, src->shape, &bytes);
  assert(ok);
  (void)ok;
  if (bytes) memcpy(out->data, src->data, bytes);
  return NULL;
}

/* Moves the returned values into out_results (copying borrowed ones and repeats). */
static vlmc_status_t take_results(const vlmc_op_t *ret, vlmc_tensor_t *values,
                                  vlmc_tensor_t *out_results) {
  for (uint32_t i = 0; i < ret->num_operands; ++i) memset(&out_results[i], 0, sizeof *out_results);
  for (uint32_t i = 0; i < ret->num_operands; ++i) {
    vlmc_tensor_t *v = &values[ret->operands[i]->id];
    bool repeated = false;
    for (uint32_t j = i + 1; j < ret->num_operands; ++j)
      repeated |= ret->operands[j] == ret->operands[i];
    if (v->owned && !repeated) {
      out_results[i] = *v;
      memset(v, 0, sizeof *v);
      continue;
    }
    vlmc_status_t st = copy_tensor(v, &out_results[i]);
    if (st) {
      for (uint32_t j = 0; j < i; ++j) vlmc_tensor_release(&out_results[j]);
      return st;
    }
  }
  return NULL;
}

/* ---- run ---- */

static void release_owned_args(vlmc_tensor_t *args, uint32_t num_args) {
  for (uint32_t i = 0; i < num_args; ++i)
    if (args[i].owned) vlmc_tensor_release(&args[i]);
}

static vlmc_status_t get_plan(vlmc_executor_t *ex, const vlmc_func_t *func,
                              vlmc_ref_plan_t **out_plan) {
  uint32_t f = 0;
  while (f < ex->module->num_funcs && ex->module->funcs[f] != func) ++f;
  assert(f < ex->module->num_funcs);
  if (!ex->plans[f])
    VLMC_RETURN_IF_ERROR(
        plan_build(ex->module, func, &ex->plans[f]));
  *out_plan = ex->plans[f];
  return NULL;
}

static vlmc_status_t run_body(vlmc_executor_t *ex, const vlmc_ref_plan_t *plan,
                              vlmc_tensor_t *values, vlmc_tensor_t *out_results) {
  size_t no = plan->max_operands ? plan->max_operands : 1;
  size_t nr = plan->max_results ? plan->max_results : 1;
  vlmc_tensor_t **in = calloc(no, sizeof *in);
  bool *may_take = calloc(no, sizeof *may_take);
  vlmc_tensor_t *out = calloc(nr, sizeof *out);
  vlmc_status_t st = NULL;
  if (!in || !may_take || !out) st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (uint32_t k = 0; !st && k < plan->num_ops; ++k) {
    const vlmc_op_t *op = plan->ops[k];
    if (op->kind == VLMC_OP_RETURN) {
      st = take_results(op, values, out_results);
      break;
    }
    st = run_op(ex, plan, k, values, in, may_take, out);
  }
  free(in);
  free(may_take);
  free(out);
  return st;
}

vlmc_status_t vlmc_executor_run(vlmc_executor_t *ex, const char *func_name, vlmc_tensor_t *args,
                                uint32_t num_args, vlmc_tensor_t *out_results,
                                uint32_t num_results) {
  for (uint32_t i = 0; i < num_results; ++i) memset(&out_results[i], 0, sizeof *out_results);
  const vlmc_func_t *func = vlmc_module_func_find(ex->module, func_name);
  vlmc_status_t st = vlmc_func_check_call(func, func_name, num_args, num_results);
  vlmc_ref_plan_t *plan = NULL;
  if (!st) st = get_plan(ex, func, &plan);
  if (st) {
    release_owned_args(args, num_args);
    return st;
  }
  for (uint32_t i = 0; i < ex->module->num_symbols; ++i) ex->bound[i] = false;
  size_t num_values = ex->module->next_value_id ? ex->module->next_value_id : 1;
  vlmc_tensor_t *values = calloc(num_values, sizeof *values);
  if (!values) st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  if (!st) st = bind_args(ex, func, args, values);
  release_owned_args(args, num_args);
  if (!st) st = run_body(ex, plan, values, out_results);
  for (size_t i = 0; values && i < num_values; ++i) vlmc_tensor_release(&values[i]);
  free(values);
  return st;
}

/* ---- trace ---- */

void vlmc_executor_trace_print(void *file, const vlmc_op_t *op, const vlmc_tensor_t *results,
                               uint32_t num_results, double seconds) {
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  vlmc_strbuf_printf(&line, "%9.3f ms  ", seconds * 1e3);
  vlmc_op_print(op, &line);
  while (line.len && (line.data[line.len - 1] == '\n' || line.data[line.len - 1] == ' '))
    line.data[--line.len] = '\0';
  for (uint32_t i = 0; i < num_results; ++i) {
    const vlmc_tensor_t *t = &results[i];
    vlmc_strbuf_puts(&line, i ? ", " : "  ->  ");
    format_shape(t, &line);
    int64_t n = vlmc_tensor_count(t);
    double sum = 0, lo = INFINITY, hi = -INFINITY;
    for (int64_t k = 0; k < n; ++k) {
      double v = t->dtype == VLMC_DTYPE_F32 ? vlmc_tensor_f32(t)[k] : (double)vlmc_tensor_i64(t)[k];
      sum += v;
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
    if (n) vlmc_strbuf_printf(&line, " min %.6g max %.6g mean %.6g", lo, hi, sum / (double)n);
  }
  fprintf((FILE *)file, "%s\n", vlmc_strbuf_cstr(&line));
  vlmc_strbuf_deinit(&line);
}
