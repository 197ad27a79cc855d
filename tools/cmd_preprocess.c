/* Placeholder until the preprocess command lands in this session; it refuses rather than pretends. */
#include <stdio.h>

#include "tools/commands.h"

int vlmc_cmd_preprocess(int argc, char **argv) {
  fprintf(stderr, "error: vlmc preprocess is not built yet\n");
  return 1;
}
