#include "tools/pass_flags.h"

#include <stdio.h>
#include <string.h>

const char vlmc_tool_pass_flags_help[] =
    "  --print-ir-before=P[,Q]   print the IR to stderr before these passes\n"
    "  --print-ir-after=P[,Q]    print the IR to stderr after these passes\n"
    "  --print-ir-before-all     print the IR before every pass\n"
    "  --print-ir-after-all      print the IR after every pass\n"
    "  --print-ir-after-change   print after a pass only when it changed the IR\n"
    "  --dump-dir=DIR            write 00-input.vir and NN-<pass>.vir into DIR\n"
    "  --no-verify               skip the verifier after each pass\n";

bool vlmc_tool_flag_value(int argc, char **argv, int *i, const char *name, const char **out) {
  size_t n = strlen(name);
  if (strncmp(argv[*i], name, n) != 0) return false;
  if (argv[*i][n] == '=') {
    *out = argv[*i] + n + 1;
    return true;
  }
  if (argv[*i][n] != '\0' || *i + 1 >= argc) return false;
  *out = argv[++*i];
  return true;
}

static void print_to_stderr(void *user, const char *header, const char *ir) {
  fprintf(stderr, "%s\n%s", header, ir);
}

static void log_to_stderr(void *user, const char *pass, const char *message) {
  fprintf(stderr, "// %s: %s\n", pass, message);
}

void vlmc_tool_pass_flags_init(vlmc_pass_manager_options_t *pm) {
  memset(pm, 0, sizeof *pm);
  pm->print = print_to_stderr;
  pm->log = log_to_stderr;
}

bool vlmc_tool_pass_flag(int argc, char **argv, int *i, vlmc_pass_manager_options_t *pm) {
  const char *a = argv[*i];
  if (vlmc_tool_flag_value(argc, argv, i, "--print-ir-before", &pm->print_ir_before) ||
      vlmc_tool_flag_value(argc, argv, i, "--print-ir-after", &pm->print_ir_after) ||
      vlmc_tool_flag_value(argc, argv, i, "--dump-dir", &pm->dump_dir))
    return true;
  if (strcmp(a, "--print-ir-before-all") == 0) pm->print_ir_before_all = true;
  else if (strcmp(a, "--print-ir-after-all") == 0) pm->print_ir_after_all = true;
  else if (strcmp(a, "--print-ir-after-change") == 0) pm->print_ir_after_change = true;
  else if (strcmp(a, "--no-verify") == 0) pm->skip_verify = true;
  else return false;
  return true;
}
