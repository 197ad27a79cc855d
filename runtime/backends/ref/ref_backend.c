/* The `ref` backend: the reference executor (reference/executor.h) runs whole functions on
 * host memory. It is the oracle the other backends are tested against, and the backend of
 * artifacts compiled without kernels. */
#include <stdlib.h>
#include <string.h>

#include "reference/executor.h"
#include "runtime/backend.h"

extern const vlmc_backend_iface_t vlmc_backend_ref;

struct vlmc_buffer_s {
  void *data;
  size_t capacity;
  bool owns_data; /* false: wrapped host memory */
};

typedef struct {
  vlmc_backend_t base;
  vlmc_executor_t *executor;
  const vlmc_function_call_t *call; /* the call running now: its tap callback */
} ref_backend_t;

static vlmc_status_t ref_tap(void *ctx, const char *name, const vlmc_op_t *op,
                             const vlmc_tensor_t *tensor) {
  const ref_backend_t *b = ctx;
  if (!b->call || !b->call->on_tap) return NULL;
  return b->call->on_tap(b->call->tap_ctx, name, tensor);
}

static vlmc_status_t ref_open(const vlmc_backend_open_params_t *params, vlmc_backend_t **out) {
  ref_backend_t *b = calloc(1, sizeof *b);
  if (!b) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  b->base.iface = &vlmc_backend_ref;
  vlmc_executor_options_t eo = vlmc_executor_options_default();
  eo.get_param = params->get_param;
  eo.param_ctx = params->param_ctx;
  eo.threads = params->threads ? params->threads : 1;
  /* A program the precision pass gave f16 / bf16 values computes them in that precision, as
   * the generated kernels do (codegen/kernel_emit.c rounds every such op result). */
  eo.emulate_low_precision = true;
  eo.on_tap = ref_tap;
  eo.tap_ctx = b;
  vlmc_status_t st = vlmc_executor_create(params->module, &eo, &b->executor);
  if (st) {
    free(b);
    return st;
  }
  *out = &b->base;
  return NULL;
}

static void ref_destroy(vlmc_backend_t *base) {
  ref_backend_t *b = (ref_backend_t *)base;
  if (!b) return;
  vlmc_executor_destroy(b->executor);
  free(b);
}

static vlmc_status_t ref_buffer_alloc(vlmc_backend_t *b, size_t bytes, vlmc_buffer_t **out) {
  vlmc_buffer_t *buf = calloc(1, sizeof *buf);
  void *data = buf ? calloc(1, bytes ? bytes : 1) : NULL;
  if (!data) {
    free(buf);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory for a %zu-byte value", bytes);
  }
  *buf = (vlmc_buffer_t){data, bytes, true};
  *out = buf;
  return NULL;
}

static vlmc_status_t ref_buffer_wrap(vlmc_backend_t *b, void *host, size_t bytes,
                                     vlmc_buffer_t **out) {
  vlmc_buffer_t *buf = calloc(1, sizeof *buf);
  if (!buf) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  *buf = (vlmc_buffer_t){host, bytes, false};
  *out = buf;
  return NULL;
}

static void ref_buffer_free(vlmc_backend_t *b, vlmc_buffer_t *buf) {
  if (!buf) return;
  if (buf->owns_data) free(buf->data);
  free(buf);
}

static void *ref_buffer_host(vlmc_backend_t *b, vlmc_buffer_t *buf) { return buf->data; }

/* The executor takes owned arguments (and may grow a KV cache in place): an owned value whose
 * buffer owns its data hands the data over; anything else is a view. */
static vlmc_tensor_t arg_tensor(vlmc_backend_t *b, vlmc_rt_value_t *v) {
  vlmc_tensor_t t = vlmc_rt_value_host_view(b, v);
  if (v->owned && v->buffer && v->buffer->owns_data) {
    t.owned = true;
    t.capacity = v->buffer->capacity;
    free(v->buffer); /* the data now belongs to the tensor */
    v->buffer = NULL;
    v->owned = false;
  }
  return t;
}

/* Moves an owned result tensor into a value. */
static vlmc_status_t result_value(vlmc_tensor_t *t, vlmc_rt_value_t *out) {
  memset(out, 0, sizeof *out);
  out->dtype = t->dtype;
  out->rank = t->rank;
  memcpy(out->shape, t->shape, sizeof out->shape);
  vlmc_buffer_t *buf = calloc(1, sizeof *buf);
  if (!buf) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  *buf = (vlmc_buffer_t){t->data, t->capacity, t->owned};
  memset(t, 0, sizeof *t);
  out->buffer = buf;
  out->owned = true;
  return NULL;
}

static vlmc_status_t ref_run_function(vlmc_backend_t *base, const vlmc_function_call_t *call) {
  ref_backend_t *b = (ref_backend_t *)base;
  vlmc_tensor_t *args = calloc(call->num_args + 1, sizeof *args);
  vlmc_tensor_t *results = calloc(call->num_results + 1, sizeof *results);
  vlmc_status_t st = args && results ? NULL : vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (uint32_t i = 0; !st && i < call->num_args; ++i) args[i] = arg_tensor(base, &call->args[i]);
  for (uint32_t i = 0; i < call->num_args; ++i) vlmc_rt_value_release(base, &call->args[i]);
  b->call = call;
  if (!st)
    st = vlmc_executor_run(b->executor, call->func, args, call->num_args, results,
                           call->num_results);
  b->call = NULL;
  for (uint32_t i = 0; !st && i < call->num_results; ++i)
    st = result_value(&results[i], &call->results[i]);
  if (st)
    for (uint32_t i = 0; i < call->num_results; ++i) vlmc_rt_value_release(base, &call->results[i]);
  for (uint32_t i = 0; results && i < call->num_results; ++i) vlmc_tensor_release(&results[i]);
  free(args);
  free(results);
  return st;
}

static const vlmc_dtype_t kComputeDtypes[] = {VLMC_DTYPE_F32, VLMC_DTYPE_F16, VLMC_DTYPE_BF16,
                                              VLMC_DTYPE_I64, VLMC_DTYPE_COUNT};
static const char *const kSections[] = {"program", NULL};

const vlmc_backend_iface_t vlmc_backend_ref = {
    .name = "ref",
    .summary = "the reference interpreter of the program (f32, f16/bf16 emulated); the oracle",
    .caps = VLMC_BACKEND_HOST_MEMORY | VLMC_BACKEND_RUNS_FUNCTIONS,
    .compute_dtypes = kComputeDtypes,
    .sections = kSections,
    .open = ref_open,
    .destroy = ref_destroy,
    .buffer_alloc = ref_buffer_alloc,
    .buffer_wrap = ref_buffer_wrap,
    .buffer_free = ref_buffer_free,
    .buffer_host = ref_buffer_host,
    .run_function = ref_run_function,
};
