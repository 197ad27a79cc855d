/* Runtime backends behind one interface (runtime/backend.h) and the program walker
 * (runtime/program.h): the registry's names and default pick; the null skeleton refusing a
 * region by name; the walker refusing a compute op outside every region (no interpreter
 * fallback); bytes moved between host and a backend with memory of its own, counted per call;
 * none on host-memory backends. */
#include <stdlib.h>
#include <string.h>

#include "runtime/backend.h"
#include "runtime/program.h"
#include "tests/unit/test.h"

static vlmc_module_t *parse(const char *text) {
  vlmc_module_t *m = NULL;
  vlmc_parse_options_t po = {.filename = "program", .first_line = 1};
  EXPECT_OK(vlmc_module_parse(text, strlen(text), &po, &m));
  if (m) EXPECT_OK(vlmc_module_verify(m));
  return m;
}

/* Sections by name: `present` lists the ones this fake artifact has. */
static const void *fake_section(void *ctx, const char *name, size_t *out_size) {
  static const char bytes[] = "x";
  for (const char *const *p = ctx; *p; ++p)
    if (!strcmp(*p, name)) {
      *out_size = 1;
      return bytes;
    }
  *out_size = 0;
  return NULL;
}

static void test_registry(void) {
  EXPECT_TRUE(vlmc_backend_find("cpu") && vlmc_backend_find("ref") && vlmc_backend_find("null"));
  EXPECT_TRUE(vlmc_backend_find("vulkan2") == NULL);
  char names[128];
  vlmc_backend_names(names, sizeof names);
#ifdef VLMC_HAVE_VULKAN
  EXPECT_STREQ(names, "cpu, vulkan, ref, null"); /* vulkan: tests/unit/test_vulkan_backend.c */
#else
  EXPECT_STREQ(names, "cpu, ref, null");
#endif
  const char *with_kernels[] = {"program", "kernels.cpu", "kernels.cpu.json", NULL};
  const char *program_only[] = {"program", NULL};
  const char *nothing[] = {NULL};
  const vlmc_backend_iface_t *pick = vlmc_backend_pick_default(fake_section, with_kernels);
  EXPECT_STREQ(pick ? pick->name : "none", "cpu");
  pick = vlmc_backend_pick_default(fake_section, program_only);
  EXPECT_STREQ(pick ? pick->name : "none", "ref"); /* null is never picked unasked */
  EXPECT_TRUE(vlmc_backend_pick_default(fake_section, nothing) == NULL);
}

typedef struct {
  vlmc_backend_t *backend;
  vlmc_program_t *program;
} session_t;

static void open_on(const char *name, const vlmc_module_t *m, session_t *s) {
  memset(s, 0, sizeof *s);
  const char *sections[] = {"program", NULL};
  vlmc_backend_open_params_t bp = {.source = "test", .module = m, .section = fake_section,
                                   .section_ctx = sections, .threads = 1};
  EXPECT_OK(vlmc_backend_find(name)->open(&bp, &s->backend));
  if (s->backend) EXPECT_OK(vlmc_program_create(m, s->backend, NULL, NULL, &s->program));
}

static void close_session(session_t *s) {
  vlmc_program_destroy(s->program);
  if (s->backend) s->backend->iface->destroy(s->backend);
}

/* Runs @k(x f32[4]) on the backend and returns the status. */
static vlmc_status_t run_f32(session_t *s) {
  float x[4] = {1, 2, 3, 4};
  vlmc_tensor_t host = vlmc_tensor_view(VLMC_DTYPE_F32, 1, (const int64_t[]){4}, x);
  vlmc_rt_value_t arg, res;
  EXPECT_OK(vlmc_program_import(s->program, &host, &arg));
  vlmc_status_t st = vlmc_program_run(s->program, "k", &arg, 1, &res, 1);
  if (!st) vlmc_program_release(s->program, &res);
  return st;
}

/* A compute op outside every region is an error naming the op, never interpreted. */
static void test_no_interpreter_fallback(void) {
  vlmc_module_t *m = parse("func @k(%x: f32[4]) -> f32[4] {\n"
                           "  %a = exp %x : f32[4]\n"
                           "  return %a\n"
                           "}\n");
  session_t s;
  open_on("null", m, &s);
  vlmc_status_t st = s.program ? run_f32(&s) : NULL;
  EXPECT_TRUE(st && strstr(vlmc_status_message(st), "no kernel") &&
              strstr(vlmc_status_message(st), "'exp'"));
  vlmc_status_free(st);
  close_session(&s);
  vlmc_module_destroy(m);
}

/* The null skeleton refuses every region, by function, number and anchor. */
static void test_null_refuses_regions(void) {
  vlmc_module_t *m = parse("func @k(%x: f32[4]) -> f32[4] {\n"
                           "  %a = exp %x : f32[4] dispatch 1\n"
                           "  return %a\n"
                           "}\n");
  session_t s;
  open_on("null", m, &s);
  vlmc_status_t st = s.program ? run_f32(&s) : NULL;
  EXPECT_TRUE(st && strstr(vlmc_status_message(st), "backend null: no kernel for @k dispatch 1 "
                                                    "(rooted at exp)"));
  vlmc_status_free(st);
  close_session(&s);
  vlmc_module_destroy(m);
}

static const char *kHostSteps = "func @k(%ids: i64[S]) -> i64[M] {\n"
                                "  %at = token_positions %ids {token=7} : i64[M]\n"
                                "  return %at\n"
                                "}\n";

/* Host steps only: runs on any backend; returns the positions and the call's transfers. */
static void run_host_steps(const char *backend, int64_t *out_positions, size_t *out_count,
                           vlmc_program_transfers_t *out_transfers) {
  vlmc_module_t *m = parse(kHostSteps);
  session_t s;
  open_on(backend, m, &s);
  int64_t ids[6] = {1, 7, 7, 3, 7, 9};
  vlmc_tensor_t host = vlmc_tensor_view(VLMC_DTYPE_I64, 1, (const int64_t[]){6}, ids);
  vlmc_rt_value_t arg, res;
  memset(out_transfers, 0, sizeof *out_transfers);
  *out_count = 0;
  if (s.program) {
    EXPECT_OK(vlmc_program_import(s.program, &host, &arg));
    EXPECT_OK(vlmc_program_run(s.program, "k", &arg, 1, &res, 1));
    vlmc_tensor_t positions;
    EXPECT_OK(vlmc_program_read(s.program, &res, &positions));
    *out_count = (size_t)vlmc_tensor_count(&positions);
    memcpy(out_positions, positions.data, *out_count * sizeof *out_positions);
    vlmc_tensor_release(&positions);
    vlmc_program_release(s.program, &res);
    size_t n = 0;
    const vlmc_program_transfers_t *t = vlmc_program_transfers(s.program, &n);
    EXPECT_EQ_INT(n, 1);
    *out_transfers = t[0];
  }
  close_session(&s);
  vlmc_module_destroy(m);
}

/* On a backend with memory of its own every byte a host step or the caller needs is moved,
 * and counted; on host-memory backends nothing is. Same answers everywhere. */
static void test_transfers(void) {
  int64_t got[6];
  size_t count;
  vlmc_program_transfers_t t;
  run_host_steps("null", got, &count, &t);
  EXPECT_EQ_INT(count, 3);
  EXPECT_TRUE(count == 3 && got[0] == 1 && got[1] == 2 && got[2] == 4);
  EXPECT_EQ_INT(t.calls, 1);
  /* ids up (48 B), read back by the host step (48 B); positions up (24 B), read (24 B). */
  EXPECT_EQ_INT(t.bytes_to_device, 48 + 24);
  EXPECT_EQ_INT(t.bytes_to_host, 48 + 24);
  run_host_steps("ref", got, &count, &t);
  EXPECT_TRUE(count == 3 && got[0] == 1 && got[1] == 2 && got[2] == 4);
  EXPECT_EQ_INT(t.bytes_to_device, 0);
  EXPECT_EQ_INT(t.bytes_to_host, 0);
}

/* Two functions called in turn: each keeps its own bytes (the arguments imported before a
 * call count for it; its results read after it count for it, not for the next call). */
static void test_transfers_per_function(void) {
  vlmc_module_t *m = parse("func @a(%ids: i64[S]) -> i64[M] {\n"
                           "  %at = token_positions %ids {token=7} : i64[M]\n"
                           "  return %at\n"
                           "}\n"
                           "func @b(%ids: i64[S]) -> i64[M] {\n"
                           "  %at = token_positions %ids {token=7} : i64[M]\n"
                           "  return %at\n"
                           "}\n");
  session_t s;
  open_on("null", m, &s);
  int64_t ids[6] = {1, 7, 7, 3, 7, 9};
  vlmc_tensor_t host = vlmc_tensor_view(VLMC_DTYPE_I64, 1, (const int64_t[]){6}, ids);
  for (int call = 0; s.program && call < 3; ++call) {
    vlmc_rt_value_t arg, res;
    vlmc_tensor_t positions;
    EXPECT_OK(vlmc_program_import(s.program, &host, &arg));
    EXPECT_OK(vlmc_program_run(s.program, call == 1 ? "b" : "a", &arg, 1, &res, 1));
    EXPECT_OK(vlmc_program_read(s.program, &res, &positions));
    vlmc_tensor_release(&positions);
    vlmc_program_release(s.program, &res);
  }
  size_t n = 0;
  const vlmc_program_transfers_t *t = s.program ? vlmc_program_transfers(s.program, &n) : NULL;
  EXPECT_EQ_INT(n, 2);
  if (n == 2) {
    EXPECT_EQ_INT(t[0].calls, 2);
    EXPECT_EQ_INT(t[0].bytes_to_device, 2 * (48 + 24));
    EXPECT_EQ_INT(t[0].bytes_to_host, 2 * (48 + 24));
    EXPECT_EQ_INT(t[1].calls, 1);
    EXPECT_EQ_INT(t[1].bytes_to_device, 48 + 24);
    EXPECT_EQ_INT(t[1].bytes_to_host, 48 + 24);
  }
  close_session(&s);
  vlmc_module_destroy(m);
}

static vlmc_status_t ids_param(void *ctx, const char *name, const vlmc_type_t *type,
                               vlmc_tensor_t *out) {
  static const int64_t kIds[6] = {1, 7, 7, 3, 7, 9};
  *out = vlmc_tensor_view(VLMC_DTYPE_I64, 1, (const int64_t[]){6}, kIds);
  ++*(int *)ctx;
  return NULL;
}

/* vlmc_program_preload_params (what the session does for VLMC_BACKEND_PRELOADS_PARAMS): every
 * parameter is uploaded once, before the first call, with progress; its bytes are the
 * open's, not the call's, and the call does not load it again. */
static void test_preload_params(void) {
  vlmc_module_t *m = parse("param @w : i64[6]\n"
                           "func @k() -> i64[M] {\n"
                           "  %w = param @w : i64[6]\n"
                           "  %at = token_positions %w {token=7} : i64[M]\n"
                           "  return %at\n"
                           "}\n");
  const char *sections[] = {"program", NULL};
  vlmc_backend_open_params_t bp = {.source = "test", .module = m, .section = fake_section,
                                   .section_ctx = sections};
  vlmc_backend_t *b = NULL;
  vlmc_program_t *p = NULL;
  int loads = 0;
  EXPECT_OK(vlmc_backend_find("null")->open(&bp, &b));
  if (b) EXPECT_OK(vlmc_program_create(m, b, ids_param, &loads, &p));
  if (p) {
    EXPECT_OK(vlmc_program_preload_params(p, NULL, NULL));
    vlmc_program_memory_t mem;
    vlmc_program_memory(p, &mem);
    EXPECT_EQ_INT(mem.params_uploaded, 48);
    vlmc_rt_value_t res;
    EXPECT_OK(vlmc_program_run(p, "k", NULL, 0, &res, 1));
    vlmc_program_release(p, &res);
    size_t n = 0;
    const vlmc_program_transfers_t *t = vlmc_program_transfers(p, &n);
    EXPECT_EQ_INT(t[0].bytes_to_device, 24); /* the positions; not the parameter again */
    EXPECT_EQ_INT(t[0].bytes_to_host, 48);   /* the host step reads the parameter */
    EXPECT_EQ_INT(loads, 1);
  }
  vlmc_program_destroy(p);
  if (b) b->iface->destroy(b);
  vlmc_module_destroy(m);
}

int main(void) {
  RUN_TEST(test_registry);
  RUN_TEST(test_no_interpreter_fallback);
  RUN_TEST(test_null_refuses_regions);
  RUN_TEST(test_transfers);
  RUN_TEST(test_transfers_per_function);
  RUN_TEST(test_preload_params);
  return TEST_SUMMARY();
}
