/* The Metal emulation's executor (emu.h): build = the MSL text + a generated trampoline,
 * compiled as C++ against the stand-in <metal_stdlib> and loaded; run = one threadgroup at a
 * time, each of its threads a fiber on the calling thread (tests/metal/README.md). */
#define _GNU_SOURCE /* ucontext, MAP_ANONYMOUS */

#include "tests/metal/emu.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <ucontext.h>
#include <unistd.h>

#include "support/file.h"
#include "support/hash.h"
#include "support/strbuf.h"
#include "tests/metal/include/vlmc_metal_emu.h"

#ifndef VLMC_METAL_CXX
#define VLMC_METAL_CXX "clang++-19"
#endif
#ifndef VLMC_METAL_STANDIN
#define VLMC_METAL_STANDIN "tests/metal/include"
#endif
/* The compile command's fixed part (its text is part of the cache key). -ffp-contract=off:
 * a product and a sum stay two roundings unless the kernel says fma, as in its SPIR-V. */
#define CXX_FLAGS "-std=c++17 -O1 -fPIC -shared -w -ffp-contract=off"

enum { MAX_THREADS = 1024, SIMD_WIDTH = VLMC_METAL_SIMD_WIDTH, MAX_SIMDS = MAX_THREADS / SIMD_WIDTH };

struct vlmc_metal_kernel_s {
  void *handle;
  vlmc_metal_entry_fn entry;
  char name[128];
  /* No barrier, no SIMD-group function, no threadgroup memory: its threads cannot observe
   * each other, so they run one after another on the calling thread (same results, no
   * thread per invocation). */
  bool independent;
};

/* ---- the trampoline ---- */

/* The builtins a kernel parameter may carry, as vlmc_metal_thread_t fields. */
static const char *const kBuiltins[] = {
    "threadgroups_per_grid",       "threadgroup_position_in_grid",   "thread_position_in_threadgroup",
    "thread_position_in_grid",     "threads_per_threadgroup",        "thread_index_in_threadgroup",
    "simdgroup_index_in_threadgroup", "simdgroups_per_threadgroup", "thread_index_in_simdgroup",
    "threads_per_simdgroup"};

static bool is_builtin(const char *attr, size_t len) {
  for (size_t i = 0; i < sizeof kBuiltins / sizeof kBuiltins[0]; ++i)
    if (strlen(kBuiltins[i]) == len && !memcmp(kBuiltins[i], attr, len)) return true;
  return false;
}

static void trim(const char **b, const char **e) {
  while (*b < *e && isspace((unsigned char)**b)) ++*b;
  while (*e > *b && isspace((unsigned char)(*e)[-1])) --*e;
}

/* One parameter "TYPE NAME [[ATTR]]" as the trampoline's argument expression. */
static vlmc_status_t parameter(const char *entry, const char *b, const char *e, vlmc_strbuf_t *out) {
  const char *attr = strstr(b, "[["), *attr_end = attr ? strstr(attr, "]]") : NULL;
  if (!attr || attr >= e || !attr_end || attr_end > e)
    return vlmc_status_make(VLMC_UNSUPPORTED, "metal emulation: kernel %s: a parameter without "
                            "an attribute: %.*s", entry, (int)(e - b), b);
  const char *decl_end = attr;
  trim(&b, &decl_end);
  const char *name = decl_end;
  while (name > b && (isalnum((unsigned char)name[-1]) || name[-1] == '_')) --name;
  const char *type_end = name;
  trim(&b, &type_end);
  attr += 2;
  size_t attr_len = (size_t)(attr_end - attr);
  if (attr_len > 7 && !memcmp(attr, "buffer(", 7)) {
    int index = atoi(attr + 7);
    bool ref = type_end > b && type_end[-1] == '&';
    if (ref) --type_end;
    if (ref)
      vlmc_strbuf_printf(out, "*(%.*s *)vlmc_buffers[%d]", (int)(type_end - b), b, index);
    else
      vlmc_strbuf_printf(out, "(%.*s)vlmc_buffers[%d]", (int)(type_end - b), b, index);
    return NULL;
  }
  if (!is_builtin(attr, attr_len))
    return vlmc_status_make(VLMC_UNSUPPORTED, "metal emulation: kernel %s: attribute [[%.*s]] "
                            "is not emulated", entry, (int)attr_len, attr);
  if ((size_t)(type_end - b) == 5 && !memcmp(b, "uint3", 5))
    vlmc_strbuf_printf(out, "uint3(vlmc_t->%.*s[0], vlmc_t->%.*s[1], vlmc_t->%.*s[2])",
                       (int)attr_len, attr, (int)attr_len, attr, (int)attr_len, attr);
  else
    vlmc_strbuf_printf(out, "(%.*s)vlmc_t->%.*s[0]", (int)(type_end - b), b, (int)attr_len, attr);
  return NULL;
}

static bool ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* The MSL text with MSL's literal rules in C++ spelling: an unsuffixed floating literal is a
 * float in MSL (a double in C++), so it gets an `f`; a half one (`h`) becomes `f16`. Comments
 * are copied as they are. Nothing else of the text changes. */
static void msl_literals(const char *msl, size_t len, vlmc_strbuf_t *out) {
  size_t i = 0;
  while (i < len) {
    if (msl[i] == '/' && i + 1 < len && (msl[i + 1] == '/' || msl[i + 1] == '*')) {
      const char *stop = msl[i + 1] == '/' ? "\n" : "*/";
      const char *end = strstr(msl + i + 2, stop);
      size_t n = end ? (size_t)(end - (msl + i)) + strlen(stop) : len - i;
      vlmc_strbuf_append(out, msl + i, n);
      i += n;
      continue;
    }
    bool starts = (isdigit((unsigned char)msl[i]) ||
                   (msl[i] == '.' && i + 1 < len && isdigit((unsigned char)msl[i + 1]))) &&
                  (i == 0 || !ident_char(msl[i - 1]));
    if (!starts) {
      vlmc_strbuf_append(out, msl + i, 1);
      ++i;
      continue;
    }
    size_t b = i;
    bool hex = msl[i] == '0' && i + 1 < len && (msl[i + 1] == 'x' || msl[i + 1] == 'X');
    bool floating = false;
    while (i < len && (ident_char(msl[i]) || msl[i] == '.' ||
                       ((msl[i] == '-' || msl[i] == '+') &&
                        (msl[i - 1] == 'e' || msl[i - 1] == 'E') && !hex))) {
      floating |= msl[i] == '.' || (!hex && (msl[i] == 'e' || msl[i] == 'E'));
      ++i;
    }
    char last = msl[i - 1];
    if (floating && (last == 'h' || last == 'H')) {
      vlmc_strbuf_append(out, msl + b, i - b - 1);
      vlmc_strbuf_puts(out, "f16");
    } else {
      vlmc_strbuf_append(out, msl + b, i - b);
      if (floating && last != 'f' && last != 'F') vlmc_strbuf_puts(out, "f");
    }
  }
}

/* The MSL text followed by `vlmc_metal_entry`, which calls the kernel with its parameters. */
static vlmc_status_t translation_unit(const char *msl, size_t len, const char *entry,
                                      vlmc_strbuf_t *out) {
  msl_literals(msl, len, out);
  char head[160];
  snprintf(head, sizeof head, "kernel void %s(", entry);
  const char *at = strstr(out->data, head);
  if (!at)
    return vlmc_status_make(VLMC_NOT_FOUND, "metal emulation: no `%s...)` in the source", head);
  const char *p = at + strlen(head), *params = p;
  int depth = 0;
  for (; *p && (depth > 0 || *p != ')'); ++p) depth += *p == '(' ? 1 : *p == ')' ? -1 : 0;
  if (!*p) return vlmc_status_make(VLMC_PARSE_ERROR, "metal emulation: kernel %s: unterminated "
                                   "parameter list", entry);
  const char *end = p;
  vlmc_strbuf_t call;
  vlmc_strbuf_init(&call);
  vlmc_strbuf_printf(&call, "%s(", entry);
  vlmc_status_t st = NULL;
  for (const char *b = params; !st && b < end;) {
    const char *e = b;
    depth = 0;
    while (e < end && (depth > 0 || *e != ',')) {
      depth += *e == '(' ? 1 : *e == ')' ? -1 : 0;
      ++e;
    }
    if (b != params) vlmc_strbuf_puts(&call, ", ");
    st = parameter(entry, b, e, &call);
    b = e < end ? e + 1 : e;
  }
  vlmc_strbuf_puts(&call, ");");
  if (!st)
    vlmc_strbuf_printf(out, "\n\n// the emulator's trampoline (tests/metal/emu.c)\n"
                       "extern \"C\" void vlmc_metal_entry(void *const *vlmc_buffers, "
                       "const vlmc_metal_thread_t *vlmc_t) {\n  vlmc_metal_self = vlmc_t;\n  %s\n}\n",
                       vlmc_strbuf_cstr(&call));
  vlmc_strbuf_deinit(&call);
  return st ? st : out->failed ? vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory") : NULL;
}

/* ---- compiling ---- */

static vlmc_status_t cache_dir(char *out, size_t size) {
  const char *env = getenv("VLMC_METAL_EMU_CACHE");
  if (env && *env) snprintf(out, size, "%s", env);
  else snprintf(out, size, "/tmp/vlmc-metal-emu-%u", (unsigned)getuid());
  return vlmc_file_mkdirs(out);
}

/* The stand-in's headers, whose text is part of every object's cache key. */
static const char *const kStandinHeaders[] = {"metal_stdlib", "simd/simd.h", "vlmc_metal_emu.h"};

static vlmc_status_t hash_standin(vlmc_xxh64_state_t *h) {
  for (size_t i = 0; i < sizeof kStandinHeaders / sizeof kStandinHeaders[0]; ++i) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", VLMC_METAL_STANDIN, kStandinHeaders[i]);
    char *text = NULL;
    size_t len = 0;
    VLMC_RETURN_IF_ERROR(vlmc_file_read_all(path, &text, &len));
    vlmc_xxh64_update(h, text, len);
    free(text);
  }
  return NULL;
}

static vlmc_status_t compile_unit(const char *entry, const vlmc_strbuf_t *unit, const char *dir,
                                  char *so, size_t so_size) {
  vlmc_xxh64_state_t h;
  vlmc_xxh64_init(&h, 0);
  vlmc_xxh64_update(&h, unit->data, unit->len);
  vlmc_xxh64_update(&h, VLMC_METAL_CXX CXX_FLAGS VLMC_METAL_STANDIN,
                    strlen(VLMC_METAL_CXX CXX_FLAGS VLMC_METAL_STANDIN));
  VLMC_RETURN_IF_ERROR(hash_standin(&h));
  char stem[8192];
  int n = snprintf(stem, sizeof stem, "%.4000s/%.128s-%016llx", dir, entry,
                   (unsigned long long)vlmc_xxh64_digest(&h));
  if (n < 0 || (size_t)n >= sizeof stem)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "metal emulation: cache path too long");
  snprintf(so, so_size, "%s.so", stem);
  struct stat sb;
  if (stat(so, &sb) == 0) return NULL; /* built before */
  char cpp[8300], log[8300], tmp[8300], cmd[40000];
  snprintf(cpp, sizeof cpp, "%s.cpp", stem);
  snprintf(log, sizeof log, "%s.log", stem);
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", stem, (long)getpid());
  VLMC_RETURN_IF_ERROR(vlmc_file_write_all(cpp, unit->data, unit->len));
  snprintf(cmd, sizeof cmd, "'%s' " CXX_FLAGS " -I'%s' '%s' -o '%s' >'%s' 2>&1",
           VLMC_METAL_CXX, VLMC_METAL_STANDIN, cpp, tmp, log);
  int rc = system(cmd);
  if (rc != 0) {
    char *text = NULL;
    size_t len = 0;
    vlmc_status_t rd = vlmc_file_read_all(log, &text, &len);
    vlmc_status_free(rd);
    vlmc_status_t st = vlmc_status_make(VLMC_INVALID_ARGUMENT, "metal emulation: kernel %s does "
                                        "not compile as C++ against the stand-in (%s):\n%.1500s",
                                        entry, cpp, text ? text : "(no log)");
    free(text);
    unlink(tmp);
    return st;
  }
  if (rename(tmp, so) != 0)
    return vlmc_status_make(VLMC_INTERNAL, "metal emulation: %s: %s", so, strerror(errno));
  return NULL;
}

vlmc_status_t vlmc_metal_kernel_build(const char *msl, size_t len, const char *entry,
                                      vlmc_metal_kernel_t **out) {
  *out = NULL;
  vlmc_strbuf_t unit;
  vlmc_strbuf_init(&unit);
  char dir[4096], so[8300];
  vlmc_status_t st = translation_unit(msl, len, entry, &unit);
  if (!st) st = cache_dir(dir, sizeof dir);
  if (!st) st = compile_unit(entry, &unit, dir, so, sizeof so);
  vlmc_strbuf_deinit(&unit);
  VLMC_RETURN_IF_ERROR(st);
  vlmc_metal_kernel_t *k = calloc(1, sizeof *k);
  if (!k) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  snprintf(k->name, sizeof k->name, "%s", entry);
  k->independent = !strstr(msl, "threadgroup_barrier") && !strstr(msl, "simd_") &&
                   !strstr(msl, "simdgroup_") && !strstr(msl, "threadgroup ");
  k->handle = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (k->handle) {
    void *sym = dlsym(k->handle, "vlmc_metal_entry");
    memcpy(&k->entry, &sym, sizeof sym);
  }
  if (!k->handle || !k->entry) {
    st = vlmc_status_make(VLMC_INTERNAL, "metal emulation: kernel %s: %s", entry, dlerror());
    vlmc_metal_kernel_destroy(k);
    return st;
  }
  *out = k;
  return NULL;
}

void vlmc_metal_kernel_destroy(vlmc_metal_kernel_t *k) {
  if (!k) return;
  if (k->handle) dlclose(k->handle);
  free(k);
}

/* ---- running ---- */

/* Every thread of a threadgroup is a fiber (ucontext) on the calling thread, resumed in turn
 * by the scheduler until it finishes or waits at a barrier: a barrier is where the threads
 * meet, as on the GPU, and the interleaving is the same on every run (a missing barrier
 * shows as a wrong result every time, not now and then). */

/* ---- contexts: a fiber's registers and stack ---- */

/* On x86-64 a switch saves the callee-saved registers and the FP control words on the old
 * stack and takes the new one (no system call: glibc's swapcontext makes one to save the
 * signal mask, which took 70% of a model run's time). Elsewhere, ucontext. */
#if defined(__x86_64__)
#define VLMC_EMU_OWN_SWITCH 1
typedef struct {
  void *sp;
} emu_context_t;
void vlmc_metal_emu_switch(void **save_sp, void *to_sp);
__asm__(".text\n"
        ".p2align 4\n"
        ".globl vlmc_metal_emu_switch\n"
        ".hidden vlmc_metal_emu_switch\n"
        ".type vlmc_metal_emu_switch,@function\n"
        "vlmc_metal_emu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size vlmc_metal_emu_switch, .-vlmc_metal_emu_switch\n");

static void context_switch(emu_context_t *from, emu_context_t *to) {
  vlmc_metal_emu_switch(&from->sp, to->sp);
}

/* A stack whose first switch "returns" into fn, as if fn had just been called (the return
 * address slot 16-byte aligned), with the caller's FP control words. */
static bool context_make(emu_context_t *c, void *stack, size_t size, void (*fn)(void)) {
  uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
  uint64_t *slot = (uint64_t *)top;
  *--slot = 0;                  /* fn's return address: fn never returns */
  *--slot = (uint64_t)(uintptr_t)fn;
  for (int i = 0; i < 6; ++i) *--slot = 0; /* rbp rbx r12 r13 r14 r15 */
  uint32_t mxcsr;
  uint16_t fpcw;
  __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
  __asm__ volatile("fnstcw %0" : "=m"(fpcw));
  *--slot = (uint64_t)mxcsr | (uint64_t)fpcw << 32;
  c->sp = slot;
  return true;
}
#else
typedef struct {
  ucontext_t uc;
} emu_context_t;

static void context_switch(emu_context_t *from, emu_context_t *to) { swapcontext(&from->uc, &to->uc); }

static bool context_make(emu_context_t *c, void *stack, size_t size, void (*fn)(void)) {
  if (getcontext(&c->uc) != 0) return false;
  c->uc.uc_stack.ss_sp = stack;
  c->uc.uc_stack.ss_size = size;
  c->uc.uc_link = NULL;
  makecontext(&c->uc, fn, 0);
  return true;
}
#endif

typedef struct {
  uint32_t count, arrived, generation;
} emu_barrier_t;

typedef struct grid_s grid_t;

typedef struct {
  grid_t *g;
  uint32_t index;
  emu_context_t context;
  void *stack;
  bool done;
  uint32_t simd_round;
  vlmc_metal_thread_t t;
} fiber_t;

struct grid_s {
  const vlmc_metal_kernel_t *k;
  void *const *buffers;
  uint32_t threads[3], groups[3], count;
  emu_context_t scheduler;
  fiber_t *running;
  uint64_t progress; /* barriers passed and threads finished: a pass without any is a hang */
  emu_barrier_t group_barrier; /* the kernel's threadgroup_barrier */
  emu_barrier_t end_barrier;   /* between threadgroups: a barrier of its own, so that a thread
                                  that skips a kernel barrier cannot pass for one at the end */
  emu_barrier_t simd_barrier[MAX_SIMDS];
  unsigned char slots[MAX_SIMDS][2 * 8 * SIMD_WIDTH];
  unsigned char matrix_slots[MAX_SIMDS][2 * 2 * 64 * sizeof(float)];
  fiber_t *fibers;
};

enum { FIBER_STACK = 256 << 10 };

/* ASan must be told when the stack changes under it (its fiber interface). */
#if defined(__SANITIZE_ADDRESS__)
#define VLMC_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VLMC_EMU_ASAN 1
#endif
#endif
#ifdef VLMC_EMU_ASAN
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old,
                                     size_t *size_old);
#endif

static _Thread_local grid_t *current_grid;
#ifdef VLMC_EMU_ASAN
static _Thread_local const void *scheduler_stack;
static _Thread_local size_t scheduler_stack_size;
#endif

/* From the scheduler into fiber f, until it yields or finishes. */
static void resume(grid_t *g, fiber_t *f) {
  g->running = f;
#ifdef VLMC_EMU_ASAN
  void *fake = NULL;
  __sanitizer_start_switch_fiber(&fake, f->stack, FIBER_STACK);
  context_switch(&g->scheduler, &f->context);
  __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#else
  context_switch(&g->scheduler, &f->context);
#endif
  g->running = NULL;
}

/* From the running fiber back to the scheduler (finishing: it never comes back). */
static void yield(grid_t *g, fiber_t *f, bool finishing) {
#ifdef VLMC_EMU_ASAN
  void *fake = NULL;
  __sanitizer_start_switch_fiber(finishing ? NULL : &fake, scheduler_stack, scheduler_stack_size);
  context_switch(&f->context, &g->scheduler);
  __sanitizer_finish_switch_fiber(fake, &scheduler_stack, &scheduler_stack_size);
#else
  (void)finishing;
  context_switch(&f->context, &g->scheduler);
#endif
}

/* vlmc_metal_thread_t.wait: the last thread to arrive opens the barrier and goes on; the
 * others yield until it is open. */
static void barrier_wait(void *barrier) {
  emu_barrier_t *b = barrier;
  grid_t *g = current_grid;
  fiber_t *f = g->running;
  uint32_t generation = b->generation;
  if (++b->arrived == b->count) {
    b->arrived = 0;
    b->generation++;
    g->progress++;
    return;
  }
  while (b->generation == generation) yield(g, f, false);
}

static void set3(uint32_t *dst, uint32_t x, uint32_t y, uint32_t z) {
  dst[0] = x;
  dst[1] = y;
  dst[2] = z;
}

/* One thread's builtins that stay the same in every threadgroup. */
static void thread_builtins(const grid_t *g, uint32_t i, vlmc_metal_thread_t *t) {
  uint32_t tx = g->threads[0], ty = g->threads[1], simd = i / SIMD_WIDTH;
  memset(t, 0, sizeof *t);
  set3(t->threadgroups_per_grid, g->groups[0], g->groups[1], g->groups[2]);
  set3(t->thread_position_in_threadgroup, i % tx, (i / tx) % ty, i / (tx * ty));
  set3(t->threads_per_threadgroup, g->threads[0], g->threads[1], g->threads[2]);
  set3(t->thread_index_in_threadgroup, i, 0, 0);
  set3(t->simdgroup_index_in_threadgroup, simd, 0, 0);
  set3(t->simdgroups_per_threadgroup, (g->count + SIMD_WIDTH - 1) / SIMD_WIDTH, 0, 0);
  set3(t->thread_index_in_simdgroup, i % SIMD_WIDTH, 0, 0);
  set3(t->threads_per_simdgroup, SIMD_WIDTH, 0, 0);
  t->simd_active = g->count - simd * SIMD_WIDTH < SIMD_WIDTH ? g->count - simd * SIMD_WIDTH
                                                             : SIMD_WIDTH;
}

/* A fiber's body: its thread in every threadgroup in turn; all of a group's threads finish
 * before any starts the next (its threadgroup memory is the kernel's statics). */
static void fiber_main(void) {
  grid_t *g = current_grid;
  fiber_t *f = g->running;
#ifdef VLMC_EMU_ASAN
  __sanitizer_finish_switch_fiber(NULL, &scheduler_stack, &scheduler_stack_size);
#endif
  vlmc_metal_thread_t *t = &f->t;
  const uint32_t *local = t->thread_position_in_threadgroup;
  for (uint32_t gz = 0; gz < g->groups[2]; ++gz)
    for (uint32_t gy = 0; gy < g->groups[1]; ++gy)
      for (uint32_t gx = 0; gx < g->groups[0]; ++gx) {
        set3(t->threadgroup_position_in_grid, gx, gy, gz);
        set3(t->thread_position_in_grid, gx * g->threads[0] + local[0],
             gy * g->threads[1] + local[1], gz * g->threads[2] + local[2]);
        g->k->entry(g->buffers, t);
        barrier_wait(&g->end_barrier);
      }
  f->done = true;
  g->progress++;
  yield(g, f, true);
}

/* Resumes every unfinished fiber in turn until all finish; a pass in which none passes a
 * barrier or finishes is a hang on the GPU (a barrier some threads never reach). */
static vlmc_status_t schedule(grid_t *g) {
  for (uint32_t left = g->count; left;) {
    uint64_t before = g->progress;
    left = 0;
    for (uint32_t i = 0; i < g->count; ++i) {
      fiber_t *f = &g->fibers[i];
      if (f->done) continue;
      resume(g, f);
      left += !f->done;
    }
    if (left && g->progress == before)
      return vlmc_status_make(VLMC_INTERNAL, "metal emulation: kernel %s hangs: %u of %u "
                              "threads wait at a barrier the others never reach (the GPU would "
                              "hang too)", g->k->name, left, g->count);
  }
  return NULL;
}

static void grid_free(grid_t *g) {
  if (!g) return;
  for (uint32_t i = 0; g->fibers && i < g->count; ++i)
    if (g->fibers[i].stack) munmap(g->fibers[i].stack, FIBER_STACK);
  free(g->fibers);
  free(g);
}

/* The grid of a kernel with barriers: its fibers made, ready to run. */
static vlmc_status_t grid_make(const vlmc_metal_kernel_t *k, void *const *buffers,
                               const uint32_t threads[3], const uint32_t groups[3], uint32_t count,
                               grid_t **out) {
  grid_t *g = calloc(1, sizeof *g);
  if (g) g->fibers = calloc(count, sizeof *g->fibers);
  if (!g || !g->fibers) {
    free(g);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  g->k = k;
  g->buffers = buffers;
  memcpy(g->threads, threads, sizeof g->threads);
  memcpy(g->groups, groups, sizeof g->groups);
  g->count = count;
  g->group_barrier.count = count;
  g->end_barrier.count = count;
  for (uint32_t s = 0; s * SIMD_WIDTH < count; ++s)
    g->simd_barrier[s].count = count - s * SIMD_WIDTH < SIMD_WIDTH ? count - s * SIMD_WIDTH
                                                                   : SIMD_WIDTH;
  for (uint32_t i = 0; i < count; ++i) {
    fiber_t *f = &g->fibers[i];
    f->g = g;
    f->index = i;
    thread_builtins(g, i, &f->t);
    f->t.wait = barrier_wait;
    f->t.group_barrier = &g->group_barrier;
    f->t.simd_barrier = &g->simd_barrier[i / SIMD_WIDTH];
    f->t.simd_slots = g->slots[i / SIMD_WIDTH];
    f->t.simd_round = &f->simd_round;
    f->t.simd_matrix = g->matrix_slots[i / SIMD_WIDTH];
    /* lazily backed: a kernel's thread touches a few pages of it */
    f->stack = mmap(NULL, FIBER_STACK, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (f->stack == MAP_FAILED) f->stack = NULL;
    if (!f->stack || !context_make(&f->context, f->stack, FIBER_STACK, fiber_main)) {
      grid_free(g);
      return vlmc_status_make(VLMC_OUT_OF_MEMORY, "metal emulation: no stack for thread %u "
                              "of %u", i, count);
    }
  }
  *out = g;
  return NULL;
}

/* An independent kernel's threads, one after another, every one with its builtins. */
static void run_in_order(const vlmc_metal_kernel_t *k, void *const *buffers,
                         const uint32_t threads[3], const uint32_t groups[3]) {
  uint32_t tx = threads[0], ty = threads[1], tz = threads[2], count = tx * ty * tz;
  vlmc_metal_thread_t t;
  memset(&t, 0, sizeof t);
  set3(t.threadgroups_per_grid, groups[0], groups[1], groups[2]);
  set3(t.threads_per_threadgroup, tx, ty, tz);
  set3(t.threads_per_simdgroup, SIMD_WIDTH, 0, 0);
  set3(t.simdgroups_per_threadgroup, (count + SIMD_WIDTH - 1) / SIMD_WIDTH, 0, 0);
  for (uint32_t gz = 0; gz < groups[2]; ++gz)
    for (uint32_t gy = 0; gy < groups[1]; ++gy)
      for (uint32_t gx = 0; gx < groups[0]; ++gx)
        for (uint32_t i = 0; i < count; ++i) {
          uint32_t lx = i % tx, ly = (i / tx) % ty, lz = i / (tx * ty);
          set3(t.threadgroup_position_in_grid, gx, gy, gz);
          set3(t.thread_position_in_threadgroup, lx, ly, lz);
          set3(t.thread_position_in_grid, gx * tx + lx, gy * ty + ly, gz * tz + lz);
          set3(t.thread_index_in_threadgroup, i, 0, 0);
          set3(t.simdgroup_index_in_threadgroup, i / SIMD_WIDTH, 0, 0);
          set3(t.thread_index_in_simdgroup, i % SIMD_WIDTH, 0, 0);
          k->entry(buffers, &t);
        }
}

vlmc_status_t vlmc_metal_kernel_run(const vlmc_metal_kernel_t *k, void *const *buffers,
                                    const uint32_t threads[3], const uint32_t groups[3]) {
  uint64_t count = (uint64_t)threads[0] * threads[1] * threads[2];
  if (count == 0 || count > MAX_THREADS)
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "metal emulation: kernel %s: %llu threads a "
                            "threadgroup (1 to %d)", k->name, (unsigned long long)count, MAX_THREADS);
  if ((uint64_t)groups[0] * groups[1] * groups[2] == 0) return NULL;
  if (k->independent) {
    run_in_order(k, buffers, threads, groups);
    return NULL;
  }
  grid_t *g = NULL;
  VLMC_RETURN_IF_ERROR(grid_make(k, buffers, threads, groups, (uint32_t)count, &g));
  grid_t *outer = current_grid; /* NULL: runs do not nest, but stay correct if they did */
  current_grid = g;
  vlmc_status_t st = schedule(g);
  current_grid = outer;
  grid_free(g);
  return st;
}
