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
 *   // template: linear       a template the kernels must use (one of them, by its exact name)
 *   // template vulkan: linear_tiles   the same for one target only (wins over `template:`)
 *   // variants vulkan: cpu   run only these kernel variants of the table for one target
 *                             (default: the main kernels, then each device class's); for a
 *                             case the main kernels cannot run on the CI's device, with the
 *                             reason in the file (lavapipe stops a shader's loops after 65535
 *                             iterations in all: docs/vulkan.md)
 *
 * A target whose kernels are another's translated (metal's are vulkan's: its `kernels_from`)
 * takes that target's `tolerance T:`, `template T:` and `variants T:` too; its own win.
 *
 * Parameters get random values in their own dtype (a bf16 weight is bf16). Prints one line per
 * (file, size) with the worst error and the kernels used; exit status 1 on any failure.
 *
 * --save DIR also writes each (file, size) as a case folder DIR/NAME.N (`case.vir`: the
 * module after the pipeline tail with the file's directives, its size and the random state
 * its inputs start from; one file per section the target generated, named like the
 * section; --no-run: saved, not run here);
 * `vlmc-kernel-check DIR/NAME.N ...` runs saved cases without the compiler, e.g. on a GPU
 * machine without LLVM/MLIR (tools/vlmc_kernel_check.c). The run half, shared by both, is
 * tools/kernel_check.c. */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/target.h"
#include "ir/ir.h"
#include "support/file.h"
#include "support/strbuf.h"
#include "tools/commands.h"
#include "tools/kernel_check.h"

typedef vlmc_kcheck_spec_t spec_t;
typedef vlmc_kcheck_outcome_t outcome_t;

enum { MAX_SIZES = VLMC_KCHECK_MAX_SIZES };

/* --save DIR; NULL: cases are not saved. --no-run: saved only (for another machine). */
static const char *save_dir = NULL;
static bool no_run = false;

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

/* Every comment line of text (the directives), one per line. */
static void directive_lines(const char *text, vlmc_strbuf_t *out) {
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    const char *q = p;
    while (q < p + len && (*q == ' ' || *q == '\t')) ++q;
    if (q + 1 < p + len && q[0] == '/' && q[1] == '/') {
      vlmc_strbuf_append(out, q, len - (size_t)(q - p));
      vlmc_strbuf_putc(out, '\n');
    }
    if (!nl) break;
    p = nl + 1;
  }
}

/* DIR/NAME.N/: case.vir (the directives, `case-size: N`, the module after the tail) and the
 * sections; *out_dir gets the folder (malloc'd). */
static vlmc_status_t save_case(const char *path, const char *text, int64_t n,
                               const char *spec_kernels_from, const vlmc_module_t *m,
                               const vlmc_target_output_t *code, char **out_dir) {
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  size_t stem = strcspn(base, ".");
  vlmc_strbuf_t dir;
  vlmc_strbuf_init(&dir);
  vlmc_strbuf_printf(&dir, "%s/%.*s.%lld", save_dir, (int)stem, base, (long long)n);
  *out_dir = vlmc_strbuf_take(&dir);
  if (!*out_dir) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  VLMC_RETURN_IF_ERROR(vlmc_file_mkdirs(*out_dir));
  vlmc_strbuf_t vir;
  vlmc_strbuf_init(&vir);
  vlmc_strbuf_printf(&vir, "// A saved kernel-test case (vlmc kernel-test --save; run it with "
                     "vlmc-kernel-check): %s at N=%lld.\n", path, (long long)n);
  if (spec_kernels_from[0]) vlmc_strbuf_printf(&vir, "// kernels-from: %s\n", spec_kernels_from);
  directive_lines(text, &vir);
  vlmc_strbuf_printf(&vir, "// case-size: %lld\n// case-seed: %llx\n", (long long)n,
                     (unsigned long long)vlmc_kcheck_seed());
  vlmc_module_print(m, &vir);
  char file[4096];
  snprintf(file, sizeof file, "%s/case.vir", *out_dir);
  vlmc_status_t st = vlmc_file_write_all(file, vir.data ? vir.data : "", vir.len);
  vlmc_strbuf_deinit(&vir);
  for (size_t i = 0; !st && i < code->sections.count; ++i) {
    const vlmc_target_section_t *s = &code->sections.items[i];
    snprintf(file, sizeof file, "%s/%s", *out_dir, s->name);
    st = vlmc_file_write_all(file, s->data, s->len);
  }
  return st;
}

/* Compiles the case (the target's pipeline tail, then its kernels) and runs it. */
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
  char *dir = NULL;
  if (!st && save_dir) st = save_case(path, text, n, s->kernels_from, m, &code, &dir);
  if (!st && !no_run) st = vlmc_kcheck_run(path, m, s, n, find_section, &code, o);
  if (st && dir) st = vlmc_status_annotate(st, "(saved as %s) ", dir);
  free(dir);
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
  vlmc_kcheck_spec_init(&base, target->name, target->kernels_from);
  memcpy(base.sizes, default_sizes, sizeof default_sizes);
  base.num_sizes = num_default_sizes;
  vlmc_kcheck_parse_spec(raw, &base); /* only `sizes:` matters before substitution */
  int failures = 0;
  for (int k = 0; k < base.num_sizes; ++k) {
    int64_t n = base.sizes[k];
    char *text = vlmc_kcheck_substitute_n(raw, n);
    spec_t s;
    vlmc_kcheck_spec_init(&s, target->name, target->kernels_from);
    if (text) vlmc_kcheck_parse_spec(text, &s);
    outcome_t o;
    memset(&o, 0, sizeof o);
    st = text ? run_case(target, path, text, &s, n, &o) : vlmc_status_make(VLMC_OUT_OF_MEMORY, "oom");
    free(text);
    if (no_run && !st)
      printf("saved %s N=%lld\n", path, (long long)n);
    else
      failures += vlmc_kcheck_report(path, n, st, &s, &o);
  }
  free(raw);
  return failures;
}

static void print_help(FILE *out) {
  fprintf(out,
          "usage: vlmc kernel-test [--target T] [--sizes A,B,...] [--save DIR [--no-run]] "
          "FILE.vir...\n"
          "  checks the kernels target T (default cpu; vlmc compile --target help lists them)\n"
          "  generates for each file's first function, run on the backend of the same name,\n"
          "  against the reference executor on random inputs; `$N` in the file takes each size\n"
          "  (default 3420, 176, 172, 1, 37, or --sizes; a file's `// sizes:` wins).\n"
          "  --target T        the target whose kernels are checked (default cpu)\n"
          "  --sizes A,B,...   the sizes `$N` takes (a file's `// sizes:` wins)\n"
          "  --save DIR        also write each case (file, size) as DIR/NAME.N/ for\n"
          "                    vlmc-kernel-check, which runs saved cases without the compiler\n"
          "                    (e.g. on a machine without LLVM)\n"
          "  --no-run          with --save: only save the cases\n"
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
    if (!strcmp(argv[first_file], "--no-run")) {
      no_run = true;
      first_file += 1;
      continue;
    }
    if (!strcmp(argv[first_file], "--target")) {
      target_name = argv[first_file + 1];
    } else if (!strcmp(argv[first_file], "--save")) {
      save_dir = argv[first_file + 1];
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
  if (no_run && !save_dir) {
    fprintf(stderr, "error: kernel-test --no-run needs --save DIR (it only saves the cases)\n");
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
  int failures = 0;
  for (int i = first_file; i < argc; ++i) failures += test_file(target, argv[i]);
  if (no_run)
    printf("kernel-test: %s\n", failures ? "FAILED" : "cases saved, not run (vlmc-kernel-check runs them)");
  else
    printf("kernel-test: %s\n", failures ? "FAILED" : "all kernels match the reference");
  return failures ? 1 : 0;
}
