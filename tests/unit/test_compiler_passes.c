/* The pass layer: registry, pipeline text, and the pass manager's debugging aids (printing,
 * dump directory, verifier after each pass, the input of a failing pass written out). Test
 * passes defined here break things on purpose. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/ir.h"
#include "passes/pass.h"
#include "support/file.h"
#include "tests/unit/test.h"

static const char *const kInput =
    "func @f(%x: f32[4]) -> f32[4] {\n"
    "  %same = cast %x {dtype=f32} : f32[4]\n"
    "  %y = exp %same : f32[4]\n"
    "  %dead = neg %y : f32[4]\n"
    "  return %y\n"
    "}\n";

static vlmc_module_t *parse_input(void) {
  vlmc_module_t *m = NULL;
  EXPECT_OK(vlmc_module_parse(kInput, strlen(kInput), NULL, &m));
  return m;
}

/* ---- test passes ---- */

static const vlmc_pass_option_t probe_options[] = {
    {"count", VLMC_PASS_OPTION_INT, "3", "how many remarks"},
    {"loud", VLMC_PASS_OPTION_BOOL, "false", "say more"},
    {"tag", VLMC_PASS_OPTION_STRING, "none", "a label"},
};
static const char *const probe_statistics[] = {"runs"};

/* Reports its options as remarks; changes nothing. */
static vlmc_status_t probe_run(vlmc_pass_context_t *ctx, vlmc_module_t *module) {
  for (int64_t i = 0; i < vlmc_pass_option_int(ctx, "count"); ++i)
    vlmc_pass_remark(ctx, "remark %lld loud=%d tag=%s", (long long)i,
                     vlmc_pass_option_bool(ctx, "loud"), vlmc_pass_option_string(ctx, "tag"));
  vlmc_pass_stat_add(ctx, 0, 1);
  return NULL;
}

static const vlmc_pass_t probe_pass = {"probe", "test: remarks", probe_options, 3,
                                       probe_statistics, 1, probe_run};

/* Leaves IR that does not verify: the first op's result type is changed. */
static vlmc_status_t break_types_run(vlmc_pass_context_t *ctx, vlmc_module_t *module) {
  vlmc_op_t *op = module->funcs[0]->body.first;
  op->results[0].type.dims[0] = vlmc_dim_static(5);
  return NULL;
}

static const vlmc_pass_t break_types_pass = {"break-types", "test: invalid IR", NULL, 0, NULL, 0,
                                             break_types_run};

static vlmc_status_t fail_run(vlmc_pass_context_t *ctx, vlmc_module_t *module) {
  return vlmc_status_make(VLMC_INTERNAL, "the fail pass always fails");
}

static const vlmc_pass_t fail_pass = {"fail", "test: fails", NULL, 0, NULL, 0, fail_run};

static void registry_init(vlmc_pass_registry_t *r) {
  vlmc_pass_registry_init(r);
  EXPECT_OK(vlmc_pass_registry_add_builtin(r));
  EXPECT_OK(vlmc_pass_registry_add(r, &probe_pass));
  EXPECT_OK(vlmc_pass_registry_add(r, &break_types_pass));
  EXPECT_OK(vlmc_pass_registry_add(r, &fail_pass));
}

/* ---- what the manager prints and logs ---- */

typedef struct {
  vlmc_strbuf_t printed;
  vlmc_strbuf_t logged;
} sink_t;

static void sink_print(void *user, const char *header, const char *ir) {
  sink_t *s = user;
  vlmc_strbuf_printf(&s->printed, "%s\n%s", header, ir);
}

static void sink_log(void *user, const char *pass, const char *message) {
  sink_t *s = user;
  vlmc_strbuf_printf(&s->logged, "%s: %s\n", pass, message);
}

static vlmc_pass_manager_options_t sink_options(sink_t *s) {
  vlmc_pass_manager_options_t o;
  memset(&o, 0, sizeof o);
  vlmc_strbuf_init(&s->printed);
  vlmc_strbuf_init(&s->logged);
  o.print = sink_print;
  o.log = sink_log;
  o.user = s;
  return o;
}

static void sink_deinit(sink_t *s) {
  vlmc_strbuf_deinit(&s->printed);
  vlmc_strbuf_deinit(&s->logged);
}

/* Runs `pipeline` on kInput. */
static vlmc_status_t run(const vlmc_pass_registry_t *r, const char *pipeline,
                         const vlmc_pass_manager_options_t *options, char **out_text) {
  vlmc_pass_pipeline_t *p;
  VLMC_RETURN_IF_ERROR(vlmc_pass_pipeline_parse(r, pipeline, &p));
  vlmc_module_t *m = parse_input();
  vlmc_status_t st = vlmc_pass_manager_run(p, options, m);
  if (out_text) *out_text = st ? NULL : vlmc_module_to_string(m);
  vlmc_module_destroy(m);
  vlmc_pass_pipeline_destroy(p);
  return st;
}

static char *make_temp_dir(void) {
  char *dir = strdup("/tmp/vlmc-test-passes-XXXXXX");
  if (!mkdtemp(dir)) {
    free(dir);
    return NULL;
  }
  return dir;
}

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  if (d) closedir(d);
  rmdir(dir);
}

static char *read_file(const char *dir, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  char *text = NULL;
  size_t len;
  vlmc_status_t st = vlmc_file_read_all(path, &text, &len);
  if (st) {
    TEST_FAIL_("%s", vlmc_status_message(st));
    vlmc_status_free(st);
  }
  return text;
}

/* ---- tests ---- */

static void test_registry(void) {
  vlmc_pass_registry_t r;
  registry_init(&r);
  EXPECT_TRUE(vlmc_pass_registry_find(&r, "cse") == &vlmc_pass_cse);
  EXPECT_TRUE(vlmc_pass_registry_find(&r, "nope") == NULL);
  EXPECT_ERROR(vlmc_pass_registry_add(&r, &vlmc_pass_dce), "pass 'dce' is registered twice");
  vlmc_strbuf_t list;
  vlmc_strbuf_init(&list);
  vlmc_pass_registry_list(&r, &list);
  /* The general passes first, the ones added here last (the domain passes in between). */
  const char *text = vlmc_strbuf_cstr(&list);
  EXPECT_TRUE(strncmp(text, "canonicalize, cse, dce, ", 24) == 0);
  const char *tail = ", probe, break-types, fail";
  EXPECT_TRUE(strlen(text) > strlen(tail) &&
              strcmp(text + strlen(text) - strlen(tail), tail) == 0);
  vlmc_strbuf_deinit(&list);
  /* Two registries are independent: no global state. */
  vlmc_pass_registry_t other;
  vlmc_pass_registry_init(&other);
  EXPECT_TRUE(vlmc_pass_registry_find(&other, "cse") == NULL);
  /* Every builtin pass describes itself. */
  for (uint32_t i = 0; i + 3 < r.count; ++i) {
    const vlmc_pass_t *p = r.passes[i];
    EXPECT_TRUE(p->name && p->summary && p->summary[0] && p->run);
    EXPECT_TRUE(p->num_statistics > 0);
  }
}

static void test_pipeline_text(void) {
  vlmc_pass_registry_t r;
  registry_init(&r);
  vlmc_pass_pipeline_t *p;
  EXPECT_OK(vlmc_pass_pipeline_parse(&r, "canonicalize, dce ,cse", &p));
  EXPECT_EQ_INT(vlmc_pass_pipeline_size(p), 3);
  vlmc_pass_pipeline_destroy(p);
  EXPECT_OK(vlmc_pass_pipeline_parse(&r, "  ", &p));
  EXPECT_EQ_INT(vlmc_pass_pipeline_size(p), 0);
  vlmc_pass_pipeline_destroy(p);
  EXPECT_OK(vlmc_pass_pipeline_parse(&r, "probe{count=1, loud=true,tag=x},cse", &p));
  EXPECT_EQ_INT(vlmc_pass_pipeline_size(p), 2);
  vlmc_pass_pipeline_destroy(p);
  EXPECT_ERROR(vlmc_pass_pipeline_parse(&r, "cse,,dce", &p), "empty pass name");
  EXPECT_ERROR(vlmc_pass_pipeline_parse(&r, "cse,", &p), "empty pass name");
  EXPECT_ERROR(vlmc_pass_pipeline_parse(&r, "cse,frob", &p),
               "--passes: unknown pass 'frob'; registered passes: canonicalize, cse, dce");
  EXPECT_ERROR(vlmc_pass_pipeline_parse(&r, "probe{count=x}", &p),
               "option 'count' expects an integer, got 'x'");
  EXPECT_ERROR(vlmc_pass_pipeline_parse(&r, "probe{size=1}", &p),
               "pass 'probe' has no option 'size' (options: count, loud, tag)");
  EXPECT_ERROR(vlmc_pass_pipeline_parse(&r, "probe{count}", &p), "expected option=value");
  EXPECT_ERROR(vlmc_pass_pipeline_parse(&r, "probe{count=1", &p), "expected '}'");
  EXPECT_ERROR(vlmc_pass_pipeline_parse(&r, "cse{x=1}", &p), "(options: none)");
}

static void test_options_remarks_statistics(void) {
  vlmc_pass_registry_t r;
  registry_init(&r);
  sink_t s;
  vlmc_pass_manager_options_t o = sink_options(&s);
  EXPECT_OK(run(&r, "probe{count=2,loud=true,tag=hello}", &o, NULL));
  EXPECT_STREQ(vlmc_strbuf_cstr(&s.logged),
               "probe: remark 0 loud=1 tag=hello\nprobe: remark 1 loud=1 tag=hello\n");
  sink_deinit(&s);
  o = sink_options(&s);
  EXPECT_OK(run(&r, "probe", &o, NULL)); /* defaults: 3 remarks, quiet, tag none */
  EXPECT_TRUE(strstr(vlmc_strbuf_cstr(&s.logged), "probe: remark 2 loud=0 tag=none\n") != NULL);
  sink_deinit(&s);

  vlmc_pass_pipeline_t *p;
  EXPECT_OK(vlmc_pass_pipeline_parse(&r, "canonicalize,dce,probe,probe", &p));
  vlmc_module_t *m = parse_input();
  EXPECT_OK(vlmc_pass_manager_run(p, NULL, m)); /* no options at all is fine */
  vlmc_strbuf_t stats;
  vlmc_strbuf_init(&stats);
  vlmc_pass_pipeline_print_statistics(p, &stats);
  EXPECT_STREQ(vlmc_strbuf_cstr(&stats),
               "canonicalize: ops-folded = 1\ncanonicalize: iterations = 2\n"
               "dce: ops-erased = 1\nprobe: runs = 1\nprobe: runs = 1\n");
  vlmc_strbuf_deinit(&stats);
  vlmc_module_destroy(m);
  vlmc_pass_pipeline_destroy(p);
}

static void test_printing(void) {
  vlmc_pass_registry_t r;
  registry_init(&r);
  sink_t s;
  vlmc_pass_manager_options_t o = sink_options(&s);
  o.print_ir_before = "dce";
  o.print_ir_after = "cse,canonicalize";
  EXPECT_OK(run(&r, "canonicalize,dce,cse", &o, NULL));
  const char *out = vlmc_strbuf_cstr(&s.printed);
  const char *after_canon = strstr(out, "// -----// IR Dump After canonicalize //----- //\n");
  const char *before_dce = strstr(out, "// -----// IR Dump Before dce //----- //\n");
  const char *after_cse = strstr(out, "// -----// IR Dump After cse //----- //\n");
  EXPECT_TRUE(after_canon && before_dce && after_cse);
  EXPECT_TRUE(after_canon < before_dce && before_dce < after_cse);
  EXPECT_TRUE(strstr(out, "After dce") == NULL);
  /* The stage after canonicalize still has the dead neg; the one after cse does not. */
  EXPECT_TRUE(after_cse && strstr(after_canon, "%dead") < after_cse);
  EXPECT_TRUE(after_cse && strstr(after_cse, "%dead") == NULL);
  sink_deinit(&s);

  /* after-change alone: only the passes that changed the text. */
  o = sink_options(&s);
  o.print_ir_after_change = true;
  EXPECT_OK(run(&r, "cse,canonicalize,probe,dce", &o, NULL));
  out = vlmc_strbuf_cstr(&s.printed);
  EXPECT_TRUE(strstr(out, "After canonicalize") && strstr(out, "After dce"));
  EXPECT_TRUE(!strstr(out, "After cse") && !strstr(out, "After probe"));
  sink_deinit(&s);

  o = sink_options(&s);
  o.print_ir_after = "bogus";
  EXPECT_ERROR(run(&r, "cse", &o, NULL), "--print-ir-after: unknown pass 'bogus'");
  sink_deinit(&s);
}

static void test_dump_dir(void) {
  vlmc_pass_registry_t r;
  registry_init(&r);
  char *dir = make_temp_dir();
  EXPECT_TRUE(dir != NULL);
  if (!dir) return;
  char sub[512];
  snprintf(sub, sizeof sub, "%s/dumps", dir); /* created by the manager */
  vlmc_pass_manager_options_t o;
  memset(&o, 0, sizeof o);
  o.dump_dir = sub;
  char *final = NULL;
  EXPECT_OK(run(&r, "canonicalize,dce", &o, &final));
  char *input = read_file(sub, "00-input.vir");
  char *last = read_file(sub, "02-dce.vir");
  char *middle = read_file(sub, "01-canonicalize.vir");
  EXPECT_STREQ(input, kInput);
  EXPECT_STREQ(last, final);
  EXPECT_TRUE(middle && strstr(middle, "%dead") && !strstr(middle, "%same"));
  free(input);
  free(last);
  free(middle);
  free(final);
  remove_dir(sub);
  remove_dir(dir);
  free(dir);
}

/* A verifier failure after a pass names the pass, and keeps both its input and its broken
 * output; with skip_verify the broken IR goes through. */
static void test_verifier_after_each_pass(void) {
  vlmc_pass_registry_t r;
  registry_init(&r);
  char *dir = make_temp_dir();
  EXPECT_TRUE(dir != NULL);
  if (!dir) return;
  vlmc_pass_manager_options_t o;
  memset(&o, 0, sizeof o);
  o.dump_dir = dir;
  vlmc_status_t st = run(&r, "dce,break-types,cse", &o, NULL);
  EXPECT_TRUE(st != NULL);
  const char *msg = vlmc_status_message(st);
  EXPECT_TRUE(strstr(msg, "<input>:2:3: error: 'cast' op: result type f32[5] does not match"));
  EXPECT_TRUE(strstr(msg, "note: the IR is invalid after pass 'break-types'; the IR that went "
                          "into it is in ") != NULL);
  EXPECT_TRUE(strstr(msg, "/02-break-types.input.vir; its invalid output is in ") != NULL);
  EXPECT_TRUE(strstr(msg, "/02-break-types.invalid-output.vir\nnote: reproduce with: vlmc opt "));
  vlmc_status_free(st);
  char *before = read_file(dir, "01-dce.vir");
  char *input = read_file(dir, "02-break-types.input.vir");
  char *broken = read_file(dir, "02-break-types.invalid-output.vir");
  EXPECT_STREQ(input, before);
  EXPECT_TRUE(broken && strstr(broken, "%same = cast %x {dtype=f32} : f32[5]"));
  free(before);
  free(input);
  free(broken);
  /* Nothing after the failing pass ran. */
  char later[512];
  snprintf(later, sizeof later, "%s/03-cse.vir", dir);
  EXPECT_TRUE(access(later, F_OK) != 0);
  remove_dir(dir);
  free(dir);

  memset(&o, 0, sizeof o);
  o.skip_verify = true;
  char *text = NULL;
  EXPECT_OK(run(&r, "break-types", &o, &text));
  EXPECT_TRUE(text && strstr(text, ": f32[5]"));
  free(text);
}

static void test_failing_pass(void) {
  vlmc_pass_registry_t r;
  registry_init(&r);
  const char *old_tmp = getenv("TMPDIR");
  char *dir = make_temp_dir();
  EXPECT_TRUE(dir != NULL);
  if (!dir) return;
  setenv("TMPDIR", dir, 1);
  vlmc_status_t st = run(&r, "canonicalize,fail", NULL, NULL);
  if (old_tmp) setenv("TMPDIR", old_tmp, 1);
  else unsetenv("TMPDIR");
  EXPECT_TRUE(st != NULL);
  const char *msg = vlmc_status_message(st);
  EXPECT_TRUE(strncmp(msg, "the fail pass always fails\nnote: while running pass 'fail'; "
                           "the IR that went into it is in ", 90) == 0);
  EXPECT_EQ_INT(vlmc_status_code(st), VLMC_INTERNAL);
  /* The temporary directory holds exactly the input of the failing pass. */
  const char *path = strstr(msg, dir);
  char failure_dir[512] = "";
  if (path) sscanf(path, "%511[^ \n]", failure_dir);
  char *slash = strrchr(failure_dir, '/');
  if (slash) *slash = '\0';
  char *input = failure_dir[0] ? read_file(failure_dir, "02-fail.input.vir") : NULL;
  EXPECT_TRUE(input && !strstr(input, "%same")); /* after canonicalize, before fail */
  free(input);
  vlmc_status_free(st);
  if (failure_dir[0]) remove_dir(failure_dir);
  remove_dir(dir);
  free(dir);
}

int main(void) {
  RUN_TEST(test_registry);
  RUN_TEST(test_pipeline_text);
  RUN_TEST(test_options_remarks_statistics);
  RUN_TEST(test_printing);
  RUN_TEST(test_dump_dir);
  RUN_TEST(test_verifier_after_each_pass);
  RUN_TEST(test_failing_pass);
  return TEST_SUMMARY();
}
