/* The cpu backend (runtime/cpu_backend.h): load the kernels' shared object from memory, read
 * the table, and run dispatches on the thread pool. */
#define _GNU_SOURCE
#include "runtime/cpu_backend.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "support/json.h"
#include "ir/dispatch.h"
#include "runtime/thread_pool.h"
#include "support/strbuf.h"

enum { MAX_KERNEL_SYMS = 16, MAX_KERNEL_BUFFERS = 256 };

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
  uint32_t slot;       /* the memory plan's activation buffer for the output; 0: none */
  uint32_t index;      /* of the region in the function's set */
} dispatch_t;

typedef struct {
  void *data;
  size_t capacity;
} slot_t;

typedef struct {
  const vlmc_func_t *func;
  vlmc_dispatch_set_t regions;
  dispatch_t *by_id; /* indexed by region id */
  uint32_t max_id;
  uint32_t num_slots; /* the memory plan's slots in this function */
  /* Liveness of each region's output (ir/dispatch.h) and its size at the last call: for the
   * largest-live-set figure that --stats compares the slots with. */
  uint32_t *first, *last;
  bool *escapes;
  size_t *bytes;
} func_table_t;

struct vlmc_cpu_backend_s {
  const char *source;
  const vlmc_module_t *module;
  void *handle;
  kernel_t *kernels;
  size_t num_kernels, num_dispatches;
  func_table_t *funcs;
  vlmc_thread_pool_t *pool;
  /* Activation buffers by slot number (1-based), kept for the backend's lifetime and shared
   * by all functions: one function runs at a time, so slot k of @encode_image and slot k of
   * @decode can be the same buffer. */
  slot_t *slots;
  uint32_t num_slots;
  bool poison;  /* VLMC_CPU_POISON=1: fill outputs with 0xFF before each kernel (tests) */
  bool profile; /* VLMC_CPU_PROFILE=1: time per kernel, printed to stderr at the end */
  uint64_t calls;
  double seconds;
};

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the shared object ---- */

/* dlopen needs a path: an anonymous memory file gives one without touching the disk; a
 * deleted temporary file is the fallback where memfd_create is not available. */
static vlmc_status_t open_shared_object(vlmc_cpu_backend_t *b, const void *data, size_t len) {
  char path[64];
  int fd = memfd_create("vlmc-kernels", MFD_CLOEXEC);
  char tmp[] = "/tmp/vlmc-kernels-XXXXXX";
  bool temporary = false;
  if (fd < 0) {
    fd = mkstemp(tmp);
    temporary = true;
  }
  if (fd < 0)
    return vlmc_status_make(VLMC_IO_ERROR, "%s: cannot make a memory file for the cpu kernels: %s",
                            b->source, strerror(errno));
  const unsigned char *p = data;
  size_t done = 0;
  while (done < len) {
    ssize_t n = write(fd, p + done, len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      if (temporary) unlink(tmp);
      return vlmc_status_make(VLMC_IO_ERROR, "%s: writing the cpu kernels: %s", b->source,
                              strerror(errno));
    }
    done += (size_t)n;
  }
  if (temporary) snprintf(path, sizeof path, "%s", tmp);
  else snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  b->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  const char *why = b->handle ? NULL : dlerror();
  close(fd);
  if (temporary) unlink(tmp);
  if (!b->handle)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: section 'kernels.cpu': not a loadable shared "
                            "object for this machine: %s", b->source, why ? why : "?");
  return NULL;
}

/* ---- the table ---- */

/* The kernel of a table checked without its shared object; never called. */
static void unloaded_kernel(void *const *buffers, const int64_t *counts, int64_t lo, int64_t hi) {
  (void)buffers, (void)counts, (void)lo, (void)hi;
}

static bool parse_storage(const char *name, vlmc_dtype_t *out) {
  static const struct { const char *name; vlmc_dtype_t dtype; } known[] = {
      {"f32", VLMC_DTYPE_F32}, {"bf16", VLMC_DTYPE_BF16}, {"f16", VLMC_DTYPE_F16},
      {"i64", VLMC_DTYPE_I64}};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; ++i)
    if (!strcmp(name, known[i].name)) {
      *out = known[i].dtype;
      return true;
    }
  return false;
}

static bool find_symbol(const vlmc_module_t *m, const char *name, uint32_t *out) {
  for (uint32_t s = 1; s <= m->num_symbols; ++s)
    if (!strcmp(vlmc_module_symbol_name(m, s), name)) {
      *out = s;
      return true;
    }
  return false;
}

static vlmc_status_t parse_dtype_list(const vlmc_json_ref_t *ref, vlmc_dtype_t **out,
                                      uint32_t *count) {
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_array(ref, -1));
  int n = ref->node ? cJSON_GetArraySize(ref->node) : 0;
  if (n > MAX_KERNEL_BUFFERS) return vlmc_json_error(ref, VLMC_PARSE_ERROR, "too many inputs");
  *out = calloc((size_t)n + 1, sizeof **out);
  if (!*out) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (int i = 0; i < n; ++i) {
    vlmc_json_ref_t item = vlmc_json_ref_index(ref, i);
    const char *name;
    VLMC_RETURN_IF_ERROR(vlmc_json_string_req(&item, &name));
    if (!parse_storage(name, &(*out)[i]))
      return vlmc_json_error(&item, VLMC_PARSE_ERROR, "expected f32, bf16, f16 or i64, got '%s'",
                             name);
  }
  *count = (uint32_t)n;
  return NULL;
}

static vlmc_status_t parse_kernel(vlmc_cpu_backend_t *b, const vlmc_json_ref_t *ref, kernel_t *k) {
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_object(ref));
  if (!ref->node) return vlmc_json_missing(ref);
  const char *symbol, *template_name, *output;
  vlmc_json_ref_t r = vlmc_json_ref(ref->file, ref->node, ref->path, "symbol");
  VLMC_RETURN_IF_ERROR(vlmc_json_string_req(&r, &symbol));
  r = vlmc_json_ref(ref->file, ref->node, ref->path, "template");
  VLMC_RETURN_IF_ERROR(vlmc_json_string_req(&r, &template_name));
  k->symbol = strdup(symbol);
  k->template_name = strdup(template_name);
  if (!k->symbol || !k->template_name) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  r = vlmc_json_ref(ref->file, ref->node, ref->path, "inputs");
  VLMC_RETURN_IF_ERROR(parse_dtype_list(&r, &k->inputs, &k->num_inputs));
  r = vlmc_json_ref(ref->file, ref->node, ref->path, "output");
  VLMC_RETURN_IF_ERROR(vlmc_json_string_req(&r, &output));
  if (!parse_storage(output, &k->output))
    return vlmc_json_error(&r, VLMC_PARSE_ERROR, "expected f32 or i64, got '%s'", output);
  r = vlmc_json_ref(ref->file, ref->node, ref->path, "syms");
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_array(&r, -1));
  int n = r.node ? cJSON_GetArraySize(r.node) : 0;
  if (n > MAX_KERNEL_SYMS) return vlmc_json_error(&r, VLMC_PARSE_ERROR, "at most %d symbols", MAX_KERNEL_SYMS);
  for (int i = 0; i < n; ++i) {
    vlmc_json_ref_t item = vlmc_json_ref_index(&r, i);
    const char *name;
    VLMC_RETURN_IF_ERROR(vlmc_json_string_req(&item, &name));
    if (!find_symbol(b->module, name, &k->syms[i]))
      return vlmc_json_error(&item, VLMC_PARSE_ERROR, "symbol '%s' is not in the program", name);
  }
  k->num_syms = (uint32_t)n;
  r = vlmc_json_ref(ref->file, ref->node, ref->path, "cost");
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&r, 1, INT64_MAX / 2, &k->cost));
  if (b->handle) *(void **)&k->fn = dlsym(b->handle, k->symbol);
  else k->fn = unloaded_kernel; /* vlmc_cpu_table_check: the table alone */
  if (!k->fn)
    return vlmc_json_error(ref, VLMC_PARSE_ERROR, "kernel '%s' is not in section 'kernels.cpu'",
                           k->symbol);
  return NULL;
}

static func_table_t *func_table(vlmc_cpu_backend_t *b, const vlmc_func_t *func) {
  for (uint32_t i = 0; i < b->module->num_funcs; ++i)
    if (b->funcs[i].func == func) return &b->funcs[i];
  return NULL;
}

static vlmc_status_t parse_work(const vlmc_json_ref_t *ref, const vlmc_module_t *m,
                                dispatch_t *d) {
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_object(ref));
  if (!ref->node) return vlmc_json_missing(ref);
  const char *sym = NULL;
  bool has_sym = false;
  vlmc_json_ref_t r = vlmc_json_ref(ref->file, ref->node, ref->path, "sym");
  VLMC_RETURN_IF_ERROR(vlmc_json_string_opt(&r, &sym, &has_sym));
  int64_t num, den, off, scale;
  vlmc_json_ref_t rn = vlmc_json_ref(ref->file, ref->node, ref->path, "num");
  vlmc_json_ref_t rd = vlmc_json_ref(ref->file, ref->node, ref->path, "den");
  vlmc_json_ref_t ro = vlmc_json_ref(ref->file, ref->node, ref->path, "off");
  vlmc_json_ref_t rs = vlmc_json_ref(ref->file, ref->node, ref->path, "scale");
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&rn, -(1LL << 40), 1LL << 40, &num));
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&rd, 1, 1LL << 40, &den));
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&ro, -(1LL << 40), 1LL << 40, &off));
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&rs, 1, 1LL << 40, &scale));
  vlmc_dim_t dim = vlmc_dim_static(off);
  if (has_sym) {
    if (!find_symbol(m, sym, &dim.sym))
      return vlmc_json_error(&r, VLMC_PARSE_ERROR, "symbol '%s' is not in the program", sym);
    dim.num = num;
    dim.den = den;
  }
  d->work = dim;
  d->scale = scale;
  return NULL;
}

static vlmc_status_t parse_dispatch(vlmc_cpu_backend_t *b, const vlmc_json_ref_t *ref) {
  VLMC_RETURN_IF_ERROR(vlmc_json_expect_object(ref));
  if (!ref->node) return vlmc_json_missing(ref);
  const char *func_name;
  int64_t id, kernel;
  vlmc_json_ref_t r = vlmc_json_ref(ref->file, ref->node, ref->path, "func");
  VLMC_RETURN_IF_ERROR(vlmc_json_string_req(&r, &func_name));
  const vlmc_func_t *func = vlmc_module_func_find(b->module, func_name);
  func_table_t *t = func ? func_table(b, func) : NULL;
  if (!t) return vlmc_json_error(&r, VLMC_PARSE_ERROR, "no function @%s in the program", func_name);
  r = vlmc_json_ref(ref->file, ref->node, ref->path, "dispatch");
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&r, 1, t->max_id, &id));
  const vlmc_dispatch_region_t *region = vlmc_dispatch_find(&t->regions, (uint32_t)id);
  if (!region)
    return vlmc_json_error(&r, VLMC_PARSE_ERROR, "@%s has no dispatch region %lld", func_name,
                           (long long)id);
  r = vlmc_json_ref(ref->file, ref->node, ref->path, "kernel");
  VLMC_RETURN_IF_ERROR(vlmc_json_int_req(&r, 0, (int64_t)b->num_kernels - 1, &kernel));
  dispatch_t *d = &t->by_id[id];
  d->kernel = &b->kernels[kernel];
  d->slot = region->ops[region->num_ops - 1]->slot;
  d->index = (uint32_t)(region - t->regions.regions);
  const vlmc_op_t *anchor = region->ops[0];
  d->append_in_place = region->num_ops == 1 && anchor->kind == VLMC_OP_KV_CACHE_APPEND &&
                       region->inputs[0] == anchor->operands[0] &&
                       !strcmp(d->kernel->template_name, "kv_cache_append");
  if (d->kernel->num_inputs != region->num_inputs)
    return vlmc_json_error(&r, VLMC_PARSE_ERROR, "kernel %s takes %u inputs, @%s dispatch %lld "
                           "has %u", d->kernel->symbol, d->kernel->num_inputs, func_name,
                           (long long)id, region->num_inputs);
  r = vlmc_json_ref(ref->file, ref->node, ref->path, "work");
  return parse_work(&r, b->module, d);
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
    uint32_t n = t->regions.num_regions;
    t->first = calloc(n + 1, sizeof *t->first);
    t->last = calloc(n + 1, sizeof *t->last);
    t->escapes = calloc(n + 1, sizeof *t->escapes);
    t->bytes = calloc(n + 1, sizeof *t->bytes);
    for (uint32_t r = 0; r < n; ++r) {
      uint32_t slot = t->regions.regions[r].ops[t->regions.regions[r].num_ops - 1]->slot;
      if (slot > t->num_slots) t->num_slots = slot;
    }
    if (t->num_slots > b->num_slots) b->num_slots = t->num_slots;
    if (!t->by_id || !t->first || !t->last || !t->escapes || !t->bytes)
      return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
    VLMC_RETURN_IF_ERROR(vlmc_dispatch_intervals(t->func, &t->regions, t->first, t->last,
                                                 t->escapes));
  }
  b->slots = calloc(b->num_slots + 1, sizeof *b->slots);
  if (!b->slots) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  return NULL;
}

/* Every region of the program has a kernel: the artifact never falls back to the
 * interpreter, and an incomplete table is refused when it is opened, not mid-generation. */
static vlmc_status_t check_coverage(const vlmc_cpu_backend_t *b, const char *file) {
  for (uint32_t i = 0; i < b->module->num_funcs; ++i) {
    const func_table_t *t = &b->funcs[i];
    for (uint32_t r = 0; r < t->regions.num_regions; ++r)
      if (!t->by_id[t->regions.regions[r].id].kernel)
        return vlmc_status_make(VLMC_PARSE_ERROR, "%s: no kernel for @%s dispatch %u", file,
                                t->func->name, t->regions.regions[r].id);
  }
  return NULL;
}

static vlmc_status_t parse_table(vlmc_cpu_backend_t *b, const char *text, size_t len) {
  char file[512];
  snprintf(file, sizeof file, "%s: section 'kernels.cpu.json'", b->source);
  cJSON *root = NULL;
  VLMC_RETURN_IF_ERROR(vlmc_json_parse_object(file, text, len, &root));
  vlmc_status_t st = NULL;
  int64_t format;
  vlmc_json_ref_t r = vlmc_json_ref(file, root, "", "format");
  st = vlmc_json_int_req(&r, 1, 1, &format);
  vlmc_json_ref_t kernels = vlmc_json_ref(file, root, "", "kernels");
  if (!st) st = vlmc_json_expect_array(&kernels, -1);
  if (!st && !kernels.node) st = vlmc_json_missing(&kernels);
  if (!st) {
    b->num_kernels = (size_t)cJSON_GetArraySize(kernels.node);
    b->kernels = calloc(b->num_kernels + 1, sizeof *b->kernels);
    if (!b->kernels) st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  for (size_t i = 0; !st && i < b->num_kernels; ++i) {
    vlmc_json_ref_t k = vlmc_json_ref_index(&kernels, (int)i);
    st = parse_kernel(b, &k, &b->kernels[i]);
  }
  if (!st) st = prepare_funcs(b);
  vlmc_json_ref_t dispatches = vlmc_json_ref(file, root, "", "dispatches");
  if (!st) st = vlmc_json_expect_array(&dispatches, -1);
  if (!st && !dispatches.node) st = vlmc_json_missing(&dispatches);
  int n = st ? 0 : cJSON_GetArraySize(dispatches.node);
  for (int i = 0; !st && i < n; ++i) {
    vlmc_json_ref_t d = vlmc_json_ref_index(&dispatches, i);
    st = parse_dispatch(b, &d);
  }
  b->num_dispatches = (size_t)n;
  if (!st) st = check_coverage(b, file);
  cJSON_Delete(root);
  return st;
}

/* ---- create / destroy ---- */

vlmc_status_t vlmc_cpu_backend_create(const char *source, const void *so, size_t so_len,
                                      const char *table_json, size_t table_len,
                                      const vlmc_module_t *module, uint32_t threads,
                                      vlmc_cpu_backend_t **out) {
  vlmc_cpu_backend_t *b = calloc(1, sizeof *b);
  if (!b) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  b->source = source;
  b->module = module;
  const char *poison = getenv("VLMC_CPU_POISON"), *profile = getenv("VLMC_CPU_PROFILE");
  b->poison = poison && *poison && strcmp(poison, "0") != 0;
  b->profile = profile && *profile && strcmp(profile, "0") != 0;
  vlmc_status_t st = open_shared_object(b, so, so_len);
  if (!st) st = parse_table(b, table_json, table_len);
  if (!st) st = vlmc_thread_pool_create(threads ? threads : 1, &b->pool);
  if (st) {
    vlmc_cpu_backend_destroy(b);
    return st;
  }
  *out = b;
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
  fprintf(stderr, "cpu profile: %.1f ms in %llu kernel calls; activation slots (KB):",
          b->seconds * 1e3, (unsigned long long)b->calls);
  for (uint32_t s = 1; s <= b->num_slots; ++s)
    fprintf(stderr, " %.0f", (double)b->slots[s].capacity / 1e3);
  fprintf(stderr, "\n");
  for (size_t i = 0; i < b->num_kernels && order[i]->calls; ++i)
    fprintf(stderr, "  %-6s %-16s %8llu calls %10.2f ms %5.1f%%\n", order[i]->symbol,
            order[i]->template_name, (unsigned long long)order[i]->calls,
            order[i]->seconds * 1e3, b->seconds > 0 ? 100 * order[i]->seconds / b->seconds : 0);
  free(order);
}

vlmc_status_t vlmc_cpu_table_check(const char *source, const char *table_json, size_t table_len,
                                   const vlmc_module_t *module) {
  vlmc_cpu_backend_t *b = calloc(1, sizeof *b);
  if (!b) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  b->source = source;
  b->module = module;
  vlmc_status_t st = parse_table(b, table_json, table_len);
  vlmc_cpu_backend_destroy(b);
  return st;
}

void vlmc_cpu_backend_destroy(vlmc_cpu_backend_t *b) {
  if (!b) return;
  if (b->profile) print_profile(b);
  vlmc_thread_pool_destroy(b->pool);
  for (uint32_t i = 0; b->funcs && i < b->module->num_funcs; ++i) {
    func_table_t *t = &b->funcs[i];
    vlmc_dispatch_set_free(&t->regions);
    free(t->by_id);
    free(t->first);
    free(t->last);
    free(t->escapes);
    free(t->bytes);
  }
  free(b->funcs);
  for (uint32_t s = 0; b->slots && s <= b->num_slots; ++s) free(b->slots[s].data);
  free(b->slots);
  for (size_t i = 0; b->kernels && i < b->num_kernels; ++i) {
    free(b->kernels[i].symbol);
    free(b->kernels[i].template_name);
    free(b->kernels[i].inputs);
  }
  free(b->kernels);
  if (b->handle) dlclose(b->handle);
  free(b);
}

size_t vlmc_cpu_backend_num_kernels(const vlmc_cpu_backend_t *b) { return b->num_kernels; }
size_t vlmc_cpu_backend_num_dispatches(const vlmc_cpu_backend_t *b) { return b->num_dispatches; }
void vlmc_cpu_backend_counters(const vlmc_cpu_backend_t *b, uint64_t *calls, double *seconds) {
  *calls = b->calls;
  *seconds = b->seconds;
}

/* The most bytes of region outputs live at one position of the function's last call. */
static size_t largest_live_set(const func_table_t *t) {
  uint32_t n = t->regions.num_regions;
  size_t best = 0;
  for (uint32_t r = 0; r < n; ++r) { /* a maximum is reached where some output starts */
    size_t live = 0;
    for (uint32_t q = 0; q < n; ++q)
      if (t->first[q] <= t->first[r] && t->last[q] >= t->first[r] && !t->escapes[q])
        live += t->bytes[q];
    if (live > best) best = live;
  }
  return best;
}

void vlmc_cpu_backend_memory(const vlmc_cpu_backend_t *b, vlmc_cpu_memory_t *out) {
  memset(out, 0, sizeof *out);
  out->slots = b->num_slots;
  for (uint32_t s = 1; s <= b->num_slots; ++s) out->slot_bytes += b->slots[s].capacity;
  for (uint32_t i = 0; i < b->module->num_funcs; ++i) {
    const func_table_t *t = &b->funcs[i];
    size_t live = largest_live_set(t);
    if (live > out->largest_live_set) out->largest_live_set = live;
  }
}

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

/* Points *out at the slot's buffer (borrowed: the executor never frees it), growing it first
 * when this value is the biggest the slot has held. Its old contents are dead (the memory
 * plan guarantees it), so growing does not copy. */
static vlmc_status_t use_slot(slot_t *slot, size_t bytes, vlmc_tensor_t *out) {
  if (slot->capacity < bytes) {
    free(slot->data);
    slot->data = malloc(bytes);
    slot->capacity = slot->data ? bytes : 0;
    if (!slot->data)
      return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory for a %zu-byte activation", bytes);
  }
  out->data = slot->data;
  out->owned = false;
  out->capacity = 0;
  return NULL;
}

/* Moves the cache's buffer into *out, grown (by doubling) to hold out's shape; returns the
 * number of leading elements already in place, or -1 when the buffer cannot be taken. */
static int64_t take_grown_cache(vlmc_tensor_t *cache, vlmc_tensor_t *out) {
  size_t elem = vlmc_dtype_info(cache->dtype)->bits / 8;
  int64_t have = vlmc_tensor_count(cache), need = vlmc_tensor_count(out);
  if (!cache->owned || cache->dtype != out->dtype || have > need) return -1;
  size_t bytes = (size_t)need * elem;
  void *data = cache->data;
  size_t capacity = cache->capacity;
  if (capacity < bytes) {
    size_t grown = capacity * 2 > bytes ? capacity * 2 : bytes;
    data = realloc(data, grown ? grown : 1);
    if (!data) return -1;
    capacity = grown;
  }
  out->data = data;
  out->capacity = capacity;
  out->owned = true;
  memset(cache, 0, sizeof *cache);
  return have;
}

vlmc_status_t vlmc_cpu_backend_dispatch(void *ctx, const vlmc_func_t *func, uint32_t region,
                                        vlmc_tensor_t *const *inputs, const bool *may_take,
                                        uint32_t num_inputs, const int64_t *symbols,
                                        vlmc_tensor_t *out) {
  vlmc_cpu_backend_t *b = ctx;
  func_table_t *t = func_table(b, func);
  const dispatch_t *d = t && region <= t->max_id ? &t->by_id[region] : NULL;
  if (!d || !d->kernel)
    return vlmc_status_make(VLMC_NOT_FOUND, "no cpu kernel for @%s dispatch %u", func->name, region);
  const kernel_t *k = d->kernel;
  if (num_inputs != k->num_inputs || num_inputs + 2 > MAX_KERNEL_BUFFERS)
    return vlmc_status_make(VLMC_INTERNAL, "kernel %s takes %u inputs, got %u", k->symbol,
                            k->num_inputs, num_inputs);
  void *buffers[MAX_KERNEL_BUFFERS];
  int64_t counts[MAX_KERNEL_BUFFERS];
  for (uint32_t i = 0; i < num_inputs; ++i) {
    if (inputs[i]->dtype != k->inputs[i])
      return vlmc_status_make(VLMC_INTERNAL, "kernel %s (%s): input %u is %s, the kernel reads %s",
                              k->symbol, k->template_name, i, storage_name(inputs[i]->dtype),
                              storage_name(k->inputs[i]));
    buffers[i] = inputs[i]->data;
    counts[i] = vlmc_tensor_count(inputs[i]);
  }
  if (out->dtype != k->output)
    return vlmc_status_make(VLMC_INTERNAL, "kernel %s (%s) writes %s, the program expects %s",
                            k->symbol, k->template_name, storage_name(k->output),
                            storage_name(out->dtype));
  int64_t in_place = d->append_in_place && may_take[0] ? take_grown_cache(inputs[0], out) : -1;
  size_t out_bytes = (size_t)vlmc_tensor_count(out) * (vlmc_dtype_info(out->dtype)->bits / 8);
  if (in_place >= 0) {
    buffers[0] = out->data; /* the kernel reads rows below in_place only, and skips them */
  } else if (d->slot) {
    VLMC_RETURN_IF_ERROR(use_slot(&b->slots[d->slot], out_bytes, out));
  } else {
    VLMC_RETURN_IF_ERROR(vlmc_tensor_alloc(out->dtype, out->rank, out->shape, out));
  }
  t->bytes[d->index] = out_bytes;
  if (b->poison && in_place < 0 && out_bytes) memset(out->data, 0xFF, out_bytes);
  int64_t syms[MAX_KERNEL_SYMS];
  for (uint32_t i = 0; i < k->num_syms; ++i) syms[i] = symbols[k->syms[i] - 1];
  buffers[num_inputs] = out->data;
  counts[num_inputs] = vlmc_tensor_count(out);
  buffers[num_inputs + 1] = syms;
  counts[num_inputs + 1] = k->num_syms;
  int64_t units = d->work.off;
  if (!vlmc_dim_is_static(d->work)) {
    vlmc_status_t st = vlmc_dim_eval(d->work, symbols, b->module->num_symbols, &units);
    if (st) return st;
  }
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
