/* Element types, symbolic dimensions (the closed form sym*num/den+off) and type equality. */
#include <stdint.h>
#include <stdlib.h>

#include "ir/ir.h"
#include "tests/unit/test.h"

static vlmc_dim_t sym_dim(uint32_t sym, int64_t num, int64_t den, int64_t off) {
  vlmc_dim_t d;
  vlmc_status_t st = vlmc_dim_symbolic(sym, num, den, off, &d);
  if (st) {
    fprintf(stderr, "sym_dim: %s\n", vlmc_status_message(st));
    vlmc_status_free(st);
    return vlmc_dim_static(0);
  }
  return d;
}

static void test_dtype_table(void) {
  vlmc_dtype_t d;
  EXPECT_TRUE(vlmc_dtype_from_name("bf16", 4, &d) && d == VLMC_DTYPE_BF16);
  EXPECT_TRUE(vlmc_dtype_from_name("q4_0", 4, &d) && d == VLMC_DTYPE_Q4_0);
  EXPECT_TRUE(!vlmc_dtype_from_name("f33", 3, &d));
  EXPECT_TRUE(!vlmc_dtype_from_name("f3", 2, &d));
  EXPECT_EQ_INT(vlmc_dtype_info(VLMC_DTYPE_F16)->block_bytes, 2);
  EXPECT_TRUE(vlmc_dtype_info(VLMC_DTYPE_Q4_0)->is_quantized);
  EXPECT_EQ_INT(vlmc_dtype_info(VLMC_DTYPE_Q4_0)->block_size, 32);
  EXPECT_EQ_INT(vlmc_dtype_info(VLMC_DTYPE_Q4_0)->block_bytes, 18);
  EXPECT_TRUE(vlmc_dtype_info(VLMC_DTYPE_U8)->is_int && !vlmc_dtype_info(VLMC_DTYPE_U8)->is_signed);
  /* Every dtype has a distinct name that reads back to it. */
  for (int i = 0; i < VLMC_DTYPE_COUNT; ++i) {
    const char *name = vlmc_dtype_info((vlmc_dtype_t)i)->name;
    EXPECT_TRUE(vlmc_dtype_from_name(name, strlen(name), &d) && d == (vlmc_dtype_t)i);
  }
}

static void test_dim_normal_form(void) {
  vlmc_dim_t d = sym_dim(1, 2, 4, 0); /* 2*P/4 is P/2 */
  EXPECT_EQ_INT(d.num, 1);
  EXPECT_EQ_INT(d.den, 2);
  d = sym_dim(1, 0, 3, 7); /* no symbol left: static 7 */
  EXPECT_TRUE(vlmc_dim_is_static(d));
  EXPECT_EQ_INT(d.off, 7);
  vlmc_dim_t bad;
  EXPECT_ERROR(vlmc_dim_symbolic(1, 1, 0, 0, &bad), "positive coefficient");
  EXPECT_ERROR(vlmc_dim_symbolic(1, -1, 1, 0, &bad), "positive coefficient");
  EXPECT_ERROR(vlmc_dim_symbolic(0, 0, 1, -3, &bad), "negative");
}

static void test_dim_arithmetic(void) {
  vlmc_dim_t p = sym_dim(1, 1, 1, 0), out;
  /* P/4 * 4 = P; P * 3 / 4 = 3*P/4; C + 1; (S - 1) - S has no closed form. */
  EXPECT_OK(vlmc_dim_div(p, 4, &out));
  EXPECT_OK(vlmc_dim_mul(out, 4, &out));
  EXPECT_TRUE(vlmc_dim_equal(out, p));
  EXPECT_OK(vlmc_dim_mul(p, 3, &out));
  EXPECT_OK(vlmc_dim_div(out, 4, &out));
  EXPECT_TRUE(vlmc_dim_equal(out, sym_dim(1, 3, 4, 0)));
  EXPECT_OK(vlmc_dim_add(p, vlmc_dim_static(1), &out));
  EXPECT_TRUE(vlmc_dim_equal(out, sym_dim(1, 1, 1, 1)));
  /* P/2 + P/2 = P; P - P/4 = 3*P/4; P - P = 0 (static). */
  vlmc_dim_t half = sym_dim(1, 1, 2, 0);
  EXPECT_OK(vlmc_dim_add(half, half, &out));
  EXPECT_TRUE(vlmc_dim_equal(out, p));
  EXPECT_OK(vlmc_dim_sub(p, sym_dim(1, 1, 4, 0), &out));
  EXPECT_TRUE(vlmc_dim_equal(out, sym_dim(1, 3, 4, 0)));
  EXPECT_OK(vlmc_dim_sub(p, p, &out));
  EXPECT_TRUE(vlmc_dim_equal(out, vlmc_dim_static(0)));
  EXPECT_ERROR(vlmc_dim_add(p, sym_dim(2, 1, 1, 0), &out), "two different symbols");
  EXPECT_ERROR(vlmc_dim_sub(vlmc_dim_static(4), p, &out), "no closed form");
  EXPECT_ERROR(vlmc_dim_sub(vlmc_dim_static(4), vlmc_dim_static(5), &out), "negative");
  EXPECT_ERROR(vlmc_dim_div(sym_dim(1, 1, 1, 1), 4, &out), "not a multiple");
  EXPECT_ERROR(vlmc_dim_mul(sym_dim(1, INT64_MAX, 1, 0), 2, &out), "overflows");
}

static void test_dim_eval(void) {
  int64_t values[2] = {1024, 7}, v;
  EXPECT_OK(vlmc_dim_eval(sym_dim(1, 3, 4, 2), values, 2, &v));
  EXPECT_EQ_INT(v, 770);
  EXPECT_OK(vlmc_dim_eval(sym_dim(2, 1, 1, -1), values, 2, &v));
  EXPECT_EQ_INT(v, 6);
  EXPECT_ERROR(vlmc_dim_eval(sym_dim(2, 1, 4, 0), values, 2, &v), "not a multiple");
  EXPECT_ERROR(vlmc_dim_eval(sym_dim(2, 1, 1, -8), values, 2, &v), "evaluates to -1");
  EXPECT_ERROR(vlmc_dim_eval(sym_dim(3, 1, 1, 0), values, 2, &v), "has no value");
}

static void test_same_count(void) {
  vlmc_module_t *m;
  EXPECT_OK(vlmc_module_create(&m));
  uint32_t p, s;
  EXPECT_OK(vlmc_module_symbol(m, "P", &p));
  EXPECT_OK(vlmc_module_symbol(m, "S", &s));
  vlmc_type_t a = vlmc_type_make(VLMC_DTYPE_F32, 2, (int64_t[]){0, 1280});
  a.dims[0] = sym_dim(p, 1, 1, 0);
  vlmc_type_t b = vlmc_type_make(VLMC_DTYPE_F32, 2, (int64_t[]){0, 5120});
  b.dims[0] = sym_dim(p, 1, 4, 0);
  bool same = false;
  EXPECT_OK(vlmc_type_same_count(&a, &b, &same)); /* [P,1280] vs [P/4,5120] */
  EXPECT_TRUE(same);
  vlmc_type_t c = vlmc_type_make(VLMC_DTYPE_F32, 3, (int64_t[]){0, 4, 1280});
  c.dims[0] = sym_dim(p, 1, 4, 0);
  EXPECT_OK(vlmc_type_same_count(&a, &c, &same)); /* [P/4,4,1280] */
  EXPECT_TRUE(same);
  vlmc_type_t d = vlmc_type_make(VLMC_DTYPE_F32, 2, (int64_t[]){0, 1280});
  d.dims[0] = sym_dim(s, 1, 1, 0);
  EXPECT_OK(vlmc_type_same_count(&a, &d, &same)); /* P vs S */
  EXPECT_TRUE(!same);
  /* (S+1)*2 vs 2*S+2: the same polynomial written two ways. */
  vlmc_type_t e = vlmc_type_make(VLMC_DTYPE_F32, 2, (int64_t[]){0, 2});
  e.dims[0] = sym_dim(s, 1, 1, 1);
  vlmc_type_t f = vlmc_type_make(VLMC_DTYPE_F32, 1, (int64_t[]){0});
  f.dims[0] = sym_dim(s, 2, 1, 2);
  EXPECT_OK(vlmc_type_same_count(&e, &f, &same));
  EXPECT_TRUE(same);
  /* (S+1)*(S+1) vs S*(S+2): different polynomials, equal at no symbol value... */
  vlmc_type_t g = vlmc_type_make(VLMC_DTYPE_F32, 2, (int64_t[]){0, 0});
  g.dims[0] = g.dims[1] = sym_dim(s, 1, 1, 1);
  vlmc_type_t h = vlmc_type_make(VLMC_DTYPE_F32, 2, (int64_t[]){0, 0});
  h.dims[0] = sym_dim(s, 1, 1, 0);
  h.dims[1] = sym_dim(s, 1, 1, 2);
  EXPECT_OK(vlmc_type_same_count(&g, &h, &same));
  EXPECT_TRUE(!same);
  /* Zero-sized tensors have the same (zero) count whatever the rest. */
  vlmc_type_t z1 = vlmc_type_make(VLMC_DTYPE_F32, 2, (int64_t[]){0, 7});
  z1.dims[1] = sym_dim(p, 1, 1, 0);
  vlmc_type_t z2 = vlmc_type_make(VLMC_DTYPE_F32, 1, (int64_t[]){0});
  EXPECT_OK(vlmc_type_same_count(&z1, &z2, &same));
  EXPECT_TRUE(same);
  /* Products beyond 64 bits are an error, not a wrong answer. */
  vlmc_type_t big = vlmc_type_make(VLMC_DTYPE_F32, 3, (int64_t[]){INT64_MAX, INT64_MAX, 2});
  EXPECT_ERROR(vlmc_type_same_count(&big, &a, &same), "overflows");
  vlmc_module_destroy(m);
}

static void test_type_helpers(void) {
  vlmc_type_t t = vlmc_type_make(VLMC_DTYPE_I64, 2, (int64_t[]){3, 4});
  int64_t n;
  EXPECT_TRUE(vlmc_type_static_count(&t, &n));
  EXPECT_EQ_INT(n, 12);
  EXPECT_TRUE(vlmc_type_is_static(&t));
  vlmc_type_t u = t;
  u.dims[1] = sym_dim(1, 1, 1, 0);
  EXPECT_TRUE(!vlmc_type_is_static(&u) && !vlmc_type_static_count(&u, &n));
  EXPECT_TRUE(!vlmc_type_equal(&t, &u));
  u.dims[1] = vlmc_dim_static(4);
  EXPECT_TRUE(vlmc_type_equal(&t, &u));
  u.dtype = VLMC_DTYPE_I32;
  EXPECT_TRUE(!vlmc_type_equal(&t, &u));
}

static void test_symbols(void) {
  vlmc_module_t *m;
  EXPECT_OK(vlmc_module_create(&m));
  uint32_t a, b, c;
  EXPECT_OK(vlmc_module_symbol(m, "P", &a));
  EXPECT_OK(vlmc_module_symbol(m, "S", &b));
  EXPECT_OK(vlmc_module_symbol(m, "P", &c));
  EXPECT_EQ_INT(a, c);
  EXPECT_TRUE(a != b);
  EXPECT_STREQ(vlmc_module_symbol_name(m, b), "S");
  EXPECT_ERROR(vlmc_module_symbol(m, "2P", &a), "not an identifier");
  EXPECT_ERROR(vlmc_module_symbol(m, "", &a), "not an identifier");
  EXPECT_ERROR(vlmc_module_symbol(m, "P.x", &a), "not an identifier");
  vlmc_module_destroy(m);
}

int main(void) {
  RUN_TEST(test_dtype_table);
  RUN_TEST(test_dim_normal_form);
  RUN_TEST(test_dim_arithmetic);
  RUN_TEST(test_dim_eval);
  RUN_TEST(test_same_count);
  RUN_TEST(test_type_helpers);
  RUN_TEST(test_symbols);
  return TEST_SUMMARY();
}
