/* The builder: shape inference through the op table (static and symbolic), attribute
 * handling, declared result types, and a built module that verifies and prints stably. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "tests/unit/test.h"

typedef struct {
  vlmc_module_t *module;
  vlmc_func_t *func;
  vlmc_builder_t b;
  uint32_t P;
} fixture_t;

static vlmc_type_t sym_type(vlmc_dtype_t dtype, uint32_t rank, const int64_t *sizes, uint32_t sym,
                            int64_t den) {
  vlmc_type_t t = vlmc_type_make(dtype, rank, sizes);
  vlmc_status_t st = vlmc_dim_symbolic(sym, 1, den, 0, &t.dims[0]);
  vlmc_status_free(st);
  return t;
}

/* @f(%x: f32[P,1280], %grid: i64[N,3]) with P symbolic, and a few parameters. */
static void fixture_init(fixture_t *f) {
  EXPECT_OK(vlmc_module_create(&f->module));
  uint32_t n;
  EXPECT_OK(vlmc_module_symbol(f->module, "P", &f->P));
  EXPECT_OK(vlmc_module_symbol(f->module, "N", &n));
  vlmc_type_t args[2] = {sym_type(VLMC_DTYPE_F32, 2, (int64_t[]){0, 1280}, f->P, 1),
                         sym_type(VLMC_DTYPE_I64, 2, (int64_t[]){0, 3}, n, 1)};
  const char *names[2] = {"x", "grid"};
  vlmc_type_t result = sym_type(VLMC_DTYPE_F32, 2, (int64_t[]){0, 5120}, f->P, 4);
  vlmc_type_t w = vlmc_type_make(VLMC_DTYPE_F32, 2, (int64_t[]){3840, 1280});
  vlmc_type_t bias = vlmc_type_make(VLMC_DTYPE_F32, 1, (int64_t[]){3840});
  vlmc_type_t g = vlmc_type_make(VLMC_DTYPE_F32, 1, (int64_t[]){1280});
  EXPECT_OK(vlmc_module_param_add(f->module, "visual.blocks.0.attn.qkv.weight", &w, NULL));
  EXPECT_OK(vlmc_module_param_add(f->module, "visual.blocks.0.attn.qkv.bias", &bias, NULL));
  EXPECT_OK(vlmc_module_param_add(f->module, "visual.blocks.0.norm1.weight", &g, NULL));
  EXPECT_OK(vlmc_module_func_add(f->module, "f", 2, args, names, 1, &result, &f->func));
  vlmc_builder_init(&f->b, f->func);
}

static void test_shape_inference(void) {
  fixture_t f;
  fixture_init(&f);
  vlmc_value_t *x = &f.func->args[0], *grid = &f.func->args[1];
  vlmc_value_t *g, *h, *w, *bias, *qkv, *act;
  EXPECT_OK(vlmc_builder_param(&f.b, "visual.blocks.0.norm1.weight", "norm1", &g));
  EXPECT_OK(vlmc_builder_rms_norm(&f.b, x, g, 1e-6, "h", &h));
  EXPECT_OK(vlmc_builder_param(&f.b, "visual.blocks.0.attn.qkv.weight", "w", &w));
  EXPECT_OK(vlmc_builder_param(&f.b, "visual.blocks.0.attn.qkv.bias", "b", &bias));
  EXPECT_OK(vlmc_builder_linear(&f.b, h, w, bias, "qkv", &qkv));
  /* linear: [P,1280] x [3840,1280]^T -> [P,3840], the symbolic dim carried through. */
  EXPECT_EQ_INT(qkv->type.rank, 2);
  EXPECT_EQ_INT(qkv->type.dims[0].sym, f.P);
  EXPECT_EQ_INT(qkv->type.dims[1].off, 3840);
  EXPECT_OK(vlmc_builder_simple(&f.b, VLMC_OP_SILU, 1, &qkv, "act", &act));
  EXPECT_TRUE(vlmc_type_equal(&act->type, &qkv->type));

  /* A declared op: window_order's length is data-dependent, here P/4. */
  vlmc_type_t order_type = sym_type(VLMC_DTYPE_I64, 1, (int64_t[]){0}, f.P, 4);
  vlmc_named_attr_t attrs[3] = {{"window", vlmc_attr_int(112)}, {"patch", vlmc_attr_int(14)},
                                {"merge", vlmc_attr_int(2)}};
  vlmc_op_t *order_op;
  EXPECT_OK(vlmc_builder_op(&f.b, VLMC_OP_WINDOW_ORDER, 1, &grid, 3, attrs, &order_type, "order",
                            &order_op));
  EXPECT_EQ_INT(order_op->results[0].type.dims[0].den, 4);

  /* reshape [P,1280] -> [P/4,5120]; then a gather of merged rows by the order. */
  vlmc_type_t merged = sym_type(VLMC_DTYPE_F32, 2, (int64_t[]){0, 5120}, f.P, 4);
  vlmc_value_t *m, *permuted, *inv;
  EXPECT_OK(vlmc_builder_reshape(&f.b, h, &merged, "merged", &m));
  vlmc_value_t *order = &order_op->results[0];
  EXPECT_OK(vlmc_builder_simple(&f.b, VLMC_OP_INVERSE_PERMUTATION, 1, &order, "inv", &inv));
  EXPECT_OK(vlmc_builder_gather(&f.b, m, order, 0, "permuted", &permuted));
  EXPECT_TRUE(vlmc_type_equal(&permuted->type, &merged));
  vlmc_value_t *back;
  EXPECT_OK(vlmc_builder_gather(&f.b, permuted, inv, 0, "back", &back));
  EXPECT_OK(vlmc_builder_return(&f.b, 1, &back));
  EXPECT_OK(vlmc_module_verify(f.module));
  vlmc_module_destroy(f.module);
}

static void test_builder_errors(void) {
  fixture_t f;
  fixture_init(&f);
  vlmc_value_t *x = &f.func->args[0], *grid = &f.func->args[1], *out;
  vlmc_value_t *pair[2] = {x, grid};
  EXPECT_ERROR(vlmc_builder_simple(&f.b, VLMC_OP_ADD, 2, pair, NULL, &out),
               "@f: building 'add': expected operands 0 and 1 to have the same dtype");
  EXPECT_ERROR(vlmc_builder_simple(&f.b, VLMC_OP_EXP, 2, pair, NULL, &out),
               "'exp' expects 1 operand, got 2");
  EXPECT_ERROR(vlmc_builder_param(&f.b, "no.such.weight", NULL, &out), "no parameter named");
  vlmc_named_attr_t bad_enum = {"approx", vlmc_attr_enum("fast")};
  vlmc_op_t *op;
  EXPECT_ERROR(vlmc_builder_op(&f.b, VLMC_OP_GELU, 1, &x, 1, &bad_enum, NULL, NULL, &op),
               "expects one of erf|tanh, not 'fast'");
  vlmc_named_attr_t unknown = {"epsilon", vlmc_attr_float(1e-6)};
  EXPECT_ERROR(vlmc_builder_op(&f.b, VLMC_OP_GELU, 1, &x, 1, &unknown, NULL, NULL, &op),
               "has no attribute 'epsilon'");
  EXPECT_ERROR(vlmc_builder_op(&f.b, VLMC_OP_GELU, 1, &x, 0, NULL, NULL, NULL, &op),
               "requires attribute 'approx'");
  vlmc_named_attr_t wrong_kind = {"approx", vlmc_attr_int(1)};
  EXPECT_ERROR(vlmc_builder_op(&f.b, VLMC_OP_GELU, 1, &x, 1, &wrong_kind, NULL, NULL, &op),
               "expects one of its choices, not an integer");
  /* reshape needs its target; window_order its length. */
  EXPECT_ERROR(vlmc_builder_reshape(&f.b, x, NULL, NULL, &out), "expected a declared result");
  vlmc_type_t wrong = vlmc_type_make(VLMC_DTYPE_F32, 2, (int64_t[]){7, 7});
  EXPECT_ERROR(vlmc_builder_reshape(&f.b, x, &wrong, NULL, &out), "same number of elements");
  /* A declared type on an inferred op must agree with the rule. */
  EXPECT_ERROR(vlmc_builder_op(&f.b, VLMC_OP_EXP, 1, &x, 0, NULL, &wrong, NULL, &op),
               "declared result type f32[7,7] differs from the inferred f32[P,1280]");
  /* Nothing was inserted by the failed calls. */
  EXPECT_TRUE(f.func->body.first == NULL);
  vlmc_module_destroy(f.module);
}

static void test_attributes_and_edits(void) {
  fixture_t f;
  fixture_init(&f);
  vlmc_value_t *x = &f.func->args[0];
  vlmc_named_attr_t approx = {"approx", vlmc_attr_enum("tanh")};
  vlmc_op_t *gelu;
  EXPECT_OK(vlmc_builder_op(&f.b, VLMC_OP_GELU, 1, &x, 1, &approx, NULL, "g", &gelu));
  EXPECT_STREQ(vlmc_op_attr_enum(gelu, "approx"), "tanh");
  EXPECT_EQ_INT(vlmc_op_attr(gelu, "approx")->v.e.index, 1);
  /* An integer where a float is expected is accepted and converted. */
  vlmc_named_attr_t eps = {"eps", vlmc_attr_int(1)};
  vlmc_value_t *norm_w;
  EXPECT_OK(vlmc_builder_param(&f.b, "visual.blocks.0.norm1.weight", NULL, &norm_w));
  vlmc_value_t *operands[2] = {x, norm_w};
  vlmc_op_t *norm;
  EXPECT_OK(vlmc_builder_op(&f.b, VLMC_OP_RMS_NORM, 2, operands, 1, &eps, NULL, NULL, &norm));
  EXPECT_TRUE(vlmc_op_attr_float(norm, "eps") == 1.0);
  /* Arrays are copied: changing the caller's array later changes nothing. */
  int64_t perm[2] = {1, 0};
  vlmc_value_t *t;
  EXPECT_OK(vlmc_builder_transpose(&f.b, x, perm, "t", &t));
  perm[0] = 0;
  EXPECT_EQ_INT(vlmc_op_attr(t->def, "perm")->v.ints.data[0], 1);
  vlmc_attr_t new_approx = vlmc_attr_enum("erf");
  EXPECT_OK(vlmc_op_set_attr(gelu, "approx", &new_approx));
  EXPECT_STREQ(vlmc_op_attr_enum(gelu, "approx"), "erf");
  EXPECT_ERROR(vlmc_op_set_attr(gelu, "axis", &new_approx), "'gelu' has no attribute 'axis'");
  /* Uses, replacement and erasure. */
  EXPECT_EQ_INT(vlmc_value_use_count(x), 3);
  EXPECT_EQ_INT(vlmc_value_replace_all_uses(&gelu->results[0], x), 0);
  EXPECT_EQ_INT(vlmc_value_replace_all_uses(x, &gelu->results[0]), 3);
  EXPECT_EQ_INT(vlmc_value_use_count(&gelu->results[0]), 3); /* gelu now reads itself */
  vlmc_op_set_operand(gelu, 0, x);
  vlmc_op_erase(t->def);
  EXPECT_TRUE(f.func->body.last == norm);
  vlmc_module_destroy(f.module);
}

/* Built modules print deterministically, with unique names for repeated hints, and the
 * text parses back to the same text. */
static void test_printing_built_module(void) {
  fixture_t f;
  fixture_init(&f);
  vlmc_value_t *x = &f.func->args[0], *a, *b2, *c, *d;
  EXPECT_OK(vlmc_builder_simple(&f.b, VLMC_OP_EXP, 1, &x, "y", &a));
  EXPECT_OK(vlmc_builder_simple(&f.b, VLMC_OP_NEG, 1, &a, "y", &b2));
  EXPECT_OK(vlmc_builder_simple(&f.b, VLMC_OP_TANH, 1, &b2, "y_1", &c));
  EXPECT_OK(vlmc_builder_simple(&f.b, VLMC_OP_SIGMOID, 1, &c, "12", &d));
  vlmc_type_t merged = sym_type(VLMC_DTYPE_F32, 2, (int64_t[]){0, 5120}, f.P, 4);
  vlmc_value_t *r;
  EXPECT_OK(vlmc_builder_reshape(&f.b, d, &merged, "has space", &r));
  EXPECT_OK(vlmc_builder_return(&f.b, 1, &r));
  char *first = vlmc_module_to_string(f.module);
  char *second = vlmc_module_to_string(f.module);
  EXPECT_STREQ(first, second);
  EXPECT_TRUE(strstr(first, "  %y = exp %x : f32[P,1280]\n") != NULL);
  EXPECT_TRUE(strstr(first, "  %y_1 = neg %y : f32[P,1280]\n") != NULL);
  EXPECT_TRUE(strstr(first, "  %y_1_1 = tanh %y_1 : f32[P,1280]\n") != NULL);
  EXPECT_TRUE(strstr(first, "  %0 = sigmoid %y_1_1 : f32[P,1280]\n") != NULL);
  EXPECT_TRUE(strstr(first, "  %has_space = reshape %0 : f32[P/4,5120]\n") != NULL);
  vlmc_module_t *parsed;
  EXPECT_OK(vlmc_module_parse(first, strlen(first), NULL, &parsed));
  EXPECT_OK(vlmc_module_verify(parsed));
  char *third = vlmc_module_to_string(parsed);
  EXPECT_STREQ(third, first);
  free(first);
  free(second);
  free(third);
  vlmc_module_destroy(parsed);
  vlmc_module_destroy(f.module);
}

static void test_module_names(void) {
  vlmc_module_t *m;
  EXPECT_OK(vlmc_module_create(&m));
  vlmc_type_t t = vlmc_type_make(VLMC_DTYPE_F32, 1, (int64_t[]){4});
  vlmc_param_t *p;
  EXPECT_OK(vlmc_module_param_add(m, "w", &t, &p));
  EXPECT_ERROR(vlmc_module_param_add(m, "w", &t, NULL), "parameter @w is declared twice");
  EXPECT_TRUE(vlmc_module_param_find(m, "w") == p);
  vlmc_module_param_remove(m, p);
  EXPECT_TRUE(vlmc_module_param_find(m, "w") == NULL);
  EXPECT_EQ_INT(m->num_params, 0);
  EXPECT_OK(vlmc_module_param_add(m, "w", &t, NULL)); /* the name is free again */
  vlmc_func_t *f;
  EXPECT_OK(vlmc_module_func_add(m, "f", 0, NULL, NULL, 0, NULL, &f));
  EXPECT_ERROR(vlmc_module_func_add(m, "f", 0, NULL, NULL, 0, NULL, NULL), "defined twice");
  EXPECT_TRUE(vlmc_module_func_find(m, "f") == f);
  vlmc_module_destroy(m);
}

int main(void) {
  RUN_TEST(test_shape_inference);
  RUN_TEST(test_builder_errors);
  RUN_TEST(test_attributes_and_edits);
  RUN_TEST(test_printing_built_module);
  RUN_TEST(test_module_names);
  return TEST_SUMMARY();
}
