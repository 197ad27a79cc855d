/* vlmc-kernel-check CASE_DIR...: runs kernel-test cases saved by `vlmc kernel-test --save DIR`
 * (each a folder: case.vir, the module after the target's pipeline tail with the test file's
 * directives, `// case-size: N` and `// case-seed: HEX`, and one file per section the target generated, named like
 * the section, e.g. kernels.vulkan and kernels.vulkan.json) against the reference executor,
 * on the backend of the target that made them (the name in "kernels.<target>.json"), every
 * kernel-variant class the table has, exactly as `vlmc kernel-test` runs them
 * (tools/kernel_check.c). Links the runtime only, never LLVM or MLIR: it is how the kernel
 * conformance suite runs on a machine where the compiler does not build (the GPU machine).
 * Each case runs in a child process of its own: NVIDIA's Vulkan driver refused vkCreateInstance
 * (VK_ERROR_INCOMPATIBLE_DRIVER) after about 40 instances and devices made and destroyed in
 * one process, and a kernel that crashes the driver then fails its case, not the suite.
 * Exit status 1 when any case fails, 2 on a usage error. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ir/ir.h"
#include "support/file.h"
#include "tools/kernel_check.h"
#ifdef VLMC_METAL_EMULATION
#include "tests/metal/emu.h"
#endif

enum { MAX_SECTIONS = 8 };

typedef struct {
  char *names[MAX_SECTIONS];
  char *data[MAX_SECTIONS];
  size_t len[MAX_SECTIONS];
  size_t count;
} sections_t;

static const void *find_section(void *ctx, const char *name, size_t *out_size) {
  const sections_t *s = ctx;
  for (size_t i = 0; i < s->count; ++i)
    if (!strcmp(s->names[i], name)) {
      *out_size = s->len[i];
      return s->data[i];
    }
  *out_size = 0;
  return NULL;
}

static void sections_free(sections_t *s) {
  for (size_t i = 0; i < s->count; ++i) {
    free(s->names[i]);
    free(s->data[i]);
  }
  s->count = 0;
}

/* Every file of dir but case.vir is a section; target gets T of "kernels.T.json". */
static vlmc_status_t read_sections(const char *dir, sections_t *s, char *target, size_t size) {
  DIR *d = opendir(dir);
  if (!d) return vlmc_status_make(VLMC_IO_ERROR, "%s: not a saved case folder (cannot open it)", dir);
  vlmc_status_t st = NULL;
  target[0] = '\0';
  for (struct dirent *e; !st && (e = readdir(d));) {
    const char *name = e->d_name;
    if (name[0] == '.' || !strcmp(name, "case.vir")) continue;
    if (s->count == MAX_SECTIONS) {
      st = vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: more than %d section files", dir, MAX_SECTIONS);
      break;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t len = 0;
    char *data = NULL;
    st = vlmc_file_read_all(path, &data, &len);
    if (st) break;
    char *copy = strdup(name);
    if (!copy) {
      free(data);
      st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
      break;
    }
    s->names[s->count] = copy;
    s->data[s->count] = data;
    s->len[s->count++] = len;
    size_t n = strlen(name);
    if (!strncmp(name, "kernels.", 8) && n > 13 && !strcmp(name + n - 5, ".json"))
      snprintf(target, size, "%.*s", (int)(n - 13), name + 8);
  }
  closedir(d);
  if (!st && !target[0])
    st = vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: no kernels.<target>.json: not a saved "
                          "case folder", dir);
  return st;
}

static int check_case(const char *dir) {
  sections_t sections = {.count = 0};
  char target[32];
  vlmc_kcheck_spec_t spec;
  vlmc_kcheck_outcome_t o;
  memset(&o, 0, sizeof o);
  vlmc_module_t *m = NULL;
  char *text = NULL;
  size_t len = 0;
  char path[4096];
  snprintf(path, sizeof path, "%s/case.vir", dir);
  vlmc_status_t st = read_sections(dir, &sections, target, sizeof target);
  vlmc_kcheck_spec_init(&spec, st ? "?" : target, NULL); /* kernels-from: in case.vir */
  if (!st) st = vlmc_file_read_all(path, &text, &len);
  if (!st) vlmc_kcheck_parse_spec(text, &spec);
  if (!st && spec.case_size < 1)
    st = vlmc_status_make(VLMC_INVALID_ARGUMENT, "%s: no `// case-size: N` line", path);
  vlmc_parse_options_t po = {.filename = path, .first_line = 1};
  if (!st) st = vlmc_module_parse(text, len, &po, &m);
  if (!st) st = vlmc_module_verify(m);
  if (!st) st = vlmc_kcheck_run(path, m, &spec, spec.case_size, find_section, &sections, &o);
  int failed = vlmc_kcheck_report(path, spec.case_size, st, &spec, &o);
  vlmc_module_destroy(m);
  free(text);
  sections_free(&sections);
  return failed;
}

/* check_case in a child process; a child that dies fails the case with the reason. */
static int check_case_apart(const char *dir) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return check_case(dir); /* no process to spare: run it here */
  if (pid == 0) {
    int failed = check_case(dir);
    fflush(stdout);
    _exit(failed);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      printf("FAIL %s: waitpid: %s\n", dir, strerror(errno));
      return 1;
    }
  if (WIFEXITED(status)) return WEXITSTATUS(status) != 0;
  printf("FAIL %s: the case's process died (signal %d)\n", dir,
         WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return 1;
}

int main(int argc, char **argv) {
#ifdef VLMC_METAL_EMULATION
  vlmc_backend_register(&vlmc_backend_metal_emulated); /* metal cases: tests/metal's emulation */
#endif
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    fprintf(argc < 2 ? stderr : stdout,
            "usage: vlmc-kernel-check CASE_DIR...\n"
            "  runs kernel-test cases saved by `vlmc kernel-test --target T --save DIR` (the\n"
            "  folders DIR/NAME.N/) on backend T against the reference executor, without the\n"
            "  compiler; the same lines and exit status as vlmc kernel-test.\n"
            "  VLMC_KERNEL_VARIANTS does not apply: every variant class of the table runs.\n");
    return argc < 2 ? 2 : 0;
  }
  int failures = 0;
  for (int i = 1; i < argc; ++i) failures += check_case_apart(argv[i]);
  printf("kernel-check: %d case%s, %s\n", argc - 1, argc == 2 ? "" : "s",
         failures ? "FAILED" : "all kernels match the reference");
  return failures ? 1 : 0;
}
