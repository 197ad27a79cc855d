/* cse: merges pure ops of one kind with identical operands, attributes and result types (the
 * operands of commutative ops in either order). Bodies are one block in program order, so the
 * first op of each class dominates the later ones, and a forward walk that renames operands as
 * it goes sees every duplicate.
 *
 * Requires: verified IR. Invalidates: nothing beyond the erased ops. */
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"

enum { STAT_OPS_ELIMINATED };

static const char *const cse_statistics[] = {"ops-eliminated"};

/* Commutative binary ops compare their operands as an unordered pair. */
static void operand_ids(const vlmc_op_t *op, uint32_t i, uint32_t *out) {
  *out = op->operands[i]->id;
  if ((vlmc_op_info(op->kind)->flags & VLMC_OP_FLAG_COMMUTATIVE) && op->num_operands == 2) {
    uint32_t a = op->operands[0]->id, b = op->operands[1]->id;
    *out = i == 0 ? (a < b ? a : b) : (a < b ? b : a);
  }
}

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

static uint64_t attr_hash(const vlmc_attr_t *a) {
  uint64_t h = (uint64_t)a->kind;
  switch (a->kind) {
    case VLMC_ATTR_INT: return mix(h, (uint64_t)a->v.i);
    case VLMC_ATTR_BOOL: return mix(h, a->v.b);
    case VLMC_ATTR_ENUM: return mix(h, a->v.e.index);
    case VLMC_ATTR_DTYPE: return mix(h, (uint64_t)a->v.dtype);
    case VLMC_ATTR_INTS: return mix(h, a->v.ints.count ? (uint64_t)a->v.ints.data[0] : 0);
    case VLMC_ATTR_DENSE: return mix(h, a->v.dense.count);
    case VLMC_ATTR_SYMBOL:
      for (const char *c = a->v.symbol; *c; ++c) h = mix(h, (unsigned char)*c);
      return h;
    default: return h; /* floats and absent attributes: equality decides */
  }
}

static uint64_t op_hash(const vlmc_op_t *op) {
  uint64_t h = mix(0, (uint64_t)op->kind);
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    uint32_t id;
    operand_ids(op, i, &id);
    h = mix(h, id);
  }
  for (uint32_t i = 0; i < vlmc_op_info(op->kind)->num_attrs; ++i)
    h = mix(h, attr_hash(&op->attrs[i]));
  return h;
}

static bool ops_equivalent(const vlmc_op_t *a, const vlmc_op_t *b) {
  if (a->kind != b->kind || a->num_operands != b->num_operands || a->num_results != b->num_results)
    return false;
  for (uint32_t i = 0; i < a->num_operands; ++i) {
    uint32_t ia, ib;
    operand_ids(a, i, &ia);
    operand_ids(b, i, &ib);
    if (ia != ib) return false;
  }
  for (uint32_t i = 0; i < vlmc_op_info(a->kind)->num_attrs; ++i)
    if (!vlmc_attr_equal(&a->attrs[i], &b->attrs[i])) return false;
  for (uint32_t i = 0; i < a->num_results; ++i)
    if (!vlmc_type_equal(&a->results[i].type, &b->results[i].type)) return false;
  return true;
}

typedef struct {
  const vlmc_op_t **slots;
  size_t capacity; /* a power of two, at least twice the number of ops */
} op_table_t;

/* The equivalent op already in the table, or NULL after inserting `op`. */
static const vlmc_op_t *table_find_or_insert(op_table_t *table, const vlmc_op_t *op) {
  size_t mask = table->capacity - 1;
  for (size_t i = op_hash(op) & mask;; i = (i + 1) & mask) {
    if (!table->slots[i]) {
      table->slots[i] = op;
      return NULL;
    }
    if (ops_equivalent(table->slots[i], op)) return table->slots[i];
  }
}

static bool op_is_candidate(const vlmc_op_t *op) {
  /* Each consumer of a dequantized weight dequantizes as it loads (fuse: a prologue of one
   * use); one shared dequantize would be a kernel of its own and an f32 copy of the weight. */
  if (op->kind == VLMC_OP_DEQUANTIZE) return false;
  uint32_t flags = vlmc_op_info(op->kind)->flags;
  return (flags & VLMC_OP_FLAG_PURE) && !(flags & VLMC_OP_FLAG_TERMINATOR) && op->num_results;
}

static vlmc_status_t cse_func(vlmc_func_t *func, vlmc_value_t **rename, uint64_t *eliminated) {
  size_t ops = 0;
  for (vlmc_op_t *op = func->body.first; op; op = op->next) ++ops;
  op_table_t table = {NULL, 16};
  while (table.capacity < 2 * ops + 2) table.capacity *= 2;
  table.slots = calloc(table.capacity, sizeof *table.slots);
  if (!table.slots) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (vlmc_op_t *op = func->body.first, *next; op; op = next) {
    next = op->next;
    for (uint32_t i = 0; i < op->num_operands; ++i)
      if (rename[op->operands[i]->id]) vlmc_op_set_operand(op, i, rename[op->operands[i]->id]);
    if (!op_is_candidate(op)) continue;
    const vlmc_op_t *same = table_find_or_insert(&table, op);
    if (!same) continue;
    for (uint32_t i = 0; i < op->num_results; ++i) rename[op->results[i].id] = &same->results[i];
    vlmc_op_erase(op);
    ++*eliminated;
  }
  free(table.slots);
  return NULL;
}

static vlmc_status_t cse_run(vlmc_pass_context_t *ctx, vlmc_module_t *module) {
  vlmc_value_t **rename = calloc(module->next_value_id + 1, sizeof *rename);
  if (!rename) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  uint64_t eliminated = 0;
  vlmc_status_t st = NULL;
  for (uint32_t f = 0; !st && f < module->num_funcs; ++f)
    st = cse_func(module->funcs[f], rename, &eliminated);
  free(rename);
  vlmc_pass_stat_add(ctx, STAT_OPS_ELIMINATED, eliminated);
  return st;
}

const vlmc_pass_t vlmc_pass_cse = {
    .name = "cse",
    .summary = "merge pure ops with identical operands, attributes and result types",
    .statistics = cse_statistics,
    .num_statistics = sizeof cse_statistics / sizeof cse_statistics[0],
    .run = cse_run,
};
