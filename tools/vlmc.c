/* vlmc: the compiler driver. `vlmc <command> ...`; see docs/design.md for the contract. */
#include <stdio.h>
#include <string.h>

#include "codegen/target.h"
#include "runtime/backend.h"
#include "support/strbuf.h"
#include "tools/cli.h"
#include "tools/commands.h"
#ifdef VLMC_METAL_EMULATION
#include "tests/metal/emu.h"
#endif

typedef struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} command_t;

static const command_t commands[] = {
    {"compile", vlmc_cmd_compile, "compile a checkpoint folder into a .vlmc artifact"},
    {"inspect", vlmc_cmd_inspect, "show what a .vlmc artifact holds (--verify: all checksums)"},
    {"opt", vlmc_cmd_opt, "run passes on a textual IR file (.vir)"},
    {"tokenize", vlmc_cmd_tokenize, "print token ids for each JSON string on stdin"},
    {"preprocess", vlmc_cmd_preprocess, "turn an image into pixel_values and image_grid_thw"},
    {"diff-taps", vlmc_cmd_diff_taps, "compare two sets of stage taps, name the first divergence"},
    {"kernel-test", vlmc_cmd_kernel_test,
     "check generated cpu kernels against the reference executor (tests/kernels/*.vir)"},
    {"random-checkpoint", vlmc_cmd_random_checkpoint,
     "write a checkpoint with random weights for a config.json (benchmarks)"},
    {"reseal", vlmc_cmd_reseal,
     "rewrite an artifact's sections with fresh checksums, replacing some (hostile-input tests)"},
};

static void print_usage(FILE *out) {
  fprintf(out, "usage: vlmc <command> [options]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; ++i)
    fprintf(out, "  %-18s %s\n", commands[i].name, commands[i].summary);
  fprintf(out, "\noptions:\n"
               "  --version          the version, git revision, targets and backends\n"
               "  -h, --help         this text; `vlmc <command> --help` describes a command\n");
}

/* --version: the version and git revision, the targets and backends built in. */
static void print_version(void) {
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  vlmc_strbuf_puts(&line, "targets: ");
  vlmc_target_names(&line);
  vlmc_strbuf_puts(&line, "\nbackends: ");
  for (size_t i = 0; i < vlmc_backend_count(); ++i) {
    const vlmc_backend_iface_t *b = vlmc_backend_at(i);
    /* a test tool's backend says so (the Metal emulation's summary starts "EMULATION") */
    vlmc_strbuf_printf(&line, "%s%s%s", i ? ", " : "", b->name,
                       strncmp(b->summary, "EMULATION", 9) ? "" : " (emulation, tests/metal)");
  }
  vlmc_cli_print_version(stdout, "vlmc", vlmc_strbuf_cstr(&line));
  vlmc_strbuf_deinit(&line);
}

int main(int argc, char **argv) {
#ifdef VLMC_METAL_EMULATION
  /* what `vlmc kernel-test --target metal` runs the metal target's kernels on (tests/metal:
   * an emulation, not Apple hardware) */
  vlmc_backend_register(&vlmc_backend_metal_emulated);
#endif
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
      strcmp(argv[1], "help") == 0) {
    print_usage(stdout);
    return 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    print_version();
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; ++i)
    if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "error: unknown command '%s'\n\n", argv[1]);
  print_usage(stderr);
  return 2;
}
