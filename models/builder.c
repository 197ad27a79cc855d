/* The graph helpers every model family's builder shares (models/builder.h). */
#include "models/builder.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "frontend/checkpoint.h"

void vlmc_model_name(char *out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out, VLMC_MODEL_NAME_MAX, fmt, ap);
  va_end(ap);
  assert(n >= 0 && n < VLMC_MODEL_NAME_MAX && "tensor and value names are short");
  (void)n;
}

/* ---- tensors ---------------------------------------------------------------------------- */

static const char *table_source(const vlmc_model_tensors_t *t) {
  return t->source ? t->source : "the tensor table";
}

static void shape_print(char *out, size_t size, uint32_t rank, const int64_t *shape) {
  size_t n = (size_t)snprintf(out, size, "[");
  for (uint32_t i = 0; i < rank && n < size; ++i)
    n += (size_t)snprintf(out + n, size - n, i ? ",%lld" : "%lld", (long long)shape[i]);
  if (n < size) snprintf(out + n, size - n, "]");
}

/* Looks the tensor up under its hub name, then under the other spelling. */
static vlmc_status_t tensor_find(const vlmc_model_builder_t *m, const char *name,
                                 vlmc_model_tensor_info_t *out_info) {
  const vlmc_model_tensors_t *t = m->tensors;
  memset(out_info, 0, sizeof *out_info);
  if (t->find(t->user, name, out_info)) return NULL;
  char other[VLMC_MODEL_NAME_MAX + 32], tried[3 * (VLMC_MODEL_NAME_MAX + 36)] = "";
  size_t used = 0;
  for (int k = 0; vlmc_checkpoint_alternate_name_at(name, k, other, sizeof other); ++k) {
    if (t->find(t->user, other, out_info)) return NULL;
    used += (size_t)snprintf(tried + used, sizeof tried - used, "%s'%s'", k ? ", " : " (also tried ",
                             other);
    if (used >= sizeof tried) used = sizeof tried - 1;
  }
  return vlmc_status_make(VLMC_NOT_FOUND, "tensor '%s' not found%s%s in %s", name, tried,
                          tried[0] ? ")" : "", table_source(t));
}

static vlmc_status_t tensor_check(const vlmc_model_builder_t *m, const char *name,
                                  const vlmc_model_tensor_info_t *info, uint32_t rank,
                                  const int64_t *shape) {
  const char *source = table_source(m->tensors);
  if (info->dtype < 0 || info->dtype >= VLMC_DTYPE_COUNT || !vlmc_dtype_info(info->dtype)->is_float)
    return vlmc_status_make(VLMC_UNSUPPORTED,
                            "%s: tensor '%s' has dtype %s; expected f32, f16 or bf16", source, name,
                            info->dtype >= 0 && info->dtype < VLMC_DTYPE_COUNT
                                ? vlmc_dtype_info(info->dtype)->name
                                : "(one vlmc does not read)");
  bool same = info->rank == rank;
  for (uint32_t i = 0; same && i < rank; ++i) same = info->shape[i] == shape[i];
  if (same) return NULL;
  char got[160], want[160];
  shape_print(got, sizeof got, info->rank < VLMC_IR_MAX_RANK ? info->rank : VLMC_IR_MAX_RANK,
              info->shape);
  shape_print(want, sizeof want, rank, shape);
  return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                          "%s: tensor '%s' has shape %s, config.json implies %s", source, name, got,
                          want);
}

bool vlmc_model_tensor_info(const vlmc_model_builder_t *m, const char *name,
                            vlmc_model_tensor_info_t *out_info) {
  vlmc_status_t st = tensor_find(m, name, out_info);
  vlmc_status_free(st);
  return st == NULL;
}

vlmc_status_t vlmc_model_check_tensor(const vlmc_model_builder_t *m, const char *name,
                                      uint32_t rank, const int64_t *shape) {
  assert(rank <= VLMC_IR_MAX_RANK);
  vlmc_model_tensor_info_t info;
  VLMC_RETURN_IF_ERROR(tensor_find(m, name, &info));
  if (m->quant_bits > 0 && info.dtype == VLMC_DTYPE_U32 && rank == 2) {
    /* packed words; quantized_weight checks its scales and biases when it reads them */
    int64_t words[2] = {shape[0], vlmc_quant_layout(m->quant_bits, m->quant_group, shape[1]).words};
    info.dtype = VLMC_DTYPE_F32;
    return tensor_check(m, name, &info, 2, words);
  }
  return tensor_check(m, name, &info, rank, shape);
}

/* Whether the table has block `index`'s tensor (under either spelling); `name` gets its hub
 * name. */
static bool has_block(const vlmc_model_builder_t *m, const char *prefix, int64_t index,
                      const char *suffix, char name[VLMC_MODEL_NAME_MAX]) {
  vlmc_model_name(name, "%s%lld%s", prefix, (long long)index, suffix);
  vlmc_model_tensor_info_t info;
  vlmc_status_t status = tensor_find(m, name, &info);
  bool found = status == NULL;
  vlmc_status_free(status);
  return found;
}

/* The last block present, given that block `present` is and block `absent` is not
 * (present < absent): bisection, assuming blocks 0..last are all there. */
static int64_t last_block(const vlmc_model_builder_t *m, const char *prefix, const char *suffix,
                          int64_t present, int64_t absent) {
  char name[VLMC_MODEL_NAME_MAX];
  while (absent - present > 1) {
    int64_t mid = present + (absent - present) / 2;
    if (has_block(m, prefix, mid, suffix, name)) present = mid;
    else absent = mid;
  }
  return present;
}

vlmc_status_t vlmc_model_require_blocks(const vlmc_model_builder_t *m, const char *field,
                                        int64_t count, const char *prefix, const char *suffix) {
  char missing[VLMC_MODEL_NAME_MAX];
  if (count <= 0 || has_block(m, prefix, count - 1, suffix, missing)) return NULL;
  const char *source = table_source(m->tensors);
  if (!has_block(m, prefix, 0, suffix, missing))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "config.json: %s is %lld, but %s has no block 0 (%s is absent)", field,
                            (long long)count, source, missing);
  int64_t present = 0, absent = count - 1;
  /* Doubling first keeps a small checkpoint's answer to a few lookups even for a huge count. */
  for (int64_t probe = 1; probe < absent; probe = probe <= absent / 2 ? probe * 2 + 1 : absent) {
    if (!has_block(m, prefix, probe, suffix, missing)) {
      absent = probe;
      break;
    }
    present = probe;
  }
  int64_t last = last_block(m, prefix, suffix, present, absent);
  vlmc_model_name(missing, "%s%lld%s", prefix, (long long)last + 1, suffix);
  return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                          "config.json: %s is %lld, but %s has blocks 0 to %lld only (%s is "
                          "absent)",
                          field, (long long)count, source, (long long)last, missing);
}

vlmc_status_t vlmc_model_param(vlmc_model_builder_t *m, const char *name, uint32_t rank,
                               const int64_t *shape, vlmc_value_t **out_value) {
  assert(rank <= VLMC_IR_MAX_RANK);
  if (!vlmc_module_param_find(m->module, name)) {
    vlmc_model_tensor_info_t info;
    VLMC_RETURN_IF_ERROR(tensor_find(m, name, &info));
    VLMC_RETURN_IF_ERROR(tensor_check(m, name, &info, rank, shape));
    vlmc_type_t type = vlmc_type_make(info.dtype, rank, shape);
    VLMC_RETURN_IF_ERROR(vlmc_module_param_add(m->module, name, &type, NULL));
  }
  return vlmc_builder_param(&m->b, name, NULL, out_value);
}

/* A quantized tensor's part `name` (packed words, scales or biases): added to the module
 * after checking its dtype (u32 for the words, a float for the others) and shape. */
static vlmc_status_t quantized_part(vlmc_model_builder_t *m, const char *name, bool words,
                                    const int64_t shape[2], const char *what,
                                    vlmc_value_t **out_value) {
  if (!vlmc_module_param_find(m->module, name)) {
    vlmc_model_tensor_info_t info;
    VLMC_RETURN_IF_ERROR(tensor_find(m, name, &info));
    const char *source = table_source(m->tensors);
    bool dtype_ok = words ? info.dtype == VLMC_DTYPE_U32
                          : info.dtype >= 0 && info.dtype < VLMC_DTYPE_COUNT &&
                                vlmc_dtype_info(info.dtype)->is_float;
    if (!dtype_ok)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: quantized tensor '%s' has dtype %s; "
                              "expected %s", source, name,
                              info.dtype >= 0 && info.dtype < VLMC_DTYPE_COUNT
                                  ? vlmc_dtype_info(info.dtype)->name : "(one vlmc does not read)",
                              words ? "u32 (packed words)" : "f32, f16 or bf16");
    if (info.rank != 2 || info.shape[0] != shape[0] || info.shape[1] != shape[1]) {
      char got[160], want[160];
      shape_print(got, sizeof got, info.rank < VLMC_IR_MAX_RANK ? info.rank : VLMC_IR_MAX_RANK,
                  info.shape);
      shape_print(want, sizeof want, 2, shape);
      return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                              "%s: quantized tensor '%s' has shape %s; %s at %lld bits, group "
                              "size %lld (config.json's quantization) imply %s", source, name, got,
                              what, (long long)m->quant_bits, (long long)m->quant_group, want);
    }
    vlmc_type_t type = vlmc_type_make(info.dtype, 2, shape);
    VLMC_RETURN_IF_ERROR(vlmc_module_param_add(m->module, name, &type, NULL));
  }
  return vlmc_builder_param(&m->b, name, NULL, out_value);
}

/* Whether `name` ("X.weight") is stored quantized: the checkpoint is, and the tensor's dtype
 * is u32. */
static bool is_quantized_weight(const vlmc_model_builder_t *m, const char *name) {
  if (m->quant_bits <= 0) return false;
  vlmc_model_tensor_info_t info;
  vlmc_status_t st = tensor_find(m, name, &info);
  bool packed = !st && info.dtype == VLMC_DTYPE_U32;
  vlmc_status_free(st);
  return packed;
}

/* dequantize(X.weight, X.scales, X.biases) for a quantized 2-D weight `name` = "X.weight". */
static vlmc_status_t quantized_weight(vlmc_model_builder_t *m, const char *name, uint32_t rank,
                                      const int64_t *shape, vlmc_value_t **out_value) {
  size_t len = strlen(name);
  if (rank != 2 || len < 7 || strcmp(name + len - 7, ".weight") != 0)
    return vlmc_status_make(VLMC_UNSUPPORTED,
                            "%s: tensor '%s' is stored as packed u32 words, but only 2-D '.weight' "
                            "tensors may be quantized", table_source(m->tensors), name);
  int64_t cols = shape[1];
  /* MLX quantizes only rows that are whole groups; checking it also pins the group size (a
   * wrong one could give the same ceil(cols / group) scale count: 256 in groups of 72 or 64) */
  if (cols % m->quant_group != 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "%s: quantized tensor '%s' has rows of %lld weights, not a multiple of "
                            "config.json's quantization.group_size %lld (MLX quantizes whole groups "
                            "only)", table_source(m->tensors), name, (long long)cols,
                            (long long)m->quant_group);
  vlmc_quant_layout_t layout = vlmc_quant_layout(m->quant_bits, m->quant_group, cols);
  int64_t words[2] = {shape[0], layout.words}, groups[2] = {shape[0], layout.groups};
  char scales_name[VLMC_MODEL_NAME_MAX], biases_name[VLMC_MODEL_NAME_MAX];
  vlmc_model_name(scales_name, "%.*s.scales", (int)(len - 7), name);
  vlmc_model_name(biases_name, "%.*s.biases", (int)(len - 7), name);
  char what[64];
  snprintf(what, sizeof what, "[%lld, %lld] weights", (long long)shape[0], (long long)cols);
  vlmc_value_t *operands[3];
  VLMC_RETURN_IF_ERROR(quantized_part(m, name, true, words, what, &operands[0]));
  VLMC_RETURN_IF_ERROR(quantized_part(m, scales_name, false, groups, what, &operands[1]));
  VLMC_RETURN_IF_ERROR(quantized_part(m, biases_name, false, groups, what, &operands[2]));
  if (operands[1]->type.dtype != operands[2]->type.dtype)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: '%s' is %s but '%s' is %s; a quantized "
                            "tensor's scales and biases share one dtype", table_source(m->tensors),
                            scales_name, vlmc_dtype_info(operands[1]->type.dtype)->name,
                            biases_name, vlmc_dtype_info(operands[2]->type.dtype)->name);
  vlmc_named_attr_t attrs[3] = {{"bits", vlmc_attr_int(m->quant_bits)},
                                {"group", vlmc_attr_int(m->quant_group)},
                                {"cols", vlmc_attr_int(cols)}};
  vlmc_op_t *op;
  VLMC_RETURN_IF_ERROR(vlmc_builder_op(&m->b, VLMC_OP_DEQUANTIZE, 3, operands, 3, attrs, NULL,
                                       NULL, &op));
  *out_value = &op->results[0];
  return NULL;
}

vlmc_status_t vlmc_model_weight(vlmc_model_builder_t *m, const char *name, uint32_t rank,
                                const int64_t *shape, vlmc_value_t **out_value) {
  if (is_quantized_weight(m, name)) return quantized_weight(m, name, rank, shape, out_value);
  vlmc_value_t *raw;
  VLMC_RETURN_IF_ERROR(vlmc_model_param(m, name, rank, shape, &raw));
  if (raw->type.dtype == VLMC_DTYPE_F32) {
    *out_value = raw;
    return NULL;
  }
  return vlmc_builder_cast(&m->b, raw, VLMC_DTYPE_F32, NULL, out_value);
}

/* ---- layers ----------------------------------------------------------------------------- */

/* `prefix.bias` [dim] in f32 when `bias`; NULL otherwise. */
static vlmc_status_t optional_bias(vlmc_model_builder_t *m, const char *prefix, int64_t dim,
                                   bool bias, vlmc_value_t **out_bias) {
  *out_bias = NULL;
  if (!bias) return NULL;
  char name[VLMC_MODEL_NAME_MAX];
  vlmc_model_name(name, "%s.bias", prefix);
  return vlmc_model_weight(m, name, 1, &dim, out_bias);
}

vlmc_status_t vlmc_model_linear(vlmc_model_builder_t *m, vlmc_value_t *x, const char *prefix,
                                int64_t out, int64_t in, bool bias, const char *name,
                                vlmc_value_t **out_value) {
  char wname[VLMC_MODEL_NAME_MAX];
  int64_t wshape[2] = {out, in};
  vlmc_value_t *w, *b;
  vlmc_model_name(wname, "%s.weight", prefix);
  VLMC_RETURN_IF_ERROR(vlmc_model_weight(m, wname, 2, wshape, &w));
  VLMC_RETURN_IF_ERROR(optional_bias(m, prefix, out, bias, &b));
  return vlmc_builder_linear(&m->b, x, w, b, name, out_value);
}

vlmc_status_t vlmc_model_swiglu(vlmc_model_builder_t *m, vlmc_value_t *x, const char *prefix,
                                int64_t hidden, int64_t inner, bool bias, const char *name,
                                vlmc_value_t **out_value) {
  char sub[VLMC_MODEL_NAME_MAX];
  vlmc_value_t *gate, *up, *act, *prod;
  vlmc_model_name(sub, "%s.gate_proj", prefix);
  VLMC_RETURN_IF_ERROR(vlmc_model_linear(m, x, sub, inner, hidden, bias, NULL, &gate));
  vlmc_model_name(sub, "%s.up_proj", prefix);
  VLMC_RETURN_IF_ERROR(vlmc_model_linear(m, x, sub, inner, hidden, bias, NULL, &up));
  VLMC_RETURN_IF_ERROR(vlmc_builder_simple(&m->b, VLMC_OP_SILU, 1, &gate, NULL, &act));
  VLMC_RETURN_IF_ERROR(vlmc_model_binary(m, VLMC_OP_MUL, act, up, NULL, &prod));
  vlmc_model_name(sub, "%s.down_proj", prefix);
  return vlmc_model_linear(m, prod, sub, hidden, inner, bias, name, out_value);
}

vlmc_status_t vlmc_model_rms_norm(vlmc_model_builder_t *m, vlmc_value_t *x,
                                  const char *weight_name, int64_t dim, double eps,
                                  const char *name, vlmc_value_t **out_value) {
  vlmc_value_t *w;
  VLMC_RETURN_IF_ERROR(vlmc_model_weight(m, weight_name, 1, &dim, &w));
  return vlmc_builder_rms_norm(&m->b, x, w, eps, name, out_value);
}

vlmc_status_t vlmc_model_layer_norm(vlmc_model_builder_t *m, vlmc_value_t *x,
                                    const char *prefix, int64_t dim, double eps, bool bias,
                                    const char *name, vlmc_value_t **out_value) {
  char wname[VLMC_MODEL_NAME_MAX];
  vlmc_value_t *w, *b;
  vlmc_model_name(wname, "%s.weight", prefix);
  VLMC_RETURN_IF_ERROR(vlmc_model_weight(m, wname, 1, &dim, &w));
  VLMC_RETURN_IF_ERROR(optional_bias(m, prefix, dim, bias, &b));
  vlmc_value_t *operands[3] = {x, w, b};
  vlmc_named_attr_t eps_attr = {"eps", vlmc_attr_float(eps)};
  vlmc_op_t *op;
  VLMC_RETURN_IF_ERROR(vlmc_builder_op(&m->b, VLMC_OP_LAYER_NORM, b ? 3 : 2, operands, 1,
                                       &eps_attr, NULL, name, &op));
  *out_value = &op->results[0];
  return NULL;
}

vlmc_status_t vlmc_model_embedding(vlmc_model_builder_t *m, const char *table_name, int64_t vocab,
                                   int64_t hidden, vlmc_value_t *ids, const char *name,
                                   vlmc_value_t **out_value) {
  int64_t shape[2] = {vocab, hidden};
  vlmc_value_t *table, *rows;
  if (is_quantized_weight(m, table_name))
    VLMC_RETURN_IF_ERROR(quantized_weight(m, table_name, 2, shape, &table));
  else
    VLMC_RETURN_IF_ERROR(vlmc_model_param(m, table_name, 2, shape, &table));
  vlmc_value_t *operands[2] = {table, ids};
  VLMC_RETURN_IF_ERROR(vlmc_builder_simple(&m->b, VLMC_OP_EMBEDDING, 2, operands, name, &rows));
  if (rows->type.dtype == VLMC_DTYPE_F32) {
    *out_value = rows;
    return NULL;
  }
  char f32_name[VLMC_MODEL_NAME_MAX];
  if (name) vlmc_model_name(f32_name, "%s_f32", name);
  return vlmc_builder_cast(&m->b, rows, VLMC_DTYPE_F32, name ? f32_name : NULL, out_value);
}

vlmc_status_t vlmc_model_attention(vlmc_model_builder_t *m, vlmc_value_t *q, vlmc_value_t *k,
                                   vlmc_value_t *v, vlmc_value_t *segments, double scale,
                                   bool causal, const char *name, vlmc_value_t **out_value) {
  /* `causal` is written only when set, so a non-causal attention prints as it always did. */
  vlmc_named_attr_t attrs[2] = {{"scale", vlmc_attr_float(scale)},
                                {"causal", vlmc_attr_bool(true)}};
  vlmc_value_t *operands[4] = {q, k, v, segments};
  vlmc_op_t *op;
  VLMC_RETURN_IF_ERROR(vlmc_builder_op(&m->b, VLMC_OP_ATTENTION, segments ? 4 : 3, operands,
                                       causal ? 2 : 1, attrs, NULL, name, &op));
  *out_value = &op->results[0];
  return NULL;
}

/* ---- shapes and small ops --------------------------------------------------------------- */

vlmc_status_t vlmc_model_reshape(vlmc_model_builder_t *m, vlmc_value_t *x, uint32_t rank,
                                 const vlmc_dim_t *dims, const char *name,
                                 vlmc_value_t **out_value) {
  vlmc_type_t type = {x->type.dtype, rank, {{0}}};
  memcpy(type.dims, dims, rank * sizeof *dims);
  return vlmc_builder_reshape(&m->b, x, &type, name, out_value);
}

vlmc_status_t vlmc_model_slice(vlmc_model_builder_t *m, vlmc_value_t *x, int64_t axis,
                               int64_t start, int64_t end, const char *name,
                               vlmc_value_t **out_value) {
  vlmc_named_attr_t attrs[3] = {{"axis", vlmc_attr_int(axis)},
                                {"start", vlmc_attr_int(start)},
                                {"end", vlmc_attr_int(end)}};
  vlmc_op_t *op;
  VLMC_RETURN_IF_ERROR(vlmc_builder_op(&m->b, VLMC_OP_SLICE, 1, &x, 3, attrs, NULL, name, &op));
  *out_value = &op->results[0];
  return NULL;
}

vlmc_status_t vlmc_model_binary(vlmc_model_builder_t *m, vlmc_op_kind_t kind, vlmc_value_t *a,
                                vlmc_value_t *b, const char *name, vlmc_value_t **out_value) {
  vlmc_value_t *operands[2] = {a, b};
  return vlmc_builder_simple(&m->b, kind, 2, operands, name, out_value);
}

vlmc_status_t vlmc_model_tap(vlmc_model_builder_t *m, const char *stage, vlmc_value_t *x) {
  if (!m->taps) return NULL;
  vlmc_named_attr_t attr = {"name", vlmc_attr_symbol(stage)};
  return vlmc_builder_op(&m->b, VLMC_OP_TAP, 1, &x, 1, &attr, NULL, NULL, NULL);
}
