/* The `cpu` backend (runtime/backends/cpu/cpu_backend.h): load the kernels' shared object
 * with vlmc's ELF loader, read the table, and run dispatch regions on the thread pool, in
 * host memory. */
#define _GNU_SOURCE
#include "runtime/backends/cpu/cpu_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "artifact/kernel_table.h"
#include "ir/dispatch.h"
#include "runtime/backend.h"
#include "runtime/backends/cpu/elf_loader.h"
#include "runtime/backends/cpu/thread_pool.h"
#include "support/strbuf.h"

enum { MAX_KERNEL_SYMS = 16, MAX_KERNEL_BUFFERS = 256 };
_Static_assert((int)MAX_KERNEL_SYMS == (int)VLMC_KERNEL_MAX_SYMS,
               "a kernel's symbols fit kernel_t");

/* Below this many f32 operations a dispatch runs on the calling thread: waking the pool
 * costs some microseconds. */
static const int64_t kThreadingThreshold = 200000;

typedef void (*kernel_fn)(void *const *buffers, const int64_t *counts, int64_t lo, int64_t hi);

typedef struct {
  char *symbol, *template_name;
  kernel_fn fn;
  vlmc_dtype_t *inputs;
  uint32_t num_inputs;
  vlmc_dtype_t output;
  uint32_t syms[MAX_KERNEL_SYMS]; /* module symbol ids */
  uint32_t num_syms;
  int64_t cost;
  uint64_t calls; /* VLMC_CPU_PROFILE: calls and seconds, printed when the backend goes */
  double seconds;
} kernel_t;

typedef struct {
  const kernel_t *kernel; /* NULL: no entry (an error at load) */
  vlmc_dim_t work;
  int64_t scale;
  /* A lone kv_cache_append whose cache (input 0) dies here: the cache's buffer is grown in
   * place and only the new rows are written (O(new rows) per decode step, not O(cache)). */
  bool append_in_place;
} dispatch_t;

typedef struct {
  const vlmc_func_t *func;
  vlmc_dispatch_set_t regions;
  dispatch_t *by_id; /* indexed by region id */
  uint32_t max_id;
} func_table_t;

/* Host memory: malloc'd, or wrapped (parameters, the caller's arguments). */
struct vlmc_buffer_s {
  void *data;
  size_t capacity;
  bool owns_data;
};

struct vlmc_cpu_backend_s {
  vlmc_backend_t base;
  const char *source;
  const vlmc_module_t *module;
  vlmc_elf_image_t *image;
  kernel_t *kernels;
  size_t num_kernels, num_dispatches;
  func_table_t *funcs;
  vlmc_thread_pool_t *pool;
  bool poison;  /* VLMC_CPU_POISON=1: fill outputs with 0xFF before each kernel (tests) */
  bool profile; /* VLMC_CPU_PROFILE=1: time per kernel, printed to stderr at the end */
  uint64_t calls;
  double seconds;
};

extern const vlmc_backend_iface_t vlmc_backend_cpu;
static void cpu_destroy(vlmc_backend_t *base);

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the shared object ---- */

/* What messages call the section ("m.vlmc: section 'kernels.cpu'"). */
static void kernels_origin(const char *source, char *out, size_t size) {
  snprintf(out, size, "%s: section 'kernels.cpu'", source);
}

/* vlmc's own loader (elf_loader.h), not dlopen: nothing of the image runs until a kernel of
 * the table is called, and its imports are the allowlist's. */
static vlmc_status_t load_shared_object(vlmc_cpu_backend_t *b, const void *data, size_t len) {
  char origin[4096];
  kernels_origin(b->source, origin, sizeof origin);
  return vlmc_elf_load(origin, data, len, &b->image);
}

/* ---- the table ---- */

/* The table was parsed and checked against the program by the artifact layer
 * (artifact/kernel_table.h); what is left here is finding each kernel's code and placing
 * each dispatch. */

static vlmc_status_t load_kernel(vlmc_cpu_backend_t *b, size_t index,
                                 const vlmc_kernel_table_kernel_t *from) {
  kernel_t *k = &b->kernels[index];
  k->symbol = strdup(from->symbol);
  k->template_name = strdup(from->template_name);
  k->inputs = calloc(from->num_inputs + 1, sizeof *k->inputs);
  if (!k->symbol || !k->template_name || !k->inputs)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  if (from->num_inputs) memcpy(k->inputs, from->inputs, from->num_inputs * sizeof *k->inputs);
  k->num_inputs = from->num_inputs;
  k->output = from->output;
  if (from->num_syms) memcpy(k->syms, from->sym_ids, from->num_syms * sizeof *k->syms);
  k->num_syms = from->num_syms;
  k->cost = from->cost;
  vlmc_elf_fn_t fn;
  if (!vlmc_elf_symbol(b->image, k->symbol, &fn))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: section 'kernels.cpu.json': kernels[%zu]: "
                            "kernel '%s' is not a function of section 'kernels.cpu'", b->source,
                            index, k->symbol);
  k->fn = (kernel_fn)fn;
  return NULL;
}

static vlmc_status_t load_kernels(vlmc_cpu_backend_t *b, const vlmc_kernel_table_t *table) {
  b->kernels = calloc(table->num_kernels + 1, sizeof *b->kernels);
  if (!b->kernels) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  b->num_kernels = table->num_kernels;
  for (size_t i = 0; i < table->num_kernels; ++i)
    VLMC_RETURN_IF_ERROR(load_kernel(b, i, &table->kernels[i]));
  return NULL;
}

static func_table_t *func_table(vlmc_cpu_backend_t *b, const vlmc_func_t *func) {
  for (uint32_t i = 0; i < b->module->num_funcs; ++i)
    if (b->funcs[i].func == func) return &b->funcs[i];
  return NULL;
}

/* The dispatch's entry in its function's table (its region exists: the table was checked). */
static void place_dispatch(vlmc_cpu_backend_t *b, const vlmc_kernel_table_dispatch_t *from) {
  func_table_t *t = &b->funcs[from->func_index];
  const vlmc_dispatch_region_t *region = vlmc_dispatch_find(&t->regions, from->dispatch);
  dispatch_t *d = &t->by_id[from->dispatch];
  d->kernel = &b->kernels[from->kernel];
  /* the in-place path takes a region that is the append alone, its cache input 0 */
  d->append_in_place = region->num_ops == 1 && vlmc_dispatch_append_cache_input(region) == 0 &&
                       !strcmp(d->kernel->template_name, "kv_cache_append");
  d->work = vlmc_kernel_table_work_dim(&from->work);
  d->scale = from->work.scale;
}

static vlmc_status_t prepare_funcs(vlmc_cpu_backend_t *b) {
  b->funcs = calloc(b->module->num_funcs + 1, sizeof *b->funcs);
  if (!b->funcs) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (uint32_t i = 0; i < b->module->num_funcs; ++i) {
    func_table_t *t = &b->funcs[i];
    t->func = b->module->funcs[i];
    VLMC_RETURN_IF_ERROR(vlmc_dispatch_regions(t->func, &t->regions));
    for (uint32_t r = 0; r < t->regions.num_regions; ++r)
      if (t->regions.regions[r].id > t->max_id) t->max_id = t->regions.regions[r].id;
    t->by_id = calloc(t->max_id + 1, sizeof *t->by_id);
    if (!t->by_id) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  return NULL;
}

static vlmc_status_t parse_table(vlmc_cpu_backend_t *b, const char *text, size_t len) {
  vlmc_kernel_table_t table;
  vlmc_status_t st = vlmc_kernel_table_parse(b->source, "cpu", text, len, &table);
  if (!st) st = vlmc_kernel_table_check(&table, b->module);
  if (!st) st = load_kernels(b, &table);
  if (!st) st = prepare_funcs(b);
  for (size_t i = 0; !st && i < table.num_dispatches; ++i) place_dispatch(b, &table.dispatches[i]);
  if (!st) b->num_dispatches = table.num_dispatches;
  vlmc_kernel_table_deinit(&table);
  return st;
}

/* ---- open / destroy ---- */

static vlmc_status_t get_sections(const vlmc_backend_open_params_t *p, const void **so,
                                  size_t *so_len, const char **table, size_t *table_len) {
  *so = p->section(p->section_ctx, "kernels.cpu", so_len);
  *table = p->section(p->section_ctx, "kernels.cpu.json", table_len);
  if (!*so || !*table)
    return vlmc_status_make(VLMC_UNSUPPORTED, "%s: backend cpu: the artifact has no cpu kernels "
                            "(compile it with --target ref,cpu)", p->source);
  return NULL;
}

static vlmc_status_t cpu_open(const vlmc_backend_open_params_t *p, vlmc_backend_t **out) {
  const void *so;
  const char *table;
  size_t so_len, table_len;
  VLMC_RETURN_IF_ERROR(get_sections(p, &so, &so_len, &table, &table_len));
  vlmc_cpu_backend_t *b = calloc(1, sizeof *b);
  if (!b) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  b->base.iface = &vlmc_backend_cpu;
  b->source = p->source;
  b->module = p->module;
  const char *poison = getenv("VLMC_CPU_POISON"), *profile = getenv("VLMC_CPU_PROFILE");
  b->poison = poison && *poison && strcmp(poison, "0") != 0;
  b->profile = profile && *profile && strcmp(profile, "0") != 0;
  vlmc_status_t st = load_shared_object(b, so, so_len);
  if (!st) st = parse_table(b, table, table_len);
  if (!st) st = vlmc_thread_pool_create(p->threads ? p->threads : 1, &b->pool);
  if (st) {
    cpu_destroy(&b->base);
    return st;
  }
  *out = &b->base;
  return NULL;
}

static int by_seconds(const void *a, const void *b) {
  const kernel_t *x = *(const kernel_t *const *)a, *y = *(const kernel_t *const *)b;
  return x->seconds < y->seconds ? 1 : x->seconds > y->seconds ? -1 : 0;
}

static void print_profile(const vlmc_cpu_backend_t *b) {
  const kernel_t **order = calloc(b->num_kernels + 1, sizeof *order);
  if (!order) return;
  for (size_t i = 0; i < b->num_kernels; ++i) order[i] = &b->kernels[i];
  qsort(order, b->num_kernels, sizeof *order, by_seconds);
  fprintf(stderr, "cpu profile: %.1f ms in %llu kernel calls\n", b->seconds * 1e3,
          (unsigned long long)b->calls);
  for (size_t i = 0; i < b->num_kernels && order[i]->calls; ++i)
    fprintf(stderr, "  %-6s %-16s %8llu calls %10.2f ms %5.1f%%\n", order[i]->symbol,
            order[i]->template_name, (unsigned long long)order[i]->calls,
            order[i]->seconds * 1e3, b->seconds > 0 ? 100 * order[i]->seconds / b->seconds : 0);
  free(order);
}

/* The shared object (validated by the loader, not mapped) and the table against the
 * program: nothing is mapped and nothing of the artifact runs. */
static vlmc_status_t cpu_check(const vlmc_backend_open_params_t *p) {
  const void *so;
  const char *table;
  size_t so_len, table_len;
  VLMC_RETURN_IF_ERROR(get_sections(p, &so, &so_len, &table, &table_len));
  char origin[4096];
  kernels_origin(p->source, origin, sizeof origin);
  VLMC_RETURN_IF_ERROR(vlmc_elf_check(origin, so, so_len));
  vlmc_kernel_table_t t;
  vlmc_status_t st = vlmc_kernel_table_parse(p->source, "cpu", table, table_len, &t);
  if (!st) st = vlmc_kernel_table_check(&t, p->module);
  vlmc_kernel_table_deinit(&t);
  return st;
}

static void cpu_destroy(vlmc_backend_t *base) {
  vlmc_cpu_backend_t *b = (vlmc_cpu_backend_t *)base;
  if (!b) return;
  if (b->profile) print_profile(b);
  vlmc_thread_pool_destroy(b->pool);
  for (uint32_t i = 0; b->funcs && i < b->module->num_funcs; ++i) {
    vlmc_dispatch_set_free(&b->funcs[i].regions);
    free(b->funcs[i].by_id);
  }
  free(b->funcs);
  for (size_t i = 0; b->kernels && i < b->num_kernels; ++i) {
    free(b->kernels[i].symbol);
    free(b->kernels[i].template_name);
    free(b->kernels[i].inputs);
  }
  free(b->kernels);
  vlmc_elf_unload(b->image);
  free(b);
}

static void cpu_counters(const vlmc_backend_t *base, vlmc_backend_counters_t *out) {
  const vlmc_cpu_backend_t *b = (const vlmc_cpu_backend_t *)base;
  memset(out, 0, sizeof *out);
  out->kernel_calls = b->calls;
  out->kernel_seconds = b->seconds;
  out->num_kernels = b->num_kernels;
  out->num_dispatches = b->num_dispatches;
}

/* ---- memory: the host's ---- */

static vlmc_status_t cpu_buffer_alloc(vlmc_backend_t *b, size_t bytes, vlmc_buffer_t **out) {
  vlmc_buffer_t *buf = malloc(sizeof *buf);
  void *data = buf ? malloc(bytes ? bytes : 1) : NULL;
  if (!data) {
    free(buf);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory for a %zu-byte activation", bytes);
  }
  *buf = (vlmc_buffer_t){data, bytes, true};
  *out = buf;
  return NULL;
}

static vlmc_status_t cpu_buffer_wrap(vlmc_backend_t *b, void *host, size_t bytes,
                                     vlmc_buffer_t **out) {
  vlmc_buffer_t *buf = malloc(sizeof *buf);
  if (!buf) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  *buf = (vlmc_buffer_t){host, bytes, false};
  *out = buf;
  return NULL;
}

static void cpu_buffer_free(vlmc_backend_t *b, vlmc_buffer_t *buf) {
  if (!buf) return;
  if (buf->owns_data) free(buf->data);
  free(buf);
}

static void *cpu_buffer_host(vlmc_backend_t *b, vlmc_buffer_t *buf) { return buf->data; }

/* ---- dispatch ---- */

typedef struct {
  kernel_fn fn;
  void *const *buffers;
  const int64_t *counts;
  int64_t first; /* work units before this are already done (an in-place append) */
} call_t;

static void run_chunk(void *arg, int64_t begin, int64_t end) {
  const call_t *c = arg;
  c->fn(c->buffers, c->counts, c->first + begin, c->first + end);
}

static const char *storage_name(vlmc_dtype_t d) { return vlmc_dtype_info(d)->name; }

static int64_t value_count(const vlmc_rt_value_t *v) {
  int64_t n = 1;
  for (uint32_t d = 0; d < v->rank; ++d) n *= v->shape[d];
  return n;
}

/* Moves the cache's buffer into *out, grown (by doubling) to hold out's shape; returns the
 * number of leading elements already in place, or -1 when the buffer cannot be taken. */
static int64_t take_grown_cache(vlmc_rt_value_t *cache, vlmc_rt_value_t *out) {
  vlmc_buffer_t *buf = cache->buffer;
  size_t elem = vlmc_dtype_info(cache->dtype)->bits / 8;
  int64_t have = value_count(cache), need = value_count(out);
  if (!cache->owned || !buf || !buf->owns_data || cache->dtype != out->dtype || have > need)
    return -1;
  size_t bytes = (size_t)need * elem;
  if (buf->capacity < bytes) {
    size_t grown = buf->capacity * 2 > bytes ? buf->capacity * 2 : bytes;
    void *data = realloc(buf->data, grown ? grown : 1);
    if (!data) return -1;
    buf->data = data;
    buf->capacity = grown;
  }
  out->buffer = buf;
  out->owned = true;
  cache->buffer = NULL;
  cache->owned = false;
  return have;
}

/* Kernels form pointers into every buffer, empty ones too. */
static void *data_of(const vlmc_rt_value_t *v) {
  static int64_t no_elements;
  return v->buffer && v->buffer->data ? v->buffer->data : &no_elements;
}

static vlmc_status_t cpu_run_region(vlmc_backend_t *base, const vlmc_region_call_t *c) {
  vlmc_cpu_backend_t *b = (vlmc_cpu_backend_t *)base;
  const vlmc_func_t *func = c->func;
  func_table_t *t = func_table(b, func);
  const dispatch_t *d = t && c->region <= t->max_id ? &t->by_id[c->region] : NULL;
  if (!d || !d->kernel)
    return vlmc_status_make(VLMC_NOT_FOUND, "no cpu kernel for @%s dispatch %u", func->name,
                            c->region);
  const kernel_t *k = d->kernel;
  uint32_t num_inputs = c->num_inputs;
  if (num_inputs != k->num_inputs || num_inputs + 2 > MAX_KERNEL_BUFFERS)
    return vlmc_status_make(VLMC_INTERNAL, "kernel %s takes %u inputs, got %u", k->symbol,
                            k->num_inputs, num_inputs);
  void *buffers[MAX_KERNEL_BUFFERS];
  int64_t counts[MAX_KERNEL_BUFFERS];
  for (uint32_t i = 0; i < num_inputs; ++i) {
    if (c->inputs[i]->dtype != k->inputs[i])
      return vlmc_status_make(VLMC_INTERNAL, "kernel %s (%s): input %u is %s, the kernel reads %s",
                              k->symbol, k->template_name, i, storage_name(c->inputs[i]->dtype),
                              storage_name(k->inputs[i]));
    buffers[i] = data_of(c->inputs[i]);
    counts[i] = value_count(c->inputs[i]);
  }
  vlmc_rt_value_t *out = c->out;
  if (out->dtype != k->output)
    return vlmc_status_make(VLMC_INTERNAL, "kernel %s (%s) writes %s, the program expects %s",
                            k->symbol, k->template_name, storage_name(k->output),
                            storage_name(out->dtype));
  int64_t in_place = d->append_in_place && c->may_take[0] && !out->buffer
                         ? take_grown_cache(c->inputs[0], out)
                         : -1;
  size_t out_bytes = (size_t)value_count(out) * (vlmc_dtype_info(out->dtype)->bits / 8);
  if (in_place >= 0) {
    buffers[0] = out->buffer->data; /* the kernel reads rows below in_place only, and skips them */
  } else if (!out->buffer) {
    VLMC_RETURN_IF_ERROR(cpu_buffer_alloc(base, out_bytes, &out->buffer));
    out->owned = true;
  }
  if (b->poison && in_place < 0 && out_bytes) memset(out->buffer->data, 0xFF, out_bytes);
  int64_t syms[MAX_KERNEL_SYMS];
  for (uint32_t i = 0; i < k->num_syms; ++i) syms[i] = c->symbols[k->syms[i] - 1];
  buffers[num_inputs] = data_of(out);
  counts[num_inputs] = value_count(out);
  buffers[num_inputs + 1] = syms;
  counts[num_inputs + 1] = k->num_syms;
  int64_t units = d->work.off;
  if (!vlmc_dim_is_static(d->work))
    VLMC_RETURN_IF_ERROR(vlmc_dim_eval(d->work, c->symbols, b->module->num_symbols, &units));
  int64_t work = units * d->scale, first = 0;
  if (in_place > 0) {
    /* Work units are spread evenly over the output's elements (rows of the cache). */
    int64_t total = counts[num_inputs];
    /* Units not aligned with the old rows: copy everything (the buffer is in place anyway). */
    if (total && (in_place * work) % total == 0) first = in_place * work / total;
  }
  if (work - first <= 0) return NULL;
  double start = now_seconds();
  call_t call = {k->fn, buffers, counts, first};
  uint32_t threads = vlmc_thread_pool_size(b->pool);
  bool big = (double)k->cost * (double)(work - first) >= (double)kThreadingThreshold;
  vlmc_thread_pool_run(b->pool, work - first, big ? threads : 1, run_chunk, &call);
  double spent = now_seconds() - start;
  b->calls++;
  b->seconds += spent;
  if (b->profile) {
    ((kernel_t *)k)->calls++;
    ((kernel_t *)k)->seconds += spent;
  }
  return NULL;
}

static const vlmc_dtype_t kComputeDtypes[] = {VLMC_DTYPE_F32, VLMC_DTYPE_I64, VLMC_DTYPE_COUNT};
static const char *const kSections[] = {"program", "kernels.cpu", "kernels.cpu.json", NULL};

const vlmc_backend_iface_t vlmc_backend_cpu = {
    .name = "cpu",
    .summary = "the artifact's generated cpu kernels (f32 compute, bf16/f16 weights read in place)",
    .caps = VLMC_BACKEND_HOST_MEMORY | VLMC_BACKEND_STREAMS_WEIGHTS,
    .compute_dtypes = kComputeDtypes,
    .sections = kSections,
    .check = cpu_check,
    .open = cpu_open,
    .destroy = cpu_destroy,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_wrap = cpu_buffer_wrap,
    .buffer_free = cpu_buffer_free,
    .buffer_host = cpu_buffer_host,
    .run_region = cpu_run_region,
    .counters = cpu_counters,
};
