/* Element types, dimensions in the closed form sym*num/den+off, and tensor types. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/internal.h"
#include "support/checked_math.h"

static const vlmc_dtype_info_t dtype_infos[VLMC_DTYPE_COUNT] = {
    [VLMC_DTYPE_F32] = {"f32", 32, 1, 4, true, false, true, false},
    [VLMC_DTYPE_F16] = {"f16", 16, 1, 2, true, false, true, false},
    [VLMC_DTYPE_BF16] = {"bf16", 16, 1, 2, true, false, true, false},
    [VLMC_DTYPE_F64] = {"f64", 64, 1, 8, true, false, true, false},
    [VLMC_DTYPE_I64] = {"i64", 64, 1, 8, false, true, true, false},
    [VLMC_DTYPE_I32] = {"i32", 32, 1, 4, false, true, true, false},
    [VLMC_DTYPE_I8] = {"i8", 8, 1, 1, false, true, true, false},
    [VLMC_DTYPE_U8] = {"u8", 8, 1, 1, false, true, false, false},
    [VLMC_DTYPE_U32] = {"u32", 32, 1, 4, false, true, false, false},
    [VLMC_DTYPE_BOOL] = {"bool", 8, 1, 1, false, false, false, false},
    /* ggml's Q4_0: an f16 scale + 32 4-bit values; Q8_0: an f16 scale + 32 int8 values. */
    [VLMC_DTYPE_Q4_0] = {"q4_0", 0, 32, 18, false, false, true, true},
    [VLMC_DTYPE_Q8_0] = {"q8_0", 0, 32, 34, false, false, true, true},
};

const vlmc_dtype_info_t *vlmc_dtype_info(vlmc_dtype_t dtype) {
  assert(dtype >= 0 && dtype < VLMC_DTYPE_COUNT);
  return &dtype_infos[dtype];
}

bool vlmc_dtype_from_name(const char *name, size_t len, vlmc_dtype_t *out_dtype) {
  for (int i = 0; i < VLMC_DTYPE_COUNT; ++i) {
    const char *candidate = dtype_infos[i].name;
    if (strlen(candidate) == len && memcmp(candidate, name, len) == 0) {
      *out_dtype = (vlmc_dtype_t)i;
      return true;
    }
  }
  return false;
}

/* ---- dims ---- */

static int64_t gcd_i64(int64_t a, int64_t b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* Builds a normalised dim; a zero coefficient makes it static, which must not be negative. */
static vlmc_status_t dim_make(uint32_t sym, int64_t num, int64_t den, int64_t off,
                              vlmc_dim_t *out_dim) {
  if (den <= 0 || num < 0)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "a dimension needs a positive coefficient");
  if (sym == 0 || num == 0) {
    if (off < 0)
      return vlmc_status_make(VLMC_OUT_OF_RANGE, "dimension would be negative (%lld)",
                              (long long)off);
    *out_dim = vlmc_dim_static(off);
    return NULL;
  }
  int64_t g = gcd_i64(num, den);
  out_dim->sym = sym;
  out_dim->num = num / g;
  out_dim->den = den / g;
  out_dim->off = off;
  return NULL;
}

static vlmc_status_t dim_overflow(void) {
  return vlmc_status_make(VLMC_OUT_OF_RANGE, "dimension arithmetic overflows 64 bits");
}

vlmc_status_t vlmc_dim_symbolic(uint32_t sym, int64_t num, int64_t den, int64_t off,
                                vlmc_dim_t *out_dim) {
  return dim_make(sym, num, den, off, out_dim);
}

bool vlmc_dim_equal(vlmc_dim_t a, vlmc_dim_t b) {
  return a.sym == b.sym && a.num == b.num && a.den == b.den && a.off == b.off;
}

/* The sum (sign = 1) or difference (sign = -1) of the symbolic coefficients of a and b. */
static vlmc_status_t dim_combine(vlmc_dim_t a, vlmc_dim_t b, int sign, vlmc_dim_t *out_dim) {
  int64_t off;
  bool ok = sign > 0 ? vlmc_add_i64(a.off, b.off, &off)
                     : !__builtin_sub_overflow(a.off, b.off, &off);
  if (!ok) return dim_overflow();
  if (b.sym == 0) return dim_make(a.sym, a.num, a.den, off, out_dim);
  if (a.sym == 0) {
    if (sign < 0)
      return vlmc_status_make(VLMC_UNSUPPORTED,
                              "a static size minus a symbolic one has no closed form");
    return dim_make(b.sym, b.num, b.den, off, out_dim);
  }
  if (a.sym != b.sym)
    return vlmc_status_make(VLMC_UNSUPPORTED,
                            "dimensions over two different symbols have no closed form");
  int64_t left, right, num, den;
  if (!vlmc_mul_i64(a.num, b.den, &left) || !vlmc_mul_i64(b.num, a.den, &right) ||
      !vlmc_mul_i64(a.den, b.den, &den))
    return dim_overflow();
  ok = sign > 0 ? vlmc_add_i64(left, right, &num) : !__builtin_sub_overflow(left, right, &num);
  if (!ok) return dim_overflow();
  if (num < 0)
    return vlmc_status_make(VLMC_UNSUPPORTED,
                            "the difference has a negative symbolic coefficient");
  return dim_make(a.sym, num, den, off, out_dim);
}

vlmc_status_t vlmc_dim_add(vlmc_dim_t a, vlmc_dim_t b, vlmc_dim_t *out_dim) {
  return dim_combine(a, b, 1, out_dim);
}

vlmc_status_t vlmc_dim_sub(vlmc_dim_t a, vlmc_dim_t b, vlmc_dim_t *out_dim) {
  return dim_combine(a, b, -1, out_dim);
}

vlmc_status_t vlmc_dim_mul(vlmc_dim_t a, int64_t k, vlmc_dim_t *out_dim) {
  if (k < 0) return vlmc_status_make(VLMC_INVALID_ARGUMENT, "negative dimension factor");
  int64_t num, off;
  if (!vlmc_mul_i64(a.num, k, &num) || !vlmc_mul_i64(a.off, k, &off)) return dim_overflow();
  return dim_make(a.sym, num, a.den, off, out_dim);
}

vlmc_status_t vlmc_dim_div(vlmc_dim_t a, int64_t k, vlmc_dim_t *out_dim) {
  if (k <= 0) return vlmc_status_make(VLMC_INVALID_ARGUMENT, "dimension divisor must be positive");
  if (a.off % k != 0)
    return vlmc_status_make(VLMC_UNSUPPORTED, "offset %lld is not a multiple of %lld",
                            (long long)a.off, (long long)k);
  int64_t den;
  if (!vlmc_mul_i64(a.den, k, &den)) return dim_overflow();
  return dim_make(a.sym, a.num, den, a.off / k, out_dim);
}

vlmc_status_t vlmc_dim_eval(vlmc_dim_t dim, const int64_t *symbol_values, size_t num_symbols,
                            int64_t *out_value) {
  if (dim.sym == 0) {
    *out_value = dim.off;
    return NULL;
  }
  if (dim.sym > num_symbols)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "symbol %u has no value", dim.sym);
  int64_t scaled, value;
  if (!vlmc_mul_i64(symbol_values[dim.sym - 1], dim.num, &scaled)) return dim_overflow();
  if (scaled % dim.den != 0)
    return vlmc_status_make(VLMC_OUT_OF_RANGE, "%lld is not a multiple of %lld",
                            (long long)scaled, (long long)dim.den);
  if (!vlmc_add_i64(scaled / dim.den, dim.off, &value)) return dim_overflow();
  if (value < 0)
    return vlmc_status_make(VLMC_OUT_OF_RANGE, "dimension evaluates to %lld", (long long)value);
  *out_value = value;
  return NULL;
}

/* ---- types ---- */

vlmc_type_t vlmc_type_make(vlmc_dtype_t dtype, uint32_t rank, const int64_t *sizes) {
  assert(rank <= VLMC_IR_MAX_RANK);
  vlmc_type_t type;
  memset(&type, 0, sizeof type);
  type.dtype = dtype;
  type.rank = rank;
  for (uint32_t i = 0; i < rank; ++i) type.dims[i] = vlmc_dim_static(sizes[i]);
  return type;
}

bool vlmc_type_equal(const vlmc_type_t *a, const vlmc_type_t *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  for (uint32_t i = 0; i < a->rank; ++i)
    if (!vlmc_dim_equal(a->dims[i], b->dims[i])) return false;
  return true;
}

bool vlmc_type_is_static(const vlmc_type_t *type) {
  for (uint32_t i = 0; i < type->rank; ++i)
    if (type->dims[i].sym) return false;
  return true;
}

bool vlmc_dim_solve(vlmc_dim_t d, int64_t value, int64_t *out_sym) {
  int64_t v, scaled;
  if (vlmc_dim_is_static(d) || __builtin_sub_overflow(value, d.off, &v) || v < 0) return false;
  if (!vlmc_mul_i64(v, d.den, &scaled) || scaled % d.num != 0) return false;
  *out_sym = scaled / d.num;
  return true;
}

bool vlmc_dim_bind(vlmc_dim_t d, int64_t value, int64_t *symbols, bool *bound,
                   size_t num_symbols) {
  if (vlmc_dim_is_static(d)) return d.off == value;
  if (!bound[d.sym - 1]) {
    int64_t sym;
    if (!vlmc_dim_solve(d, value, &sym)) return false;
    symbols[d.sym - 1] = sym;
    bound[d.sym - 1] = true;
  }
  int64_t got;
  vlmc_status_t st = vlmc_dim_eval(d, symbols, num_symbols, &got);
  vlmc_status_free(st);
  return !st && got == value;
}

bool vlmc_type_static_count(const vlmc_type_t *type, int64_t *out_count) {
  int64_t count = 1;
  for (uint32_t i = 0; i < type->rank; ++i) {
    if (type->dims[i].sym || !vlmc_mul_i64(count, type->dims[i].off, &count)) return false;
  }
  *out_count = count;
  return true;
}

bool vlmc_type_size_fits(const vlmc_type_t *type) {
  for (uint32_t i = 0; i < type->rank; ++i)
    if (!type->dims[i].sym && type->dims[i].off == 0) return true; /* no elements at all */
  int64_t count = 1;
  for (uint32_t i = 0; i < type->rank; ++i)
    if (!type->dims[i].sym && !vlmc_mul_i64(count, type->dims[i].off, &count)) return false;
  const vlmc_dtype_info_t *info = vlmc_dtype_info(type->dtype);
  uint64_t blocks = ((uint64_t)count + info->block_size - 1) / info->block_size, bytes;
  return vlmc_mul_u64(blocks, info->block_bytes, &bytes) && bytes <= SIZE_MAX;
}

/* ---- element counts as polynomials ----
 * A symbolic dim (num/den)*sym + off factors as (num/den) * (sym + off*den/num): a rational
 * coefficient times a monic linear factor. The product of a type's dims is therefore a
 * coefficient times a multiset of such factors, and two products are equal polynomials exactly
 * when coefficients and multisets agree (unique factorisation). */

typedef struct {
  int64_t num, den; /* den > 0, reduced */
} rational_t;

typedef struct {
  uint32_t sym;
  rational_t c;
} factor_t;

typedef struct {
  bool zero;
  rational_t coef;
  uint32_t count;
  factor_t factors[VLMC_IR_MAX_RANK];
} count_poly_t;

static bool rational_make(int64_t num, int64_t den, rational_t *out) {
  if (den < 0) {
    if (num == INT64_MIN || den == INT64_MIN) return false;
    num = -num;
    den = -den;
  }
  int64_t g = gcd_i64(num, den);
  if (g == 0) g = 1;
  out->num = num / g;
  out->den = den / g;
  return true;
}

static bool rational_mul(rational_t a, rational_t b, rational_t *out) {
  int64_t num, den;
  if (!vlmc_mul_i64(a.num, b.num, &num) || !vlmc_mul_i64(a.den, b.den, &den)) return false;
  return rational_make(num, den, out);
}

static int factor_compare(const void *pa, const void *pb) {
  const factor_t *a = pa, *b = pb;
  if (a->sym != b->sym) return a->sym < b->sym ? -1 : 1;
  if (a->c.num != b->c.num) return a->c.num < b->c.num ? -1 : 1;
  if (a->c.den != b->c.den) return a->c.den < b->c.den ? -1 : 1;
  return 0;
}

static bool count_poly_build(const vlmc_type_t *type, count_poly_t *out) {
  memset(out, 0, sizeof *out);
  out->coef.num = 1;
  out->coef.den = 1;
  for (uint32_t i = 0; i < type->rank; ++i) {
    vlmc_dim_t d = type->dims[i];
    if (d.sym == 0) {
      if (d.off == 0) out->zero = true;
      if (!rational_mul(out->coef, (rational_t){d.off, 1}, &out->coef)) return false;
      continue;
    }
    rational_t scale, c;
    int64_t c_num;
    if (!rational_make(d.num, d.den, &scale) || !rational_mul(out->coef, scale, &out->coef))
      return false;
    if (!vlmc_mul_i64(d.off, d.den, &c_num) || !rational_make(c_num, d.num, &c)) return false;
    out->factors[out->count].sym = d.sym;
    out->factors[out->count].c = c;
    out->count++;
  }
  qsort(out->factors, out->count, sizeof(factor_t), factor_compare);
  return true;
}

vlmc_status_t vlmc_type_same_count(const vlmc_type_t *a, const vlmc_type_t *b, bool *out_same) {
  count_poly_t pa, pb;
  if (!count_poly_build(a, &pa) || !count_poly_build(b, &pb))
    return vlmc_status_make(VLMC_OUT_OF_RANGE, "element count overflows 64 bits");
  if (pa.zero || pb.zero) {
    *out_same = pa.zero && pb.zero;
    return NULL;
  }
  bool same = pa.coef.num == pb.coef.num && pa.coef.den == pb.coef.den && pa.count == pb.count;
  for (uint32_t i = 0; same && i < pa.count; ++i)
    same = factor_compare(&pa.factors[i], &pb.factors[i]) == 0;
  *out_same = same;
  return NULL;
}
