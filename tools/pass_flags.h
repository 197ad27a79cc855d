/* Command-line flags shared by the tools that run pass pipelines (vlmc opt, vlmc compile):
 * the IR printing and dump options of the pass manager. */
#ifndef VLMC_TOOLS_PASS_FLAGS_H
#define VLMC_TOOLS_PASS_FLAGS_H

#include <stdbool.h>

#include "passes/pass.h"

/* "--name=value" or "--name value"; advances *i past a separate value. */
bool vlmc_tool_flag_value(int argc, char **argv, int *i, const char *name, const char **out);

/* Zeroes `pm` and points its print and log callbacks at stderr. */
void vlmc_tool_pass_flags_init(vlmc_pass_manager_options_t *pm);

/* Consumes one of --print-ir-before[=]P, --print-ir-after[=]P, --print-ir-before-all,
 * --print-ir-after-all, --print-ir-after-change, --dump-dir[=]DIR, --no-verify into `pm`;
 * false when argv[*i] is none of them. */
bool vlmc_tool_pass_flag(int argc, char **argv, int *i, vlmc_pass_manager_options_t *pm);

/* The help lines for those flags. */
extern const char vlmc_tool_pass_flags_help[];

#endif
