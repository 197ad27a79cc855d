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

#include "artifact/kernel_table.h"
#include "ir/dispatch.h"
#include "runtime/thread_pool.h"
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
  *(void **)&k->fn = dlsym(b->handle, k->symbol);
  if (!k->fn)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: section 'kernels.cpu.json': kernels[%zu]: "
                            "kernel '%s' is not in section 'kernels.cpu'", b->source, index,
                            k->symbol);
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

static vlmc_dim_t work_dim(const vlmc_kernel_table_work_t *w) {
  vlmc_dim_t dim = vlmc_dim_static(w->off);
  if (w->sym) {
    dim.sym = w->sym_id;
    dim.num = w->num;
    dim.den = w->den;
  }
  return dim;
}

/* The dispatch's entry in its function's table (its region exists: the table was checked). */
static void place_dispatch(vlmc_cpu_backend_t *b, const vlmc_kernel_table_dispatch_t *from) {
  func_table_t *t = &b->funcs[from->func_index];
  const vlmc_dispatch_region_t *region = vlmc_dispatch_find(&t->regions, from->dispatch);
  dispatch_t *d = &t->by_id[from->dispatch];
  d->kernel = &b->kernels[from->kernel];
  d->slot = region->ops[region->num_ops - 1]->slot;
  d->index = (uint32_t)(region - t->regions.regions);
  const vlmc_op_t *anchor = region->ops[0];
  d->append_in_place = region->num_ops == 1 && anchor->kind == VLMC_OP_KV_CACHE_APPEND &&
                       region->inputs[0] == anchor->operands[0] &&
                       !strcmp(d->kernel->template_name, "kv_cache_append");
  d->work = work_dim(&from->work);
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
