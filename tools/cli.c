/* The tools' command-line conventions (cli.h). */
#include "tools/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#ifndef VLMC_GIT_REVISION
#define VLMC_GIT_REVISION "unknown"
#endif
#define VLMC_VERSION "0.1"

static const vlmc_cli_option_t *find(const vlmc_cli_t *cli, const char *name, size_t len) {
  for (size_t i = 0; i < cli->num_options; ++i) {
    const vlmc_cli_option_t *o = &cli->options[i];
    if ((strlen(o->name) == len && !strncmp(o->name, name, len)) ||
        (o->alias && strlen(o->alias) == len && !strncmp(o->alias, name, len)))
      return o;
  }
  return NULL;
}

static vlmc_cli_kind_t usage(const vlmc_cli_t *cli, const char *what, const char *arg) {
  fprintf(stderr, "error: %s '%s' (%s --help lists the options)\n", what, arg, cli->tool);
  return VLMC_CLI_USAGE;
}

vlmc_cli_kind_t vlmc_cli_next(vlmc_cli_t *cli, int argc, char **argv, const char **name,
                              const char **value) {
  *name = NULL;
  *value = NULL;
  if (cli->index >= argc) return VLMC_CLI_END;
  const char *a = argv[cli->index++];
  if (cli->options_ended || a[0] != '-' || !strcmp(a, "-")) {
    *value = a;
    return VLMC_CLI_POSITIONAL;
  }
  if (!strcmp(a, "--")) {
    cli->options_ended = true;
    return vlmc_cli_next(cli, argc, argv, name, value);
  }
  const vlmc_cli_option_t *o = NULL;
  const char *attached = NULL;
  if (a[1] == '-') { /* --name or --name=value */
    const char *eq = strchr(a, '=');
    o = find(cli, a, eq ? (size_t)(eq - a) : strlen(a));
    attached = eq ? eq + 1 : NULL;
  } else { /* -n or -n5 */
    o = find(cli, a, 2);
    attached = a[2] ? a + 2 : NULL;
    if (o && !o->takes_value && attached) o = NULL; /* -ix: not a bundle of switches */
  }
  if (!o) return usage(cli, "unknown option", a);
  *name = o->name;
  if (!o->takes_value) {
    if (attached) return usage(cli, "this option takes no value:", a);
    return VLMC_CLI_OPTION;
  }
  if (attached) {
    *value = attached;
    return VLMC_CLI_OPTION;
  }
  if (cli->index >= argc) {
    fprintf(stderr, "error: %s needs a value\n", a);
    return VLMC_CLI_USAGE;
  }
  *value = argv[cli->index++];
  return VLMC_CLI_OPTION;
}

void vlmc_cli_print_version(FILE *out, const char *tool, const char *built_in) {
  fprintf(out, "%s %s (git %s)\n", tool, VLMC_VERSION, VLMC_GIT_REVISION);
  if (built_in && *built_in) fprintf(out, "%s\n", built_in);
}

bool vlmc_cli_parse_int(const char *text, long long min, long long max, long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno || *end || end == text || v < min || v > max) return false;
  *out = v;
  return true;
}

int vlmc_cli_bad_value(const char *flag, const char *value, const char *expected) {
  fprintf(stderr, "error: %s: expected %s, got '%s'\n", flag, expected, value);
  return 2;
}

int vlmc_cli_session_option(const char *name, const char *value, vlmc_session_options_t *session) {
  long long n;
  if (!strcmp(name, "--backend")) {
    session->backend = value;
  } else if (!strcmp(name, "--threads")) {
    if (!vlmc_cli_parse_int(value, 1, 16, &n)) return vlmc_cli_bad_value(name, value, "1 to 16");
    session->threads = (uint32_t)n;
  } else if (!strcmp(name, "--device")) {
    if (!vlmc_cli_parse_int(value, 0, 1 << 16, &n))
      return vlmc_cli_bad_value(name, value, "a device index >= 0");
    session->device = (uint32_t)n;
  } else if (!strcmp(name, "--params")) {
    session->params_dir = value;
  } else if (!strcmp(name, "--weights")) {
    session->weights = value;
  } else {
    return -1;
  }
  return 0;
}
