/* Placeholder until the tokenize command lands in this session; it refuses rather than pretends. */
#include <stdio.h>

#include "tools/commands.h"

int vlmc_cmd_tokenize(int argc, char **argv) {
  fprintf(stderr, "error: vlmc tokenize is not built yet\n");
  return 1;
}
