/* The graph helpers every model family shares (models/builder.h), on a small fake tensor
 * table: the ops and parameters each helper makes, the casts of stored dtypes, and the
 * refusals of a missing, misshapen or non-float tensor by name. */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "models/builder.h"
#include "tests/unit/test.h"

typedef struct {
  const char *name;
  vlmc_dtype_t dtype;
  uint32_t rank;
  int64_t shape[2];
} fake_tensor_t;

static const fake_tensor_t kTensors[] = {
    {"lin.weight", VLMC_DTYPE_BF16, 2, {6, 8}}, {"lin.bias", VLMC_DTYPE_F32, 1, {6}},
    {"ln.weight", VLMC_DTYPE_F32, 1, {8}},      {"ln.bias", VLMC_DTYPE_F32, 1, {8}},
    {"rms.weight", VLMC_DTYPE_F16, 1, {8}},     {"emb.weight", VLMC_DTYPE_BF16, 2, {10, 8}},
    {"mlp.gate_proj.weight", VLMC_DTYPE_F32, 2, {16, 8}},
    {"mlp.up_proj.weight", VLMC_DTYPE_F32, 2, {16, 8}},
    {"mlp.down_proj.weight", VLMC_DTYPE_F32, 2, {8, 16}},
    {"ids.weight", VLMC_DTYPE_I64, 1, {8}},
};

static bool fake_find(void *user, const char *name, vlmc_model_tensor_info_t *out) {
  (void)user;
  for (size_t i = 0; i < sizeof kTensors / sizeof kTensors[0]; ++i) {
    if (strcmp(kTensors[i].name, name) != 0) continue;
    out->dtype = kTensors[i].dtype;
    out->rank = kTensors[i].rank;
    memcpy(out->shape, kTensors[i].shape, sizeof kTensors[i].shape);
    return true;
  }
  return false;
}

static const vlmc_model_tensors_t kTable = {fake_find, NULL, "fake.safetensors"};

/* A module with f(x f32[4,8], ids i64[4]) -> f32[4,8], its builder at the end of f's body. */
static vlmc_model_builder_t start(bool taps) {
  vlmc_model_builder_t m;
  memset(&m, 0, sizeof m);
  m.tensors = &kTable;
  m.taps = taps;
  EXPECT_OK(vlmc_module_create(&m.module));
  int64_t x_shape[2] = {4, 8}, ids_shape[1] = {4};
  vlmc_type_t args[2] = {vlmc_type_make(VLMC_DTYPE_F32, 2, x_shape),
                         vlmc_type_make(VLMC_DTYPE_I64, 1, ids_shape)};
  const char *names[2] = {"x", "ids"};
  vlmc_func_t *func = NULL;
  EXPECT_OK(vlmc_module_func_add(m.module, "f", 2, args, names, 1, args, &func));
  if (func) vlmc_builder_init(&m.b, func);
  return m;
}

static int count_ops(const vlmc_func_t *func, vlmc_op_kind_t kind) {
  int n = 0;
  for (const vlmc_op_t *op = func->body.first; op; op = op->next) n += op->kind == kind;
  return n;
}

static const vlmc_op_t *first_op(const vlmc_func_t *func, vlmc_op_kind_t kind) {
  for (const vlmc_op_t *op = func->body.first; op; op = op->next)
    if (op->kind == kind) return op;
  return NULL;
}

static void test_layers(void) {
  vlmc_model_builder_t m = start(false);
  vlmc_func_t *f = m.b.func;
  vlmc_value_t *x = &f->args[0], *y, *ln, *rms, *mlp, *emb, *sum;
  EXPECT_OK(vlmc_model_linear(&m, x, "lin", 6, 8, true, "y", &y));
  EXPECT_OK(vlmc_model_layer_norm(&m, x, "ln", 8, 1e-5, true, "ln", &ln));
  EXPECT_OK(vlmc_model_rms_norm(&m, ln, "rms.weight", 8, 1e-6, "rms", &rms));
  EXPECT_OK(vlmc_model_swiglu(&m, rms, "mlp", 8, 16, false, "mlp", &mlp));
  EXPECT_OK(vlmc_model_embedding(&m, "emb.weight", 10, 8, &f->args[1], "embeds", &emb));
  EXPECT_OK(vlmc_model_binary(&m, VLMC_OP_ADD, mlp, emb, "sum", &sum));
  EXPECT_OK(vlmc_model_tap(&m, "sum", sum)); /* taps off: nothing */
  EXPECT_OK(vlmc_builder_return(&m.b, 1, &sum));
  EXPECT_OK(vlmc_module_verify(m.module));
  /* Parameters keep their stored dtype; bf16 and f16 ones are cast where they are used. */
  EXPECT_EQ_INT(m.module->num_params, 9);
  vlmc_param_t *w = vlmc_module_param_find(m.module, "lin.weight");
  EXPECT_TRUE(w && w->type.dtype == VLMC_DTYPE_BF16);
  EXPECT_EQ_INT(y->type.dims[1].off, 6);
  EXPECT_EQ_INT(count_ops(f, VLMC_OP_CAST), 3); /* lin.weight, rms.weight, the embedded rows */
  EXPECT_EQ_INT(count_ops(f, VLMC_OP_LINEAR), 4);
  EXPECT_EQ_INT(count_ops(f, VLMC_OP_SILU), 1);
  EXPECT_EQ_INT(count_ops(f, VLMC_OP_TAP), 0);
  const vlmc_op_t *norm = first_op(f, VLMC_OP_LAYER_NORM);
  EXPECT_TRUE(norm && norm->num_operands == 3);
  if (norm) EXPECT_NEAR(vlmc_op_attr_float(norm, "eps"), 1e-5, 0);
  /* Only the gathered rows are cast, under the rows' name. */
  char *text = vlmc_module_to_string(m.module);
  EXPECT_TRUE(text && strstr(text, "%embeds_f32 = cast %embeds"));
  free(text);
  vlmc_module_destroy(m.module);
}

static void test_attention_and_taps(void) {
  vlmc_model_builder_t m = start(true);
  vlmc_func_t *f = m.b.func;
  vlmc_value_t *q, *causal, *plain;
  vlmc_dim_t dims[3] = {vlmc_dim_static(4), vlmc_dim_static(2), vlmc_dim_static(4)};
  EXPECT_OK(vlmc_model_reshape(&m, &f->args[0], 3, dims, "q", &q));
  EXPECT_OK(vlmc_model_attention(&m, q, q, q, NULL, 0.5, true, "causal", &causal));
  EXPECT_OK(vlmc_model_attention(&m, q, q, q, NULL, 0.5, false, "plain", &plain));
  EXPECT_OK(vlmc_model_tap(&m, "attn", plain));
  const vlmc_op_t *a = causal ? causal->def : NULL, *b = plain ? plain->def : NULL;
  EXPECT_TRUE(a && b);
  if (a && b) {
    EXPECT_TRUE(vlmc_op_attr(a, "causal") != NULL);
    EXPECT_TRUE(vlmc_op_attr(b, "causal") == NULL); /* not written when unset */
    EXPECT_NEAR(vlmc_op_attr_float(b, "scale"), 0.5, 0);
  }
  EXPECT_EQ_INT(count_ops(f, VLMC_OP_TAP), 1);
  vlmc_value_t *cols;
  EXPECT_OK(vlmc_model_slice(&m, &f->args[0], 1, 2, 6, "cols", &cols));
  EXPECT_EQ_INT(cols->type.dims[1].off, 4);
  vlmc_module_destroy(m.module);
}

static void test_tensors_refused_by_name(void) {
  vlmc_model_builder_t m = start(false);
  vlmc_value_t *x = &m.b.func->args[0], *y;
  EXPECT_ERROR(vlmc_model_linear(&m, x, "missing", 6, 8, false, NULL, &y),
               "tensor 'missing.weight' not found in fake.safetensors");
  EXPECT_ERROR(vlmc_model_linear(&m, x, "model.missing", 6, 8, false, NULL, &y),
               "tensor 'model.missing.weight' not found (also tried "
               "'model.language_model.missing.weight', 'language_model.model.missing.weight') in "
               "fake.safetensors");
  EXPECT_ERROR(vlmc_model_linear(&m, x, "lin", 6, 9, false, NULL, &y),
               "fake.safetensors: tensor 'lin.weight' has shape [6,8], config.json implies "
               "[6,9]");
  int64_t dim = 8;
  EXPECT_ERROR(vlmc_model_weight(&m, "ids.weight", 1, &dim, &y),
               "fake.safetensors: tensor 'ids.weight' has dtype i64; expected f32, f16 or bf16");
  EXPECT_ERROR(vlmc_model_layer_norm(&m, x, "rms", 8, 1e-5, true, NULL, &y),
               "tensor 'rms.bias' not found");
  EXPECT_EQ_INT(m.module->num_params, 1); /* rms.weight; nothing of the refused ones */
  vlmc_module_destroy(m.module);
}

int main(void) {
  RUN_TEST(test_layers);
  RUN_TEST(test_attention_and_taps);
  RUN_TEST(test_tensors_refused_by_name);
  return TEST_SUMMARY();
}
