/* Module access and effects: param (through the caller's callback, converted once and cached;
 * a raw parameter keeps its bf16 / f16 storage), constant, tap, and return (which the
 * interpreter loop handles itself). */
#include <assert.h>
#include <string.h>

#include "reference/exec_internal.h"
#include "support/strbuf.h"

static vlmc_status_t param_shape_error(vlmc_ref_ctx_t *ctx, const vlmc_param_t *param,
                                       const vlmc_tensor_t *view) {
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  vlmc_type_print(ctx->ex->module, &param->type, &text);
  vlmc_strbuf_printf(&text, ", got %s data of shape [",
                     view->dtype >= 0 && view->dtype < VLMC_DTYPE_COUNT
                         ? vlmc_dtype_info(view->dtype)->name : "?");
  for (uint32_t i = 0; i < view->rank && i < VLMC_IR_MAX_RANK; ++i)
    vlmc_strbuf_printf(&text, "%s%lld", i ? ", " : "", (long long)view->shape[i]);
  vlmc_strbuf_putc(&text, ']');
  vlmc_status_t st = vlmc_ref_fail(ctx, VLMC_INVALID_ARGUMENT, "param @%s: expected %s",
                                   param->name, vlmc_strbuf_cstr(&text));
  vlmc_strbuf_deinit(&text);
  return st;
}

static vlmc_status_t load_param(vlmc_ref_ctx_t *ctx, int32_t index) {
  vlmc_executor_t *ex = ctx->ex;
  const vlmc_param_t *param = ex->module->params[index];
  if (!ex->options.get_param)
    return vlmc_ref_fail(ctx, VLMC_NOT_FOUND, "param @%s: the executor has no parameter source "
                         "(options.get_param)", param->name);
  vlmc_tensor_t view;
  memset(&view, 0, sizeof view);
  vlmc_status_t st = ex->options.get_param(ex->options.param_ctx, param->name, &param->type, &view);
  if (st) return vlmc_ref_locate(ctx, vlmc_status_annotate(st, "param @%s: ", param->name));
  bool same = view.rank == param->type.rank;
  for (uint32_t i = 0; same && i < view.rank; ++i)
    same = view.shape[i] == param->type.dims[i].off; /* parameters have static shapes */
  if (!same) {
    st = param_shape_error(ctx, param, &view);
    vlmc_tensor_release(&view);
    return st;
  }
  char what[300];
  snprintf(what, sizeof what, "param @%s", param->name);
  st = vlmc_ref_convert_input(ex, &view, param->type.dtype, what, ex->param_raw[index],
                              &ex->params[index]);
  vlmc_tensor_release(&view); /* frees an owned view that was converted, not one taken */
  if (st) return vlmc_ref_locate(ctx, st);
  ex->param_loaded[index] = true;
  return NULL;
}

vlmc_status_t vlmc_ref_eval_PARAM(vlmc_ref_ctx_t *ctx) {
  int32_t index = ctx->plan->param_index[ctx->op_index];
  assert(index >= 0); /* the verifier resolved the name */
  if (!ctx->ex->param_loaded[index]) VLMC_RETURN_IF_ERROR(load_param(ctx, index));
  const vlmc_tensor_t *p = &ctx->ex->params[index];
  ctx->out[0] = vlmc_tensor_view(p->dtype, p->rank, p->shape, p->data);
  return NULL;
}

vlmc_status_t vlmc_ref_eval_CONSTANT(vlmc_ref_ctx_t *ctx) {
  const vlmc_attr_t *value = vlmc_op_attr(ctx->op, "value");
  VLMC_RETURN_IF_ERROR(vlmc_ref_result_alloc(ctx, 0));
  vlmc_tensor_t *out = &ctx->out[0];
  size_t n = value->v.dense.count;
  assert((int64_t)n == vlmc_tensor_count(out));
  if (out->dtype == VLMC_DTYPE_F32)
    for (size_t i = 0; i < n; ++i) vlmc_tensor_f32(out)[i] = (float)value->v.dense.floats[i];
  else
    for (size_t i = 0; i < n; ++i) vlmc_tensor_i64(out)[i] = value->v.dense.ints[i];
  return NULL;
}

/* `tap @name %x`: hands the value to the caller's tap callback (a no-op without one). */
vlmc_status_t vlmc_ref_eval_TAP(vlmc_ref_ctx_t *ctx) {
  const vlmc_executor_options_t *o = &ctx->ex->options;
  if (!o->on_tap) return NULL;
  const char *name = vlmc_op_attr(ctx->op, "name")->v.symbol;
  return vlmc_ref_locate(ctx, o->on_tap(o->tap_ctx, name, ctx->op, ctx->in[0]));
}

vlmc_status_t vlmc_ref_eval_RETURN(vlmc_ref_ctx_t *ctx) {
  assert(!"the interpreter loop handles return");
  return NULL;
}
