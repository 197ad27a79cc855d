/* Placeholder until the opt command lands in this session; it refuses rather than pretends. */
#include <stdio.h>

#include "tools/commands.h"

int vlmc_cmd_opt(int argc, char **argv) {
  fprintf(stderr, "error: vlmc opt is not built yet\n");
  return 1;
}
