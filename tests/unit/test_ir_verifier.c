/* The verifier on built IR (parsed IR is covered by tests/lit/invalid.vir): each broken
 * invariant gets an error that names the function, the op and what was expected. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "tests/unit/test.h"

typedef struct {
  vlmc_module_t *module;
  vlmc_func_t *func;
  vlmc_builder_t b;
  vlmc_value_t *x;
} fixture_t;

/* @f(%x: f32[4]) -> f32[4] with an empty body. */
static void fixture_init(fixture_t *f) {
  EXPECT_OK(vlmc_module_create(&f->module));
  vlmc_type_t t = vlmc_type_make(VLMC_DTYPE_F32, 1, (int64_t[]){4});
  const char *names[1] = {"x"};
  EXPECT_OK(vlmc_module_func_add(f->module, "f", 1, &t, names, 1, &t, &f->func));
  vlmc_builder_init(&f->b, f->func);
  f->x = &f->func->args[0];
}

static void test_valid(void) {
  fixture_t f;
  fixture_init(&f);
  vlmc_value_t *y;
  EXPECT_OK(vlmc_builder_simple(&f.b, VLMC_OP_EXP, 1, &f.x, "y", &y));
  EXPECT_OK(vlmc_builder_return(&f.b, 1, &y));
  EXPECT_OK(vlmc_module_verify(f.module));
  vlmc_module_destroy(f.module);
}

static void test_terminator(void) {
  fixture_t f;
  fixture_init(&f);
  vlmc_value_t *y;
  EXPECT_OK(vlmc_builder_simple(&f.b, VLMC_OP_EXP, 1, &f.x, "y", &y));
  EXPECT_ERROR(vlmc_module_verify(f.module), "func @f: the body must end with 'return'");
  EXPECT_OK(vlmc_builder_return(&f.b, 1, &y));
  vlmc_value_t *z;
  EXPECT_OK(vlmc_builder_simple(&f.b, VLMC_OP_NEG, 1, &y, "z", &z));
  EXPECT_ERROR(vlmc_module_verify(f.module), "@f: op #1 'return': 'return' must be the last op");
  vlmc_module_destroy(f.module);
}

static void test_return_types(void) {
  fixture_t f;
  fixture_init(&f);
  vlmc_value_t *y;
  EXPECT_OK(vlmc_builder_cast(&f.b, f.x, VLMC_DTYPE_F16, "y", &y));
  EXPECT_OK(vlmc_builder_return(&f.b, 1, &y));
  EXPECT_ERROR(vlmc_module_verify(f.module),
               "'return': result 0 has type f16[4], but @f declares f32[4]");
  vlmc_module_destroy(f.module);
  fixture_init(&f);
  EXPECT_OK(vlmc_builder_return(&f.b, 0, NULL));
  EXPECT_ERROR(vlmc_module_verify(f.module), "@f returns 1 values, but 'return' has 0");
  vlmc_module_destroy(f.module);
}

/* Dominance in a single block is program order: an operand defined later, or by an erased
 * op, is an error, and the message shows the op. */
static void test_use_before_def_and_dangling(void) {
  fixture_t f;
  fixture_init(&f);
  vlmc_value_t *a, *b2;
  EXPECT_OK(vlmc_builder_simple(&f.b, VLMC_OP_EXP, 1, &f.x, "a", &a));
  EXPECT_OK(vlmc_builder_simple(&f.b, VLMC_OP_NEG, 1, &a, "b", &b2));
  EXPECT_OK(vlmc_builder_return(&f.b, 1, &b2));
  vlmc_op_set_operand(a->def, 0, b2);
  EXPECT_ERROR(vlmc_module_verify(f.module),
               "@f: op #0 'exp': operand 0 is used before it is defined (or its op was erased)\n"
               "  %a = exp %b : f32[4]");
  vlmc_op_set_operand(a->def, 0, f.x);
  EXPECT_OK(vlmc_module_verify(f.module));
  vlmc_op_erase(a->def);
  EXPECT_ERROR(vlmc_module_verify(f.module), "operand 0 is used before it is defined");
  /* The printer still works on that IR and shows the dangling operand. */
  char *text = vlmc_module_to_string(f.module);
  EXPECT_TRUE(text && strstr(text, "%b = neg %<dangling> : f32[4]"));
  free(text);
  vlmc_module_destroy(f.module);
}

static void test_foreign_value(void) {
  fixture_t f;
  fixture_init(&f);
  vlmc_type_t t = vlmc_type_make(VLMC_DTYPE_F32, 1, (int64_t[]){4});
  vlmc_func_t *g;
  EXPECT_OK(vlmc_module_func_add(f.module, "g", 1, &t, NULL, 1, &t, &g));
  vlmc_value_t *y;
  EXPECT_OK(vlmc_builder_simple(&f.b, VLMC_OP_EXP, 1, &f.x, "y", &y));
  EXPECT_OK(vlmc_builder_return(&f.b, 1, &y));
  vlmc_builder_t gb;
  vlmc_builder_init(&gb, g);
  vlmc_value_t *z;
  EXPECT_ERROR(vlmc_builder_simple(&gb, VLMC_OP_EXP, 1, &f.x, "z", &z), "is not a value of @g");
  vlmc_value_t *garg = &g->args[0];
  EXPECT_OK(vlmc_builder_return(&gb, 1, &garg));
  vlmc_op_set_operand(y->def, 0, garg);
  EXPECT_ERROR(vlmc_module_verify(f.module), "operand 0 is not a value of this function");
  vlmc_module_destroy(f.module);
}

static void test_result_type_tampered(void) {
  fixture_t f;
  fixture_init(&f);
  vlmc_value_t *y;
  EXPECT_OK(vlmc_builder_simple(&f.b, VLMC_OP_EXP, 1, &f.x, "y", &y));
  EXPECT_OK(vlmc_builder_return(&f.b, 1, &y));
  y->type.dims[0] = vlmc_dim_static(5);
  EXPECT_ERROR(vlmc_module_verify(f.module),
               "'exp': result type f32[5] does not match f32[4] inferred from the operands");
  y->type.dims[0].num = 3; /* not a normalised static dim */
  EXPECT_ERROR(vlmc_module_verify(f.module), "malformed dimension 0");
  vlmc_module_destroy(f.module);
}

static void test_params(void) {
  fixture_t f;
  fixture_init(&f);
  vlmc_type_t t = vlmc_type_make(VLMC_DTYPE_F32, 1, (int64_t[]){4});
  vlmc_param_t *p;
  EXPECT_OK(vlmc_module_param_add(f.module, "w", &t, &p));
  vlmc_value_t *w, *y;
  EXPECT_OK(vlmc_builder_param(&f.b, "w", "w", &w));
  vlmc_value_t *ops[2] = {f.x, w};
  EXPECT_OK(vlmc_builder_simple(&f.b, VLMC_OP_ADD, 2, ops, "y", &y));
  EXPECT_OK(vlmc_builder_return(&f.b, 1, &y));
  EXPECT_OK(vlmc_module_verify(f.module));
  vlmc_module_param_remove(f.module, p);
  EXPECT_ERROR(vlmc_module_verify(f.module), "'param': no parameter named @w");
  uint32_t s;
  EXPECT_OK(vlmc_module_symbol(f.module, "S", &s));
  vlmc_type_t dynamic = t;
  EXPECT_OK(vlmc_dim_symbolic(s, 1, 1, 0, &dynamic.dims[0]));
  EXPECT_OK(vlmc_module_param_add(f.module, "dyn", &dynamic, NULL));
  EXPECT_ERROR(vlmc_module_verify(f.module), "param @dyn: expected a static shape, got f32[S]");
  vlmc_module_destroy(f.module);
}

static void test_kv_cache_single_use(void) {
  vlmc_module_t *m;
  EXPECT_OK(vlmc_module_create(&m));
  uint32_t c;
  EXPECT_OK(vlmc_module_symbol(m, "C", &c));
  vlmc_type_t cache = vlmc_type_make(VLMC_DTYPE_BF16, 3, (int64_t[]){0, 2, 16});
  EXPECT_OK(vlmc_dim_symbolic(c, 1, 1, 0, &cache.dims[0]));
  vlmc_type_t row = vlmc_type_make(VLMC_DTYPE_BF16, 3, (int64_t[]){1, 2, 16});
  vlmc_type_t grown = cache;
  EXPECT_OK(vlmc_dim_symbolic(c, 1, 1, 1, &grown.dims[0]));
  vlmc_type_t args[2] = {cache, row};
  vlmc_type_t results[2] = {grown, cache};
  vlmc_func_t *f;
  EXPECT_OK(vlmc_module_func_add(m, "decode", 2, args, NULL, 2, results, &f));
  vlmc_builder_t b;
  vlmc_builder_init(&b, f);
  vlmc_value_t *ops[2] = {&f->args[0], &f->args[1]}, *next;
  EXPECT_OK(vlmc_builder_simple(&b, VLMC_OP_KV_CACHE_APPEND, 2, ops, "next", &next));
  EXPECT_TRUE(vlmc_type_equal(&next->type, &grown)); /* C+1 */
  vlmc_value_t *ret[2] = {next, &f->args[0]};
  EXPECT_OK(vlmc_builder_return(&b, 2, ret));
  EXPECT_ERROR(vlmc_module_verify(m), "the cache operand has 2 uses");
  vlmc_module_destroy(m);
}

int main(void) {
  RUN_TEST(test_valid);
  RUN_TEST(test_terminator);
  RUN_TEST(test_return_types);
  RUN_TEST(test_use_before_def_and_dangling);
  RUN_TEST(test_foreign_value);
  RUN_TEST(test_result_type_tampered);
  RUN_TEST(test_params);
  RUN_TEST(test_kv_cache_single_use);
  return TEST_SUMMARY();
}
