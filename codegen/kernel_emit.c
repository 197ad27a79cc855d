/* The shared kernel writer (codegen/kernel_emit.h): entry-block constants and dims, prologue
 * reads with storage conversion, scalar elementwise semantics, the epilogue, the function. */
#include "codegen/kernel_emit.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact/kernel_table.h"

/* Memo kinds of this file; a target's own start at VLMC_KERNEL_MEMO_TARGET. */
enum { MEMO_INDEX, MEMO_I64, MEMO_F32, MEMO_DIM, MEMO_SYM };

/* ---- writing ---- */

int vlmc_kernel_emit_fresh(vlmc_kernel_emit_t *e) { return e->next++; }

static void vline(vlmc_strbuf_t *buf, int indent, const char *fmt, va_list ap) {
  for (int i = 0; i < indent; ++i) vlmc_strbuf_puts(buf, "  ");
  char small[512];
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(small, sizeof small, fmt, copy);
  va_end(copy);
  if (n >= 0 && (size_t)n < sizeof small) {
    vlmc_strbuf_puts(buf, small);
  } else if (n >= 0) {
    char *big = malloc((size_t)n + 1);
    if (big) {
      vsnprintf(big, (size_t)n + 1, fmt, ap);
      vlmc_strbuf_puts(buf, big);
      free(big);
    } else {
      buf->failed = true;
    }
  }
  vlmc_strbuf_putc(buf, '\n');
}

void vlmc_kernel_emit_line(vlmc_kernel_emit_t *e, const char *fmt, ...) {
  if (fmt[0] == '}') --e->indent;
  va_list ap;
  va_start(ap, fmt);
  vline(&e->body, e->indent + 2, fmt, ap);
  va_end(ap);
  size_t len = strlen(fmt);
  if (len && fmt[len - 1] == '{') ++e->indent;
}

void vlmc_kernel_emit_entry_line(vlmc_kernel_emit_t *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vline(&e->entry, 2, fmt, ap);
  va_end(ap);
}

void vlmc_kernel_emit_fail(vlmc_kernel_emit_t *e, const char *fmt, ...) {
  if (e->error) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  e->error = vlmc_status_make(VLMC_UNSUPPORTED, "%s", msg);
}

/* ---- memoized entry values ---- */

int vlmc_kernel_emit_memo_find(const vlmc_kernel_emit_t *e, int kind, int64_t key) {
  for (uint32_t i = 0; i < e->num_memo; ++i)
    if (e->memo[i].kind == kind && e->memo[i].key == key) return e->memo[i].ssa;
  return -1;
}

int vlmc_kernel_emit_memo_add(vlmc_kernel_emit_t *e, int kind, int64_t key, int ssa) {
  if (e->num_memo < VLMC_KERNEL_EMIT_MAX_MEMO) {
    e->memo[e->num_memo].kind = kind;
    e->memo[e->num_memo].key = key;
    e->memo[e->num_memo].ssa = ssa;
    e->num_memo++;
  }
  return ssa;
}

/* An integer constant of MLIR type `type` ("index" or "i64"), memoized under `kind`. */
static int integer_constant(vlmc_kernel_emit_t *e, int kind, const char *type, int64_t value) {
  int v = vlmc_kernel_emit_memo_find(e, kind, value);
  if (v >= 0) return v;
  v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_entry_line(e, VLMC_SSA " = arith.constant %lld : %s", v, (long long)value, type);
  return vlmc_kernel_emit_memo_add(e, kind, value, v);
}

int vlmc_kernel_emit_index(vlmc_kernel_emit_t *e, int64_t value) {
  return integer_constant(e, MEMO_INDEX, "index", value);
}

int vlmc_kernel_emit_i64(vlmc_kernel_emit_t *e, int64_t value) {
  return integer_constant(e, MEMO_I64, "i64", value);
}

int vlmc_kernel_emit_f32(vlmc_kernel_emit_t *e, double value) {
  float f = (float)value;
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  int v = vlmc_kernel_emit_memo_find(e, MEMO_F32, bits);
  if (v >= 0) return v;
  v = vlmc_kernel_emit_fresh(e);
  /* The hex form is exact, and also spells inf and NaN. */
  vlmc_kernel_emit_entry_line(e, VLMC_SSA " = arith.constant 0x%08X : f32", v, bits);
  return vlmc_kernel_emit_memo_add(e, MEMO_F32, bits, v);
}

static int emit_symbol(vlmc_kernel_emit_t *e, uint32_t sym) {
  int v = vlmc_kernel_emit_memo_find(e, MEMO_SYM, sym);
  if (v >= 0) return v;
  uint32_t k = 0;
  while (k < e->num_syms && e->syms[k] != sym) ++k;
  if (k == e->num_syms) {
    if (k == VLMC_KERNEL_EMIT_MAX_SYMS) {
      vlmc_kernel_emit_fail(e, "a kernel reads at most %d symbols", VLMC_KERNEL_EMIT_MAX_SYMS);
      return vlmc_kernel_emit_index(e, 0);
    }
    e->syms[e->num_syms++] = sym;
  }
  if (e->hooks && e->hooks->read_symbol) {
    v = e->hooks->read_symbol(e, k);
  } else {
    int at = vlmc_kernel_emit_index(e, k);
    int raw = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_entry_line(e, VLMC_SSA " = memref.load %%syms[" VLMC_SSA "] : memref<?xi64>", raw, at);
    v = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_entry_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : i64 to index", v, raw);
  }
  return vlmc_kernel_emit_memo_add(e, MEMO_SYM, sym, v);
}

int vlmc_kernel_emit_dim(vlmc_kernel_emit_t *e, vlmc_dim_t dim) {
  if (vlmc_dim_is_static(dim)) return vlmc_kernel_emit_index(e, dim.off);
  /* Key: the dim's four fields packed (small in practice; collisions only merge equal dims). */
  int64_t key = ((int64_t)dim.sym << 48) ^ ((dim.num & 0xFFFF) << 32) ^ ((dim.den & 0xFFFF) << 16) ^
                (dim.off & 0xFFFF);
  int v = vlmc_kernel_emit_memo_find(e, MEMO_DIM, key);
  if (v >= 0) return v;
  v = emit_symbol(e, dim.sym);
  if (dim.num != 1) {
    int t = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_entry_line(e, VLMC_SSA " = arith.muli " VLMC_SSA ", " VLMC_SSA " : index", t, v,
               vlmc_kernel_emit_index(e, dim.num));
    v = t;
  }
  if (dim.den != 1) {
    int t = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_entry_line(e, VLMC_SSA " = arith.divsi " VLMC_SSA ", " VLMC_SSA " : index", t, v,
               vlmc_kernel_emit_index(e, dim.den));
    v = t;
  }
  if (dim.off != 0) {
    int t = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_entry_line(e, VLMC_SSA " = arith.addi " VLMC_SSA ", " VLMC_SSA " : index", t, v,
               vlmc_kernel_emit_index(e, dim.off));
    v = t;
  }
  return vlmc_kernel_emit_memo_add(e, MEMO_DIM, key, v);
}

int vlmc_kernel_emit_dims_product(vlmc_kernel_emit_t *e, const vlmc_type_t *type, uint32_t from,
                                  uint32_t to) {
  int64_t fixed = 1;
  int v = -1;
  for (uint32_t d = from; d < to && d < type->rank; ++d) {
    if (vlmc_dim_is_static(type->dims[d])) {
      fixed *= type->dims[d].off;
      continue;
    }
    int dim = vlmc_kernel_emit_dim(e, type->dims[d]);
    if (v < 0) {
      v = dim;
    } else {
      int t = vlmc_kernel_emit_fresh(e);
      vlmc_kernel_emit_entry_line(e, VLMC_SSA " = arith.muli " VLMC_SSA ", " VLMC_SSA " : index", t, v, dim);
      v = t;
    }
  }
  if (v < 0) return vlmc_kernel_emit_index(e, fixed);
  if (fixed == 1) return v;
  int t = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_entry_line(e, VLMC_SSA " = arith.muli " VLMC_SSA ", " VLMC_SSA " : index", t, v,
             vlmc_kernel_emit_index(e, fixed));
  return t;
}

vlmc_dim_t vlmc_kernel_emit_count_dims(const vlmc_type_t *type) {
  vlmc_dim_t d;
  return vlmc_type_count_dim(type, &d) ? d : vlmc_dim_static(-1);
}

/* ---- inputs ---- */

static int member_index(const vlmc_dispatch_region_t *r, const vlmc_op_t *op) {
  for (uint32_t i = 0; op && i < r->num_ops; ++i)
    if (r->ops[i] == op) return (int)i;
  return -1;
}

int vlmc_kernel_emit_source_input(const vlmc_kernel_emit_t *e, const vlmc_value_t *v) {
  return vlmc_dispatch_source_input(e->region, e->anchor_index, v);
}

bool vlmc_kernel_emit_readable(const vlmc_kernel_emit_t *e, const vlmc_value_t *v) {
  return vlmc_kernel_emit_source_input(e, v) >= 0 || vlmc_kernel_emit_dequantizes(e, v) ||
         vlmc_kernel_emit_norm_prologue(e, v);
}

vlmc_dtype_t vlmc_kernel_emit_input_storage(const vlmc_kernel_emit_t *e, uint32_t i) {
  return vlmc_kernel_input_storage(e->region->inputs[i]); /* the table's rule */
}

const char *vlmc_kernel_emit_storage_type(vlmc_dtype_t d) {
  switch (d) {
    case VLMC_DTYPE_BF16: return "bf16";
    case VLMC_DTYPE_F16: return "f16";
    case VLMC_DTYPE_I64: return "i64";
    case VLMC_DTYPE_U32: return "i32"; /* MLIR's integers are signless */
    default: return "f32";
  }
}

const char *vlmc_kernel_emit_type(vlmc_dtype_t ir_dtype) {
  return vlmc_dtype_info(ir_dtype)->is_float ? "f32" : "i64";
}

static int i32_const(vlmc_kernel_emit_t *e, int64_t c);
static int i32_op(vlmc_kernel_emit_t *e, const char *op, int a, int b);

/* Element `flat` of input i in its storage's load form: f32 for floats (bf16 / f16 widened),
 * i64 for integers, i32 for packed u32 words. */
static int load_stored(vlmc_kernel_emit_t *e, int i, int flat) {
  vlmc_dtype_t storage = vlmc_kernel_emit_input_storage(e, (uint32_t)i);
  if (e->hooks && e->hooks->load_input) return e->hooks->load_input(e, i, storage, flat);
  const char *st = vlmc_kernel_emit_storage_type(storage);
  int raw = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.load %%b%d[" VLMC_SSA "] : memref<?x%s>", raw, i, flat,
                        st);
  if (storage != VLMC_DTYPE_BF16 && storage != VLMC_DTYPE_F16) return raw;
  int wide = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.extf " VLMC_SSA " : %s to f32", wide, raw, st);
  return wide;
}

int vlmc_kernel_emit_quant_index(vlmc_kernel_emit_t *e, int row, int64_t per_row, int col,
                                 int64_t per_item) {
  int row_start = vlmc_kernel_emit_index_op(e, "arith.muli", row, vlmc_kernel_emit_index(e, per_row));
  int in_row = vlmc_kernel_emit_index_op(e, "arith.divui", col, vlmc_kernel_emit_index(e, per_item));
  return vlmc_kernel_emit_index_op(e, "arith.addi", row_start, in_row);
}

bool vlmc_kernel_emit_dequantizes(const vlmc_kernel_emit_t *e, const vlmc_value_t *v) {
  return vlmc_dispatch_dequantize_source(e->region, e->anchor_index, v) != NULL;
}

int vlmc_kernel_emit_dequantized(vlmc_kernel_emit_t *e, const vlmc_op_t *dq, int row, int col) {
  vlmc_quant_layout_t L = vlmc_dequantize_layout(dq);
  int packed = vlmc_kernel_emit_source_input(e, dq->operands[0]);
  int word = load_stored(e, packed, vlmc_kernel_emit_quant_index(e, row, L.words, col, L.per_word));
  int lane = vlmc_kernel_emit_index_op(e, "arith.remui", col, vlmc_kernel_emit_index(e, L.per_word));
  int lane32 = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : index to i32", lane32, lane);
  int shift = i32_op(e, "muli", lane32, i32_const(e, L.bits));
  int shifted = i32_op(e, "shrui", word, shift);
  int q = i32_op(e, "andi", shifted, i32_const(e, (1 << L.bits) - 1));
  int qf = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.uitofp " VLMC_SSA " : i32 to f32", qf, q);
  int g = vlmc_kernel_emit_quant_index(e, row, L.groups, col, L.group);
  int scale = vlmc_kernel_emit_load(e, dq->operands[1], g);
  int bias = vlmc_kernel_emit_load(e, dq->operands[2], g);
  /* two roundings, as the reference (reference/exec_quantize.c) */
  return vlmc_kernel_emit_float_op(e, "arith.addf", vlmc_kernel_emit_float_op(e, "arith.mulf", scale, qf, 0),
                                   bias, 0);
}

const vlmc_op_t *vlmc_kernel_emit_norm_prologue(const vlmc_kernel_emit_t *e, const vlmc_value_t *v) {
  const vlmc_op_t *chain[VLMC_DISPATCH_MAX_NORM_CHAIN];
  uint32_t n;
  return vlmc_dispatch_norm_source(e->region, e->anchor_index, v, chain, &n);
}

void vlmc_kernel_emit_set_norm_scale(vlmc_kernel_emit_t *e, const vlmc_op_t *norm, int a) {
  e->norm = norm;
  e->norm_scale = a;
}

static bool rounds_result(const vlmc_op_t *op);
static int round_float(vlmc_kernel_emit_t *e, int x, vlmc_dtype_t to);

/* w * (x * a) as the norm's kernel computes it (kernel_norm.c), its result's rounding, then
 * each cast of the chain. */
static int normed(vlmc_kernel_emit_t *e, const vlmc_op_t *norm, const vlmc_op_t *const *chain,
                  uint32_t len, int x, int w, int a) {
  int y = vlmc_kernel_emit_float_op(e, "arith.mulf", x, a, 0);
  if (w >= 0) y = vlmc_kernel_emit_float_op(e, "arith.mulf", w, y, 0);
  if (rounds_result(norm)) y = round_float(e, y, norm->results[0].type.dtype); /* a norm in f16 */
  for (uint32_t i = 0; i < len; ++i)
    if (chain[i]->kind == VLMC_OP_CAST) y = vlmc_kernel_emit_elementwise(e, chain[i], &y);
  return y;
}

/* Element `flat` of a value read through norm prologue `norm` and its chain (see the header):
 * the norm's element as its kernel computes it (kernel_norm.c's w * (x * a)), then each cast. */
static int load_normed(vlmc_kernel_emit_t *e, const vlmc_op_t *norm, const vlmc_op_t *const *chain,
                       uint32_t len, int flat) {
  if (e->norm != norm) {
    vlmc_kernel_emit_fail(e, "template '%s' reads x through an rms_norm prologue but computes no "
                          "row statistic for it (fuse{norm-prologue=true} regions need one)",
                          e->template_name ? e->template_name : "?");
    return vlmc_kernel_emit_f32(e, 0);
  }
  const vlmc_type_t *t = &norm->results[0].type;
  int cols = vlmc_kernel_emit_dim(e, t->dims[t->rank - 1]);
  int col = vlmc_kernel_emit_index_op(e, "arith.remui", flat, cols);
  int x = vlmc_kernel_emit_load(e, norm->operands[0], flat);
  int w = norm->num_operands > 1 ? vlmc_kernel_emit_load(e, norm->operands[1], col) : -1;
  return normed(e, norm, chain, len, x, w, e->norm_scale);
}

int vlmc_kernel_emit_norm_element(vlmc_kernel_emit_t *e, const vlmc_value_t *v, int x, int w, int a) {
  const vlmc_op_t *chain[VLMC_DISPATCH_MAX_NORM_CHAIN];
  uint32_t len;
  const vlmc_op_t *norm = vlmc_dispatch_norm_source(e->region, e->anchor_index, v, chain, &len);
  if (!norm) {
    vlmc_kernel_emit_fail(e, "vlmc_kernel_emit_norm_element: the value is not read through a "
                          "norm prologue");
    return vlmc_kernel_emit_f32(e, 0);
  }
  return normed(e, norm, chain, len, x, w, a);
}

int vlmc_kernel_emit_load(vlmc_kernel_emit_t *e, const vlmc_value_t *v, int flat) {
  int i = vlmc_kernel_emit_source_input(e, v);
  if (i < 0) {
    const vlmc_op_t *dq = vlmc_dispatch_dequantize_source(e->region, e->anchor_index, v);
    if (dq) {
      int cols = vlmc_kernel_emit_index(e, vlmc_op_attr_int(dq, "cols"));
      int row = vlmc_kernel_emit_index_op(e, "arith.divui", flat, cols);
      int col = vlmc_kernel_emit_index_op(e, "arith.remui", flat, cols);
      return vlmc_kernel_emit_dequantized(e, dq, row, col);
    }
    const vlmc_op_t *chain[VLMC_DISPATCH_MAX_NORM_CHAIN];
    uint32_t len;
    const vlmc_op_t *norm = vlmc_dispatch_norm_source(e->region, e->anchor_index, v, chain, &len);
    if (norm) return load_normed(e, norm, chain, len, flat);
    vlmc_kernel_emit_fail(e, "kernel reads a value that is neither an input nor a prologue result");
    return vlmc_kernel_emit_f32(e, 0);
  }
  int raw = load_stored(e, i, flat);
  if (vlmc_kernel_emit_input_storage(e, (uint32_t)i) != VLMC_DTYPE_U32) return raw;
  int wide = vlmc_kernel_emit_fresh(e); /* a u32 read as an integer value: i64, unsigned */
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.extui " VLMC_SSA " : i32 to i64", wide, raw);
  return wide;
}

/* ---- computing ---- */

static int binary(vlmc_kernel_emit_t *e, const char *op, int a, int b, const char *type) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = %s " VLMC_SSA ", " VLMC_SSA " : %s", v, op, a, b, type);
  return v;
}

static int unary(vlmc_kernel_emit_t *e, const char *op, int a, const char *type) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = %s " VLMC_SSA " : %s", v, op, a, type);
  return v;
}

/* 1 / (1 + exp(-x)) and x / (1 + exp(-x)), as the reference computes them. */
static int logistic_denominator(vlmc_kernel_emit_t *e, int x) {
  int neg = unary(e, "arith.negf", x, "f32");
  int ex = unary(e, "math.exp", neg, "f32");
  return binary(e, "arith.addf", vlmc_kernel_emit_f32(e, 1.0), ex, "f32");
}

/* erf(x) as arithmetic for targets without math.erf: erfc by the Chebyshev fit of Numerical
 * Recipes (erfcc; fractional error < 1.2e-7 everywhere), erf = 1 - erfc for x >= 0 and odd. */
static int erf_expanded(vlmc_kernel_emit_t *e, int x) {
  static const double kFit[] = {-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
                                0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277};
  int one = vlmc_kernel_emit_f32(e, 1.0);
  int z = unary(e, "math.absf", x, "f32");
  int t = binary(e, "arith.divf", one,
                 binary(e, "arith.addf", one, binary(e, "arith.mulf", vlmc_kernel_emit_f32(e, 0.5), z, "f32"),
                        "f32"), "f32");
  int poly = vlmc_kernel_emit_f32(e, kFit[9]);
  for (int k = 8; k >= 0; --k) { /* Horner: poly = kFit[k] + t * poly */
    int coeff = vlmc_kernel_emit_f32(e, kFit[k]);
    int t_poly = binary(e, "arith.mulf", t, poly, "f32");
    poly = binary(e, "arith.addf", coeff, t_poly, "f32");
  }
  int zz = binary(e, "arith.mulf", z, z, "f32");
  int arg = binary(e, "arith.subf", poly, zz, "f32");
  int erfc = binary(e, "arith.mulf", t, unary(e, "math.exp", arg, "f32"), "f32");
  int pos = binary(e, "arith.subf", one, erfc, "f32");
  return binary(e, "math.copysign", pos, x, "f32");
}

static int erf_of(vlmc_kernel_emit_t *e, int x) {
  if (e->hooks && e->hooks->expand_erf) return erf_expanded(e, x);
  return unary(e, "math.erf", x, "f32");
}

static int gelu(vlmc_kernel_emit_t *e, const vlmc_op_t *op, int x) {
  const char *approx = vlmc_op_attr_enum(op, "approx");
  int half = vlmc_kernel_emit_f32(e, 0.5), one = vlmc_kernel_emit_f32(e, 1.0);
  int inner;
  if (strcmp(approx, "tanh") == 0) {
    int x3 = binary(e, "arith.mulf", binary(e, "arith.mulf", x, x, "f32"), x, "f32");
    int poly = binary(e, "arith.addf", x,
                      binary(e, "arith.mulf", vlmc_kernel_emit_f32(e, 0.044715), x3, "f32"), "f32");
    int arg = binary(e, "arith.mulf", vlmc_kernel_emit_f32(e, 0.7978845608028654 /* sqrt(2 / pi) */), poly, "f32");
    inner = unary(e, "math.tanh", arg, "f32");
  } else {
    int arg = binary(e, "arith.mulf", x, vlmc_kernel_emit_f32(e, 1.0 / sqrt(2.0)), "f32");
    inner = erf_of(e, arg);
  }
  int hx = binary(e, "arith.mulf", half, x, "f32");
  return binary(e, "arith.mulf", hx, binary(e, "arith.addf", one, inner, "f32"), "f32");
}

static int clamp(vlmc_kernel_emit_t *e, const vlmc_op_t *op, int x, bool is_float) {
  const vlmc_attr_t *lo = vlmc_op_attr(op, "min"), *hi = vlmc_op_attr(op, "max");
  if (!is_float) {
    if (lo) x = binary(e, "arith.maxsi", x, vlmc_kernel_emit_i64(e, (int64_t)lo->v.f), "i64");
    if (hi) x = binary(e, "arith.minsi", x, vlmc_kernel_emit_i64(e, (int64_t)hi->v.f), "i64");
    return x;
  }
  if (lo) x = binary(e, "arith.maximumf", x, vlmc_kernel_emit_f32(e, lo->v.f), "f32");
  if (hi) x = binary(e, "arith.minimumf", x, vlmc_kernel_emit_f32(e, hi->v.f), "f32");
  return x;
}

/* Wraps an i64 to a narrower integer dtype (two's complement), or to 0/1 for bool. */
static int wrap_int(vlmc_kernel_emit_t *e, int x, vlmc_dtype_t to) {
  const vlmc_dtype_info_t *info = vlmc_dtype_info(to);
  if (to == VLMC_DTYPE_BOOL) {
    int ne = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi ne, " VLMC_SSA ", " VLMC_SSA " : i64", ne, x,
                          vlmc_kernel_emit_i64(e, 0));
    int v = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.extui " VLMC_SSA " : i1 to i64", v, ne);
    return v;
  }
  if (info->bits >= 64) return x;
  int t = vlmc_kernel_emit_fresh(e), v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.trunci " VLMC_SSA " : i64 to i%u", t, x, info->bits);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.%s " VLMC_SSA " : i%u to i64", v,
                        info->is_signed ? "extsi" : "extui", t, info->bits);
  return v;
}

static int i32_const(vlmc_kernel_emit_t *e, int64_t c) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.constant %lld : i32", v, (long long)c);
  return v;
}

/* arith.<op> of two i32 SSAs. */
static int i32_op(vlmc_kernel_emit_t *e, const char *op, int a, int b) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.%s " VLMC_SSA ", " VLMC_SSA " : i32", v, op, a, b);
  return v;
}

/* cond ? a : b, of i32 SSAs, cond = (x <pred> c) unsigned or signed as pred says. */
static int i32_select_if(vlmc_kernel_emit_t *e, int x, const char *pred, int64_t c, int a, int b) {
  int cond = vlmc_kernel_emit_fresh(e), v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi %s, " VLMC_SSA ", " VLMC_SSA " : i32", cond, pred, x,
                        i32_const(e, c));
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : i32", v, cond, a, b);
  return v;
}

/* Rounds an f32 to bf16 and back in integer arithmetic, round to nearest even, NaN kept
 * quiet (as support/float16.c does): LLVM would call __truncsfbf2, which libgcc lacks. */
static int round_bf16(vlmc_kernel_emit_t *e, int x) {
  int bits = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.bitcast " VLMC_SSA " : f32 to i32", bits, x);
  int mask = i32_const(e, -65536);
  int high = i32_op(e, "shrui", bits, i32_const(e, 16));
  int lsb = i32_op(e, "andi", high, i32_const(e, 1));
  int bias = i32_op(e, "addi", lsb, i32_const(e, 32767));
  int rounded = i32_op(e, "andi", i32_op(e, "addi", bits, bias), mask);
  int nan_kept = i32_op(e, "andi", i32_op(e, "ori", bits, i32_const(e, 4194304)), mask);
  int is_nan = vlmc_kernel_emit_fresh(e), chosen = vlmc_kernel_emit_fresh(e), v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpf uno, " VLMC_SSA ", " VLMC_SSA " : f32", is_nan, x, x);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : i32",
                        chosen, is_nan, nan_kept, rounded);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.bitcast " VLMC_SSA " : i32 to f32", v, chosen);
  return v;
}

/* Rounds an f32 to f16 and back in integer arithmetic (the round_f16_by_bits hook), as
 * support/float16.c's vlmc_f32_to_f16 then vlmc_f16_to_f32 do: round to nearest even, f16
 * subnormals (multiples of 2^-24), 65520 and up to inf, inf and NaN kept, the sign kept. */
static int round_f16_bits(vlmc_kernel_emit_t *e, int x) {
  int bits = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.bitcast " VLMC_SSA " : f32 to i32", bits, x);
  int sign = i32_op(e, "andi", bits, i32_const(e, INT32_MIN));
  int a = i32_op(e, "andi", bits, i32_const(e, 0x7fffffff)); /* |x| */
  /* f16 normals (|x| >= 2^-14): the low 13 mantissa bits rounded away, to nearest even; a
   * carry into the exponent is the right result, one past 65504 is >= 2^16: inf. */
  int kept = i32_op(e, "shrui", a, i32_const(e, 13));
  int lsb = i32_op(e, "andi", kept, i32_const(e, 1));
  int sum = i32_op(e, "addi", i32_op(e, "addi", a, i32_const(e, 0x0fff)), lsb);
  int normal = i32_op(e, "andi", sum, i32_const(e, -0x2000));
  normal = i32_select_if(e, normal, "uge", 0x47800000, i32_const(e, 0x7f800000), normal);
  /* Below 2^-14: |x| = m 2^(E-150) rounded to a multiple q of 2^-24, q = m >> (126 - E) to
   * nearest even (a shift of 25 or more leaves 0; clamped to 31, what a shift may be). */
  int exponent = i32_op(e, "shrui", a, i32_const(e, 23));
  int mantissa = i32_op(e, "andi", a, i32_const(e, 0x7fffff));
  int m = i32_op(e, "ori", mantissa, i32_const(e, 0x800000));
  int unclamped = i32_op(e, "subi", i32_const(e, 126), exponent);
  int shift = i32_op(e, "minui", unclamped, i32_const(e, 31));
  int one = i32_const(e, 1);
  int half = i32_op(e, "shli", one, i32_op(e, "subi", shift, i32_const(e, 1)));
  int m_shifted = i32_op(e, "shrui", m, shift);
  int odd = i32_op(e, "andi", m_shifted, i32_const(e, 1));
  int q = i32_op(e, "shrui", i32_op(e, "addi", i32_op(e, "addi", m, i32_op(e, "subi", half, i32_const(e, 1))), odd),
                 shift);
  int qf = vlmc_kernel_emit_fresh(e), scaled = vlmc_kernel_emit_fresh(e), sub = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.uitofp " VLMC_SSA " : i32 to f32", qf, q);
  /* q <= 1024, times 2^-24: both exact */
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.mulf " VLMC_SSA ", " VLMC_SSA " : f32", scaled, qf,
                        vlmc_kernel_emit_f32(e, 5.9604644775390625e-08f));
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.bitcast " VLMC_SSA " : f32 to i32", sub, scaled);
  int r = i32_select_if(e, a, "ult", 0x38800000, sub, normal);
  r = i32_select_if(e, a, "uge", 0x7f800000, a, r); /* inf, NaN */
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.bitcast " VLMC_SSA " : i32 to f32", v, i32_op(e, "ori", r, sign));
  return v;
}

/* Rounds an f32 to f16 / bf16 and back (what a cast to those dtypes stores). */
static int round_float(vlmc_kernel_emit_t *e, int x, vlmc_dtype_t to) {
  if (to == VLMC_DTYPE_BF16) return round_bf16(e, x);
  if (to != VLMC_DTYPE_F16) return x;
  if (e->hooks && e->hooks->round_f16_by_bits) return round_f16_bits(e, x);
  int narrow = vlmc_kernel_emit_fresh(e), wide = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.truncf " VLMC_SSA " : f32 to f16", narrow, x);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.extf " VLMC_SSA " : f16 to f32", wide, narrow);
  return wide;
}

int vlmc_kernel_emit_round_f16(vlmc_kernel_emit_t *e, int x) { return round_float(e, x, VLMC_DTYPE_F16); }

static int cast(vlmc_kernel_emit_t *e, const vlmc_op_t *op, int x) {
  vlmc_dtype_t from = op->operands[0]->type.dtype, to = op->results[0].type.dtype;
  bool from_float = vlmc_dtype_info(from)->is_float, to_float = vlmc_dtype_info(to)->is_float;
  if (from_float && to_float) return round_float(e, x, to);
  if (!from_float && !to_float) return wrap_int(e, x, to);
  int v = vlmc_kernel_emit_fresh(e);
  if (to_float) {
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.sitofp " VLMC_SSA " : i64 to f32", v, x);
    return round_float(e, v, to);
  }
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.fptosi " VLMC_SSA " : f32 to i64", v, x);
  return wrap_int(e, v, to);
}

static int elementwise_f32(vlmc_kernel_emit_t *e, const vlmc_op_t *op, const int *in) {
  bool f = vlmc_dtype_info(op->results[0].type.dtype)->is_float;
  const char *t = f ? "f32" : "i64";
  switch (op->kind) {
    case VLMC_OP_RESHAPE: return in[0];
    case VLMC_OP_ADD: return binary(e, f ? "arith.addf" : "arith.addi", in[0], in[1], t);
    case VLMC_OP_SUB: return binary(e, f ? "arith.subf" : "arith.subi", in[0], in[1], t);
    case VLMC_OP_MUL: return binary(e, f ? "arith.mulf" : "arith.muli", in[0], in[1], t);
    case VLMC_OP_DIV: return binary(e, f ? "arith.divf" : "arith.divsi", in[0], in[1], t);
    case VLMC_OP_NEG:
      return f ? unary(e, "arith.negf", in[0], t)
               : binary(e, "arith.subi", vlmc_kernel_emit_i64(e, 0), in[0], t);
    case VLMC_OP_EXP: return unary(e, "math.exp", in[0], t);
    case VLMC_OP_SQRT: return unary(e, "math.sqrt", in[0], t);
    case VLMC_OP_RSQRT: return unary(e, "math.rsqrt", in[0], t);
    case VLMC_OP_TANH: return unary(e, "math.tanh", in[0], t);
    case VLMC_OP_ERF: return erf_of(e, in[0]);
    case VLMC_OP_COS: return unary(e, "math.cos", in[0], t);
    case VLMC_OP_SIN: return unary(e, "math.sin", in[0], t);
    case VLMC_OP_SIGMOID: {
      int one = vlmc_kernel_emit_f32(e, 1.0);
      return binary(e, "arith.divf", one, logistic_denominator(e, in[0]), t);
    }
    case VLMC_OP_SILU: return binary(e, "arith.divf", in[0], logistic_denominator(e, in[0]), t);
    case VLMC_OP_GELU: return gelu(e, op, in[0]);
    case VLMC_OP_CLAMP: return clamp(e, op, in[0], f);
    case VLMC_OP_CAST: return cast(e, op, in[0]);
    default:
      vlmc_kernel_emit_fail(e, "'%s' is not elementwise", vlmc_op_info(op->kind)->mnemonic);
      return in[0];
  }
}

/* Whether op's result is a value computed in f16 / bf16 that a cast or a move has not already
 * rounded: an op that computes in a low precision rounds its result, as the hardware does
 * (f32 arithmetic rounded once to f16 is the correctly rounded f16 result for +, -, *, /). */
static bool rounds_result(const vlmc_op_t *op) {
  vlmc_dtype_t d = op->results[0].type.dtype;
  return (d == VLMC_DTYPE_F16 || d == VLMC_DTYPE_BF16) && op->kind != VLMC_OP_CAST &&
         op->kind != VLMC_OP_RESHAPE;
}

int vlmc_kernel_emit_elementwise(vlmc_kernel_emit_t *e, const vlmc_op_t *op, const int *in) {
  int v = elementwise_f32(e, op, in);
  return rounds_result(op) ? round_float(e, v, op->results[0].type.dtype) : v;
}

int vlmc_kernel_emit_index_op(vlmc_kernel_emit_t *e, const char *op, int a, int b) {
  return binary(e, op, a, b, "index");
}

/* "f32" for width 0, else "vector<width x f32>". */
static const char *float_type(int width, char *buf, size_t size) {
  if (width == 0) return "f32";
  snprintf(buf, size, "vector<%dxf32>", width);
  return buf;
}

int vlmc_kernel_emit_float_op(vlmc_kernel_emit_t *e, const char *op, int a, int b, int width) {
  char type[32];
  return binary(e, op, a, b, float_type(width, type, sizeof type));
}

int vlmc_kernel_emit_float_unary(vlmc_kernel_emit_t *e, const char *op, int a, int width) {
  char type[32];
  return unary(e, op, a, float_type(width, type, sizeof type));
}

int vlmc_kernel_emit_for(vlmc_kernel_emit_t *e, int from, int to, int step) {
  int iv = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, "scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA " {",
                        iv, from, to, step);
  return iv;
}

/* ---- the output ---- */

bool vlmc_kernel_emit_has_epilogue(const vlmc_kernel_emit_t *e) {
  return e->anchor_index + 1 < e->region->num_ops;
}

void vlmc_kernel_emit_store(vlmc_kernel_emit_t *e, int value, int flat) {
  const vlmc_value_t *out = vlmc_dispatch_output(e->region);
  vlmc_kernel_emit_line(e, "memref.store " VLMC_SSA ", %%out[" VLMC_SSA "] : memref<?x%s>", value, flat,
                        vlmc_kernel_emit_type(out->type.dtype));
}

static bool same_count(const vlmc_type_t *a, const vlmc_type_t *b) {
  if (a->rank != b->rank) return false;
  for (uint32_t d = 0; d < a->rank; ++d)
    if (!vlmc_dim_equal(a->dims[d], b->dims[d])) return false;
  return true;
}

/* Operand j of epilogue op `op`, whose running value (already computed) is `running`. */
static int epilogue_operand(vlmc_kernel_emit_t *e, const vlmc_op_t *op, uint32_t j,
                            const int *member_ssa, int flat) {
  const vlmc_value_t *v = op->operands[j];
  int m = member_index(e->region, v->def);
  if (m >= (int)e->anchor_index) return member_ssa[m];
  if (same_count(&v->type, &op->results[0].type)) return vlmc_kernel_emit_load(e, v, flat);
  int count = vlmc_kernel_emit_dims_product(e, &v->type, 0, v->type.rank);
  int at = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.remui " VLMC_SSA ", " VLMC_SSA " : index", at, flat,
                        count);
  return vlmc_kernel_emit_load(e, v, at);
}

void vlmc_kernel_emit_finish_element(vlmc_kernel_emit_t *e, int value, int flat) {
  const vlmc_dispatch_region_t *r = e->region;
  int member_ssa[r->num_ops];
  /* An anchor computing in f16 (not a move, not elementwise: those round on their own)
   * rounds its result before the epilogue reads it. */
  const vlmc_op_t *anchor = r->ops[e->anchor_index];
  bool anchor_rounds = rounds_result(anchor) &&
                       !(vlmc_op_info(anchor->kind)->flags & VLMC_OP_FLAG_ELEMENTWISE) &&
                       !vlmc_op_moves_data_only(anchor->kind);
  member_ssa[e->anchor_index] =
      anchor_rounds ? round_float(e, value, anchor->results[0].type.dtype) : value;
  for (uint32_t k = e->anchor_index + 1; k < r->num_ops; ++k) {
    const vlmc_op_t *op = r->ops[k];
    int in[VLMC_IR_MAX_OPERANDS];
    for (uint32_t j = 0; j < op->num_operands && j < VLMC_IR_MAX_OPERANDS; ++j)
      in[j] = epilogue_operand(e, op, j, member_ssa, flat);
    member_ssa[k] = vlmc_kernel_emit_elementwise(e, op, in);
  }
  vlmc_kernel_emit_store(e, member_ssa[r->num_ops - 1], flat);
}

/* ---- elementwise regions ---- */

static bool same_shape_type(const vlmc_type_t *a, const vlmc_type_t *b) {
  if (a->rank != b->rank) return false;
  for (uint32_t d = 0; d < a->rank; ++d)
    if (!vlmc_dim_equal(a->dims[d], b->dims[d])) return false;
  return true;
}

/* The flat index into `operand` (broadcast to `out`, right-aligned) of the output element
 * whose multi-index is idx[0 .. out->rank). */
static int broadcast_index(vlmc_kernel_emit_t *e, const vlmc_type_t *operand, const vlmc_type_t *out,
                           const int *idx) {
  int at = vlmc_kernel_emit_index(e, 0);
  uint32_t shift = out->rank - operand->rank;
  for (uint32_t d = 0; d < operand->rank; ++d) {
    vlmc_dim_t dim = operand->dims[d];
    if (vlmc_dim_is_static(dim) && dim.off == 1) continue; /* broadcast: index 0 */
    int stride = vlmc_kernel_emit_dims_product(e, operand, d + 1, operand->rank);
    int term = vlmc_kernel_emit_fresh(e), sum = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.muli " VLMC_SSA ", " VLMC_SSA " : index", term,
                          idx[d + shift], stride);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addi " VLMC_SSA ", " VLMC_SSA " : index", sum, at,
                          term);
    at = sum;
  }
  return at;
}

/* idx[d] of flat index `flat` in `type`, innermost dim first. */
static void multi_index(vlmc_kernel_emit_t *e, const vlmc_type_t *type, int flat, int *idx) {
  int rest = flat;
  for (uint32_t d = type->rank; d-- > 0;) {
    int dim = vlmc_kernel_emit_dim(e, type->dims[d]);
    idx[d] = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.remui " VLMC_SSA ", " VLMC_SSA " : index", idx[d],
                          rest, dim);
    if (d == 0) break;
    int next = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.divui " VLMC_SSA ", " VLMC_SSA " : index", next,
                          rest, dim);
    rest = next;
  }
}

/* One output element of an elementwise region (its anchor elementwise, a cast or a reshape):
 * an operand of the output's shape is read at `flat`, a broadcast one (numpy broadcasting,
 * right-aligned) through the output's multi-index; then the epilogue and the store. */
void vlmc_kernel_emit_elementwise_element(vlmc_kernel_emit_t *e, int flat) {
  const vlmc_op_t *op = e->anchor;
  const vlmc_type_t *out = &op->results[0].type;
  bool broadcasts = false;
  for (uint32_t i = 0; i < op->num_operands && op->kind != VLMC_OP_RESHAPE; ++i)
    broadcasts |= !same_shape_type(&op->operands[i]->type, out);
  int idx[VLMC_IR_MAX_RANK];
  if (broadcasts) multi_index(e, out, flat, idx);
  int in[VLMC_IR_MAX_OPERANDS];
  for (uint32_t i = 0; i < op->num_operands && i < VLMC_IR_MAX_OPERANDS; ++i) {
    const vlmc_value_t *v = op->operands[i];
    bool flat_read = op->kind == VLMC_OP_RESHAPE || same_shape_type(&v->type, out);
    int at = flat_read ? flat : broadcast_index(e, &v->type, out, idx);
    in[i] = vlmc_kernel_emit_load(e, v, at);
  }
  vlmc_kernel_emit_finish_element(e, vlmc_kernel_emit_elementwise(e, op, in), flat);
}

/* ---- the driver's side ---- */

uint32_t vlmc_kernel_anchor_index(const vlmc_dispatch_region_t *region) {
  return vlmc_dispatch_anchor_index(region);
}

vlmc_status_t vlmc_kernel_emit_init(vlmc_kernel_emit_t *e, const vlmc_module_t *module,
                                    const vlmc_func_t *func, const vlmc_dispatch_region_t *region,
                                    int vector_width) {
  memset(e, 0, sizeof *e);
  e->module = module;
  e->func = func;
  e->region = region;
  e->vector_width = vector_width;
  vlmc_strbuf_init(&e->entry);
  vlmc_strbuf_init(&e->body);
  e->anchor_index = vlmc_kernel_anchor_index(region);
  e->anchor = region->ops[e->anchor_index];
  for (uint32_t i = 0; i < region->num_inputs; ++i) {
    const vlmc_value_t *v = region->inputs[i];
    const vlmc_dtype_info_t *info = vlmc_dtype_info(v->type.dtype);
    /* The storage spellings below cover these only (vlmc_kernel_emit_storage_type). */
    if (info->is_quantized || v->type.dtype == VLMC_DTYPE_F64)
      return vlmc_status_make(VLMC_UNSUPPORTED,
                              "dispatch %u: input %u is %s; kernels read f32, f16, bf16 and "
                              "integers", region->id, i, info->name);
  }
  return NULL;
}

void vlmc_kernel_emit_deinit(vlmc_kernel_emit_t *e) {
  vlmc_strbuf_deinit(&e->entry);
  vlmc_strbuf_deinit(&e->body);
  vlmc_status_free(e->error);
  e->error = NULL;
}

void vlmc_kernel_emit_append_code(const vlmc_kernel_emit_t *e, vlmc_strbuf_t *out) {
  vlmc_strbuf_append(out, e->entry.data ? e->entry.data : "", e->entry.len);
  vlmc_strbuf_append(out, e->body.data ? e->body.data : "", e->body.len);
}

vlmc_status_t vlmc_kernel_emit_function(vlmc_kernel_emit_t *e, const char *name,
                                        const char *trailing_params, vlmc_strbuf_t *out) {
  if (e->error) {
    vlmc_status_t st = e->error;
    e->error = NULL;
    return st;
  }
  if (e->entry.failed || e->body.failed)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory writing a kernel");
  if (e->hooks && e->hooks->write_function) {
    VLMC_RETURN_IF_ERROR(e->hooks->write_function(e, name, trailing_params, out));
    return out->failed ? vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory writing a kernel")
                       : NULL;
  }
  const vlmc_value_t *result = vlmc_dispatch_output(e->region);
  vlmc_strbuf_printf(out, "module {\n  func.func @%s(", name);
  for (uint32_t i = 0; i < e->region->num_inputs; ++i)
    vlmc_strbuf_printf(out, "%%b%u: memref<?x%s>, ", i,
                       vlmc_kernel_emit_storage_type(vlmc_kernel_emit_input_storage(e, i)));
  vlmc_strbuf_printf(out, "%%out: memref<?x%s>, %%syms: memref<?xi64>%s%s) {\n",
                     vlmc_kernel_emit_type(result->type.dtype), trailing_params[0] ? ", " : "",
                     trailing_params);
  vlmc_kernel_emit_append_code(e, out);
  vlmc_strbuf_puts(out, "    return\n  }\n}\n");
  return out->failed ? vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory writing a kernel")
                     : NULL;
}

bool vlmc_kernel_emit_static_dims(const vlmc_type_t *t, uint32_t from) {
  for (uint32_t d = from; d < t->rank; ++d)
    if (!vlmc_dim_is_static(t->dims[d])) return false;
  return true;
}
