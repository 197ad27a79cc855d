/* The op table instantiated from ops.def, and attribute values. */
#include <assert.h>
#include <string.h>

#include "ir/internal.h"

/* Words used in ops.def rows. */
#define PURE VLMC_OP_FLAG_PURE
#define ELEMENTWISE VLMC_OP_FLAG_ELEMENTWISE
#define COMMUTATIVE VLMC_OP_FLAG_COMMUTATIVE
#define TERMINATOR VLMC_OP_FLAG_TERMINATOR
#define SYMREF VLMC_OP_FLAG_SYMREF
#define DECLARED VLMC_OP_FLAG_DECLARED
#define HOST VLMC_OP_FLAG_HOST
#define VARIADIC VLMC_OP_VARIADIC
#define REQUIRED true
#define OPTIONAL false
#define ATTR(name, kind, required, choices) {#name, VLMC_ATTR_##kind, required, choices},

/* One schema array per op; the last entry is a terminator that is not counted. */
#define OP(name, mnemonic, min_ops, max_ops, nres, shape, verify, flags, attrs) \
  static const vlmc_attr_schema_t attrs_##name[] = {attrs{NULL, VLMC_ATTR_NONE, false, NULL}};
#include "ir/ops.def"
#undef OP

static const vlmc_op_info_t op_infos[VLMC_OP_COUNT] = {
#define OP(name, mnemonic, min_ops, max_ops, nres, shape, verify, flags, attrs)              \
  [VLMC_OP_##name] = {VLMC_OP_##name, mnemonic, min_ops, max_ops, nres, shape, verify, flags, \
                      attrs_##name, sizeof attrs_##name / sizeof attrs_##name[0] - 1},
#include "ir/ops.def"
#undef OP
};

const vlmc_op_info_t *vlmc_op_info(vlmc_op_kind_t kind) {
  assert(kind >= 0 && kind < VLMC_OP_COUNT);
  return &op_infos[kind];
}

bool vlmc_op_kind_from_mnemonic(const char *name, size_t len, vlmc_op_kind_t *out_kind) {
  for (int i = 0; i < VLMC_OP_COUNT; ++i) {
    const char *m = op_infos[i].mnemonic;
    if (strlen(m) == len && memcmp(m, name, len) == 0) {
      *out_kind = (vlmc_op_kind_t)i;
      return true;
    }
  }
  return false;
}

int vlmc_op_attr_slot(vlmc_op_kind_t kind, const char *name) {
  const vlmc_op_info_t *info = vlmc_op_info(kind);
  for (uint32_t i = 0; i < info->num_attrs; ++i)
    if (strcmp(info->attrs[i].name, name) == 0) return (int)i;
  return -1;
}

const vlmc_attr_t *vlmc_sig_attr(const vlmc_op_signature_t *sig, const char *name) {
  int slot = vlmc_op_attr_slot(sig->kind, name);
  assert(slot >= 0 && "shape rule asked for an attribute its op does not have");
  const vlmc_attr_t *attr = &sig->attrs[slot];
  return attr->kind == VLMC_ATTR_NONE ? NULL : attr;
}

bool vlmc_ir_enum_lookup(const vlmc_attr_schema_t *schema, const char *choice, size_t len,
                         vlmc_attr_t *out_attr) {
  const char *p = schema->choices;
  for (uint32_t index = 0; p && *p; ++index) {
    const char *end = strchr(p, '|');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == len && memcmp(p, choice, len) == 0) {
      /* The name stays as given; attaching to an op interns a NUL-terminated copy. */
      out_attr->kind = VLMC_ATTR_ENUM;
      out_attr->v.e.index = index;
      return true;
    }
    p = end ? end + 1 : p + n;
  }
  return false;
}

/* ---- attribute constructors ---- */

vlmc_attr_t vlmc_attr_int(int64_t v) {
  vlmc_attr_t a = {.kind = VLMC_ATTR_INT};
  a.v.i = v;
  return a;
}

vlmc_attr_t vlmc_attr_float(double v) {
  vlmc_attr_t a = {.kind = VLMC_ATTR_FLOAT};
  a.v.f = v;
  return a;
}

vlmc_attr_t vlmc_attr_bool(bool v) {
  vlmc_attr_t a = {.kind = VLMC_ATTR_BOOL};
  a.v.b = v;
  return a;
}

vlmc_attr_t vlmc_attr_enum(const char *choice) {
  vlmc_attr_t a = {.kind = VLMC_ATTR_ENUM};
  a.v.e.name = choice;
  a.v.e.index = UINT32_MAX; /* resolved against the schema when attached */
  return a;
}

vlmc_attr_t vlmc_attr_dtype(vlmc_dtype_t dtype) {
  vlmc_attr_t a = {.kind = VLMC_ATTR_DTYPE};
  a.v.dtype = dtype;
  return a;
}

vlmc_attr_t vlmc_attr_ints(const int64_t *data, size_t count) {
  vlmc_attr_t a = {.kind = VLMC_ATTR_INTS};
  a.v.ints.data = data;
  a.v.ints.count = count;
  return a;
}

vlmc_attr_t vlmc_attr_dense_ints(const int64_t *data, size_t count) {
  vlmc_attr_t a = {.kind = VLMC_ATTR_DENSE};
  a.v.dense.ints = data;
  a.v.dense.count = count;
  return a;
}

vlmc_attr_t vlmc_attr_dense_floats(const double *data, size_t count) {
  vlmc_attr_t a = {.kind = VLMC_ATTR_DENSE};
  a.v.dense.floats = data;
  a.v.dense.count = count;
  return a;
}

vlmc_attr_t vlmc_attr_symbol(const char *name) {
  vlmc_attr_t a = {.kind = VLMC_ATTR_SYMBOL};
  a.v.symbol = name;
  return a;
}

/* Floats compare by bits so that CSE never merges 0.0 with -0.0 and NaN equals itself. */
static bool same_double(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static bool dense_equal(const vlmc_attr_t *a, const vlmc_attr_t *b) {
  if (a->v.dense.count != b->v.dense.count) return false;
  if ((a->v.dense.ints != NULL) != (b->v.dense.ints != NULL)) return false;
  size_t n = a->v.dense.count;
  if (a->v.dense.ints) return n == 0 || memcmp(a->v.dense.ints, b->v.dense.ints, n * 8) == 0;
  for (size_t i = 0; i < n; ++i)
    if (!same_double(a->v.dense.floats[i], b->v.dense.floats[i])) return false;
  return true;
}

bool vlmc_attr_equal(const vlmc_attr_t *a, const vlmc_attr_t *b) {
  if (a->kind != b->kind) return false;
  switch (a->kind) {
    case VLMC_ATTR_NONE: return true;
    case VLMC_ATTR_INT: return a->v.i == b->v.i;
    case VLMC_ATTR_FLOAT: return same_double(a->v.f, b->v.f);
    case VLMC_ATTR_BOOL: return a->v.b == b->v.b;
    case VLMC_ATTR_ENUM: return a->v.e.index == b->v.e.index;
    case VLMC_ATTR_DTYPE: return a->v.dtype == b->v.dtype;
    case VLMC_ATTR_SYMBOL: return strcmp(a->v.symbol, b->v.symbol) == 0;
    case VLMC_ATTR_INTS:
      return a->v.ints.count == b->v.ints.count &&
             (a->v.ints.count == 0 ||
              memcmp(a->v.ints.data, b->v.ints.data, a->v.ints.count * sizeof(int64_t)) == 0);
    case VLMC_ATTR_DENSE: return dense_equal(a, b);
  }
  return false;
}

vlmc_status_t vlmc_ir_check_required_attrs(const vlmc_op_info_t *info, const vlmc_attr_t *attrs) {
  for (uint32_t i = 0; i < info->num_attrs; ++i)
    if (info->attrs[i].required && attrs[i].kind == VLMC_ATTR_NONE)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT, "requires attribute '%s'",
                              info->attrs[i].name);
  return NULL;
}

bool vlmc_op_is_static(const vlmc_op_t *op, const bool *is_static) {
  if (op->num_results == 0 || op->kind == VLMC_OP_TAP || op->kind == VLMC_OP_RETURN) return false;
  for (uint32_t i = 0; i < op->num_results; ++i)
    if (!vlmc_type_is_static(&op->results[i].type)) return false;
  if (op->kind == VLMC_OP_PARAM || op->kind == VLMC_OP_CONSTANT) return true;
  if (op->num_operands == 0) return false;
  for (uint32_t i = 0; i < op->num_operands; ++i)
    if (!is_static[op->operands[i]->id]) return false;
  return true;
}

bool vlmc_op_moves_data_only(vlmc_op_kind_t kind) {
  switch (kind) {
    case VLMC_OP_GATHER: case VLMC_OP_EMBEDDING: case VLMC_OP_SCATTER_ROWS:
    case VLMC_OP_RESHAPE: case VLMC_OP_TRANSPOSE: case VLMC_OP_CONCAT: case VLMC_OP_SLICE:
    case VLMC_OP_KV_CACHE_APPEND:
      return true;
    default:
      return false;
  }
}
