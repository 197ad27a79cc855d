/* vlmc kernel-test [--target T] [--sizes A,B,...] FILE.vir...: checks a target's generated
 * kernels against the reference executor (T defaults to cpu; --sizes replaces the default
 * sizes, e.g. for a device that binds at most 128 MiB per buffer, like lavapipe).
 *
 * Each file is a module whose first function is the test; `$N` in its text is replaced by each
 * size in turn (default 3420, 176, 172, 1, 37: awkward on purpose). Per size: parse, run the
 * target's pipeline tail (fuse, memory-plan), generate its kernels through the target
 * interface (codegen/target.h, sections kept in memory), load them into the runtime backend of
 * the same name like the runtime does, run the function on random inputs there and on the
 * reference executor, compare every result. Directives (comment lines):
 *
 *   // sizes: 5,64            replace the default sizes
 *   // sym S = 7              a symbol's value (default: the size N); `$N` works here too
 *   // arg %x: uniform -4 4   a float argument's distribution (default uniform -1 1)
 *   // arg %ids: ints 0 512   integers in [lo, hi)
 *   // arg %cu: segments      0 = c0 < c1 < ... = its last dim's... the split points of a
 *                             sequence: sorted, first 0, last `// segments-total` (default N)
 *   // arg %p: permutation    a random permutation of 0 .. len-1
 *   // tolerance: 1e-5        max |cpu - ref| / max(1, max |ref|) (default 1e-5)
 *   // tolerance vulkan: 1e-6 the same for one target only (wins over `tolerance:`)
 *   // template: linear       the template the kernels must use (at least one of them)
 *   // variants vulkan: cpu   run only these kernel variants of the table for one target
 *                             (default: the main kernels, then each device class's); for a
 *                             case the main kernels cannot run on the CI's device, with the
 *                             reason in the file (lavapipe stops a shader's loops after 65535
 *                             iterations in all: docs/vulkan.md)
 *
 * Parameters get random values in their own dtype (a bf16 weight is bf16). Prints one line per
 * (file, size) with the worst error and the kernels used; exit status 1 on any failure. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/target.h"
#include "ir/ir.h"
#include "passes/pass.h"
#include "reference/executor.h"
#include "artifact/kernel_table.h"
#include "runtime/backend.h"
#include "runtime/program.h"
#include "support/file.h"
#include "support/float16.h"
#include "support/strbuf.h"
#include "tools/commands.h"

enum { MAX_SIZES = 16, MAX_ARGS = 64, MAX_SYMS = 16, MAX_PARAMS = 64 };

/* The target under test (`tolerance T:` directives). */
static const char *current_target = "cpu";


typedef struct {
  char name[64];
  char kind[64]; /* uniform, ints, segments, permutation */
  double lo, hi;
} arg_spec_t;

typedef struct {
  int64_t sizes[MAX_SIZES];
  int num_sizes;
  arg_spec_t args[MAX_ARGS];
  int num_args;
  char sym_names[MAX_SYMS][64];
  char sym_values[MAX_SYMS][64];
  int num_syms;
  double tolerance;
  double target_tolerance; /* `tolerance T:` for the target under test; < 0: none */
  char required_template[64];
  int64_t segments_total_override; /* 0: none */
  char variants[64]; /* `variants T:` for the target under test; "": every variant */
} spec_t;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

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

static char *substitute_n(const char *text, int64_t n) {
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

static void parse_directive(spec_t *s, const char *line) {
  char a[64], b[64];
  double lo, hi;
  if (!strncmp(line, "sizes:", 6)) {
    s->num_sizes = 0;
    for (const char *p = line + 6; *p && s->num_sizes < MAX_SIZES;) {
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
  } else if (sscanf(line, "tolerance: %lf", &lo) == 1) {
    s->tolerance = lo;
  } else if (sscanf(line, "tolerance %63[a-z0-9_]: %lf", a, &lo) == 2) {
    if (!strcmp(a, current_target)) s->target_tolerance = lo;
  } else if (sscanf(line, "template: %63s", a) == 1) {
    snprintf(s->required_template, sizeof s->required_template, "%s", a);
  } else if (sscanf(line, "variants %63[a-z0-9_]: %63[a-z0-9_,]", a, b) == 2) {
    if (!strcmp(a, current_target)) snprintf(s->variants, sizeof s->variants, "%s", b);
  }
}

/* Directives of the text for one size (after $N substitution). */
static void parse_spec(const char *text, spec_t *s) {
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
    vlmc_dtype_t storage = vlmc_dtype_info(t->dtype)->is_float ? t->dtype : VLMC_DTYPE_I64;
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

/* ---- one case ---- */

typedef struct {
  double worst;   /* relative error */
  double max_ref;
  char templates[256];
  char runs[160];      /* the kernel variants run: "main,cpu"; "" when the table has none */
  char worst_run[32];  /* the run with the worst error */
} outcome_t;


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

static void compare(const vlmc_tensor_t *ref, const vlmc_tensor_t *got, outcome_t *o) {
  int64_t n = vlmc_tensor_count(ref);
  if (ref->dtype == VLMC_DTYPE_I64) {
    for (int64_t i = 0; i < n; ++i)
      if (((int64_t *)ref->data)[i] != ((int64_t *)got->data)[i]) o->worst = INFINITY;
    return;
  }
  const float *r = ref->data, *g = got->data;
  double max_ref = 0, max_diff = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (isfinite(r[i])) max_ref = fmax(max_ref, fabs(r[i]));
    double d = r[i] == g[i] ? 0 : fabs((double)r[i] - (double)g[i]);
    if (d != d) d = (r[i] != r[i] && g[i] != g[i]) ? 0 : INFINITY; /* NaN only matches NaN */
    max_diff = fmax(max_diff, d);
  }
  o->max_ref = fmax(o->max_ref, max_ref);
  o->worst = fmax(o->worst, max_diff / fmax(1.0, max_ref));
}

/* What the target is given: VLMC_KERNEL_TEST_CPU=... as its cpu option, VLMC_KERNEL_TEST_DUMP
 * as --dump-kernels. */
static vlmc_status_t target_config(vlmc_target_config_t *config) {
  memset(config, 0, sizeof *config);
  config->dump_dir = getenv("VLMC_KERNEL_TEST_DUMP");
  const char *cpu = getenv("VLMC_KERNEL_TEST_CPU");
  if (!cpu) return NULL;
  char option[160];
  snprintf(option, sizeof option, "cpu=%s", cpu);
  return vlmc_target_config_set_options(config, option);
}

/* The generated sections, as the backend finds them in an artifact. */
static const void *find_section(void *ctx, const char *name, size_t *out_size) {
  const vlmc_target_section_t *s = vlmc_target_output_section(ctx, name);
  *out_size = s ? s->len : 0;
  return s ? s->data : NULL;
}

/* The templates the target's kernel table names ("kernels.<target>.json"; none without one). */
static vlmc_status_t table_templates(const vlmc_target_output_t *code, char *out, size_t size) {
  char name[80];
  snprintf(name, sizeof name, "kernels.%s.json", code->target->name);
  const vlmc_target_section_t *table = vlmc_target_output_section(code, name);
  out[0] = '\0';
  if (!table) return NULL;
  char *text = strndup(table->data, table->len); /* a section is not NUL-terminated */
  if (!text) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  templates_of(text, out, size);
  free(text);
  return NULL;
}

/* Adds each device class of variant k's for_devices to the list out (",cpu,gpu"), once. */
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

/* The kernel variants to run: "" when the table has no variants (one run, the device's
 * own kernels), else "main" and each device class a variant is for ("main,cpu"), so that
 * every kernel of the table is tested. */
static vlmc_status_t variant_runs(const char *path, const vlmc_target_output_t *code, char *out,
                                  size_t size) {
  char name[80];
  snprintf(name, sizeof name, "kernels.%s.json", code->target->name);
  const vlmc_target_section_t *section = vlmc_target_output_section(code, name);
  out[0] = '\0';
  if (!section) return NULL;
  vlmc_kernel_table_t table;
  vlmc_status_t st = vlmc_kernel_table_parse(path, code->target->name, section->data,
                                             section->len, &table);
  char classes[128] = "";
  for (size_t i = 0; !st && i < table.num_kernels; ++i)
    if (table.kernels[i].is_variant) add_classes(&table.kernels[i], classes, sizeof classes);
  vlmc_kernel_table_deinit(&table);
  if (!st && classes[0]) snprintf(out, size, "main%s", classes);
  return st;
}

/* Runs @f on the backend through the program walker, as the runtime does, with the kernel
 * variants `variants` (NULL: the device's own). */
static vlmc_status_t run_on_backend(const char *backend_name, const char *path,
                                    const vlmc_module_t *m, const vlmc_func_t *f,
                                    const vlmc_target_output_t *code, params_t *params,
                                    const char *variants, vlmc_tensor_t *args,
                                    vlmc_tensor_t *results) {
  const vlmc_backend_iface_t *iface = vlmc_backend_find(backend_name);
  if (!iface) return vlmc_status_make(VLMC_NOT_FOUND, "no backend '%s'", backend_name);
  vlmc_backend_open_params_t bp = {.source = path, .module = m, .section = find_section,
                                   .section_ctx = (void *)code, .get_param = get_param,
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
  if (backend) backend->iface->destroy(backend);
  return st;
}

static vlmc_status_t run_case(const vlmc_target_t *target, const char *path, const char *text,
                              const spec_t *s, int64_t n, outcome_t *o) {
  vlmc_module_t *m = NULL;
  vlmc_parse_options_t po = {.filename = path, .first_line = 1};
  VLMC_RETURN_IF_ERROR(vlmc_module_parse(text, strlen(text), &po, &m));
  vlmc_status_t st = vlmc_module_verify(m);
  if (!st) st = vlmc_target_run_tail(target, m);
  vlmc_target_config_t config;
  vlmc_target_output_t code;
  memset(&code, 0, sizeof code);
  if (!st) st = target_config(&config);
  if (!st) st = vlmc_target_generate(target, m, &config, &code);
  if (!st) st = table_templates(&code, o->templates, sizeof o->templates);
  if (!st && s->required_template[0] && !strstr(o->templates, s->required_template))
    st = vlmc_status_make(VLMC_INVALID_ARGUMENT, "expected a '%s' kernel, got %s",
                          s->required_template, o->templates);
  params_t params;
  memset(&params, 0, sizeof params);
  if (!st) st = make_params(m, &params);
  const vlmc_func_t *f = m->num_funcs ? m->funcs[0] : NULL;
  if (!st && !f) st = vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s has no function", path);
  int64_t syms[MAX_SYMS + 64];
  vlmc_tensor_t args_ref[MAX_ARGS], args_cpu[MAX_ARGS], res_ref[MAX_ARGS], res_cpu[MAX_ARGS];
  memset(args_ref, 0, sizeof args_ref);
  memset(args_cpu, 0, sizeof args_cpu);
  memset(res_ref, 0, sizeof res_ref);
  memset(res_cpu, 0, sizeof res_cpu);
  if (!st && (f->num_args > MAX_ARGS || f->num_results > MAX_ARGS || m->num_symbols > MAX_SYMS))
    st = vlmc_status_make(VLMC_UNSUPPORTED, "kernel-test: too many args, results or symbols");
  if (!st) st = symbol_values(m, s, n, syms);
  if (!st) st = make_args(f, s, syms, m->num_symbols, args_ref);
  if (!st) st = copy_args(args_ref, f->num_args, args_cpu);
  vlmc_executor_t *ref = NULL;
  vlmc_executor_options_t eo = vlmc_executor_options_default();
  eo.emulate_low_precision = true; /* kernels round every f16 / bf16 op result */
  eo.get_param = get_param;
  eo.param_ctx = &params;
  if (!st) st = vlmc_executor_create(m, &eo, &ref);
  if (!st) st = vlmc_executor_run(ref, f->name, args_ref, f->num_args, res_ref, f->num_results);
  /* The backend of the target's name runs its kernels (vlmc-run picks it the same way),
   * once per kernel variant the table has. */
  if (!st) st = variant_runs(path, &code, o->runs, sizeof o->runs);
  if (!st && s->variants[0] && o->runs[0]) snprintf(o->runs, sizeof o->runs, "%s", s->variants);
  for (const char *run = o->runs; !st;) {
    const char *end = strchr(run, ',');
    char variants[32] = "";
    snprintf(variants, sizeof variants, "%.*s", (int)(end ? end - run : (long)strlen(run)), run);
    st = vlmc_status_annotate(run_on_backend(target->name, path, m, f, &code, &params,
                                             variants[0] ? variants : NULL, args_cpu, res_cpu),
                              "%s backend%s%s: ", target->name, variants[0] ? ", kernels " : "",
                              variants);
    double before = o->worst;
    for (uint32_t i = 0; !st && i < f->num_results; ++i) compare(&res_ref[i], &res_cpu[i], o);
    if (!(o->worst <= before) || !o->worst_run[0])
      snprintf(o->worst_run, sizeof o->worst_run, "%s", variants);
    for (uint32_t i = 0; i < f->num_results && i < MAX_ARGS; ++i) vlmc_tensor_release(&res_cpu[i]);
    if (!end) break;
    run = end + 1;
  }
  for (uint32_t i = 0; f && i < f->num_results && i < MAX_ARGS; ++i) {
    vlmc_tensor_release(&res_ref[i]);
    vlmc_tensor_release(&res_cpu[i]);
  }
  for (uint32_t i = 0; i < MAX_ARGS; ++i) {
    vlmc_tensor_release(&args_ref[i]);
    vlmc_tensor_release(&args_cpu[i]);
  }
  for (uint32_t i = 0; i < MAX_PARAMS; ++i) vlmc_tensor_release(&params.params[i]);
  vlmc_executor_destroy(ref);
  vlmc_target_output_free(&code);
  vlmc_module_destroy(m);
  return st;
}

/* The sizes `$N` takes unless a file says `// sizes:` (--sizes replaces them). */
static int64_t default_sizes[MAX_SIZES] = {3420, 176, 172, 1, 37};
static int num_default_sizes = 5;

/* "A,B,..." (positive) into the default sizes; false when it is not such a list. */
static bool set_default_sizes(const char *text) {
  int n = 0;
  for (const char *p = text; *p;) {
    char *end = NULL;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 1 || n == MAX_SIZES || (*end && *end != ',')) return false;
    default_sizes[n++] = v;
    p = *end ? end + 1 : end;
  }
  num_default_sizes = n;
  return n > 0;
}

static int test_file(const vlmc_target_t *target, const char *path) {
  char *raw = NULL;
  size_t len = 0;
  vlmc_status_t st = vlmc_file_read_all(path, &raw, &len);
  if (st) {
    fprintf(stderr, "kernel-test: %s\n", vlmc_status_message(st));
    vlmc_status_free(st);
    return 1;
  }
  spec_t base;
  memset(&base, 0, sizeof base);
  memcpy(base.sizes, default_sizes, sizeof default_sizes);
  base.num_sizes = num_default_sizes;
  parse_spec(raw, &base); /* only `sizes:` matters before substitution */
  int failures = 0;
  for (int k = 0; k < base.num_sizes; ++k) {
    int64_t n = base.sizes[k];
    char *text = substitute_n(raw, n);
    spec_t s = base;
    s.num_args = s.num_syms = 0;
    s.tolerance = 1e-5;
    s.target_tolerance = -1;
    s.required_template[0] = '\0';
    parse_spec(text, &s);
    if (s.target_tolerance >= 0) s.tolerance = s.target_tolerance;
    outcome_t o;
    memset(&o, 0, sizeof o);
    st = text ? run_case(target, path, text, &s, n, &o) : vlmc_status_make(VLMC_OUT_OF_MEMORY, "oom");
    free(text);
    if (st) {
      printf("FAIL %s N=%lld: %s\n", path, (long long)n, vlmc_status_message(st));
      vlmc_status_free(st);
      ++failures;
    } else if (!(o.worst <= s.tolerance)) {
      printf("FAIL %s N=%lld: max |cpu - ref| / max(1, |ref|) = %.3g > %.1g (kernels: %s%s%s)\n",
             path, (long long)n, o.worst, s.tolerance, o.templates,
             o.runs[0] ? "; worst in the run of kernel variants " : "", o.runs[0] ? o.worst_run : "");
      ++failures;
    } else {
      printf("ok   %s N=%lld: max rel error %.2g, max |ref| %.3g (kernels: %s%s%s)\n", path,
             (long long)n, o.worst, o.max_ref, o.templates, o.runs[0] ? "; variants run: " : "",
             o.runs);
    }
  }
  free(raw);
  return failures;
}

static void print_help(FILE *out) {
  fprintf(out,
          "usage: vlmc kernel-test [--target T] [--sizes A,B,...] FILE.vir...\n"
          "  checks the kernels target T (default cpu; vlmc compile --target help lists them)\n"
          "  generates for each file's first function, run on the backend of the same name,\n"
          "  against the reference executor on random inputs; `$N` in the file takes each size\n"
          "  (default 3420, 176, 172, 1, 37, or --sizes; a file's `// sizes:` wins).\n"
          "  Directives: see tools/cmd_kernel_test.c.\n"
          "  VLMC_KERNEL_TEST_CPU=native|x86-64-v3|... sets the cpu target's cpu option,\n"
          "  VLMC_KERNEL_TEST_DUMP=DIR dumps the kernels.\n");
}

int vlmc_cmd_kernel_test(int argc, char **argv) {
  const char *target_name = "cpu";
  int first_file = 1;
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    print_help(stdout);
    return 0;
  }
  while (first_file + 1 < argc && argv[first_file][0] == '-') {
    if (!strcmp(argv[first_file], "--target")) {
      target_name = argv[first_file + 1];
    } else if (!strcmp(argv[first_file], "--sizes")) {
      if (!set_default_sizes(argv[first_file + 1])) {
        fprintf(stderr, "error: kernel-test --sizes %s: expected positive sizes separated by "
                "commas (at most %d)\n", argv[first_file + 1], MAX_SIZES);
        return 2;
      }
    } else {
      break;
    }
    first_file += 2;
  }
  if (first_file >= argc) {
    print_help(stderr);
    return 2;
  }
  const vlmc_target_t *target = vlmc_target_find(target_name);
  if (!target) {
    vlmc_strbuf_t names;
    vlmc_strbuf_init(&names);
    vlmc_target_names(&names);
    fprintf(stderr, "error: kernel-test --target %s: unknown target; targets: %s\n", target_name,
            vlmc_strbuf_cstr(&names));
    vlmc_strbuf_deinit(&names);
    return 2;
  }
  current_target = target->name;
  /* Outputs start as 0xFF bytes (NaN, -1): a kernel that skips an element fails. */
  setenv("VLMC_CPU_POISON", "1", 0);
  int failures = 0;
  for (int i = first_file; i < argc; ++i) failures += test_file(target, argv[i]);
  printf("kernel-test: %s\n", failures ? "FAILED" : "all kernels match the reference");
  return failures ? 1 : 0;
}
