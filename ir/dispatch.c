/* Dispatch regions: membership, inputs and the checks of ir/dispatch.h. */
#include "ir/dispatch.h"

#include <stdlib.h>
#include <string.h>

#include "ir/internal.h"
#include "support/hash.h"
#include "support/strbuf.h"

bool vlmc_dispatch_may_contain(vlmc_op_kind_t kind) {
  const vlmc_op_info_t *info = vlmc_op_info(kind);
  if (info->flags & (VLMC_OP_FLAG_HOST | VLMC_OP_FLAG_TERMINATOR)) return false;
  return kind != VLMC_OP_PARAM && kind != VLMC_OP_CONSTANT && kind != VLMC_OP_TAP;
}

typedef struct {
  vlmc_dispatch_region_t *regions;
  const vlmc_op_t **ops;
  const vlmc_value_t **inputs;
} storage_t;

void vlmc_dispatch_set_free(vlmc_dispatch_set_t *set) {
  storage_t *s = set->storage_;
  if (s) {
    free(s->regions);
    free(s->ops);
    free(s->inputs);
    free(s);
  }
  memset(set, 0, sizeof *set);
}

const vlmc_dispatch_region_t *vlmc_dispatch_find(const vlmc_dispatch_set_t *set, uint32_t id) {
  for (uint32_t i = 0; i < set->num_regions; ++i)
    if (set->regions[i].id == id) return &set->regions[i];
  return NULL;
}

static vlmc_status_t op_error(const vlmc_op_t *op, const char *fmt, uint32_t id) {
  return vlmc_ir_locate(op, vlmc_status_make(VLMC_INVALID_ARGUMENT, fmt, id));
}

/* Members must be compute ops, roots single-result, inner results used inside only. */
static vlmc_status_t check_uses(const vlmc_func_t *func, const uint32_t *region_of_value,
                                const vlmc_op_t *const *root_of) {
  for (const vlmc_op_t *op = func->body.first; op; op = op->next) {
    for (uint32_t i = 0; i < op->num_operands; ++i) {
      uint32_t r = region_of_value[op->operands[i]->id];
      if (!r || r == op->dispatch) continue;
      const vlmc_op_t *def = op->operands[i]->def;
      if (def != root_of[r])
        return op_error(op, "uses a value that is internal to dispatch region %u (only the "
                            "region's last op may be used outside it)", r);
    }
  }
  return NULL;
}

static vlmc_status_t check_members(const vlmc_func_t *func, const vlmc_op_t *const *root_of) {
  for (const vlmc_op_t *op = func->body.first; op; op = op->next) {
    if (!op->dispatch) continue;
    if (!vlmc_dispatch_may_contain(op->kind))
      return op_error(op, "cannot be part of dispatch region %u (params, constants, taps, "
                          "return and host index ops stay outside regions)", op->dispatch);
    if (root_of[op->dispatch] == op && op->num_results != 1)
      return op_error(op, "the last op of dispatch region %u must have exactly one result",
                      op->dispatch);
  }
  return NULL;
}

/* Collects region ids (compacted to 1..n in order of first member) and their roots. */
static uint32_t number_regions(const vlmc_func_t *func, uint32_t *compact, uint32_t max_id,
                               const vlmc_op_t **root_of) {
  uint32_t n = 0;
  for (const vlmc_op_t *op = func->body.first; op; op = op->next) {
    if (!op->dispatch || op->dispatch > max_id) continue;
    if (!compact[op->dispatch]) compact[op->dispatch] = ++n;
    root_of[op->dispatch] = op;
  }
  return n;
}

static bool is_member_value(const vlmc_value_t *v, uint32_t id) {
  return v->def && v->def->dispatch == id;
}

/* Lays members and inputs out region by region (compact numbers 1..n, in order of first
 * member), then orders the regions by the position of their roots. */
static vlmc_status_t fill_regions(const vlmc_func_t *func, const uint32_t *compact, storage_t *s,
                                  uint32_t n, vlmc_dispatch_set_t *out) {
  uint32_t *ops_at = calloc(n + 2, sizeof *ops_at), *inputs_at = calloc(n + 2, sizeof *inputs_at);
  uint32_t *root_pos = calloc(n + 1, sizeof *root_pos);
  if (!ops_at || !inputs_at || !root_pos) {
    free(ops_at), free(inputs_at), free(root_pos);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  for (const vlmc_op_t *op = func->body.first; op; op = op->next) {
    if (!op->dispatch) continue;
    ops_at[compact[op->dispatch] + 1]++;
    inputs_at[compact[op->dispatch] + 1] += op->num_operands;
  }
  for (uint32_t k = 1; k <= n; ++k) {
    ops_at[k + 1] += ops_at[k];
    inputs_at[k + 1] += inputs_at[k];
    s->regions[k - 1].ops = &s->ops[ops_at[k]];
    s->regions[k - 1].inputs = &s->inputs[inputs_at[k]];
  }
  uint32_t pos = 0;
  for (const vlmc_op_t *op = func->body.first; op; op = op->next, ++pos) {
    if (!op->dispatch) continue;
    uint32_t k = compact[op->dispatch];
    vlmc_dispatch_region_t *r = &s->regions[k - 1];
    r->id = op->dispatch;
    r->ops[r->num_ops++] = op;
    root_pos[k] = pos;
    for (uint32_t i = 0; i < op->num_operands; ++i) {
      const vlmc_value_t *v = op->operands[i];
      if (is_member_value(v, r->id)) continue;
      bool seen = false;
      for (uint32_t j = 0; j < r->num_inputs && !seen; ++j) seen = r->inputs[j] == v;
      if (!seen) r->inputs[r->num_inputs++] = v;
    }
  }
  /* Insertion sort by root position (regions mostly come in order already). */
  for (uint32_t i = 1; i < n; ++i) {
    vlmc_dispatch_region_t r = s->regions[i];
    uint32_t key = root_pos[compact[r.id]], j = i;
    for (; j > 0 && root_pos[compact[s->regions[j - 1].id]] > key; --j)
      s->regions[j] = s->regions[j - 1];
    s->regions[j] = r;
  }
  free(ops_at), free(inputs_at), free(root_pos);
  out->regions = s->regions;
  out->num_regions = n;
  out->storage_ = s;
  return NULL;
}

vlmc_status_t vlmc_dispatch_regions(const vlmc_func_t *func, vlmc_dispatch_set_t *out) {
  memset(out, 0, sizeof *out);
  uint32_t max_id = 0, num_members = 0, num_operands = 0;
  for (const vlmc_op_t *op = func->body.first; op; op = op->next) {
    if (!op->dispatch) continue;
    max_id = op->dispatch > max_id ? op->dispatch : max_id;
    ++num_members;
    num_operands += op->num_operands;
  }
  if (!num_members) return NULL;
  /* Region ids are at most the number of ops in practice; refuse absurd sparse numbering. */
  if (max_id > 4 * num_members + 1024)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "@%s: dispatch region numbers go up to %u for %u member ops; number "
                            "regions densely from 1", func->name, max_id, num_members);
  const vlmc_module_t *module = func->module;
  uint32_t *compact = calloc(max_id + 1, sizeof *compact);
  const vlmc_op_t **root_of = calloc(max_id + 1, sizeof *root_of);
  uint32_t *region_of_value = calloc(module->next_value_id + 1, sizeof *region_of_value);
  storage_t *s = calloc(1, sizeof *s);
  vlmc_status_t st = NULL;
  if (!compact || !root_of || !region_of_value || !s)
    st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  uint32_t n = 0;
  if (!st) {
    n = number_regions(func, compact, max_id, root_of);
    for (const vlmc_op_t *op = func->body.first; op; op = op->next)
      for (uint32_t i = 0; op->dispatch && i < op->num_results; ++i)
        region_of_value[op->results[i].id] = op->dispatch;
    st = check_members(func, root_of);
  }
  if (!st) st = check_uses(func, region_of_value, root_of);
  if (!st) {
    s->regions = calloc(n, sizeof *s->regions);
    s->ops = calloc(num_members, sizeof *s->ops);
    s->inputs = calloc(num_operands + 1, sizeof *s->inputs);
    if (!s->regions || !s->ops || !s->inputs)
      st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  if (!st) st = fill_regions(func, compact, s, n, out);
  if (!st) s = NULL;
  if (s) {
    free(s->regions);
    free(s->ops);
    free(s->inputs);
    free(s);
  }
  free(compact);
  free(root_of);
  free(region_of_value);
  return st;
}

/* ---- liveness and slots ---- */

vlmc_status_t vlmc_dispatch_intervals(const vlmc_func_t *func, const vlmc_dispatch_set_t *set,
                                      uint32_t *first, uint32_t *last, bool *escapes) {
  const vlmc_module_t *m = func->module;
  uint32_t num_ops = 0;
  for (const vlmc_op_t *op = func->body.first; op; op = op->next) ++num_ops;
  /* By value id: the region whose output it is (index + 1); by op position: where it reads. */
  uint32_t *region_of = calloc(m->next_value_id + 1, sizeof *region_of);
  uint32_t *read_at = calloc(num_ops + 1, sizeof *read_at);
  if (!region_of || !read_at) {
    free(region_of);
    free(read_at);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  uint32_t pos = 0, r = 0;
  for (const vlmc_op_t *op = func->body.first; op; op = op->next, ++pos) {
    read_at[pos] = pos;
    if (r < set->num_regions && op == set->regions[r].ops[set->regions[r].num_ops - 1]) {
      region_of[op->results[0].id] = r + 1;
      first[r] = last[r] = pos;
      escapes[r] = false;
      ++r;
    }
  }
  /* Members read at their root's position. */
  uint32_t max_id = 0;
  for (uint32_t k = 0; k < set->num_regions; ++k)
    if (set->regions[k].id > max_id) max_id = set->regions[k].id;
  uint32_t *index_of = calloc(max_id + 1, sizeof *index_of);
  if (!index_of) {
    free(region_of);
    free(read_at);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  for (uint32_t k = 0; k < set->num_regions; ++k) index_of[set->regions[k].id] = k;
  pos = 0;
  for (const vlmc_op_t *op = func->body.first; op; op = op->next, ++pos)
    if (op->dispatch && op->dispatch <= max_id) read_at[pos] = first[index_of[op->dispatch]];
  free(index_of);
  pos = 0;
  for (const vlmc_op_t *op = func->body.first; op; op = op->next, ++pos)
    for (uint32_t i = 0; i < op->num_operands; ++i) {
      uint32_t rr = region_of[op->operands[i]->id];
      if (!rr) continue;
      if (op->kind == VLMC_OP_RETURN) escapes[rr - 1] = true;
      if (read_at[pos] > last[rr - 1]) last[rr - 1] = read_at[pos];
    }
  free(region_of);
  free(read_at);
  return NULL;
}

vlmc_status_t vlmc_dispatch_check_slots(const vlmc_func_t *func, const vlmc_dispatch_set_t *set) {
  bool any = false;
  for (const vlmc_op_t *op = func->body.first; op && !any; op = op->next) any = op->slot != 0;
  if (!any) return NULL;
  uint32_t n = set->num_regions;
  /* The runtime keeps one buffer entry per slot number up to the largest (runtime/program.c):
   * a sparse `slot 2000000000` would cost gigabytes at open. The memory plan numbers slots
   * 1..k with k <= regions; refuse absurd numbering as for region numbers. */
  uint32_t max_slot = 0;
  for (const vlmc_op_t *op = func->body.first; op; op = op->next)
    max_slot = op->slot > max_slot ? op->slot : max_slot;
  if (max_slot > 4 * n + 1024)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "@%s: activation slot numbers go up to %u for %u dispatch regions; "
                            "number slots densely from 1", func->name, max_slot, n);
  uint32_t *first = calloc(n + 1, sizeof *first), *last = calloc(n + 1, sizeof *last);
  bool *escapes = calloc(n + 1, sizeof *escapes);
  vlmc_status_t st = NULL;
  if (!first || !last || !escapes) st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  if (!st) st = vlmc_dispatch_intervals(func, set, first, last, escapes);
  for (const vlmc_op_t *op = func->body.first; !st && op; op = op->next) {
    if (!op->slot) continue;
    bool is_root = false;
    for (uint32_t r = 0; r < n && !is_root; ++r)
      is_root = set->regions[r].ops[set->regions[r].num_ops - 1] == op;
    if (!is_root)
      st = op_error(op, "has slot %u but is not the last op of a dispatch region", op->slot);
  }
  for (uint32_t a = 0; !st && a < n; ++a) {
    const vlmc_op_t *ra = set->regions[a].ops[set->regions[a].num_ops - 1];
    if (!ra->slot) continue;
    if (escapes[a]) {
      st = op_error(ra, "is returned, so it cannot live in activation slot %u", ra->slot);
      break;
    }
    for (uint32_t b = a + 1; b < n; ++b) {
      const vlmc_op_t *rb = set->regions[b].ops[set->regions[b].num_ops - 1];
      if (rb->slot != ra->slot || last[a] < first[b] || last[b] < first[a]) continue;
      st = op_error(rb, "slot %u is still in use here by an earlier dispatch region's output "
                        "(their live ranges overlap)", rb->slot);
      break;
    }
  }
  free(first);
  free(last);
  free(escapes);
  return st;
}

/* ---- what a kernel of a region is ---- */

bool vlmc_dispatch_is_prologue_op(const vlmc_op_t *op) {
  if (op->kind == VLMC_OP_RESHAPE) return true;
  if (op->kind != VLMC_OP_CAST) return false;
  const vlmc_dtype_info_t *from = vlmc_dtype_info(op->operands[0]->type.dtype);
  return from->is_float && !from->is_quantized && op->results[0].type.dtype == VLMC_DTYPE_F32;
}

static int region_input_index(const vlmc_dispatch_region_t *r, const vlmc_value_t *v) {
  for (uint32_t i = 0; i < r->num_inputs; ++i)
    if (r->inputs[i] == v) return (int)i;
  return -1;
}

static int region_member_index(const vlmc_dispatch_region_t *r, const vlmc_op_t *op) {
  for (uint32_t i = 0; op && i < r->num_ops; ++i)
    if (r->ops[i] == op) return (int)i;
  return -1;
}

int vlmc_dispatch_source_input(const vlmc_dispatch_region_t *r, uint32_t anchor_index,
                               const vlmc_value_t *v) {
  for (;;) {
    int i = region_input_index(r, v);
    if (i >= 0) return i;
    int m = region_member_index(r, v->def);
    if (m < 0 || (uint32_t)m >= anchor_index || !vlmc_dispatch_is_prologue_op(v->def)) return -1;
    v = v->def->operands[0];
  }
}

/* A dequantize whose three operands the region reads through members before k. */
static bool is_dequantize_prologue(const vlmc_dispatch_region_t *region, uint32_t k,
                                   const vlmc_op_t *op) {
  if (op->kind != VLMC_OP_DEQUANTIZE) return false;
  for (uint32_t i = 0; i < op->num_operands; ++i)
    if (vlmc_dispatch_source_input(region, k, op->operands[i]) < 0) return false;
  return true;
}

const vlmc_op_t *vlmc_dispatch_dequantize_source(const vlmc_dispatch_region_t *region,
                                                 uint32_t anchor_index, const vlmc_value_t *v) {
  int m = region_member_index(region, v->def);
  if (m < 0 || (uint32_t)m >= anchor_index) return NULL;
  return is_dequantize_prologue(region, (uint32_t)m, v->def) ? v->def : NULL;
}

/* ---- norm prologues ---- */

bool vlmc_dispatch_is_norm_chain_op(const vlmc_op_t *op) {
  if (op->kind == VLMC_OP_RESHAPE) return true;
  return op->kind == VLMC_OP_CAST && vlmc_dtype_info(op->operands[0]->type.dtype)->is_float &&
         !vlmc_dtype_info(op->operands[0]->type.dtype)->is_quantized &&
         vlmc_dtype_info(op->results[0].type.dtype)->is_float;
}

/* The member that reads op's result, when exactly one does and it is a member (-1 else). */
static int only_member_use(const vlmc_dispatch_region_t *r, const vlmc_op_t *op) {
  int user = -1;
  for (uint32_t i = 0; i < r->num_ops; ++i)
    for (uint32_t j = 0; j < r->ops[i]->num_operands; ++j)
      if (r->ops[i]->operands[j] == &op->results[0]) {
        if (user >= 0) return -1;
        user = (int)i;
      }
  return user;
}

/* Whether op (member k) is an rms_norm whose operands come from inputs through prologue
 * members and whose result reaches operand 0 of a later linear member through norm-chain
 * members only, each with that one use. */
static bool is_norm_prologue(const vlmc_dispatch_region_t *r, uint32_t k, const vlmc_op_t *op) {
  if (op->kind != VLMC_OP_RMS_NORM) return false;
  for (uint32_t i = 0; i < op->num_operands; ++i)
    if (vlmc_dispatch_source_input(r, k, op->operands[i]) < 0) return false;
  const vlmc_op_t *at = op;
  for (uint32_t steps = 0; steps <= r->num_ops; ++steps) {
    int user = only_member_use(r, at);
    if (user < 0) return false;
    const vlmc_op_t *next = r->ops[user];
    if (next->kind == VLMC_OP_LINEAR) return next->operands[0] == &at->results[0];
    if (!vlmc_dispatch_is_norm_chain_op(next)) return false;
    at = next;
  }
  return false;
}

const vlmc_op_t *vlmc_dispatch_norm_source(const vlmc_dispatch_region_t *region,
                                           uint32_t anchor_index, const vlmc_value_t *v,
                                           const vlmc_op_t **chain, uint32_t *chain_len) {
  uint32_t n = 0;
  const vlmc_op_t *stack[VLMC_DISPATCH_MAX_NORM_CHAIN];
  for (;;) {
    int m = region_member_index(region, v->def);
    if (m < 0 || (uint32_t)m >= anchor_index) return NULL;
    const vlmc_op_t *op = v->def;
    if (is_norm_prologue(region, (uint32_t)m, op)) {
      for (uint32_t i = 0; i < n; ++i) chain[i] = stack[n - 1 - i]; /* in the order they apply */
      *chain_len = n;
      return op;
    }
    if (!vlmc_dispatch_is_norm_chain_op(op) || n == VLMC_DISPATCH_MAX_NORM_CHAIN) return NULL;
    stack[n++] = op;
    v = op->operands[0];
  }
}

/* Whether member k is part of a norm prologue: the norm, or an op of its chain to the linear. */
static bool in_norm_prologue(const vlmc_dispatch_region_t *r, uint32_t k) {
  const vlmc_op_t *op = r->ops[k];
  if (is_norm_prologue(r, k, op)) return true;
  if (!vlmc_dispatch_is_norm_chain_op(op)) return false;
  const vlmc_op_t *chain[VLMC_DISPATCH_MAX_NORM_CHAIN];
  uint32_t n;
  return vlmc_dispatch_norm_source(r, k, op->operands[0], chain, &n) != NULL;
}

uint32_t vlmc_dispatch_anchor_index(const vlmc_dispatch_region_t *region) {
  /* Members before k are the prologue candidates op may read through. */
  for (uint32_t k = 0; k + 1 < region->num_ops; ++k) {
    const vlmc_op_t *op = region->ops[k];
    if (is_dequantize_prologue(region, k, op) || in_norm_prologue(region, k)) continue;
    if (!vlmc_dispatch_is_prologue_op(op) ||
        vlmc_dispatch_source_input(region, k, op->operands[0]) < 0)
      return k;
  }
  return region->num_ops - 1;
}

int vlmc_dispatch_append_cache_input(const vlmc_dispatch_region_t *region) {
  const vlmc_op_t *anchor = region->ops[vlmc_dispatch_anchor_index(region)];
  if (anchor != region->ops[region->num_ops - 1] || anchor->kind != VLMC_OP_KV_CACHE_APPEND)
    return -1;
  for (uint32_t i = 0; i < region->num_inputs; ++i)
    if (region->inputs[i] == anchor->operands[0]) return (int)i;
  return -1;
}

bool vlmc_type_count_dim(const vlmc_type_t *type, vlmc_dim_t *out) {
  vlmc_dim_t symbolic = vlmc_dim_static(1);
  int64_t fixed = 1;
  bool have = false;
  for (uint32_t d = 0; d < type->rank; ++d) {
    if (vlmc_dim_is_static(type->dims[d])) {
      fixed *= type->dims[d].off;
      continue;
    }
    if (have) return false;
    symbolic = type->dims[d];
    have = true;
  }
  if (!have) {
    *out = vlmc_dim_static(fixed);
    return true;
  }
  /* fixed * (sym*num/den + off) = sym*(num*fixed)/den + off*fixed, since sym*num/den is an
   * exact quotient for a valid dim. */
  *out = (vlmc_dim_t){symbolic.sym, symbolic.num * fixed, symbolic.den, symbolic.off * fixed};
  return true;
}

/* "m3" for the result of member 3, "i1" for input 1. */
static void print_operand_ref(const vlmc_dispatch_region_t *r, const vlmc_value_t *v,
                              vlmc_strbuf_t *out) {
  int m = region_member_index(r, v->def);
  if (m >= 0) vlmc_strbuf_printf(out, " m%d.%u", m, (unsigned)(v - v->def->results));
  else vlmc_strbuf_printf(out, " i%d", region_input_index(r, v));
}

static void print_member(const vlmc_module_t *module, const vlmc_dispatch_region_t *r,
                         const vlmc_op_t *op, vlmc_strbuf_t *out) {
  const vlmc_op_info_t *info = vlmc_op_info(op->kind);
  vlmc_strbuf_puts(out, info->mnemonic);
  for (uint32_t i = 0; i < op->num_operands; ++i) print_operand_ref(r, op->operands[i], out);
  for (uint32_t i = 0; i < info->num_attrs; ++i) {
    if (op->attrs[i].kind == VLMC_ATTR_NONE) continue;
    vlmc_strbuf_printf(out, " %s=", info->attrs[i].name);
    vlmc_attr_print(&op->attrs[i], out);
  }
  for (uint32_t i = 0; i < op->num_results; ++i) {
    vlmc_strbuf_puts(out, " : ");
    vlmc_type_print(module, &op->results[i].type, out);
  }
  vlmc_strbuf_putc(out, '\n');
}

uint64_t vlmc_dispatch_signature(const vlmc_module_t *module,
                                 const vlmc_dispatch_region_t *region) {
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  for (uint32_t i = 0; i < region->num_inputs; ++i) {
    const vlmc_value_t *v = region->inputs[i];
    vlmc_strbuf_printf(&text, "in%u %s: ", i,
                       v->def && v->def->kind == VLMC_OP_PARAM ? "param" : "value");
    vlmc_type_print(module, &v->type, &text);
    vlmc_strbuf_putc(&text, '\n');
  }
  for (uint32_t k = 0; k < region->num_ops; ++k) print_member(module, region, region->ops[k], &text);
  /* Out of memory: a signature no table holds, so the check refuses rather than accepts. */
  uint64_t h = text.failed ? 0 : vlmc_xxh64(text.data ? text.data : "", text.len, 0);
  vlmc_strbuf_deinit(&text);
  return h;
}
