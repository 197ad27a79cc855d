/* Helpers shared by the reference executor's tests: parse a module from text, hand parameters
 * from arrays, run a function on F32 / I64 views, compare with expected values. */
#ifndef VLMC_TESTS_UNIT_TEST_REFERENCE_UTIL_H
#define VLMC_TESTS_UNIT_TEST_REFERENCE_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "reference/executor.h"
#include "tests/unit/test.h"

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

static inline vlmc_tensor_t ref_f32(uint32_t rank, const int64_t *shape, const float *data) {
  return vlmc_tensor_view(VLMC_DTYPE_F32, rank, shape, data);
}

static inline vlmc_tensor_t ref_i64(uint32_t rank, const int64_t *shape, const int64_t *data) {
  return vlmc_tensor_view(VLMC_DTYPE_I64, rank, shape, data);
}

/* Parameters by name, as borrowed views. */
typedef struct {
  const char *name;
  vlmc_tensor_t view;
} ref_param_t;

typedef struct {
  const ref_param_t *params;
  size_t count;
  int calls; /* how often the executor asked */
} ref_params_t;

static inline vlmc_status_t ref_get_param(void *ctx, const char *name, const vlmc_type_t *type,
                                          vlmc_tensor_t *out_view) {
  ref_params_t *p = ctx;
  ++p->calls;
  for (size_t i = 0; i < p->count; ++i)
    if (strcmp(p->params[i].name, name) == 0) {
      *out_view = p->params[i].view;
      return NULL;
    }
  return vlmc_status_make(VLMC_NOT_FOUND, "test has no tensor named %s", name);
}

/* Parses `text` (named "test.vir" in diagnostics); NULL after a test failure. */
static inline vlmc_module_t *ref_parse(const char *text) {
  vlmc_module_t *module = NULL;
  vlmc_parse_options_t options = {"test.vir", 1};
  vlmc_status_t st = vlmc_module_parse(text, strlen(text), &options, &module);
  if (st) {
    TEST_FAIL_("parse failed: %s", vlmc_status_message(st));
    vlmc_status_free(st);
    return NULL;
  }
  return module;
}

/* Parses, creates an executor with `options` (NULL: defaults), runs `func` and destroys the
 * executor and module; results stay valid (owned). Returns the first error. */
static inline vlmc_status_t ref_run(const char *text, const vlmc_executor_options_t *options,
                                    const char *func, vlmc_tensor_t *args, uint32_t num_args,
                                    vlmc_tensor_t *results, uint32_t num_results) {
  memset(results, 0, num_results * sizeof *results);
  vlmc_module_t *module = ref_parse(text);
  if (!module) return vlmc_status_make(VLMC_PARSE_ERROR, "parse failed");
  vlmc_executor_t *ex = NULL;
  vlmc_status_t st = vlmc_executor_create(module, options, &ex);
  if (!st) st = vlmc_executor_run(ex, func, args, num_args, results, num_results);
  vlmc_executor_destroy(ex);
  vlmc_module_destroy(module);
  return st;
}

/* One F32 result compared element by element against `expected` within `tol`. */
static inline void ref_expect_f32(const vlmc_tensor_t *t, const float *expected, int64_t count,
                                  double tol, const char *what) {
  if (t->dtype != VLMC_DTYPE_F32 || vlmc_tensor_count(t) != count) {
    TEST_FAIL_("%s: expected %lld f32 values, got %lld of dtype %d", what, (long long)count,
               (long long)vlmc_tensor_count(t), (int)t->dtype);
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    float a = vlmc_tensor_f32(t)[i], e = expected[i];
    bool same = (isnan(a) && isnan(e)) || a == e || fabs((double)a - (double)e) <= tol;
    if (!same) {
      TEST_FAIL_("%s[%lld] = %.9g, expected %.9g (tol %g)", what, (long long)i, a, e, tol);
      return;
    }
  }
}

static inline void ref_expect_i64(const vlmc_tensor_t *t, const int64_t *expected, int64_t count,
                                  const char *what) {
  if (t->dtype != VLMC_DTYPE_I64 || vlmc_tensor_count(t) != count) {
    TEST_FAIL_("%s: expected %lld i64 values, got %lld of dtype %d", what, (long long)count,
               (long long)vlmc_tensor_count(t), (int)t->dtype);
    return;
  }
  for (int64_t i = 0; i < count; ++i)
    if (vlmc_tensor_i64(t)[i] != expected[i]) {
      TEST_FAIL_("%s[%lld] = %lld, expected %lld", what, (long long)i,
                 (long long)vlmc_tensor_i64(t)[i], (long long)expected[i]);
      return;
    }
}

static inline void ref_expect_shape(const vlmc_tensor_t *t, uint32_t rank, const int64_t *shape,
                                    const char *what) {
  bool same = t->rank == rank;
  for (uint32_t i = 0; same && i < rank; ++i) same = t->shape[i] == shape[i];
  if (!same) TEST_FAIL_("%s: shape differs (rank %u vs %u)", what, t->rank, rank);
}

/* A deterministic pseudo-random float in [-1, 1) (xorshift), for inputs of awkward sizes. */
static inline float ref_rand(uint64_t *state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *state = x;
  return (float)((double)(x >> 11) * 0x1p-53 * 2.0 - 1.0);
}

static inline float *ref_rand_array(int64_t n, uint64_t seed) {
  float *a = malloc((size_t)(n ? n : 1) * sizeof *a);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; a && i < n; ++i) a[i] = ref_rand(&s);
  return a;
}

static inline void ref_release_all(vlmc_tensor_t *t, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) vlmc_tensor_release(&t[i]);
}

#endif
