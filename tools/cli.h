/* The command-line conventions the tools share (issue 20), GNU getopt_long style: an option
 * takes its value as `--name=value`, `--name value`, `-n5` or `-n 5`; a switch takes none
 * (`--stats=1` is refused); `--` ends the options; an unknown option or a missing value is
 * a usage error that names it. vlmc-run parses all of its arguments with it; vlmc's driver
 * answers --version with it (its subcommands keep vlmc_tool_flag_value, which takes the same
 * `--name=value` and `--name value` forms). */
#ifndef VLMC_TOOLS_CLI_H
#define VLMC_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "runtime/session.h"

typedef struct {
  const char *name;  /* "--top-k", or a short "-n" */
  const char *alias; /* another spelling ("-t" for "--temperature"), or NULL */
  bool takes_value;
} vlmc_cli_option_t;

typedef enum {
  VLMC_CLI_OPTION,     /* *name: the option's `name`, *value: its value (NULL for a switch) */
  VLMC_CLI_POSITIONAL, /* *value: the argument */
  VLMC_CLI_END,        /* no arguments left */
  VLMC_CLI_USAGE,      /* a usage error, already printed on stderr ("error: ...") */
} vlmc_cli_kind_t;

typedef struct {
  const char *tool; /* names the tool in messages */
  const vlmc_cli_option_t *options;
  size_t num_options;
  int index;          /* the next argv index; start at 1 */
  bool options_ended; /* after `--` */
} vlmc_cli_t;

vlmc_cli_kind_t vlmc_cli_next(vlmc_cli_t *cli, int argc, char **argv, const char **name,
                              const char **value);

/* "TOOL VERSION (git REV)" and, when given, a line of what is built in ("backends: ...").
 * The revision is the checkout's at configure time. */
void vlmc_cli_print_version(FILE *out, const char *tool, const char *built_in);

/* A decimal integer in [min, max] (the whole text); false otherwise. */
bool vlmc_cli_parse_int(const char *text, long long min, long long max, long long *out);
/* Prints "error: FLAG: expected EXPECTED, got 'VALUE'" and returns 2 (a usage error). */
int vlmc_cli_bad_value(const char *flag, const char *value, const char *expected);

/* The session flags vlmc-run and vlmc-serve share: --backend NAME, --threads N (1 to 16),
 * --device N, --params DIR, --weights MODE, into `session`. Returns 0 when `name` was one, 2
 * on a bad value (printed), -1 when it is not a session flag. */
int vlmc_cli_session_option(const char *name, const char *value, vlmc_session_options_t *session);

#endif
