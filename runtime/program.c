/* The program walker (runtime/program.h). */
#define _POSIX_C_SOURCE 200809L
#include "runtime/program.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ir/dispatch.h"
#include "support/checked_math.h"
#include "support/strbuf.h"

typedef struct {
  vlmc_buffer_t *buffer;
  size_t capacity;
} slot_t;

/* What a function's walk needs, computed on its first call. */
typedef struct {
  const vlmc_func_t *func;
  uint32_t num_ops;
  const vlmc_op_t **ops;
  vlmc_dispatch_set_t regions;
  const vlmc_dispatch_region_t **region_at; /* by op index: the region rooted there */
  bool *member;                             /* by op index: inside some region */
  uint32_t *last_use; /* by value id: the last op index that reads it (UINT32_MAX: none) */
  bool *is_static;    /* by value id: the same on every call (parameters and constants only) */
  /* Liveness of each region's output and its size at the last call (--stats). */
  uint32_t *first, *last;
  bool *escapes;
  size_t *bytes;
} plan_t;

struct vlmc_program_s {
  const vlmc_module_t *module;
  vlmc_backend_t *backend;
  const vlmc_backend_iface_t *iface;
  bool host_memory;
  vlmc_backend_param_fn get_param;
  void *param_ctx;
  vlmc_backend_tap_fn on_tap;
  void *tap_ctx;
  vlmc_program_step_fn on_step; /* progress: after each step of a walked call */
  void *step_ctx;
  plan_t **plans;            /* by function index */
  vlmc_rt_value_t *params;   /* by parameter index: loaded on first use, owned here */
  vlmc_tensor_t *param_host; /* by parameter index: a converted host copy, when one was needed */
  vlmc_rt_value_t *kept;     /* by value id: constants and static region outputs, owned here */
  slot_t *slots;             /* by slot number (1-based), shared by all functions */
  uint32_t num_slots;
  int64_t *symbols;
  bool *bound;
  vlmc_program_transfers_t *transfers; /* by function index */
  size_t current;                      /* the function transfers count for now */
  uint64_t params_uploaded;            /* bytes of parameters uploaded at open (preload) */
  /* Bytes uploaded between calls (arguments imported): they count for the next call; bytes
   * read between calls (results) count for the last one, `current`. */
  uint64_t pending_to_device;
  bool in_call;
};

/* ---- plans ---- */

static void plan_free(plan_t *plan) {
  if (!plan) return;
  vlmc_dispatch_set_free(&plan->regions);
  free(plan->ops);
  free(plan->region_at);
  free(plan->member);
  free(plan->last_use);
  free(plan->is_static);
  free(plan->first);
  free(plan->last);
  free(plan->escapes);
  free(plan->bytes);
  free(plan);
}

/* Marks region roots and members; a member's operands are read at its root. */
static void plan_regions(plan_t *plan, uint32_t *read_at) {
  uint32_t r = 0;
  for (uint32_t k = 0; k < plan->num_ops && r < plan->regions.num_regions; ++k) {
    const vlmc_dispatch_region_t *region = &plan->regions.regions[r];
    if (plan->ops[k] != region->ops[region->num_ops - 1]) continue;
    plan->region_at[k] = region;
    ++r;
  }
  for (uint32_t k = plan->num_ops; k-- > 0;) {
    if (!plan->ops[k]->dispatch) continue;
    plan->member[k] = true;
    uint32_t root = k; /* the root comes after every member */
    while (!(plan->region_at[root] && plan->region_at[root]->id == plan->ops[k]->dispatch)) ++root;
    read_at[k] = root;
  }
}

static vlmc_status_t plan_build(const vlmc_module_t *m, const vlmc_func_t *func, plan_t **out) {
  plan_t *plan = calloc(1, sizeof *plan);
  if (!plan) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  plan->func = func;
  for (const vlmc_op_t *op = func->body.first; op; op = op->next) ++plan->num_ops;
  size_t n = plan->num_ops ? plan->num_ops : 1, nv = m->next_value_id ? m->next_value_id : 1;
  plan->ops = calloc(n, sizeof *plan->ops);
  plan->region_at = calloc(n, sizeof *plan->region_at);
  plan->member = calloc(n, sizeof *plan->member);
  plan->last_use = malloc(nv * sizeof *plan->last_use);
  plan->is_static = calloc(nv, sizeof *plan->is_static);
  uint32_t *read_at = calloc(n, sizeof *read_at);
  vlmc_status_t st = NULL;
  if (!plan->ops || !plan->region_at || !plan->member || !plan->last_use || !plan->is_static ||
      !read_at)
    st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  if (!st) st = vlmc_dispatch_regions(func, &plan->regions);
  if (!st) {
    uint32_t nr = plan->regions.num_regions + 1;
    plan->first = calloc(nr, sizeof *plan->first);
    plan->last = calloc(nr, sizeof *plan->last);
    plan->escapes = calloc(nr, sizeof *plan->escapes);
    plan->bytes = calloc(nr, sizeof *plan->bytes);
    if (!plan->first || !plan->last || !plan->escapes || !plan->bytes)
      st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  if (!st) st = vlmc_dispatch_intervals(func, &plan->regions, plan->first, plan->last,
                                        plan->escapes);
  if (st) {
    free(read_at);
    plan_free(plan);
    return st;
  }
  uint32_t k = 0;
  for (const vlmc_op_t *op = func->body.first; op; op = op->next, ++k) {
    plan->ops[k] = op;
    read_at[k] = k;
  }
  for (size_t i = 0; i < nv; ++i) plan->last_use[i] = UINT32_MAX;
  plan_regions(plan, read_at);
  for (k = 0; k < plan->num_ops; ++k) {
    const vlmc_op_t *op = plan->ops[k];
    for (uint32_t i = 0; i < op->num_operands; ++i) {
      uint32_t *last = &plan->last_use[op->operands[i]->id];
      if (*last == UINT32_MAX || read_at[k] > *last) *last = read_at[k];
    }
    bool is_static = vlmc_op_is_static(op, plan->is_static);
    for (uint32_t i = 0; i < op->num_results; ++i) plan->is_static[op->results[i].id] = is_static;
  }
  free(read_at);
  *out = plan;
  return NULL;
}

static vlmc_status_t get_plan(vlmc_program_t *p, const vlmc_func_t *func, size_t *out_index,
                              plan_t **out) {
  size_t f = 0;
  while (f < p->module->num_funcs && p->module->funcs[f] != func) ++f;
  assert(f < p->module->num_funcs);
  *out_index = f;
  if (!p->plans[f]) VLMC_RETURN_IF_ERROR(plan_build(p->module, func, &p->plans[f]));
  *out = p->plans[f];
  return NULL;
}

/* ---- create / destroy ---- */

vlmc_status_t vlmc_program_create(const vlmc_module_t *module, vlmc_backend_t *backend,
                                  vlmc_backend_param_fn get_param, void *param_ctx,
                                  vlmc_program_t **out) {
  *out = NULL;
  vlmc_program_t *p = calloc(1, sizeof *p);
  if (!p) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  p->module = module;
  p->backend = backend;
  p->iface = backend->iface;
  p->host_memory = (p->iface->caps & VLMC_BACKEND_HOST_MEMORY) != 0;
  p->get_param = get_param;
  p->param_ctx = param_ctx;
  size_t nf = module->num_funcs + 1, np = module->num_params + 1;
  size_t nv = module->next_value_id + 1, ns = module->num_symbols + 1;
  p->plans = calloc(nf, sizeof *p->plans);
  p->transfers = calloc(nf, sizeof *p->transfers);
  p->params = calloc(np, sizeof *p->params);
  p->param_host = calloc(np, sizeof *p->param_host);
  p->kept = calloc(nv, sizeof *p->kept);
  p->symbols = calloc(ns, sizeof *p->symbols);
  p->bound = calloc(ns, sizeof *p->bound);
  for (const vlmc_func_t *const *f = (const vlmc_func_t *const *)module->funcs;
       f < (const vlmc_func_t *const *)module->funcs + module->num_funcs; ++f)
    for (const vlmc_op_t *op = (*f)->body.first; op; op = op->next)
      if (op->dispatch && op->slot > p->num_slots) p->num_slots = op->slot;
  p->slots = calloc(p->num_slots + 1, sizeof *p->slots);
  if (!p->plans || !p->transfers || !p->params || !p->param_host || !p->kept || !p->symbols ||
      !p->bound || !p->slots) {
    vlmc_program_destroy(p);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  for (uint32_t f = 0; f < module->num_funcs; ++f) p->transfers[f].func = module->funcs[f]->name;
  *out = p;
  return NULL;
}

void vlmc_program_destroy(vlmc_program_t *p) {
  if (!p) return;
  for (uint32_t f = 0; p->plans && f < p->module->num_funcs; ++f) plan_free(p->plans[f]);
  for (uint32_t i = 0; p->params && i < p->module->num_params; ++i) {
    vlmc_rt_value_release(p->backend, &p->params[i]);
    vlmc_tensor_release(&p->param_host[i]);
  }
  for (uint32_t i = 0; p->kept && i < p->module->next_value_id; ++i)
    vlmc_rt_value_release(p->backend, &p->kept[i]);
  for (uint32_t s = 0; p->slots && s <= p->num_slots; ++s)
    if (p->slots[s].buffer) p->iface->buffer_free(p->backend, p->slots[s].buffer);
  free(p->plans);
  free(p->transfers);
  free(p->params);
  free(p->param_host);
  free(p->kept);
  free(p->slots);
  free(p->symbols);
  free(p->bound);
  free(p);
}

void vlmc_program_set_tap(vlmc_program_t *p, vlmc_backend_tap_fn fn, void *ctx) {
  p->on_tap = fn;
  p->tap_ctx = ctx;
}

void vlmc_program_set_step_hook(vlmc_program_t *p, vlmc_program_step_fn fn, void *ctx) {
  p->on_step = fn;
  p->step_ctx = ctx;
}

/* ---- moving bytes ---- */

/* A new owned value holding a copy of host data (uploaded, or written through the host
 * pointer). */
/* An empty value of host's dtype and shape, and its size in bytes. */
static vlmc_status_t value_like(const vlmc_tensor_t *host, vlmc_rt_value_t *out, size_t *bytes) {
  memset(out, 0, sizeof *out);
  out->dtype = host->dtype;
  out->rank = host->rank;
  memcpy(out->shape, host->shape, sizeof out->shape);
  if (!vlmc_tensor_byte_size(host->dtype, host->rank, host->shape, bytes))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "a value of an invalid shape");
  return NULL;
}

static vlmc_status_t value_from_host(vlmc_program_t *p, const vlmc_tensor_t *host,
                                     vlmc_rt_value_t *out) {
  size_t bytes;
  VLMC_RETURN_IF_ERROR(value_like(host, out, &bytes));
  VLMC_RETURN_IF_ERROR(p->iface->buffer_alloc(p->backend, bytes, &out->buffer));
  out->owned = true;
  if (!bytes) return NULL;
  if (p->host_memory) {
    memcpy(p->iface->buffer_host(p->backend, out->buffer), host->data, bytes);
    return NULL;
  }
  if (p->in_call) p->transfers[p->current].bytes_to_device += bytes;
  else p->pending_to_device += bytes;
  vlmc_status_t st = p->iface->upload(p->backend, out->buffer, host->data, bytes);
  if (st) vlmc_rt_value_release(p->backend, out);
  return st;
}

/* Borrows host memory on a host-memory backend, else copies it. */
static vlmc_status_t value_of_host(vlmc_program_t *p, const vlmc_tensor_t *host,
                                   vlmc_rt_value_t *out) {
  if (!p->host_memory) return value_from_host(p, host, out);
  size_t bytes;
  VLMC_RETURN_IF_ERROR(value_like(host, out, &bytes));
  VLMC_RETURN_IF_ERROR(p->iface->buffer_wrap(p->backend, host->data, bytes, &out->buffer));
  out->owned = true;
  return NULL;
}

vlmc_status_t vlmc_program_import(vlmc_program_t *p, const vlmc_tensor_t *host,
                                  vlmc_rt_value_t *out) {
  return value_of_host(p, host, out);
}

vlmc_status_t vlmc_program_read(vlmc_program_t *p, const vlmc_rt_value_t *v, vlmc_tensor_t *out) {
  if (p->host_memory) {
    *out = vlmc_rt_value_host_view(p->backend, v);
    return NULL;
  }
  VLMC_RETURN_IF_ERROR(vlmc_tensor_alloc(v->dtype, v->rank, v->shape, out));
  size_t bytes = 0;
  vlmc_rt_value_bytes(v, &bytes);
  if (!bytes) return NULL;
  p->transfers[p->current].bytes_to_host += bytes;
  vlmc_status_t st = p->iface->download(p->backend, v->buffer, out->data, bytes);
  if (st) vlmc_tensor_release(out);
  return st;
}

void vlmc_program_release(vlmc_program_t *p, vlmc_rt_value_t *v) {
  vlmc_rt_value_release(p->backend, v);
}

/* A borrowed copy of a value held elsewhere (a parameter, a kept value, a slot). */
static vlmc_rt_value_t borrowed(const vlmc_rt_value_t *v) {
  vlmc_rt_value_t b = *v;
  b.owned = false;
  return b;
}

/* ---- symbols and shapes ---- */

/* Binds the dim's symbol so that the dim is `value` (when unbound), then checks the dim. */
static bool bind_dim(vlmc_program_t *p, vlmc_dim_t d, int64_t value) {
  return vlmc_dim_bind(d, value, p->symbols, p->bound, p->module->num_symbols);
}

static vlmc_status_t eval_shape(const vlmc_program_t *p, const vlmc_type_t *type,
                                int64_t *shape) {
  for (uint32_t d = 0; d < type->rank; ++d) {
    vlmc_dim_t dim = type->dims[d];
    if (vlmc_dim_is_static(dim)) {
      shape[d] = dim.off;
      continue;
    }
    if (!p->bound[dim.sym - 1])
      return vlmc_status_make(VLMC_INTERNAL, "symbol %s is not bound",
                              vlmc_module_symbol_name(p->module, dim.sym));
    VLMC_RETURN_IF_ERROR(vlmc_dim_eval(dim, p->symbols, p->module->num_symbols, &shape[d]));
  }
  return NULL;
}

/* Kernels compute in f32 and i64: the storage of an IR dtype's activations. */
static vlmc_dtype_t activation_storage(vlmc_dtype_t ir_dtype) {
  const vlmc_dtype_info_t *info = vlmc_dtype_info(ir_dtype);
  return info->is_float || info->is_quantized ? VLMC_DTYPE_F32 : VLMC_DTYPE_I64;
}

static vlmc_status_t result_value(const vlmc_program_t *p, const vlmc_value_t *result,
                                  vlmc_rt_value_t *out) {
  memset(out, 0, sizeof *out);
  out->dtype = activation_storage(result->type.dtype);
  out->rank = result->type.rank;
  return eval_shape(p, &result->type, out->shape);
}

static const char *dtype_name(vlmc_dtype_t d) {
  return d >= 0 && d < VLMC_DTYPE_COUNT ? vlmc_dtype_info(d)->name : "?";
}

static vlmc_status_t bind_args(vlmc_program_t *p, const vlmc_func_t *func, vlmc_rt_value_t *args,
                               vlmc_rt_value_t *values) {
  for (uint32_t i = 0; i < func->num_args; ++i) {
    const vlmc_type_t *type = &func->args[i].type;
    vlmc_rt_value_t *a = &args[i];
    bool fits = a->rank == type->rank;
    for (uint32_t d = 0; fits && d < type->rank; ++d) fits = bind_dim(p, type->dims[d], a->shape[d]);
    if (!fits) {
      vlmc_strbuf_t text;
      vlmc_strbuf_init(&text);
      vlmc_type_print(p->module, type, &text);
      vlmc_status_t st = vlmc_status_make(VLMC_INVALID_ARGUMENT, "@%s: argument %u (%%%s) does "
                                          "not fit %s", func->name, i, func->args[i].name,
                                          vlmc_strbuf_cstr(&text));
      vlmc_strbuf_deinit(&text);
      return st;
    }
    if (a->dtype != activation_storage(type->dtype))
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "@%s: argument %u (%%%s) is %s, the "
                              "kernels read %s", func->name, i, func->args[i].name,
                              dtype_name(a->dtype), dtype_name(activation_storage(type->dtype)));
    values[func->args[i].id] = *a;
    memset(a, 0, sizeof *a); /* taken (an owned one) or only read (a borrowed one) */
  }
  return NULL;
}

/* ---- parameters and constants ---- */

static bool storage_fits(vlmc_dtype_t ir, vlmc_dtype_t stored) {
  const vlmc_dtype_info_t *info = vlmc_dtype_info(ir);
  if (info->is_quantized) return stored == ir;
  if (info->is_float)
    return stored == VLMC_DTYPE_F32 || stored == VLMC_DTYPE_BF16 || stored == VLMC_DTYPE_F16 ||
           stored == VLMC_DTYPE_F64;
  if (ir == VLMC_DTYPE_U32) return stored == VLMC_DTYPE_U32;
  return stored == VLMC_DTYPE_I64 || stored == VLMC_DTYPE_I32 || stored == VLMC_DTYPE_I8 ||
         stored == VLMC_DTYPE_U8 || stored == VLMC_DTYPE_BOOL;
}

/* The host form kernels read: floats in their own storage (bf16, f16, f32), f64 narrowed and
 * quantized blocks expanded to f32, packed u32 words as stored (dequantize reads them),
 * other integers widened to i64. Returns false when `view` already is that form. */
static bool needs_conversion(const vlmc_tensor_t *view) {
  switch (view->dtype) {
    case VLMC_DTYPE_F32: case VLMC_DTYPE_BF16: case VLMC_DTYPE_F16: case VLMC_DTYPE_I64:
    case VLMC_DTYPE_U32:
      return false;
    default:
      return true;
  }
}

static vlmc_status_t convert_param(const vlmc_tensor_t *view, vlmc_tensor_t *out) {
  bool to_float = vlmc_dtype_info(view->dtype)->is_float ||
                  vlmc_dtype_info(view->dtype)->is_quantized;
  VLMC_RETURN_IF_ERROR(vlmc_tensor_alloc(to_float ? VLMC_DTYPE_F32 : VLMC_DTYPE_I64, view->rank,
                                         view->shape, out));
  int64_t n = vlmc_tensor_count(view);
  const void *d = view->data;
  if (view->dtype == VLMC_DTYPE_Q4_0) vlmc_dequantize_q4_0(d, (size_t)n / 32, vlmc_tensor_f32(out));
  else if (view->dtype == VLMC_DTYPE_Q8_0) vlmc_dequantize_q8_0(d, (size_t)n / 32, vlmc_tensor_f32(out));
  for (int64_t i = 0; i < n; ++i) {
    switch (view->dtype) {
      case VLMC_DTYPE_F64: vlmc_tensor_f32(out)[i] = (float)((const double *)d)[i]; break;
      case VLMC_DTYPE_I32: vlmc_tensor_i64(out)[i] = ((const int32_t *)d)[i]; break;
      case VLMC_DTYPE_I8: vlmc_tensor_i64(out)[i] = ((const int8_t *)d)[i]; break;
      case VLMC_DTYPE_U8: case VLMC_DTYPE_BOOL: vlmc_tensor_i64(out)[i] = ((const uint8_t *)d)[i]; break;
      default: break; /* quantized: done above */
    }
  }
  return NULL;
}

/* Makes parameter `index` resident in the backend (once). */
static vlmc_status_t load_param_at(vlmc_program_t *p, uint32_t index) {
  const vlmc_param_t *param = p->module->params[index];
  const char *name = param->name;
  if (!p->params[index].buffer) {
    if (!p->get_param)
      return vlmc_status_make(VLMC_NOT_FOUND, "param @%s: no parameter source", name);
    vlmc_tensor_t view;
    memset(&view, 0, sizeof view);
    VLMC_RETURN_IF_ERROR(p->get_param(p->param_ctx, name, &param->type, &view));
    bool same = view.rank == param->type.rank && storage_fits(param->type.dtype, view.dtype);
    for (uint32_t d = 0; same && d < view.rank; ++d) same = view.shape[d] == param->type.dims[d].off;
    if (!same) {
      vlmc_status_t st = vlmc_status_make(VLMC_INVALID_ARGUMENT, "param @%s: stored as %s of "
                                          "rank %u, which does not fit its type", name,
                                          dtype_name(view.dtype), view.rank);
      vlmc_tensor_release(&view); /* after the message reads it */
      return st;
    }
    const vlmc_tensor_t *host = &view;
    vlmc_status_t st = NULL;
    if (needs_conversion(&view)) {
      st = convert_param(&view, &p->param_host[index]);
      host = &p->param_host[index];
    }
    if (!st) st = value_of_host(p, host, &p->params[index]);
    vlmc_tensor_release(&view); /* an owned view was converted or copied */
    if (st) return vlmc_status_annotate(st, "param @%s: ", name);
  }
  return NULL;
}

static vlmc_status_t load_param(vlmc_program_t *p, const vlmc_op_t *op, vlmc_rt_value_t *out) {
  const char *name = vlmc_op_attr(op, "name")->v.symbol;
  const vlmc_param_t *param = vlmc_module_param_find(p->module, name);
  uint32_t index = 0;
  while (index < p->module->num_params && p->module->params[index] != param) ++index;
  assert(param && index < p->module->num_params); /* the verifier resolved the name */
  VLMC_RETURN_IF_ERROR(load_param_at(p, index));
  *out = borrowed(&p->params[index]);
  return NULL;
}

vlmc_status_t vlmc_program_preload_params(vlmc_program_t *p, vlmc_program_progress_fn progress,
                                          void *ctx) {
  size_t total = 0, done = 0;
  for (uint32_t i = 0; i < p->module->num_params; ++i) {
    size_t bytes = 0;
    const vlmc_type_t *t = &p->module->params[i]->type;
    int64_t shape[VLMC_IR_MAX_RANK];
    for (uint32_t d = 0; d < t->rank; ++d) shape[d] = t->dims[d].off;
    if (vlmc_tensor_byte_size(t->dtype, t->rank, shape, &bytes)) total += bytes;
  }
  /* Bytes uploaded here count as the open's, not the first call's. */
  uint64_t before = p->pending_to_device;
  vlmc_status_t st = NULL;
  for (uint32_t i = 0; !st && i < p->module->num_params; ++i) {
    st = load_param_at(p, i);
    size_t bytes = 0;
    if (!st && vlmc_rt_value_bytes(&p->params[i], &bytes)) done += bytes;
    if (!st && progress) progress(ctx, p->module->params[i]->name, done, total);
  }
  p->params_uploaded += p->pending_to_device - before;
  p->pending_to_device = before;
  return st;
}

static vlmc_status_t make_constant(vlmc_program_t *p, const vlmc_op_t *op, vlmc_rt_value_t *out) {
  uint32_t id = op->results[0].id;
  if (!p->kept[id].buffer) {
    vlmc_rt_value_t shape;
    VLMC_RETURN_IF_ERROR(result_value(p, &op->results[0], &shape));
    vlmc_tensor_t host;
    VLMC_RETURN_IF_ERROR(vlmc_tensor_alloc(shape.dtype, shape.rank, shape.shape, &host));
    const vlmc_attr_t *value = vlmc_op_attr(op, "value");
    size_t n = value->v.dense.count;
    for (size_t i = 0; i < n && (int64_t)i < vlmc_tensor_count(&host); ++i) {
      if (host.dtype == VLMC_DTYPE_F32) vlmc_tensor_f32(&host)[i] = (float)value->v.dense.floats[i];
      else vlmc_tensor_i64(&host)[i] = value->v.dense.ints[i];
    }
    vlmc_status_t st = value_from_host(p, &host, &p->kept[id]);
    vlmc_tensor_release(&host);
    VLMC_RETURN_IF_ERROR(st);
  }
  *out = borrowed(&p->kept[id]);
  return NULL;
}

/* ---- host steps ---- */

/* Result 0 of a host index op from `count` computed indices: binds the length's symbol along
 * `axis` (or checks it), then moves the data to the backend. */
static vlmc_status_t host_index_result(vlmc_program_t *p, const vlmc_op_t *op, int64_t *data,
                                       size_t count, uint32_t axis, int64_t length,
                                       vlmc_rt_value_t *out) {
  const vlmc_type_t *type = &op->results[0].type;
  vlmc_status_t st = NULL;
  if (!bind_dim(p, type->dims[axis], length))
    st = vlmc_status_make(VLMC_INVALID_ARGUMENT, "computed %lld entries, which the declared "
                          "type cannot have here", (long long)length);
  vlmc_rt_value_t shape;
  if (!st) st = result_value(p, &op->results[0], &shape);
  if (!st) {
    vlmc_tensor_t host = vlmc_tensor_view(VLMC_DTYPE_I64, shape.rank, shape.shape, data);
    if (vlmc_tensor_count(&host) != (int64_t)count)
      st = vlmc_status_make(VLMC_INTERNAL, "computed %zu entries for a result of %lld", count,
                            (long long)vlmc_tensor_count(&host));
    if (!st) st = value_from_host(p, &host, out);
  }
  free(data);
  return st;
}

/* pos_interp_index / pos_interp_weight: [4, patches] of i64 corners or f32 weights. */
static vlmc_status_t run_pos_interp(vlmc_program_t *p, const vlmc_op_t *op, const int64_t *grid,
                                    size_t images, vlmc_rt_value_t *out) {
  bool weights = op->kind == VLMC_OP_POS_INTERP_WEIGHT;
  int64_t *index = NULL;
  float *weight = NULL;
  size_t count = 0;
  VLMC_RETURN_IF_ERROR(vlmc_index_pos_interp(grid, images, vlmc_op_attr_int(op, "side"),
                                             vlmc_op_attr_int(op, "merge"),
                                             weights ? NULL : &index, weights ? &weight : NULL,
                                             &count));
  if (!weights) return host_index_result(p, op, index, count, 1, (int64_t)(count / 4), out);
  const vlmc_type_t *type = &op->results[0].type;
  vlmc_status_t st = NULL;
  if (!bind_dim(p, type->dims[1], (int64_t)(count / 4)))
    st = vlmc_status_make(VLMC_INVALID_ARGUMENT, "computed %zu weights, which the declared type "
                          "cannot have here", count);
  vlmc_rt_value_t shape;
  if (!st) st = result_value(p, &op->results[0], &shape);
  if (!st) {
    vlmc_tensor_t host = vlmc_tensor_view(VLMC_DTYPE_F32, shape.rank, shape.shape, weight);
    if (vlmc_tensor_count(&host) != (int64_t)count)
      st = vlmc_status_make(VLMC_INTERNAL, "computed %zu weights for a result of %lld", count,
                            (long long)vlmc_tensor_count(&host));
    if (!st) st = value_from_host(p, &host, out);
  }
  free(weight);
  return st;
}

static vlmc_status_t run_host_index(vlmc_program_t *p, const vlmc_op_t *op, vlmc_rt_value_t *in,
                                    vlmc_rt_value_t *out) {
  vlmc_tensor_t x;
  VLMC_RETURN_IF_ERROR(vlmc_program_read(p, in, &x));
  const int64_t *v = vlmc_tensor_i64(&x);
  size_t n = x.rank ? (size_t)x.shape[0] : 1;
  int64_t *data = NULL;
  size_t count = 0;
  vlmc_status_t st = NULL;
  switch (op->kind) {
    case VLMC_OP_WINDOW_ORDER:
    case VLMC_OP_WINDOW_SEGMENTS:
      st = (op->kind == VLMC_OP_WINDOW_ORDER ? vlmc_index_window_order : vlmc_index_window_segments)(
          v, n, vlmc_op_attr_int(op, "window"), vlmc_op_attr_int(op, "patch"),
          vlmc_op_attr_int(op, "merge"), &data, &count);
      if (!st) st = host_index_result(p, op, data, count, 0, (int64_t)count, out);
      break;
    case VLMC_OP_FULL_SEGMENTS:
      st = vlmc_index_full_segments(v, n, &data, &count);
      if (!st) st = host_index_result(p, op, data, count, 0, (int64_t)count, out);
      break;
    case VLMC_OP_VISION_POSITIONS: /* [2, patches] */
      st = vlmc_index_vision_positions(v, n, vlmc_op_attr_int(op, "merge"), &data, &count);
      if (!st) st = host_index_result(p, op, data, count, 1, (int64_t)(count / 2), out);
      break;
    case VLMC_OP_POS_INTERP_INDEX:
    case VLMC_OP_POS_INTERP_WEIGHT:
      st = run_pos_interp(p, op, v, n, out);
      break;
    case VLMC_OP_TOKEN_POSITIONS: { /* where ids[i] == token: the image rows' places */
      int64_t token = vlmc_op_attr_int(op, "token");
      data = malloc((n ? n : 1) * sizeof *data);
      if (!data) st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
      for (size_t i = 0; !st && i < n; ++i)
        if (v[i] == token) data[count++] = (int64_t)i;
      if (!st) st = host_index_result(p, op, data, count, 0, (int64_t)count, out);
      break;
    }
    case VLMC_OP_INVERSE_PERMUTATION:
      data = malloc((n ? n : 1) * sizeof *data);
      st = data ? vlmc_index_inverse_permutation(v, n, data)
                : vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
      if (!st) st = host_index_result(p, op, data, n, 0, (int64_t)n, out);
      else free(data);
      break;
    default:
      st = vlmc_status_make(VLMC_INTERNAL, "not a host step");
  }
  vlmc_tensor_release(&x);
  return st;
}

static vlmc_status_t run_tap(vlmc_program_t *p, const vlmc_op_t *op, const vlmc_rt_value_t *v) {
  if (!p->on_tap) return NULL;
  vlmc_tensor_t host;
  VLMC_RETURN_IF_ERROR(vlmc_program_read(p, v, &host));
  vlmc_status_t st = p->on_tap(p->tap_ctx, vlmc_op_attr(op, "name")->v.symbol, &host);
  vlmc_tensor_release(&host);
  return st;
}

static bool is_host_index(vlmc_op_kind_t kind) {
  return kind == VLMC_OP_WINDOW_ORDER || kind == VLMC_OP_WINDOW_SEGMENTS ||
         kind == VLMC_OP_FULL_SEGMENTS || kind == VLMC_OP_VISION_POSITIONS ||
         kind == VLMC_OP_TOKEN_POSITIONS || kind == VLMC_OP_INVERSE_PERMUTATION ||
         kind == VLMC_OP_POS_INTERP_INDEX || kind == VLMC_OP_POS_INTERP_WEIGHT;
}

/* ---- regions ---- */

/* A memory-plan slot's buffer, grown (its old contents are dead) to hold `bytes`. */
static vlmc_status_t use_slot(vlmc_program_t *p, uint32_t number, size_t bytes,
                              vlmc_rt_value_t *out) {
  slot_t *slot = &p->slots[number];
  if (!slot->buffer || slot->capacity < bytes) {
    if (slot->buffer) p->iface->buffer_free(p->backend, slot->buffer);
    slot->buffer = NULL;
    slot->capacity = 0;
    VLMC_RETURN_IF_ERROR(p->iface->buffer_alloc(p->backend, bytes, &slot->buffer));
    slot->capacity = bytes;
  }
  out->buffer = slot->buffer;
  out->owned = false;
  return NULL;
}

static vlmc_status_t run_region(vlmc_program_t *p, plan_t *plan, uint32_t k,
                                vlmc_rt_value_t *values, vlmc_rt_value_t **in, bool *may_take) {
  const vlmc_dispatch_region_t *region = plan->region_at[k];
  const vlmc_op_t *root = plan->ops[k];
  const vlmc_value_t *result = &root->results[0];
  bool is_static = plan->is_static[result->id];
  if (is_static && p->kept[result->id].buffer) {
    values[result->id] = borrowed(&p->kept[result->id]);
    return NULL;
  }
  for (uint32_t i = 0; i < region->num_inputs; ++i) {
    const vlmc_value_t *v = region->inputs[i];
    in[i] = &values[v->id];
    may_take[i] = plan->last_use[v->id] == k && in[i]->owned;
  }
  vlmc_rt_value_t out;
  VLMC_RETURN_IF_ERROR(result_value(p, result, &out));
  size_t bytes;
  if (!vlmc_rt_value_bytes(&out, &bytes))
    return vlmc_status_make(VLMC_OUT_OF_RANGE, "the result is too large");
  if (root->slot) VLMC_RETURN_IF_ERROR(use_slot(p, root->slot, bytes, &out));
  vlmc_region_call_t call = {plan->func, region->id, in, may_take, region->num_inputs,
                             p->symbols, &out};
  vlmc_status_t st = p->iface->run_region(p->backend, &call);
  if (!st && !out.buffer && bytes)
    st = vlmc_status_make(VLMC_INTERNAL, "dispatch region %u produced no data", region->id);
  if (st) {
    vlmc_rt_value_release(p->backend, &out);
    return st;
  }
  plan->bytes[region - plan->regions.regions] = bytes;
  if (is_static) {
    assert(out.owned || !out.buffer); /* a kept value has no slot */
    p->kept[result->id] = out;
    out = borrowed(&out);
  }
  values[result->id] = out;
  return NULL;
}

/* ---- results ---- */

/* An owned copy of v. */
static vlmc_status_t copy_value(vlmc_program_t *p, const vlmc_rt_value_t *v, vlmc_rt_value_t *out) {
  vlmc_tensor_t host;
  VLMC_RETURN_IF_ERROR(vlmc_program_read(p, v, &host));
  vlmc_status_t st = value_from_host(p, &host, out);
  vlmc_tensor_release(&host);
  return st;
}

static vlmc_status_t take_results(vlmc_program_t *p, const vlmc_op_t *ret, vlmc_rt_value_t *values,
                                  vlmc_rt_value_t *results) {
  for (uint32_t i = 0; i < ret->num_operands; ++i) {
    vlmc_rt_value_t *v = &values[ret->operands[i]->id];
    bool repeated = false;
    for (uint32_t j = i + 1; j < ret->num_operands; ++j) repeated |= ret->operands[j] == ret->operands[i];
    if (v->owned && !repeated) {
      results[i] = *v;
      memset(v, 0, sizeof *v);
      continue;
    }
    vlmc_status_t st = copy_value(p, v, &results[i]);
    if (st) {
      for (uint32_t j = 0; j < i; ++j) vlmc_rt_value_release(p->backend, &results[j]);
      return st;
    }
  }
  return NULL;
}

/* ---- the walk ---- */

static vlmc_status_t no_kernel(void) {
  return vlmc_status_make(VLMC_UNSUPPORTED,
                          "no kernel: the op is in no dispatch region, and a backend with "
                          "kernels never falls back to the reference interpreter (run the fuse "
                          "pass)");
}

static vlmc_status_t run_op(vlmc_program_t *p, const vlmc_op_t *op, vlmc_rt_value_t *values) {
  vlmc_rt_value_t *result = op->num_results ? &values[op->results[0].id] : NULL;
  if (op->kind == VLMC_OP_PARAM) return load_param(p, op, result);
  if (op->kind == VLMC_OP_CONSTANT) return make_constant(p, op, result);
  if (op->kind == VLMC_OP_TAP) return run_tap(p, op, &values[op->operands[0]->id]);
  if (is_host_index(op->kind)) return run_host_index(p, op, &values[op->operands[0]->id], result);
  if (vlmc_dispatch_may_contain(op->kind)) return no_kernel();
  return vlmc_status_make(VLMC_UNSUPPORTED, "the runtime has no host step for this op");
}

static void release_dead(vlmc_program_t *p, const plan_t *plan, uint32_t k, const vlmc_op_t *op,
                         vlmc_rt_value_t *values) {
  const vlmc_dispatch_region_t *region = plan->region_at[k];
  uint32_t n = region ? region->num_inputs : op->num_operands;
  for (uint32_t i = 0; i < n; ++i) {
    const vlmc_value_t *v = region ? region->inputs[i] : op->operands[i];
    if (plan->last_use[v->id] == k) vlmc_rt_value_release(p->backend, &values[v->id]);
  }
  for (uint32_t i = 0; i < op->num_results; ++i)
    if (plan->last_use[op->results[i].id] == UINT32_MAX)
      vlmc_rt_value_release(p->backend, &values[op->results[i].id]);
}

static vlmc_status_t walk(vlmc_program_t *p, plan_t *plan, vlmc_rt_value_t *values,
                          vlmc_rt_value_t *results) {
  uint32_t most = 1;
  for (uint32_t r = 0; r < plan->regions.num_regions; ++r)
    if (plan->regions.regions[r].num_inputs > most) most = plan->regions.regions[r].num_inputs;
  vlmc_rt_value_t **in = calloc(most, sizeof *in);
  bool *may_take = calloc(most, sizeof *may_take);
  vlmc_status_t st = in && may_take ? NULL : vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  uint32_t steps = 0, done = 0;
  for (uint32_t k = 0; p->on_step && k < plan->num_ops; ++k)
    steps += plan->ops[k]->kind != VLMC_OP_RETURN && !(plan->member[k] && !plan->region_at[k]);
  for (uint32_t k = 0; !st && k < plan->num_ops; ++k) {
    const vlmc_op_t *op = plan->ops[k];
    if (op->kind == VLMC_OP_RETURN) {
      st = take_results(p, op, values, results);
      break;
    }
    if (plan->member[k] && !plan->region_at[k]) continue; /* inside its region's kernel */
    st = plan->region_at[k] ? run_region(p, plan, k, values, in, may_take) : run_op(p, op, values);
    if (st) st = vlmc_op_locate_error(op, st);
    else release_dead(p, plan, k, op, values);
    if (!st && p->on_step) p->on_step(p->step_ctx, ++done, steps);
  }
  free(in);
  free(may_take);
  return st;
}

static vlmc_status_t run_function(vlmc_program_t *p, const char *name, vlmc_rt_value_t *args,
                                  uint32_t num_args, vlmc_rt_value_t *results,
                                  uint32_t num_results) {
  vlmc_function_call_t call = {name, args, num_args, results, num_results, p->on_tap, p->tap_ctx};
  return p->iface->run_function(p->backend, &call);
}

vlmc_status_t vlmc_program_run(vlmc_program_t *p, const char *name, vlmc_rt_value_t *args,
                               uint32_t num_args, vlmc_rt_value_t *results,
                               uint32_t num_results) {
  for (uint32_t i = 0; i < num_results; ++i) memset(&results[i], 0, sizeof *results);
  const vlmc_func_t *func = vlmc_module_func_find(p->module, name);
  vlmc_status_t st = vlmc_func_check_call(func, name, num_args, num_results);
  size_t f = 0;
  plan_t *plan = NULL;
  if (!st && !(p->iface->caps & VLMC_BACKEND_RUNS_FUNCTIONS)) st = get_plan(p, func, &f, &plan);
  else if (!st) while (p->module->funcs[f] != func) ++f;
  if (st) {
    for (uint32_t i = 0; i < num_args; ++i) vlmc_rt_value_release(p->backend, &args[i]);
    return st;
  }
  /* Arguments imported just before count for this call, as do results read after it (until
   * the next call). */
  p->transfers[f].bytes_to_device += p->pending_to_device;
  p->pending_to_device = 0;
  p->current = f;
  p->transfers[f].calls++;
  p->in_call = true;
  if (!plan) {
    st = run_function(p, name, args, num_args, results, num_results);
    p->in_call = false;
    return st;
  }
  for (uint32_t i = 0; i < p->module->num_symbols; ++i) p->bound[i] = false;
  size_t nv = p->module->next_value_id + 1;
  vlmc_rt_value_t *values = calloc(nv, sizeof *values);
  st = values ? bind_args(p, func, args, values)
              : vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (uint32_t i = 0; i < num_args; ++i) vlmc_rt_value_release(p->backend, &args[i]);
  if (!st) st = walk(p, plan, values, results);
  if (!st && p->iface->synchronize) st = p->iface->synchronize(p->backend);
  for (size_t i = 0; values && i < nv; ++i) vlmc_rt_value_release(p->backend, &values[i]);
  free(values);
  p->in_call = false;
  if (st)
    for (uint32_t i = 0; i < num_results; ++i) vlmc_rt_value_release(p->backend, &results[i]);
  return st;
}

/* ---- stats ---- */

const vlmc_program_transfers_t *vlmc_program_transfers(const vlmc_program_t *p,
                                                       size_t *out_count) {
  *out_count = p->module->num_funcs;
  return p->transfers;
}

/* The most bytes of region outputs live at one position of the function's last call. */
static size_t largest_live_set(const plan_t *plan) {
  uint32_t n = plan->regions.num_regions;
  size_t best = 0;
  for (uint32_t r = 0; r < n; ++r) { /* a maximum is reached where some output starts */
    size_t live = 0;
    for (uint32_t q = 0; q < n; ++q)
      if (plan->first[q] <= plan->first[r] && plan->last[q] >= plan->first[r] && !plan->escapes[q])
        live += plan->bytes[q];
    if (live > best) best = live;
  }
  return best;
}

void vlmc_program_memory(const vlmc_program_t *p, vlmc_program_memory_t *out) {
  memset(out, 0, sizeof *out);
  out->slots = p->num_slots;
  out->params_uploaded = p->params_uploaded;
  for (uint32_t s = 1; s <= p->num_slots; ++s) out->slot_bytes += p->slots[s].capacity;
  for (uint32_t f = 0; f < p->module->num_funcs; ++f) {
    if (!p->plans[f]) continue;
    size_t live = largest_live_set(p->plans[f]);
    if (live > out->largest_live_set) out->largest_live_set = live;
  }
}
