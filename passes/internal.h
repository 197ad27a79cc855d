/* Private to passes/: the pipeline and context structs shared by the registry, the pipeline
 * parser and the pass manager. */
#ifndef VLMC_PASSES_INTERNAL_H
#define VLMC_PASSES_INTERNAL_H

#include "passes/pass.h"

typedef struct {
  const vlmc_pass_t *pass;
  char **option_values;  /* one malloc'd text per pass option (the default when not given) */
  uint64_t *statistics;  /* one counter per pass statistic */
} vlmc_pass_instance_t;

struct vlmc_pass_pipeline_s {
  const vlmc_pass_registry_t *registry;
  vlmc_pass_instance_t *instances;
  uint32_t count;
};

struct vlmc_pass_context_s {
  vlmc_pass_instance_t *instance;
  const vlmc_pass_manager_options_t *options;
};

/* Parses an option value of `kind`; false when malformed. */
bool vlmc_pass_option_parse_int(const char *text, int64_t *out);
bool vlmc_pass_option_parse_bool(const char *text, bool *out);

#endif
