/* precision: the per-target dtype policy (f32 everywhere for `ref`; f16 or bf16 storage with
 * f32 islands for GPU targets), by rule and by calibration. The policy, the calibration and
 * their text form are described in passes/precision.h.
 *
 * Requires: verified IR; for `calibration=FILE`, the ranges recorded on exactly this IR.
 * Invalidates: nothing cached. Leaves casts that canonicalize may fold (a cast to the dtype a
 * value already has). */
#include <assert.h>
#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/precision.h"
#include "support/file.h"

/* ---- calibration: the range table ---------------------------------------------------------- */

void vlmc_precision_calibration_init(vlmc_precision_calibration_t *calibration) {
  memset(calibration, 0, sizeof *calibration);
}

void vlmc_precision_calibration_deinit(vlmc_precision_calibration_t *calibration) {
  for (size_t i = 0; i < calibration->count; ++i) free(calibration->ranges[i].func);
  free(calibration->ranges);
  memset(calibration, 0, sizeof *calibration);
}

static vlmc_precision_range_t *range_find(vlmc_precision_calibration_t *cal, const char *func,
                                          uint32_t op_index, uint32_t result_index) {
  for (size_t i = 0; i < cal->count; ++i) {
    vlmc_precision_range_t *r = &cal->ranges[i];
    if (r->op_index == op_index && r->result_index == result_index && strcmp(r->func, func) == 0)
      return r;
  }
  return NULL;
}

static vlmc_status_t range_append(vlmc_precision_calibration_t *cal, const char *func,
                                  uint32_t op_index, uint32_t result_index, const char *mnemonic,
                                  vlmc_precision_range_t **out) {
  if (cal->count == cal->capacity) {
    size_t capacity = cal->capacity ? 2 * cal->capacity : 64;
    vlmc_precision_range_t *grown = realloc(cal->ranges, capacity * sizeof *grown);
    if (!grown) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
    cal->ranges = grown;
    cal->capacity = capacity;
  }
  vlmc_precision_range_t *r = &cal->ranges[cal->count];
  memset(r, 0, sizeof *r);
  if (!(r->func = malloc(strlen(func) + 1)))
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  strcpy(r->func, func);
  r->op_index = op_index;
  r->result_index = result_index;
  snprintf(r->mnemonic, sizeof r->mnemonic, "%s", mnemonic);
  cal->count++;
  *out = r;
  return NULL;
}

/* ---- calibration: running the reference executor -------------------------------------------- */

/* Where each value id is made: (function, op position). */
typedef struct {
  const vlmc_func_t **func;
  uint32_t *op_index;
  uint32_t size;
} value_sites_t;

static vlmc_status_t value_sites_init(const vlmc_module_t *module, value_sites_t *sites) {
  sites->size = module->next_value_id;
  sites->func = calloc(sites->size + 1, sizeof *sites->func);
  sites->op_index = calloc(sites->size + 1, sizeof *sites->op_index);
  if (!sites->func || !sites->op_index)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (uint32_t f = 0; f < module->num_funcs; ++f) {
    uint32_t index = 0;
    for (const vlmc_op_t *op = module->funcs[f]->body.first; op; op = op->next, ++index)
      for (uint32_t r = 0; r < op->num_results; ++r) {
        sites->func[op->results[r].id] = module->funcs[f];
        sites->op_index[op->results[r].id] = index;
      }
  }
  return NULL;
}

static void value_sites_deinit(value_sites_t *sites) {
  free(sites->func);
  free(sites->op_index);
}

typedef struct {
  vlmc_precision_calibration_t *cal;
  value_sites_t sites;
  vlmc_status_t error; /* the first failure inside the callback (out of memory) */
} recorder_t;

static void record_range(void *ctx, const vlmc_value_range_t *range) {
  recorder_t *rec = ctx;
  const vlmc_value_t *v = range->value;
  if (rec->error || v->id >= rec->sites.size || !rec->sites.func[v->id] ||
      !vlmc_dtype_info(v->type.dtype)->is_float)
    return;
  const char *func = rec->sites.func[v->id]->name;
  uint32_t index = rec->sites.op_index[v->id];
  vlmc_precision_range_t *r = range_find(rec->cal, func, index, range->result_index);
  if (!r) {
    rec->error = range_append(rec->cal, func, index, range->result_index,
                              vlmc_op_info(range->op->kind)->mnemonic, &r);
    if (rec->error) return;
  }
  if (range->max_abs > r->max_abs) r->max_abs = range->max_abs;
  r->nonfinite += range->nonfinite;
}

struct vlmc_precision_calibrator_s {
  recorder_t rec;
  vlmc_executor_t *executor;
};

vlmc_status_t vlmc_precision_calibrator_create(const vlmc_module_t *module,
                                               const vlmc_executor_options_t *executor_options,
                                               vlmc_precision_calibration_t *calibration,
                                               vlmc_precision_calibrator_t **out) {
  *out = NULL;
  vlmc_precision_calibrator_t *c = calloc(1, sizeof *c);
  if (!c) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  c->rec.cal = calibration;
  vlmc_status_t st = value_sites_init(module, &c->rec.sites);
  vlmc_executor_options_t options =
      executor_options ? *executor_options : vlmc_executor_options_default();
  options.emulate_low_precision = false;
  options.on_range = record_range;
  options.range_ctx = &c->rec;
  if (!st) st = vlmc_executor_create(module, &options, &c->executor);
  if (st) {
    vlmc_precision_calibrator_destroy(c);
    return vlmc_status_annotate(st, "precision calibration: ");
  }
  *out = c;
  return NULL;
}

vlmc_status_t vlmc_precision_calibrator_run(vlmc_precision_calibrator_t *c, const char *func,
                                            vlmc_tensor_t *args, uint32_t num_args,
                                            vlmc_tensor_t *out_results, uint32_t num_results) {
  vlmc_status_t st = vlmc_executor_run(c->executor, func, args, num_args, out_results,
                                       num_results);
  if (!st && c->rec.error) st = c->rec.error, c->rec.error = NULL;
  return vlmc_status_annotate(st, "precision calibration: ");
}

void vlmc_precision_calibrator_destroy(vlmc_precision_calibrator_t *c) {
  if (!c) return;
  vlmc_status_free(c->rec.error);
  vlmc_executor_destroy(c->executor);
  value_sites_deinit(&c->rec.sites);
  free(c);
}

static vlmc_status_t run_sample(vlmc_precision_calibrator_t *calibrator,
                                const vlmc_module_t *module,
                                const vlmc_precision_sample_t *sample) {
  const vlmc_func_t *func = vlmc_module_func_find(module, sample->func);
  if (!func)
    return vlmc_status_make(VLMC_NOT_FOUND, "calibration sample: no function @%s", sample->func);
  vlmc_tensor_t *args = calloc(sample->num_args + 1, sizeof *args);
  vlmc_tensor_t *results = calloc(func->num_results + 1, sizeof *results);
  vlmc_status_t st = NULL;
  if (!args || !results) st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (uint32_t i = 0; !st && i < sample->num_args; ++i) {
    if (sample->args[i].owned)
      st = vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "calibration sample for @%s: argument %u must be a borrowed view",
                            sample->func, i);
    else args[i] = sample->args[i];
  }
  if (!st)
    st = vlmc_precision_calibrator_run(calibrator, sample->func, args, sample->num_args, results,
                                       func->num_results);
  for (uint32_t i = 0; results && i < func->num_results; ++i) vlmc_tensor_release(&results[i]);
  free(args);
  free(results);
  return st;
}

vlmc_status_t vlmc_precision_calibrate(const vlmc_module_t *module,
                                       const vlmc_executor_options_t *executor_options,
                                       const vlmc_precision_sample_t *samples,
                                       size_t num_samples,
                                       vlmc_precision_calibration_t *calibration) {
  vlmc_precision_calibrator_t *calibrator = NULL;
  VLMC_RETURN_IF_ERROR(
      vlmc_precision_calibrator_create(module, executor_options, calibration, &calibrator));
  vlmc_status_t st = NULL;
  for (size_t i = 0; !st && i < num_samples; ++i) st = run_sample(calibrator, module, &samples[i]);
  vlmc_precision_calibrator_destroy(calibrator);
  return st;
}

/* ---- calibration: text form ---------------------------------------------------------------- */

void vlmc_precision_calibration_print(const vlmc_precision_calibration_t *calibration,
                                      vlmc_strbuf_t *out) {
  vlmc_strbuf_puts(out, "# vlmc precision calibration v1\n");
  for (size_t i = 0; i < calibration->count; ++i) {
    const vlmc_precision_range_t *r = &calibration->ranges[i];
    vlmc_strbuf_printf(out, "@%s %u %s %u max_abs=%.9g nonfinite=%lld\n", r->func, r->op_index,
                       r->mnemonic, r->result_index, r->max_abs, (long long)r->nonfinite);
  }
}

/* One whitespace-separated word of [*p, end) into out (size bytes); false when none. */
static bool next_word(const char **p, const char *end, char *out, size_t size) {
  while (*p < end && (**p == ' ' || **p == '\t')) ++*p;
  const char *begin = *p;
  while (*p < end && **p != ' ' && **p != '\t') ++*p;
  size_t len = (size_t)(*p - begin);
  if (len == 0 || len >= size) return false;
  memcpy(out, begin, len);
  out[len] = '\0';
  return true;
}

static bool parse_u32(const char *text, uint32_t *out) {
  char *end;
  unsigned long long v = strtoull(text, &end, 10);
  if (!isdigit((unsigned char)text[0]) || *end || v > UINT32_MAX) return false;
  *out = (uint32_t)v;
  return true;
}

static bool parse_keyed(const char *word, const char *key, double *out) {
  size_t n = strlen(key);
  if (strncmp(word, key, n) != 0 || word[n] != '=' || !word[n + 1]) return false;
  char *end;
  *out = strtod(word + n + 1, &end);
  return *end == '\0' && !isnan(*out) && *out >= 0;
}

static vlmc_status_t parse_line(const char *p, const char *end, const char *file, int line,
                                vlmc_precision_calibration_t *cal) {
  char func[256], index[32], mnemonic[32], result[32], max_abs[64], nonfinite[64], extra[8];
  double abs_value, bad;
  uint32_t op_index, result_index;
  if (!next_word(&p, end, func, sizeof func) || func[0] != '@' || !func[1])
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s:%d: expected '@function'", file, line);
  if (!next_word(&p, end, index, sizeof index) || !parse_u32(index, &op_index))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s:%d: expected the op position", file, line);
  if (!next_word(&p, end, mnemonic, sizeof mnemonic))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s:%d: expected the op mnemonic", file, line);
  if (!next_word(&p, end, result, sizeof result) || !parse_u32(result, &result_index))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s:%d: expected the result index", file, line);
  if (!next_word(&p, end, max_abs, sizeof max_abs) || !parse_keyed(max_abs, "max_abs", &abs_value))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s:%d: expected 'max_abs=<number>'", file, line);
  if (!next_word(&p, end, nonfinite, sizeof nonfinite) ||
      !parse_keyed(nonfinite, "nonfinite", &bad) || bad != floor(bad) || bad > 9e18)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s:%d: expected 'nonfinite=<count>'", file, line);
  if (next_word(&p, end, extra, sizeof extra) || p < end)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s:%d: unexpected text after the counts", file,
                            line);
  if (range_find(cal, func + 1, op_index, result_index))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s:%d: @%s op %u result %u is given twice", file,
                            line, func + 1, op_index, result_index);
  vlmc_precision_range_t *r;
  VLMC_RETURN_IF_ERROR(range_append(cal, func + 1, op_index, result_index, mnemonic, &r));
  r->max_abs = abs_value;
  r->nonfinite = (int64_t)bad;
  return NULL;
}

vlmc_status_t vlmc_precision_calibration_parse(const char *text, size_t len, const char *file,
                                               vlmc_precision_calibration_t *calibration) {
  const char *p = text, *end = text + len;
  for (int line = 1; p < end; ++line) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    const char *stop = eol ? eol : end;
    const char *q = p;
    while (q < stop && (*q == ' ' || *q == '\t' || *q == '\r')) ++q;
    const char *last = stop;
    while (last > q && (last[-1] == '\r' || last[-1] == ' ' || last[-1] == '\t')) --last;
    if (q < last && *q != '#') VLMC_RETURN_IF_ERROR(parse_line(q, last, file, line, calibration));
    p = eol ? eol + 1 : end;
  }
  return NULL;
}

/* ---- the policy ---------------------------------------------------------------------------- */

typedef enum {
  RULE_NONE = -1,
  RULE_ACCUMULATION,
  RULE_NORM,
  RULE_SOFTMAX,
  RULE_ATTENTION,
  RULE_ROTARY,
  RULE_COUNT
} rule_t;

static const char *const rule_names[RULE_COUNT] = {
    "linear/matmul (f32 accumulation)", "norm (f32 statistics)", "softmax",
    "attention (f32 scores and softmax)", "rope (f32 rotary angles)"};

static rule_t rule_of(vlmc_op_kind_t kind) {
  switch (kind) {
    case VLMC_OP_LINEAR: case VLMC_OP_MATMUL: return RULE_ACCUMULATION;
    case VLMC_OP_RMS_NORM: case VLMC_OP_LAYER_NORM: return RULE_NORM;
    case VLMC_OP_SOFTMAX: return RULE_SOFTMAX;
    case VLMC_OP_ATTENTION: case VLMC_OP_WINDOW_ATTENTION: return RULE_ATTENTION;
    case VLMC_OP_ROPE: return RULE_ROTARY;
    default: return RULE_NONE;
  }
}

typedef struct {
  const vlmc_precision_options_t *options;
  vlmc_precision_summary_t *summary;
  vlmc_func_t *func;
  vlmc_dtype_t low;  /* the storage dtype L */
  double limit;      /* L's largest finite value over the headroom: pinned above it */
  double headroom;
  uint32_t size;     /* value ids that existed before the pass */
  const vlmc_precision_range_t **pinned; /* by id: the range that keeps it in f32, or NULL */
  /* Casts made so far, by source value id (grown as casts make new values). */
  vlmc_value_t **cast_low, **cast_f32;
  uint32_t cast_capacity;
  uint64_t rule_counts[RULE_COUNT];
} policy_t;

static void policy_log(const policy_t *pol, const char *fmt, ...) VLMC_PRINTF(2, 3);
static void policy_log(const policy_t *pol, const char *fmt, ...) {
  if (!pol->options->log) return;
  char message[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  pol->options->log(pol->options->user, message);
}

static bool is_float_value(const vlmc_value_t *v) {
  return vlmc_dtype_info(v->type.dtype)->is_float;
}

/* ---- the checkpoint module of an op ---------------------------------------------------------- */

void vlmc_precision_param_module(const char *param, char *out, size_t size) {
  size_t len = strlen(param), dots = 0;
  for (size_t i = 0; i < len; ++i) dots += param[i] == '.';
  /* "a.b.c.up_proj.weight" -> "a.b.c"; "lm_head.weight" -> "lm_head"; "x" -> "x". */
  size_t drop = dots >= 2 ? 2 : dots;
  size_t keep = len;
  for (size_t k = 0; k < drop; ++k)
    while (keep > 0 && param[--keep] != '.') {
    }
  snprintf(out, size, "%.*s", (int)keep, param);
}

/* Breadth-first over the values an op reads, nearest first; a module's weights are a few ops
 * away from its computation (linear <- cast <- param), so the search stops after a bounded
 * number of values rather than walking the whole function. */
enum { MODULE_SEARCH_LIMIT = 4096 };

bool vlmc_precision_op_module(const vlmc_op_t *op, char *out, size_t size) {
  snprintf(out, size, "%s", "");
  const vlmc_module_t *module = op->block->func->module;
  uint32_t ids = module->next_value_id;
  bool *seen = calloc(ids + 1, sizeof *seen);
  const vlmc_op_t **queue = malloc(MODULE_SEARCH_LIMIT * sizeof *queue);
  bool found = false;
  size_t head = 0, tail = 0;
  if (seen && queue) queue[tail++] = op;
  while (head < tail && !found) {
    const vlmc_op_t *at = queue[head++];
    if (at->kind == VLMC_OP_PARAM) {
      vlmc_precision_param_module(vlmc_op_attr(at, "name")->v.symbol, out, size);
      found = true;
      break;
    }
    for (uint32_t i = 0; i < at->num_operands && tail < MODULE_SEARCH_LIMIT; ++i) {
      const vlmc_value_t *v = at->operands[i];
      if (!v->def || v->id >= ids || seen[v->id]) continue;
      seen[v->id] = true;
      queue[tail++] = v->def;
    }
  }
  free(seen);
  free(queue);
  return found;
}

double vlmc_precision_calibration_limit(vlmc_precision_target_t target, double headroom) {
  /* bf16 shares f32's exponent: only inf / NaN in the f32 run itself exceed it. */
  double max = target == VLMC_PRECISION_F16 ? 65504.0 : target == VLMC_PRECISION_BF16 ? FLT_MAX
                                                                                       : INFINITY;
  return max / (headroom > 1 ? headroom : 1);
}

static bool is_pinned(const policy_t *pol, const vlmc_value_t *v) {
  return v->id < pol->size && pol->pinned[v->id];
}

static void value_label(const vlmc_value_t *v, char *out, size_t size) {
  if (v->name) snprintf(out, size, "%%%s", v->name);
  else snprintf(out, size, "(value #%u)", v->id);
}

/* Marks the op results the calibration says leave L's range. */
static vlmc_status_t pin_from_calibration(policy_t *pol, const vlmc_precision_calibration_t *cal) {
  for (size_t i = 0; cal && i < cal->count; ++i) {
    const vlmc_precision_range_t *r = &cal->ranges[i];
    if (strcmp(r->func, pol->func->name) != 0) continue;
    const vlmc_op_t *op = pol->func->body.first;
    for (uint32_t k = 0; op && k < r->op_index; ++k) op = op->next;
    if (!op || strcmp(vlmc_op_info(op->kind)->mnemonic, r->mnemonic) != 0 ||
        r->result_index >= op->num_results)
      return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                              "precision: the calibration does not match the IR: @%s op %u is "
                              "%s, the ranges say '%s' (result %u); calibrate the IR that this "
                              "pass runs on",
                              r->func, r->op_index,
                              op ? vlmc_op_info(op->kind)->mnemonic : "past the end",
                              r->mnemonic, r->result_index);
    const vlmc_value_t *v = &op->results[r->result_index];
    if (is_float_value(v) && (r->max_abs > pol->limit || r->nonfinite > 0)) pol->pinned[v->id] = r;
  }
  return NULL;
}

static vlmc_status_t cast_memo_slot(policy_t *pol, uint32_t id, vlmc_value_t ***out_slot,
                                    vlmc_dtype_t dtype) {
  if (id >= pol->cast_capacity) {
    uint32_t capacity = pol->cast_capacity * 2 > id + 1 ? pol->cast_capacity * 2 : id + 64;
    vlmc_value_t **low = realloc(pol->cast_low, capacity * sizeof *low);
    if (low) pol->cast_low = low;
    vlmc_value_t **f32 = low ? realloc(pol->cast_f32, capacity * sizeof *f32) : NULL;
    if (f32) pol->cast_f32 = f32;
    if (!low || !f32) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
    for (uint32_t i = pol->cast_capacity; i < capacity; ++i) low[i] = f32[i] = NULL;
    pol->cast_capacity = capacity;
  }
  *out_slot = dtype == VLMC_DTYPE_F32 ? &pol->cast_f32[id] : &pol->cast_low[id];
  return NULL;
}

/* v in `dtype`, through a cast placed before `user` (the first op that needs it; later ones
 * reuse it). */
static vlmc_status_t value_as(policy_t *pol, vlmc_op_t *user, vlmc_value_t *v, vlmc_dtype_t dtype,
                              vlmc_value_t **out) {
  if (v->type.dtype == dtype) {
    *out = v;
    return NULL;
  }
  assert(dtype == VLMC_DTYPE_F32 || dtype == pol->low);
  vlmc_value_t **slot = NULL;
  VLMC_RETURN_IF_ERROR(cast_memo_slot(pol, v->id, &slot, dtype));
  if (!*slot) {
    vlmc_builder_t b;
    vlmc_builder_init(&b, pol->func);
    vlmc_builder_set_insert_before(&b, user);
    b.loc = user->loc;
    VLMC_RETURN_IF_ERROR(vlmc_builder_cast(&b, v, dtype, NULL, slot));
    pol->summary->casts_inserted++;
  }
  *out = *slot;
  return NULL;
}

/* Every float operand of op (other than block-quantized weights) read in `dtype`. */
static vlmc_status_t operands_as(policy_t *pol, vlmc_op_t *op, vlmc_dtype_t dtype) {
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    vlmc_value_t *v = op->operands[i], *cast;
    if (!is_float_value(v)) continue;
    VLMC_RETURN_IF_ERROR(value_as(pol, op, v, dtype, &cast));
    if (cast != v) vlmc_op_set_operand(op, i, cast);
  }
  return NULL;
}

/* The result is computed in `compute` and stored in `storage`: when they differ, every use
 * reads a cast to the storage dtype. The result's dtype is changed in place (its type is
 * otherwise the same; the verifier checks the whole function after the pass). */
static vlmc_status_t retype_result(policy_t *pol, vlmc_op_t *op, vlmc_dtype_t compute,
                                   vlmc_dtype_t storage) {
  vlmc_value_t *result = &op->results[0];
  result->type.dtype = compute;
  if (storage == compute) return NULL;
  vlmc_builder_t b;
  vlmc_builder_init(&b, pol->func);
  if (op->next) vlmc_builder_set_insert_before(&b, op->next);
  b.loc = op->loc;
  vlmc_value_t *stored;
  VLMC_RETURN_IF_ERROR(vlmc_builder_cast(&b, result, storage, NULL, &stored));
  vlmc_value_replace_all_uses(result, stored);
  vlmc_op_set_operand(stored->def, 0, result);
  pol->summary->casts_inserted++;
  return NULL;
}

static bool only_returned(const policy_t *pol, const vlmc_value_t *v) {
  bool used = false;
  for (const vlmc_op_t *op = pol->func->body.first; op; op = op->next)
    for (uint32_t i = 0; i < op->num_operands; ++i) {
      if (op->operands[i] != v) continue;
      if (op->kind != VLMC_OP_RETURN) return false;
      used = true;
    }
  return used;
}

static vlmc_status_t apply_float_op(policy_t *pol, vlmc_op_t *op, uint32_t index) {
  vlmc_value_t *result = &op->results[0];
  rule_t rule = rule_of(op->kind);
  const vlmc_precision_range_t *range = is_pinned(pol, result) ? pol->pinned[result->id] : NULL;
  const vlmc_value_t *pinned_operand = NULL;
  for (uint32_t i = 0; i < op->num_operands && !pinned_operand; ++i)
    if (is_pinned(pol, op->operands[i])) pinned_operand = op->operands[i];
  bool f32 = rule != RULE_NONE || range || pinned_operand;
  vlmc_dtype_t compute = f32 ? VLMC_DTYPE_F32 : pol->low;
  /* A value computed in f32 that only leaves the function is not stored in L first: the
   * results keep their dtype. */
  vlmc_dtype_t storage = range || (f32 && only_returned(pol, result)) ? VLMC_DTYPE_F32 : pol->low;
  VLMC_RETURN_IF_ERROR(operands_as(pol, op, compute));
  VLMC_RETURN_IF_ERROR(retype_result(pol, op, compute, storage));
  char label[160];
  value_label(result, label, sizeof label);
  const char *low = vlmc_dtype_info(pol->low)->name;
  if (range) {
    char module[160];
    if (!vlmc_precision_op_module(op, module, sizeof module))
      snprintf(module, sizeof module, "no weight");
    pol->summary->range_upcasts++;
    if (range->nonfinite > 0)
      policy_log(pol, "upcast: @%s: op #%u '%s' %s (%s) kept in f32: %lld inf/NaN values in "
                 "calibration", pol->func->name, index, vlmc_op_info(op->kind)->mnemonic, label,
                 module, (long long)range->nonfinite);
    else
      policy_log(pol, "upcast: @%s: op #%u '%s' %s (%s) kept in f32: max |x| %.3g > %.6g (%s "
                 "max / headroom %g) in calibration", pol->func->name, index,
                 vlmc_op_info(op->kind)->mnemonic, label, module, range->max_abs, pol->limit,
                 low, pol->headroom);
  } else if (rule != RULE_NONE) {
    pol->summary->rule_upcasts++;
    pol->rule_counts[rule]++;
  } else if (pinned_operand) {
    char operand[160];
    value_label(pinned_operand, operand, sizeof operand);
    pol->summary->f32_readers++;
    policy_log(pol, "@%s: op #%u '%s' %s computes in f32: it reads %s, kept in f32; its "
               "result is stored in %s", pol->func->name, index,
               vlmc_op_info(op->kind)->mnemonic, label, operand, low);
  }
  return NULL;
}

/* The model's casts of stored data (weights, embedding rows) to f32 become casts to L: the
 * data is stored in L, and ops that compute in f32 cast it up themselves. */
static bool is_storage_cast(const vlmc_op_t *op) {
  if (op->kind != VLMC_OP_CAST) return false;
  const vlmc_value_t *from = op->operands[0];
  return op->results[0].type.dtype == VLMC_DTYPE_F32 && is_float_value(from) &&
         from->type.dtype != VLMC_DTYPE_F32;
}

/* A bf16 parameter under the f16 policy keeps its widening cast to f32: the kernel that reads
 * it widens each bf16 element exactly as it loads (fuse makes the cast a prologue), where a
 * cast to f16 would be a narrowing region of its own, run once and kept on the device: a
 * second copy of every weight (the 3B: 33.7 GiB against 8.0 at f32, found on the H200), and
 * a rounding that sends bf16 weights past 65504 to inf and those below 6.1e-5 into f16's
 * subnormals. The ops that read weights compute in f32 by rule anyway. */
static bool keeps_bf16_param(const policy_t *pol, const vlmc_op_t *cast) {
  const vlmc_value_t *from = cast->operands[0];
  return pol->low == VLMC_DTYPE_F16 && from->type.dtype == VLMC_DTYPE_BF16 && from->def &&
         from->def->kind == VLMC_OP_PARAM;
}

static vlmc_status_t apply_return(policy_t *pol, vlmc_op_t *op) {
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    vlmc_value_t *v = op->operands[i], *cast;
    vlmc_dtype_t want = pol->func->result_types[i].dtype;
    if (!is_float_value(v) || v->type.dtype == want) continue;
    VLMC_RETURN_IF_ERROR(value_as(pol, op, v, want, &cast));
    vlmc_op_set_operand(op, i, cast);
  }
  return NULL;
}

static vlmc_status_t apply_op(policy_t *pol, vlmc_op_t *op, uint32_t index) {
  switch (op->kind) {
    case VLMC_OP_RETURN: return apply_return(pol, op);
    case VLMC_OP_KV_CACHE_APPEND: {
      /* The cache keeps its dtype (the calling convention); the new rows are cast to it. */
      vlmc_value_t *rows;
      VLMC_RETURN_IF_ERROR(value_as(pol, op, op->operands[1], op->operands[0]->type.dtype, &rows));
      vlmc_op_set_operand(op, 1, rows);
      return NULL;
    }
    case VLMC_OP_PARAM: case VLMC_OP_CONSTANT: case VLMC_OP_EMBEDDING: case VLMC_OP_TAP:
    case VLMC_OP_ARGMAX:
    /* A dequantized weight stays f32, as a bf16 weight keeps its widening cast
     * (keeps_bf16_param): its kernel dequantizes each element as it loads. */
    case VLMC_OP_DEQUANTIZE:
      return NULL;
    default:
      break;
  }
  if (is_storage_cast(op)) {
    if (is_pinned(pol, &op->results[0]) || keeps_bf16_param(pol, op)) return NULL;
    vlmc_attr_t dtype = vlmc_attr_dtype(pol->low);
    op->results[0].type.dtype = pol->low;
    return vlmc_op_set_attr(op, "dtype", &dtype);
  }
  if (op->kind == VLMC_OP_CAST || op->num_results != 1 || !is_float_value(&op->results[0]))
    return NULL;
  return apply_float_op(pol, op, index);
}

static vlmc_status_t apply_func(policy_t *pol) {
  /* Snapshot the ops first: the casts this inserts are not themselves subject to policy. */
  uint32_t count = 0;
  for (vlmc_op_t *op = pol->func->body.first; op; op = op->next) ++count;
  vlmc_op_t **ops = malloc((count + 1) * sizeof *ops);
  if (!ops) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  count = 0;
  for (vlmc_op_t *op = pol->func->body.first; op; op = op->next) ops[count++] = op;
  vlmc_status_t st = NULL;
  for (uint32_t i = 0; !st && i < count; ++i) st = apply_op(pol, ops[i], i);
  free(ops);
  VLMC_RETURN_IF_ERROR(st);
  char line[512];
  size_t n = (size_t)snprintf(line, sizeof line, "@%s: activations stored in %s; in f32 by rule:",
                              pol->func->name, vlmc_dtype_info(pol->low)->name);
  bool any = false;
  for (int r = 0; r < RULE_COUNT && n < sizeof line; ++r) {
    if (!pol->rule_counts[r]) continue;
    n += (size_t)snprintf(line + n, sizeof line - n, "%s %llu %s", any ? "," : "",
                          (unsigned long long)pol->rule_counts[r], rule_names[r]);
    any = true;
  }
  if (!any && n < sizeof line) snprintf(line + n, sizeof line - n, " none");
  policy_log(pol, "%s", line);
  return NULL;
}

static vlmc_status_t policy_func(const vlmc_precision_options_t *options,
                                 vlmc_precision_summary_t *summary, vlmc_func_t *func) {
  policy_t pol;
  memset(&pol, 0, sizeof pol);
  pol.options = options;
  pol.summary = summary;
  pol.func = func;
  pol.low = options->target == VLMC_PRECISION_F16 ? VLMC_DTYPE_F16 : VLMC_DTYPE_BF16;
  pol.headroom = options->headroom > 1 ? options->headroom : 1;
  pol.limit = vlmc_precision_calibration_limit(options->target, pol.headroom);
  pol.size = func->module->next_value_id;
  pol.pinned = calloc(pol.size + 1, sizeof *pol.pinned);
  vlmc_status_t st = pol.pinned ? NULL : vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  if (!st) st = pin_from_calibration(&pol, options->calibration);
  if (!st) st = apply_func(&pol);
  free(pol.pinned);
  free(pol.cast_low);
  free(pol.cast_f32);
  return st;
}

/* ---- bf16-matmul: linears with bf16 or quantized weights read bf16 inputs (precision.h) ----- */

/* Whether w (a linear's weight operand) holds values exact in bf16 products: a widening cast
 * of a bf16 value (the model's cast of a bf16 parameter to f32), or a dequantize (each value
 * scale * q + bias with q a small integer: the kernels multiply q, exact in bf16, and take
 * the group's scale and bias out of the sum, docs/quantization.md). */
static bool is_bf16_exact_weight(const vlmc_value_t *w) {
  if (w->def && w->def->kind == VLMC_OP_DEQUANTIZE) return true;
  return w->def && w->def->kind == VLMC_OP_CAST &&
         w->def->operands[0]->type.dtype == VLMC_DTYPE_BF16;
}

static vlmc_status_t insert_cast(vlmc_func_t *func, vlmc_op_t *before, vlmc_value_t *v,
                                 vlmc_dtype_t dtype, vlmc_value_t **out) {
  vlmc_builder_t b;
  vlmc_builder_init(&b, func);
  vlmc_builder_set_insert_before(&b, before);
  b.loc = before->loc;
  return vlmc_builder_cast(&b, v, dtype, NULL, out);
}

static vlmc_status_t bf16_matmul_func(const vlmc_precision_options_t *options,
                                      vlmc_precision_summary_t *summary, vlmc_func_t *func) {
  uint32_t size = func->module->next_value_id;
  vlmc_value_t **rounded = calloc(size + 1, sizeof *rounded); /* by input id: its bf16 cast */
  if (!rounded) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  uint64_t linears = 0, kept = 0;
  vlmc_status_t st = NULL;
  for (vlmc_op_t *op = func->body.first; op && !st; op = op->next) {
    if (op->kind != VLMC_OP_LINEAR) continue;
    vlmc_value_t *x = op->operands[0];
    if (!is_bf16_exact_weight(op->operands[1]) || x->type.dtype != VLMC_DTYPE_F32 || x->id >= size) {
      kept++;
      continue;
    }
    if (!rounded[x->id]) {
      st = insert_cast(func, op, x, VLMC_DTYPE_BF16, &rounded[x->id]);
      summary->casts_inserted++;
    }
    vlmc_value_t *widened = NULL;
    if (!st) st = insert_cast(func, op, rounded[x->id], VLMC_DTYPE_F32, &widened);
    if (st) break;
    summary->casts_inserted++;
    vlmc_op_set_operand(op, 0, widened);
    linears++;
  }
  free(rounded);
  summary->bf16_matmul_inputs += linears;
  if (!st && options->log) {
    char line[256];
    snprintf(line, sizeof line, "@%s: bf16-matmul: %llu linears read their input rounded to "
             "bf16 (bf16 or quantized weights), %llu keep an f32 input; every activation stays f32",
             func->name, (unsigned long long)linears, (unsigned long long)kept);
    options->log(options->user, line);
  }
  return st;
}

vlmc_status_t vlmc_precision_apply(vlmc_module_t *module, const vlmc_precision_options_t *options,
                                   vlmc_precision_summary_t *out_summary) {
  vlmc_precision_summary_t summary;
  memset(&summary, 0, sizeof summary);
  if (options->target == VLMC_PRECISION_REF) {
    if (options->log) options->log(options->user, "target ref: every value stays f32");
  } else if (options->target == VLMC_PRECISION_BF16_MATMUL) {
    for (uint32_t f = 0; f < module->num_funcs; ++f)
      VLMC_RETURN_IF_ERROR(bf16_matmul_func(options, &summary, module->funcs[f]));
  } else {
    for (uint32_t f = 0; f < module->num_funcs; ++f)
      VLMC_RETURN_IF_ERROR(policy_func(options, &summary, module->funcs[f]));
  }
  if (out_summary) *out_summary = summary;
  return NULL;
}

/* ---- the pass ------------------------------------------------------------------------------ */

enum { STAT_RULE, STAT_RANGE, STAT_READERS, STAT_CASTS, STAT_BF16_MATMUL };

static const char *const precision_statistics[] = {"rule-upcasts", "calibration-upcasts",
                                                   "f32-readers", "casts-inserted",
                                                   "bf16-matmul-inputs"};

static const vlmc_pass_option_t precision_options[] = {
    {"target", VLMC_PASS_OPTION_STRING, "ref",
     "ref (f32 everywhere), f16 or bf16 (activations stored in that dtype), bf16-matmul "
     "(f32 activations; linears with bf16 weights read their input rounded to bf16)"},
    {"calibration", VLMC_PASS_OPTION_STRING, "",
     "ranges file recorded on this IR (vlmc_precision_calibrate); empty: rules only"},
    {"headroom", VLMC_PASS_OPTION_INT, "4",
     "keep in f32 every value whose calibrated |x| exceeds the dtype's max / headroom"},
};

static void remark(void *user, const char *message) {
  vlmc_pass_remark(user, "%s", message);
}

static vlmc_status_t parse_target(const char *text, vlmc_precision_target_t *out) {
  if (strcmp(text, "ref") == 0) *out = VLMC_PRECISION_REF;
  else if (strcmp(text, "f16") == 0) *out = VLMC_PRECISION_F16;
  else if (strcmp(text, "bf16") == 0) *out = VLMC_PRECISION_BF16;
  else if (strcmp(text, "bf16-matmul") == 0) *out = VLMC_PRECISION_BF16_MATMUL;
  else
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "precision: option 'target' is '%s'; expected ref, f16, bf16 or "
                            "bf16-matmul", text);
  return NULL;
}

static vlmc_status_t load_calibration(const char *path, vlmc_precision_calibration_t *cal) {
  char *text = NULL;
  size_t len = 0;
  VLMC_RETURN_IF_ERROR(vlmc_file_read_all(path, &text, &len));
  vlmc_status_t st = vlmc_precision_calibration_parse(text, len, path, cal);
  free(text);
  return st;
}

static vlmc_status_t precision_run(vlmc_pass_context_t *ctx, vlmc_module_t *module) {
  vlmc_precision_options_t options = {VLMC_PRECISION_REF, NULL, remark, ctx, 1};
  VLMC_RETURN_IF_ERROR(parse_target(vlmc_pass_option_string(ctx, "target"), &options.target));
  int64_t headroom = vlmc_pass_option_int(ctx, "headroom");
  if (headroom < 1 || headroom > 65504)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "precision: option 'headroom' is %lld; expected 1 to 65504",
                            (long long)headroom);
  options.headroom = (double)headroom;
  vlmc_precision_calibration_t cal;
  vlmc_precision_calibration_init(&cal);
  const char *path = vlmc_pass_option_string(ctx, "calibration");
  if (path[0] && options.target == VLMC_PRECISION_BF16_MATMUL)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT,
                            "precision: target bf16-matmul keeps every activation in f32, so a "
                            "calibration has nothing to decide; drop calibration=%s", path);
  vlmc_status_t st = path[0] ? load_calibration(path, &cal) : NULL;
  if (path[0]) options.calibration = &cal;
  vlmc_precision_summary_t summary;
  if (!st) st = vlmc_precision_apply(module, &options, &summary);
  if (!st) {
    vlmc_pass_stat_add(ctx, STAT_RULE, summary.rule_upcasts);
    vlmc_pass_stat_add(ctx, STAT_RANGE, summary.range_upcasts);
    vlmc_pass_stat_add(ctx, STAT_READERS, summary.f32_readers);
    vlmc_pass_stat_add(ctx, STAT_CASTS, summary.casts_inserted);
    vlmc_pass_stat_add(ctx, STAT_BF16_MATMUL, summary.bf16_matmul_inputs);
  }
  vlmc_precision_calibration_deinit(&cal);
  return st;
}

const vlmc_pass_t vlmc_pass_precision = {
    .name = "precision",
    .summary = "per-target storage and compute dtypes: f32 islands by rule and by calibration",
    .options = precision_options,
    .num_options = sizeof precision_options / sizeof precision_options[0],
    .statistics = precision_statistics,
    .num_statistics = sizeof precision_statistics / sizeof precision_statistics[0],
    .run = precision_run,
};
