/* quantize: vlmc's own affine group quantization of linear weights (`vlmc compile --quantize
 * q4[:gN]`, docs/quantization.md). Every `linear` whose weight is a 2-D checkpoint parameter
 * (read directly in f32, or through its widening cast) in a function not listed in `skip` gets
 * `dequantize(packed, scales, biases)` of three new parameters instead, named after the source
 * (passes/quantize.h), which the compiler makes from the checkpoint tensor when it writes the
 * artifact (reference/tensor.h: vlmc_quantize_affine_row, f16 scales and biases). fuse then
 * makes each dequantize its linear's prologue, so the kernels read the packed words. The
 * default skips `encode_image` (the vision tower and merger stay in their dtype; `--quantize-
 * vision` clears it). Embedding gathers keep their table: a tied lm_head gets a quantized
 * copy of the embedding for its linear, the gather reads the original.
 *
 * Requires: verified IR, before precision (which then sees the dequantize ops). Follow it with
 * dce{prune-params=true}: the replaced weights' params and casts are left dead. Statistics:
 * linears quantized, weights (elements) quantized. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"
#include "passes/quantize.h"

enum { STAT_LINEARS, STAT_WEIGHTS };

static const char *const quantize_statistics[] = {"linears-quantized", "weights-quantized"};

static const vlmc_pass_option_t quantize_options[] = {
    {"bits", VLMC_PASS_OPTION_INT, "4", "bits per weight: 4 or 8"},
    {"group", VLMC_PASS_OPTION_INT, "64",
     "weights sharing a scale and a bias along the input dimension (a multiple of 32 / bits)"},
    {"skip", VLMC_PASS_OPTION_STRING, "encode_image",
     "functions whose linears stay unquantized, separated by '+' (none: quantize all)"},
};

static const char *const kParts[] = {"packed", "scales", "biases"};

bool vlmc_quantized_param_name(const char *source, int64_t bits, int64_t group,
                               vlmc_quant_part_t part, char *out, size_t cap) {
  int n = snprintf(out, cap, "%s.vlmc-q%lldg%lld.%s", source, (long long)bits, (long long)group,
                   kParts[part]);
  return n > 0 && (size_t)n < cap;
}

bool vlmc_quantized_param_parse(const char *name, char *source, size_t cap, int64_t *bits,
                                int64_t *group, vlmc_quant_part_t *part) {
  const char *mark = strstr(name, ".vlmc-q");
  if (!mark) return false;
  while (strstr(mark + 1, ".vlmc-q")) mark = strstr(mark + 1, ".vlmc-q");
  long long b = 0, g = 0;
  int used = 0;
  if (sscanf(mark, ".vlmc-q%lldg%lld.%n", &b, &g, &used) != 2 || used == 0) return false;
  for (int p = 0; p < 3; ++p) {
    if (strcmp(mark + used, kParts[p]) != 0) continue;
    size_t len = (size_t)(mark - name);
    if (len == 0 || len >= cap) return false;
    memcpy(source, name, len);
    source[len] = '\0';
    *bits = b;
    *group = g;
    *part = (vlmc_quant_part_t)p;
    return true;
  }
  return false;
}

typedef struct {
  vlmc_pass_context_t *ctx;
  vlmc_module_t *module;
  int64_t bits, group;
} quantize_t;

/* Whether function `name` is one of the '+'-separated `skip` list. */
static bool skipped(const char *skip, const char *name) {
  size_t len = strlen(name);
  for (const char *p = skip; *p;) {
    size_t n = strcspn(p, "+");
    if (n == len && !strncmp(p, name, len)) return true;
    p += n + (p[n] == '+');
  }
  return false;
}

/* The checkpoint parameter a linear's weight is (directly in f32, or through a widening
 * cast); NULL when it is anything else (computed, already quantized, not 2-D static). */
static const vlmc_op_t *weight_param(const vlmc_value_t *w) {
  const vlmc_op_t *def = w->def;
  if (def && def->kind == VLMC_OP_CAST && def->operands[0]->def) def = def->operands[0]->def;
  if (!def || def->kind != VLMC_OP_PARAM) return NULL;
  const vlmc_type_t *t = &def->results[0].type;
  if (t->rank != 2 || !vlmc_dim_is_static(t->dims[0]) || !vlmc_dim_is_static(t->dims[1]))
    return NULL;
  if (!vlmc_dtype_info(t->dtype)->is_float || vlmc_dtype_info(t->dtype)->is_quantized) return NULL;
  return def;
}

/* Declares part `part` of `source` ([rows, cols]) in the module, once. */
static vlmc_status_t declare_part(const quantize_t *q, const char *source, int64_t rows,
                                  int64_t cols, vlmc_quant_part_t part, char *name, size_t cap) {
  if (!vlmc_quantized_param_name(source, q->bits, q->group, part, name, cap))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "quantize: parameter name '%s' is too long",
                            source);
  if (vlmc_module_param_find(q->module, name)) return NULL;
  vlmc_quant_layout_t layout = vlmc_quant_layout(q->bits, q->group, cols);
  int64_t shape[2] = {rows, part == VLMC_QUANT_PACKED ? layout.words : layout.groups};
  vlmc_type_t type = vlmc_type_make(part == VLMC_QUANT_PACKED ? VLMC_DTYPE_U32 : VLMC_DTYPE_F16,
                                    2, shape);
  return vlmc_module_param_add(q->module, name, &type, NULL);
}

static vlmc_status_t quantize_linear(const quantize_t *q, vlmc_func_t *func, vlmc_op_t *linear,
                                     const vlmc_op_t *param) {
  const char *source = vlmc_op_attr(param, "name")->v.symbol;
  const vlmc_type_t *t = &param->results[0].type;
  int64_t rows = t->dims[0].off, cols = t->dims[1].off;
  vlmc_builder_t b;
  vlmc_builder_init(&b, func);
  vlmc_builder_set_insert_before(&b, linear);
  vlmc_value_t *operands[3];
  for (int part = 0; part < 3; ++part) {
    char name[512];
    VLMC_RETURN_IF_ERROR(declare_part(q, source, rows, cols, (vlmc_quant_part_t)part, name,
                                      sizeof name));
    VLMC_RETURN_IF_ERROR(vlmc_builder_param(&b, name, NULL, &operands[part]));
  }
  vlmc_named_attr_t attrs[3] = {{"bits", vlmc_attr_int(q->bits)},
                                {"group", vlmc_attr_int(q->group)},
                                {"cols", vlmc_attr_int(cols)}};
  vlmc_op_t *dq;
  VLMC_RETURN_IF_ERROR(vlmc_builder_op(&b, VLMC_OP_DEQUANTIZE, 3, operands, 3, attrs, NULL, NULL,
                                       &dq));
  vlmc_op_set_operand(linear, 1, &dq->results[0]);
  vlmc_pass_stat_add(q->ctx, STAT_LINEARS, 1);
  vlmc_pass_stat_add(q->ctx, STAT_WEIGHTS, (uint64_t)(rows * cols));
  return NULL;
}

static vlmc_status_t quantize_run(vlmc_pass_context_t *ctx, vlmc_module_t *module) {
  quantize_t q = {ctx, module, vlmc_pass_option_int(ctx, "bits"),
                  vlmc_pass_option_int(ctx, "group")};
  if (q.bits != 4 && q.bits != 8)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "quantize: option 'bits' is %lld; expected 4 "
                            "or 8", (long long)q.bits);
  if (q.group < 32 / q.bits || q.group > 4096 || q.group % (32 / q.bits))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "quantize: option 'group' is %lld; expected a multiple of %lld from "
                            "%lld to 4096", (long long)q.group, (long long)(32 / q.bits),
                            (long long)(32 / q.bits));
  const char *skip = vlmc_pass_option_string(ctx, "skip");
  for (uint32_t f = 0; f < module->num_funcs; ++f) {
    vlmc_func_t *func = module->funcs[f];
    if (skipped(skip, func->name)) continue;
    for (vlmc_op_t *op = func->body.first; op; op = op->next) {
      if (op->kind != VLMC_OP_LINEAR) continue;
      const vlmc_op_t *param = weight_param(op->operands[1]);
      if (param) VLMC_RETURN_IF_ERROR(vlmc_op_locate_error(op, quantize_linear(&q, func, op, param)));
    }
  }
  return NULL;
}

const vlmc_pass_t vlmc_pass_quantize = {
    .name = "quantize",
    .summary = "affine group quantization of linear weights (dequantize as the linear loads)",
    .options = quantize_options,
    .num_options = sizeof quantize_options / sizeof quantize_options[0],
    .statistics = quantize_statistics,
    .num_statistics = sizeof quantize_statistics / sizeof quantize_statistics[0],
    .run = quantize_run,
};
