/* The run half of a kernel conformance case (kernel_check.h). */
#define _POSIX_C_SOURCE 200809L
#include "tools/kernel_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact/kernel_table.h"
#include "reference/executor.h"
#include "runtime/backend.h"
#include "runtime/program.h"
#include "support/float16.h"
#include "support/strbuf.h"
#include "tools/ref_cache.h"

enum { MAX_ARGS = VLMC_KCHECK_MAX_ARGS, MAX_SYMS = VLMC_KCHECK_MAX_SYMS, MAX_PARAMS = 64 };

typedef vlmc_kcheck_arg_t arg_spec_t;
typedef vlmc_kcheck_spec_t spec_t;
typedef vlmc_kcheck_outcome_t outcome_t;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

uint64_t vlmc_kcheck_seed(void) { return rng_state; }

static uint64_t rng_next(void) {
  uint64_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return rng_state = x;
}

static double rng_uniform(double lo, double hi) {
  return lo + (hi - lo) * (double)(rng_next() >> 11) / 9007199254740992.0;
}

/* ---- text and directives ---- */

char *vlmc_kcheck_substitute_n(const char *text, int64_t n) {
  vlmc_strbuf_t out;
  vlmc_strbuf_init(&out);
  for (const char *p = text; *p; ++p) {
    if (p[0] == '$' && p[1] == 'N') {
      vlmc_strbuf_printf(&out, "%lld", (long long)n);
      ++p;
    } else {
      vlmc_strbuf_putc(&out, *p);
    }
  }
  return vlmc_strbuf_take(&out);
}

/* How closely a directive's target name `T` (as in `tolerance T:`) names the target under
 * test: 2 itself, 1 the target its kernels come from, 0 another. */
static int target_rank(const spec_t *s, const char *name) {
  if (!strcmp(name, s->target)) return 2;
  return s->kernels_from[0] && !strcmp(name, s->kernels_from) ? 1 : 0;
}

static void parse_directive(spec_t *s, const char *line) {
  char a[64], b[64];
  double lo, hi;
  long long size;
  if (!strncmp(line, "sizes:", 6)) {
    s->num_sizes = 0;
    for (const char *p = line + 6; *p && s->num_sizes < VLMC_KCHECK_MAX_SIZES;) {
      char *end;
      long long v = strtoll(p, &end, 10);
      if (end == p) break;
      s->sizes[s->num_sizes++] = v;
      p = end;
      while (*p == ',' || *p == ' ') ++p;
    }
  } else if (sscanf(line, "sym %63s = %63s", a, b) == 2 && s->num_syms < MAX_SYMS) {
    snprintf(s->sym_names[s->num_syms], sizeof s->sym_names[0], "%s", a);
    snprintf(s->sym_values[s->num_syms], sizeof s->sym_values[0], "%s", b);
    s->num_syms++;
  } else if (sscanf(line, "arg %%%63[^:]: %63s %lf %lf", a, b, &lo, &hi) >= 2 &&
             s->num_args < MAX_ARGS) {
    arg_spec_t *arg = &s->args[s->num_args++];
    snprintf(arg->name, sizeof arg->name, "%s", a);
    snprintf(arg->kind, sizeof arg->kind, "%s", b);
    int n = sscanf(line, "arg %%%63[^:]: %63s %lf %lf", a, b, &lo, &hi);
    arg->lo = n >= 3 ? lo : -1;
    arg->hi = n >= 4 ? hi : 1;
  } else if (sscanf(line, "kernels-from: %31[a-z0-9_]", a) == 1) {
    if (!s->kernels_from[0]) snprintf(s->kernels_from, sizeof s->kernels_from, "%.31s", a);
  } else if (sscanf(line, "tolerance: %lf", &lo) == 1) {
    s->tolerance = lo;
  } else if (sscanf(line, "tolerance %63[a-z0-9_]: %lf", a, &lo) == 2) {
    int rank = target_rank(s, a);
    if (rank > s->tolerance_rank) s->target_tolerance = lo, s->tolerance_rank = rank;
  } else if (sscanf(line, "template: %63s", a) == 1) {
    if (!s->template_rank) snprintf(s->required_template, sizeof s->required_template, "%s", a);
  } else if (sscanf(line, "template %63[a-z0-9_]: %63s", a, b) == 2) {
    int rank = target_rank(s, a);
    if (rank > s->template_rank) {
      snprintf(s->required_template, sizeof s->required_template, "%s", b);
      s->template_rank = rank;
    }
  } else if (sscanf(line, "variants %63[a-z0-9_]: %63[a-z0-9_,]", a, b) == 2) {
    int rank = target_rank(s, a);
    if (rank > s->variants_rank) {
      snprintf(s->variants, sizeof s->variants, "%s", b);
      s->variants_rank = rank;
    }
  } else if (sscanf(line, "case-size: %lld", &size) == 1 && size >= 1) {
    s->case_size = size;
  } else if (sscanf(line, "case-seed: %63[0-9a-f]", a) == 1) {
    s->case_seed = strtoull(a, NULL, 16);
  }
}

void vlmc_kcheck_spec_init(spec_t *s, const char *target, const char *kernels_from) {
  memset(s, 0, sizeof *s);
  snprintf(s->target, sizeof s->target, "%s", target);
  snprintf(s->kernels_from, sizeof s->kernels_from, "%s", kernels_from ? kernels_from : "");
  s->tolerance = 1e-5;
  s->target_tolerance = -1;
}

/* Directives of the text for one size (after $N substitution). */
void vlmc_kcheck_parse_spec(const char *text, spec_t *s) {
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    while (len && (*p == ' ' || *p == '\t')) ++p, --len;
    if (len > 3 && p[0] == '/' && p[1] == '/') {
      char line[256];
      size_t n = len - 2 < sizeof line - 1 ? len - 2 : sizeof line - 1;
      memcpy(line, p + 2, n);
      line[n] = '\0';
      char *start = line;
      while (*start == ' ') ++start;
      parse_directive(s, start);
    }
    if (!nl) break;
    p = nl + 1;
  }
}

/* ---- inputs ---- */

typedef struct {
  const vlmc_module_t *module;
  vlmc_tensor_t params[MAX_PARAMS];
} params_t;

static vlmc_status_t random_tensor(vlmc_dtype_t dtype, uint32_t rank, const int64_t *shape,
                                   const arg_spec_t *spec, vlmc_tensor_t *out) {
  VLMC_RETURN_IF_ERROR(vlmc_tensor_alloc(dtype, rank, shape, out));
  int64_t n = vlmc_tensor_count(out);
  const char *kind = spec ? spec->kind : "uniform";
  double lo = spec ? spec->lo : -1, hi = spec ? spec->hi : 1;
  if (!strcmp(kind, "segments") || !strcmp(kind, "permutation")) {
    int64_t *d = out->data;
    if (!strcmp(kind, "permutation")) {
      for (int64_t i = 0; i < n; ++i) d[i] = i;
      for (int64_t i = n - 1; i > 0; --i) {
        int64_t j = (int64_t)(rng_next() % (uint64_t)(i + 1)), t = d[i];
        d[i] = d[j];
        d[j] = t;
      }
    } else { /* lo = total length; sorted split points, first 0, last total */
      int64_t total = (int64_t)lo;
      for (int64_t i = 0; i < n; ++i) d[i] = n > 1 ? total * i / (n - 1) : 0;
      for (int64_t i = 1; i + 1 < n; ++i) { /* jitter within the neighbours */
        int64_t span = d[i + 1] - d[i - 1];
        if (span > 1) d[i] = d[i - 1] + 1 + (int64_t)(rng_next() % (uint64_t)(span - 1));
        else d[i] = d[i - 1];
      }
      if (n) d[n - 1] = total;
    }
    return NULL;
  }
  for (int64_t i = 0; i < n; ++i) {
    double v = rng_uniform(lo, hi);
    switch (dtype) {
      case VLMC_DTYPE_F32: ((float *)out->data)[i] = (float)v; break;
      case VLMC_DTYPE_BF16: ((uint16_t *)out->data)[i] = vlmc_f32_to_bf16((float)v); break;
      case VLMC_DTYPE_F16: ((uint16_t *)out->data)[i] = vlmc_f32_to_f16((float)v); break;
      case VLMC_DTYPE_I64: ((int64_t *)out->data)[i] = (int64_t)floor(v); break;
      case VLMC_DTYPE_U32: ((uint32_t *)out->data)[i] = (uint32_t)rng_next(); break; /* packed */
      default: return vlmc_status_make(VLMC_UNSUPPORTED, "kernel-test: no random %s data",
                                       vlmc_dtype_info(dtype)->name);
    }
  }
  return NULL;
}

static vlmc_status_t get_param(void *ctx, const char *name, const vlmc_type_t *type,
                               vlmc_tensor_t *out_view) {
  params_t *p = ctx;
  for (uint32_t i = 0; i < p->module->num_params && i < MAX_PARAMS; ++i) {
    if (strcmp(p->module->params[i]->name, name) != 0) continue;
    vlmc_tensor_t *t = &p->params[i];
    *out_view = vlmc_tensor_view(t->dtype, t->rank, t->shape, t->data);
    return NULL;
  }
  return vlmc_status_make(VLMC_NOT_FOUND, "no parameter %s", name);
}

static vlmc_status_t make_params(const vlmc_module_t *m, params_t *p) {
  p->module = m;
  if (m->num_params > MAX_PARAMS)
    return vlmc_status_make(VLMC_UNSUPPORTED, "kernel-test: at most %d params", MAX_PARAMS);
  for (uint32_t i = 0; i < m->num_params; ++i) {
    const vlmc_type_t *t = &m->params[i]->type;
    int64_t shape[VLMC_IR_MAX_RANK];
    for (uint32_t d = 0; d < t->rank; ++d) shape[d] = t->dims[d].off;
    vlmc_dtype_t storage = vlmc_dtype_info(t->dtype)->is_float || t->dtype == VLMC_DTYPE_U32
                               ? t->dtype : VLMC_DTYPE_I64;
    VLMC_RETURN_IF_ERROR(random_tensor(storage, t->rank, shape, NULL, &p->params[i]));
  }
  return NULL;
}

static const arg_spec_t *find_arg_spec(const spec_t *s, const char *name) {
  for (int i = 0; name && i < s->num_args; ++i)
    if (!strcmp(s->args[i].name, name)) return &s->args[i];
  return NULL;
}

static vlmc_status_t symbol_values(const vlmc_module_t *m, const spec_t *s, int64_t n,
                                   int64_t *values) {
  for (uint32_t k = 1; k <= m->num_symbols; ++k) {
    values[k - 1] = n;
    for (int i = 0; i < s->num_syms; ++i)
      if (!strcmp(s->sym_names[i], vlmc_module_symbol_name(m, k)))
        values[k - 1] = strtoll(s->sym_values[i], NULL, 10);
  }
  return NULL;
}

/* A bf16 or f16 argument is stored in f32 (the storage convention of activations,
 * artifact/kernel_table.h) holding values that dtype represents, as a kernel that produced it
 * would have written: round the random values so. */
static void round_to_dtype(vlmc_tensor_t *t, vlmc_dtype_t dtype) {
  if (t->dtype != VLMC_DTYPE_F32 || (dtype != VLMC_DTYPE_BF16 && dtype != VLMC_DTYPE_F16)) return;
  float *d = t->data;
  for (int64_t i = 0, n = vlmc_tensor_count(t); i < n; ++i)
    d[i] = dtype == VLMC_DTYPE_BF16 ? vlmc_round_bf16(d[i]) : vlmc_round_f16(d[i]);
}

static vlmc_status_t make_args(const vlmc_func_t *f, const spec_t *s, const int64_t *syms,
                               size_t num_syms, vlmc_tensor_t *args) {
  for (uint32_t i = 0; i < f->num_args; ++i) {
    const vlmc_type_t *t = &f->args[i].type;
    int64_t shape[VLMC_IR_MAX_RANK];
    for (uint32_t d = 0; d < t->rank; ++d)
      VLMC_RETURN_IF_ERROR(vlmc_dim_eval(t->dims[d], syms, num_syms, &shape[d]));
    const arg_spec_t *spec = find_arg_spec(s, f->args[i].name);
    arg_spec_t fixed;
    if (spec && !strcmp(spec->kind, "segments") && spec->lo < 0) {
      fixed = *spec;
      fixed.lo = (double)syms[0];
      spec = &fixed;
    }
    vlmc_dtype_t storage = vlmc_dtype_info(t->dtype)->is_float ? VLMC_DTYPE_F32 : VLMC_DTYPE_I64;
    VLMC_RETURN_IF_ERROR(random_tensor(storage, t->rank, shape, spec, &args[i]));
    round_to_dtype(&args[i], t->dtype);
  }
  return NULL;
}

static vlmc_status_t copy_args(const vlmc_tensor_t *from, uint32_t n, vlmc_tensor_t *to) {
  for (uint32_t i = 0; i < n; ++i) {
    VLMC_RETURN_IF_ERROR(vlmc_tensor_alloc(from[i].dtype, from[i].rank, from[i].shape, &to[i]));
    size_t bytes = (size_t)vlmc_tensor_count(&from[i]) * vlmc_dtype_info(from[i].dtype)->bits / 8;
    if (bytes) memcpy(to[i].data, from[i].data, bytes);
  }
  return NULL;
}

static void templates_of(const char *table, char *out, size_t size) {
  out[0] = '\0';
  for (const char *p = strstr(table, "\"template\": \""); p; p = strstr(p + 1, "\"template\": \"")) {
    const char *name = p + 13, *end = strchr(name, '"');
    if (!end) break;
    char one[64];
    snprintf(one, sizeof one, "%.*s", (int)(end - name), name);
    if (strstr(out, one)) continue;
    size_t used = strlen(out);
    snprintf(out + used, size - used, "%s%s", used ? "," : "", one);
  }
}

/* Compares result `which` of a run with the reference's; a worse error than any before takes
 * over the outcome's worst element. Returns the number of elements that differ. */
static int64_t compare(const vlmc_tensor_t *ref, const vlmc_tensor_t *got, uint32_t which,
                       outcome_t *o) {
  int64_t n = vlmc_tensor_count(ref), differing = 0, at = -1;
  if (ref->dtype == VLMC_DTYPE_I64) {
    const int64_t *r = ref->data, *g = got->data;
    for (int64_t i = 0; i < n; ++i)
      if (r[i] != g[i] && differing++ == 0) at = i;
    if (at >= 0 && !(o->worst == INFINITY)) {
      o->worst = INFINITY;
      o->worst_result = which, o->worst_index = at;
      o->worst_ref = (double)r[at], o->worst_got = (double)g[at];
    }
    return differing;
  }
  const float *r = ref->data, *g = got->data;
  double max_ref = 0, max_diff = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (isfinite(r[i])) max_ref = fmax(max_ref, fabs(r[i]));
    double d = r[i] == g[i] ? 0 : fabs((double)r[i] - (double)g[i]);
    if (d != d) d = (r[i] != r[i] && g[i] != g[i]) ? 0 : INFINITY; /* NaN only matches NaN */
    if (d > 0) ++differing;
    if (d > max_diff || at < 0) max_diff = d, at = i;
  }
  o->max_ref = fmax(o->max_ref, max_ref);
  double worst = max_diff / fmax(1.0, max_ref);
  if (n && worst > o->worst) {
    o->worst_result = which, o->worst_index = at;
    o->worst_ref = r[at], o->worst_got = g[at];
  }
  o->worst = fmax(o->worst, worst);
  return differing;
}

static void add_classes(const vlmc_kernel_table_kernel_t *k, char *out, size_t size) {
  for (const char *p = k->for_devices; p && *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char one[40];
    snprintf(one, sizeof one, ",%.*s,", (int)(len < 32 ? len : 32), p);
    char listed[192];
    snprintf(listed, sizeof listed, "%s,", out);
    if (!strstr(listed, one)) {
      size_t used = strlen(out);
      snprintf(out + used, size - used, "%.*s", (int)strlen(one) - 1, one);
    }
    if (!end) break;
    p = end + 1;
  }
}

/* The section "kernels.<target>.json", as text (malloc'd; NULL with *out_len 0 when absent). */
typedef struct {
  const char *target;
  vlmc_kcheck_section_fn section;
  void *ctx;
} sections_t;

static const void *table_section(const sections_t *c, size_t *out_len) {
  char name[80];
  snprintf(name, sizeof name, "kernels.%s.json", c->target);
  return c->section(c->ctx, name, out_len);
}

/* The templates the target's kernel table names (none without one). */
static vlmc_status_t table_templates(const sections_t *c, char *out, size_t size) {
  size_t len = 0;
  const void *table = table_section(c, &len);
  out[0] = '\0';
  if (!table) return NULL;
  char *text = strndup(table, len); /* a section is not NUL-terminated */
  if (!text) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  templates_of(text, out, size);
  free(text);
  return NULL;
}

/* The kernel variants to run: "" when the table has no variants (one run, the device's
 * own kernels), else "main" and each device class a variant is for ("main,cpu"), so that
 * every kernel of the table is tested. */
static vlmc_status_t variant_runs(const char *path, const sections_t *c, char *out, size_t size) {
  size_t len = 0;
  const void *section = table_section(c, &len);
  out[0] = '\0';
  if (!section) return NULL;
  vlmc_kernel_table_t table;
  vlmc_status_t st = vlmc_kernel_table_parse(path, c->target, section, len, &table);
  char classes[128] = "";
  for (size_t i = 0; !st && i < table.num_kernels; ++i)
    if (table.kernels[i].is_variant) add_classes(&table.kernels[i], classes, sizeof classes);
  vlmc_kernel_table_deinit(&table);
  if (!st && classes[0]) snprintf(out, size, "main%s", classes);
  return st;
}

/* Runs @f on the backend through the program walker, as the runtime does, with the kernel
 * variants `variants` (NULL: the device's own). */
static vlmc_status_t run_on_backend(const char *path, const vlmc_module_t *m,
                                    const vlmc_func_t *f, const sections_t *c,
                                    params_t *params, const char *variants,
                                    vlmc_tensor_t *args, vlmc_tensor_t *results,
                                    size_t *out_variants_used) {
  const vlmc_backend_iface_t *iface = vlmc_backend_find(c->target);
  if (!iface) return vlmc_status_make(VLMC_NOT_FOUND, "no backend '%s'", c->target);
  vlmc_backend_open_params_t bp = {.source = path, .module = m, .section = c->section,
                                   .section_ctx = c->ctx, .get_param = get_param,
                                   .param_ctx = params, .threads = 2,
                                   .kernel_variants = variants};
  vlmc_backend_t *backend = NULL;
  vlmc_program_t *program = NULL;
  vlmc_rt_value_t in[MAX_ARGS], out[MAX_ARGS];
  memset(in, 0, sizeof in);
  memset(out, 0, sizeof out);
  vlmc_status_t st = iface->open(&bp, &backend);
  if (!st) st = vlmc_program_create(m, backend, get_param, params, &program);
  for (uint32_t i = 0; !st && i < f->num_args; ++i) st = vlmc_program_import(program, &args[i], &in[i]);
  if (!st) st = vlmc_program_run(program, f->name, in, f->num_args, out, f->num_results);
  for (uint32_t i = 0; !st && i < f->num_results; ++i) {
    vlmc_tensor_t host;
    st = vlmc_program_read(program, &out[i], &host);
    if (!st) {
      vlmc_tensor_t *r = &results[i];
      st = vlmc_tensor_alloc(host.dtype, host.rank, host.shape, r);
      size_t bytes = 0;
      vlmc_tensor_byte_size(host.dtype, host.rank, host.shape, &bytes);
      if (!st && bytes) memcpy(r->data, host.data, bytes);
      vlmc_tensor_release(&host);
    }
  }
  for (uint32_t i = 0; program && i < MAX_ARGS; ++i) {
    vlmc_program_release(program, &in[i]);
    vlmc_program_release(program, &out[i]);
  }
  vlmc_program_destroy(program);
  *out_variants_used = 0;
  if (backend && backend->iface->counters) {
    vlmc_backend_counters_t counters;
    backend->iface->counters(backend, &counters);
    *out_variants_used = counters.num_variants_used;
  }
  if (backend) backend->iface->destroy(backend);
  return st;
}

/* The backend's runs, one per variant class in o->runs, each compared with ref. */
static vlmc_status_t run_variants(const char *path, const vlmc_module_t *m, const vlmc_func_t *f,
                                  const sections_t *c, params_t *params,
                                  const vlmc_tensor_t *res_ref, vlmc_tensor_t *args,
                                  outcome_t *o) {
  vlmc_tensor_t res[MAX_ARGS];
  memset(res, 0, sizeof res);
  vlmc_status_t st = NULL;
  for (const char *run = o->runs; !st;) {
    const char *end = strchr(run, ',');
    char variants[32] = "";
    snprintf(variants, sizeof variants, "%.*s", (int)(end ? end - run : (long)strlen(run)), run);
    size_t used = 0;
    st = vlmc_status_annotate(run_on_backend(path, m, f, c, params,
                                             variants[0] ? variants : NULL, args, res, &used),
                              "%s backend%s%s: ", c->target, variants[0] ? ", kernels " : "",
                              variants);
    if (!st && variants[0] && strcmp(variants, "main") != 0) {
      size_t len = strlen(o->used);
      snprintf(o->used + len, sizeof o->used - len, "%s%s %zu", len ? ", " : "", variants, used);
    }
    double before = o->worst;
    int64_t differing = 0, elements = 0;
    for (uint32_t i = 0; !st && i < f->num_results; ++i) {
      differing += compare(&res_ref[i], &res[i], i, o);
      elements += vlmc_tensor_count(&res_ref[i]);
    }
    if (!(o->worst <= before) || !o->worst_run[0]) {
      snprintf(o->worst_run, sizeof o->worst_run, "%s", variants);
      o->num_differing = differing, o->num_elements = elements;
    }
    for (uint32_t i = 0; i < f->num_results && i < MAX_ARGS; ++i) vlmc_tensor_release(&res[i]);
    if (!end) break;
    run = end + 1;
  }
  return st;
}

/* The reference executor's results for the inputs, from the shared cache when another target
 * of this build computed them already (tools/ref_cache.h), else computed and filed. */
static vlmc_status_t reference_results(const vlmc_module_t *m, const vlmc_func_t *f,
                                       const vlmc_executor_options_t *eo, const params_t *params,
                                       vlmc_tensor_t *args, vlmc_tensor_t *results) {
  vlmc_ref_cache_key_t key = {.enabled = false};
  if (vlmc_ref_cache_wanted()) { /* the key: the program as run, the function, every input */
    vlmc_strbuf_t text;
    vlmc_strbuf_init(&text);
    vlmc_module_print(m, &text);
    vlmc_strbuf_printf(&text, "\n// run @%s, low precision emulated: %d\n", f->name,
                       eo->emulate_low_precision);
    vlmc_ref_cache_key_init(&key, vlmc_strbuf_cstr(&text));
    vlmc_strbuf_deinit(&text);
    for (uint32_t i = 0; i < m->num_params && i < MAX_PARAMS; ++i)
      vlmc_ref_cache_key_add_tensor(&key, &params->params[i]);
    for (uint32_t i = 0; i < f->num_args; ++i) vlmc_ref_cache_key_add_tensor(&key, &args[i]);
  }
  if (vlmc_ref_cache_load(&key, results, f->num_results)) return NULL;
  vlmc_executor_t *ref = NULL;
  vlmc_status_t st = vlmc_executor_create(m, eo, &ref);
  if (!st) st = vlmc_executor_run(ref, f->name, args, f->num_args, results, f->num_results);
  vlmc_executor_destroy(ref);
  if (!st) {
    vlmc_status_t filed = vlmc_ref_cache_store(&key, results, f->num_results);
    if (filed)
      fprintf(stderr, "kernel-test: %s (the result is not shared)\n", vlmc_status_message(filed));
    vlmc_status_free(filed);
  }
  return st;
}

/* Whether the comma-separated list names `name` itself ("linear" is not "linear_tiles"). */
static bool names_template(const char *list, const char *name) {
  size_t len = strlen(name);
  for (const char *p = list; (p = strstr(p, name)) != NULL; p += len)
    if ((p == list || p[-1] == ',') && (p[len] == ',' || p[len] == '\0')) return true;
  return false;
}

vlmc_status_t vlmc_kcheck_run(const char *path, const vlmc_module_t *m, const spec_t *s,
                              int64_t n, vlmc_kcheck_section_fn section, void *section_ctx,
                              outcome_t *o) {
  memset(o, 0, sizeof *o);
  if (s->case_seed) rng_state = s->case_seed; /* a saved case: the inputs it had when saved */
  /* Outputs start as 0xFF bytes (NaN, -1): a kernel that skips an element fails. */
  setenv("VLMC_CPU_POISON", "1", 0);
  sections_t c = {s->target, section, section_ctx};
  vlmc_status_t st = table_templates(&c, o->templates, sizeof o->templates);
  if (!st && s->required_template[0] && !names_template(o->templates, s->required_template))
    st = vlmc_status_make(VLMC_INVALID_ARGUMENT, "expected a '%s' kernel, got %s",
                          s->required_template, o->templates);
  params_t params;
  memset(&params, 0, sizeof params);
  if (!st) st = make_params(m, &params);
  const vlmc_func_t *f = m->num_funcs ? m->funcs[0] : NULL;
  if (!st && !f) st = vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s has no function", path);
  int64_t syms[MAX_SYMS + 64];
  vlmc_tensor_t args_ref[MAX_ARGS], args_backend[MAX_ARGS], res_ref[MAX_ARGS];
  memset(args_ref, 0, sizeof args_ref);
  memset(args_backend, 0, sizeof args_backend);
  memset(res_ref, 0, sizeof res_ref);
  if (!st && (f->num_args > MAX_ARGS || f->num_results > MAX_ARGS || m->num_symbols > MAX_SYMS))
    st = vlmc_status_make(VLMC_UNSUPPORTED, "kernel-test: too many args, results or symbols");
  if (!st) st = symbol_values(m, s, n, syms);
  if (!st) st = make_args(f, s, syms, m->num_symbols, args_ref);
  if (!st) st = copy_args(args_ref, f->num_args, args_backend);
  vlmc_executor_options_t eo = vlmc_executor_options_default();
  eo.emulate_low_precision = true; /* kernels round every f16 / bf16 op result */
  eo.get_param = get_param;
  eo.param_ctx = &params;
  if (!st) st = reference_results(m, f, &eo, &params, args_ref, res_ref);
  /* The backend of the target's name runs its kernels (vlmc-run picks it the same way),
   * once per kernel variant the table has. */
  if (!st) st = variant_runs(path, &c, o->runs, sizeof o->runs);
  if (!st && s->variants[0] && o->runs[0]) snprintf(o->runs, sizeof o->runs, "%s", s->variants);
  if (!st) st = run_variants(path, m, f, &c, &params, res_ref, args_backend, o);
  for (uint32_t i = 0; f && i < f->num_results && i < MAX_ARGS; ++i) vlmc_tensor_release(&res_ref[i]);
  for (uint32_t i = 0; i < MAX_ARGS; ++i) {
    vlmc_tensor_release(&args_ref[i]);
    vlmc_tensor_release(&args_backend[i]);
  }
  for (uint32_t i = 0; i < MAX_PARAMS; ++i) vlmc_tensor_release(&params.params[i]);
  return st;
}

int vlmc_kcheck_report(const char *path, int64_t n, vlmc_status_t st, const spec_t *s,
                       const outcome_t *o) {
  double tolerance = s->target_tolerance >= 0 ? s->target_tolerance : s->tolerance;
  if (st) {
    printf("FAIL %s N=%lld: %s\n", path, (long long)n, vlmc_status_message(st));
    vlmc_status_free(st);
    return 1;
  }
  if (!(o->worst <= tolerance)) {
    printf("FAIL %s N=%lld: max |%s - ref| / max(1, |ref|) = %.3g > %.1g (kernels: %s%s%s); "
           "worst at result %u element %lld: ref %.9g, got %.9g; %lld of %lld elements differ\n",
           path, (long long)n, s->target, o->worst, tolerance, o->templates,
           o->runs[0] ? "; worst in the run of kernel variants " : "", o->runs[0] ? o->worst_run : "",
           o->worst_result, (long long)o->worst_index, o->worst_ref, o->worst_got,
           (long long)o->num_differing, (long long)o->num_elements);
    return 1;
  }
  printf("ok   %s N=%lld: max rel error %.2g, max |ref| %.3g (kernels: %s%s%s%s%s)\n", path,
         (long long)n, o->worst, o->max_ref, o->templates, o->runs[0] ? "; variants run: " : "",
         o->runs, o->used[0] ? "; variant kernels used: " : "", o->used);
  return 0;
}
