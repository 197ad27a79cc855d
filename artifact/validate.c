/* The manifest's parameters against the params section and the program
 * (artifact/validate.h). Sorting, not pairwise comparison: a manifest may list a million
 * entries, and each check stays O(n log n). */
#include "artifact/validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/checked_math.h"
#include "support/strbuf.h"

static vlmc_status_t out_of_memory(const vlmc_artifact_t *a) {
  return vlmc_status_make(VLMC_OUT_OF_MEMORY, "%s: out of memory checking the parameters",
                          vlmc_artifact_path(a));
}

/* "bf16[512, 64]" */
static void describe_tensor(const vlmc_manifest_param_t *p, char *buf, size_t size) {
  size_t n = (size_t)snprintf(buf, size, "%s[", vlmc_dtype_info(p->dtype)->name);
  for (uint32_t d = 0; d < p->rank && n < size; ++d)
    n += (size_t)snprintf(buf + n, size - n, d ? ", %lld" : "%lld", (long long)p->shape[d]);
  if (n < size) snprintf(buf + n, size - n, "]");
}

/* The bytes a tensor of p's dtype and shape takes; false when that overflows or the element
 * count is not a whole number of the dtype's blocks. */
static bool tensor_bytes(const vlmc_manifest_param_t *p, uint64_t *out) {
  const vlmc_dtype_info_t *info = vlmc_dtype_info(p->dtype);
  uint64_t elements = 1;
  for (uint32_t d = 0; d < p->rank; ++d)
    if (!vlmc_mul_u64(elements, (uint64_t)p->shape[d], &elements)) return false;
  if (!info->block_size || elements % info->block_size) return false;
  return vlmc_mul_u64(elements / info->block_size, info->block_bytes, out);
}

static vlmc_status_t check_nbytes(const vlmc_artifact_t *a, const vlmc_manifest_param_t *p,
                                  size_t i) {
  uint64_t bytes = 0;
  char what[160];
  describe_tensor(p, what, sizeof what);
  if (!tensor_bytes(p, &bytes))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: manifest: params.tensors[%zu] '%s': %s has "
                            "no byte size (overflow, or not whole blocks)", vlmc_artifact_path(a),
                            i, p->name, what);
  if (bytes == p->nbytes) return NULL;
  return vlmc_status_make(VLMC_PARSE_ERROR, "%s: manifest: params.tensors[%zu] '%s': nbytes %llu, "
                          "but %s is %llu bytes", vlmc_artifact_path(a), i, p->name,
                          (unsigned long long)p->nbytes, what, (unsigned long long)bytes);
}

static vlmc_status_t check_inside(const vlmc_artifact_t *a, const vlmc_artifact_section_t *sec,
                                  const vlmc_manifest_param_t *p, size_t i) {
  uint64_t end;
  if (vlmc_add_u64(p->offset, p->nbytes, &end) && end <= sec->size) return NULL;
  return vlmc_status_make(VLMC_PARSE_ERROR, "%s: manifest: params.tensors[%zu] '%s': bytes "
                          "[%llu, +%llu) lie outside the params section (%llu bytes)",
                          vlmc_artifact_path(a), i, p->name, (unsigned long long)p->offset,
                          (unsigned long long)p->nbytes, (unsigned long long)sec->size);
}

/* ---- orders over the entries ---- */

typedef struct {
  const vlmc_manifest_param_t *p;
  size_t index;
} entry_t;

/* Ties go to the lower index, so that the first of equal entries comes first. */
static int by_index(const entry_t *a, const entry_t *b) {
  return a->index < b->index ? -1 : a->index > b->index;
}

static int by_range(const void *x, const void *y) {
  const entry_t *a = x, *b = y;
  if (a->p->offset != b->p->offset) return a->p->offset < b->p->offset ? -1 : 1;
  if (a->p->nbytes != b->p->nbytes) return a->p->nbytes < b->p->nbytes ? -1 : 1;
  return by_index(a, b);
}

static int by_name(const void *x, const void *y) {
  const entry_t *a = x, *b = y;
  int c = strcmp(a->p->name, b->p->name);
  return c ? c : by_index(a, b);
}

/* The entries sorted by `order`; NULL when out of memory. */
static entry_t *sorted_entries(const vlmc_manifest_t *m,
                               int (*order)(const void *, const void *)) {
  entry_t *e = malloc((m->num_params ? m->num_params : 1) * sizeof *e);
  if (!e) return NULL;
  for (size_t i = 0; i < m->num_params; ++i) e[i] = (entry_t){&m->params[i], i};
  qsort(e, m->num_params, sizeof *e, order);
  return e;
}

static bool same_bytes(const vlmc_manifest_param_t *a, const vlmc_manifest_param_t *b) {
  return a->offset == b->offset && a->nbytes == b->nbytes;
}

vlmc_status_t vlmc_manifest_param_aliases(const vlmc_manifest_t *m, size_t *first) {
  for (size_t i = 0; i < m->num_params; ++i) first[i] = i;
  if (m->params_external || m->num_params < 2) return NULL;
  entry_t *order = sorted_entries(m, by_range);
  if (!order) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "manifest: out of memory");
  for (size_t k = 1; k < m->num_params; ++k)
    if (order[k].p->nbytes && same_bytes(order[k - 1].p, order[k].p))
      first[order[k].index] = first[order[k - 1].index]; /* ties sort by index: the lowest */
  free(order);
  return NULL;
}

/* In offset order, each tensor starts at or after the end of every earlier one, or is the
 * same bytes as the one before it (an alias, which must then agree on its checksum). */
static vlmc_status_t check_overlaps(const vlmc_artifact_t *a, const vlmc_manifest_t *m) {
  entry_t *order = sorted_entries(m, by_range);
  if (!order) return out_of_memory(a);
  vlmc_status_t st = NULL;
  const vlmc_manifest_param_t *q = NULL; /* of the entries so far, the one reaching furthest */
  for (size_t k = 0; !st && k < m->num_params; ++k) {
    const vlmc_manifest_param_t *p = order[k].p;
    if (!p->nbytes) continue;
    if (q && same_bytes(p, q)) {
      if (p->checksum != q->checksum)
        st = vlmc_status_make(VLMC_PARSE_ERROR, "%s: manifest: parameters '%s' and '%s' are the "
                              "same bytes [%llu, +%llu) with different checksums",
                              vlmc_artifact_path(a), q->name, p->name,
                              (unsigned long long)p->offset, (unsigned long long)p->nbytes);
      continue;
    }
    if (q && p->offset < q->offset + q->nbytes)
      st = vlmc_status_make(VLMC_PARSE_ERROR, "%s: manifest: parameters '%s' [%llu, +%llu) and "
                            "'%s' [%llu, +%llu) overlap (only the same bytes may be shared)",
                            vlmc_artifact_path(a), q->name, (unsigned long long)q->offset,
                            (unsigned long long)q->nbytes, p->name,
                            (unsigned long long)p->offset, (unsigned long long)p->nbytes);
    if (!q || p->offset + p->nbytes > q->offset + q->nbytes) q = p;
  }
  free(order);
  return st;
}

static vlmc_status_t check_unique_names(const vlmc_artifact_t *a, const vlmc_manifest_t *m,
                                        const entry_t *by_name_order) {
  for (size_t k = 1; k < m->num_params; ++k) {
    const entry_t *p = &by_name_order[k - 1], *q = &by_name_order[k];
    if (!strcmp(p->p->name, q->p->name))
      return vlmc_status_make(VLMC_PARSE_ERROR, "%s: manifest: parameter '%s' is listed twice "
                              "(params.tensors[%zu] and [%zu])", vlmc_artifact_path(a),
                              p->p->name, p->index, q->index);
  }
  return NULL;
}

/* ---- the program's params ---- */

typedef struct {
  const vlmc_manifest_t *m;
  const entry_t *by_name_order;
} name_index_t;

static const vlmc_manifest_param_t *find_by_name(const name_index_t *ix, const char *name) {
  size_t lo = 0, hi = ix->m->num_params;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const vlmc_manifest_param_t *p = ix->by_name_order[mid].p;
    int c = strcmp(p->name, name);
    if (!c) return p;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

static bool fits_type(const vlmc_manifest_param_t *p, const vlmc_type_t *t) {
  if (p->dtype != t->dtype || p->rank != t->rank) return false;
  for (uint32_t d = 0; d < t->rank; ++d)
    if (!vlmc_dim_is_static(t->dims[d]) || t->dims[d].off != p->shape[d]) return false;
  return true;
}

static vlmc_status_t check_program_param(const vlmc_artifact_t *a, const name_index_t *ix,
                                         const vlmc_func_t *func, const vlmc_op_t *op) {
  const char *name = vlmc_op_attr(op, "name")->v.symbol;
  const vlmc_manifest_param_t *p = find_by_name(ix, name);
  if (!p)
    return vlmc_status_make(VLMC_NOT_FOUND, "%s: program: @%s uses parameter '%s', which the "
                            "manifest does not list", vlmc_artifact_path(a), func->name, name);
  if (fits_type(p, &op->results[0].type)) return NULL;
  char have[160];
  describe_tensor(p, have, sizeof have);
  vlmc_strbuf_t want;
  vlmc_strbuf_init(&want);
  vlmc_type_print(func->module, &op->results[0].type, &want);
  vlmc_status_t st = vlmc_status_make(VLMC_PARSE_ERROR, "%s: manifest: parameter '%s' is %s; the "
                                      "program (@%s) reads it as %s", vlmc_artifact_path(a), name,
                                      have, func->name, vlmc_strbuf_cstr(&want));
  vlmc_strbuf_deinit(&want);
  return st;
}

static vlmc_status_t check_program_params(const vlmc_artifact_t *a, const name_index_t *ix,
                                          const vlmc_module_t *module) {
  for (uint32_t f = 0; f < module->num_funcs; ++f)
    for (const vlmc_op_t *op = module->funcs[f]->body.first; op; op = op->next)
      if (op->kind == VLMC_OP_PARAM)
        VLMC_RETURN_IF_ERROR(check_program_param(a, ix, module->funcs[f], op));
  return NULL;
}

/* ---- all of it ---- */

static vlmc_status_t check_each_entry(const vlmc_artifact_t *a, const vlmc_manifest_t *m) {
  const vlmc_artifact_section_t *sec = NULL;
  if (!m->params_external && m->num_params)
    VLMC_RETURN_IF_ERROR(vlmc_artifact_require(a, "params", "the manifest's inline parameters",
                                               &sec));
  for (size_t i = 0; i < m->num_params; ++i) {
    VLMC_RETURN_IF_ERROR(check_nbytes(a, &m->params[i], i));
    if (sec) VLMC_RETURN_IF_ERROR(check_inside(a, sec, &m->params[i], i));
  }
  return NULL;
}

vlmc_status_t vlmc_artifact_check_params(const vlmc_artifact_t *a, const vlmc_manifest_t *m,
                                         const vlmc_module_t *module) {
  VLMC_RETURN_IF_ERROR(check_each_entry(a, m));
  if (!m->params_external) VLMC_RETURN_IF_ERROR(check_overlaps(a, m));
  entry_t *names = sorted_entries(m, by_name);
  if (!names) return out_of_memory(a);
  name_index_t ix = {m, names};
  vlmc_status_t st = check_unique_names(a, m, names);
  if (!st && module) st = check_program_params(a, &ix, module);
  free(names);
  return st;
}
