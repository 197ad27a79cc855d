/* Fuzzes model building from a config (models/family.h): the input is a config.json text,
 * parsed through the family registry; the module is built against a synthetic tensor table,
 * the family's own plan for that config (plan_tensors, what `vlmc random-checkpoint` writes),
 * bf16 like the hub's checkpoints. Either the config is refused with a status, or the build
 * succeeds, every planned tensor is used (a tensor with a negative dim is left out of the
 * table, so the build must refuse), and the same config is built again with a small fixed
 * image grid and taps (refused or built, never a crash). A config whose plan exceeds
 * PLAN_MAX_* (valid, but too large for one fuzz input: the builder's work grows with it) is
 * built against an empty table instead, which the builder must refuse at its first weight. */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/family.h"

enum {
  PLAN_MAX_TENSORS = 1024,
  PLAN_MAX_ELEMENTS = 4 << 20, /* 8 MB of bf16 in all */
  NAME_CAP = VLMC_MODEL_NAME_MAX,
};

typedef struct {
  char name[NAME_CAP];
  vlmc_model_tensor_info_t info;
  bool used;
} planned_t;

typedef struct {
  planned_t items[PLAN_MAX_TENSORS];
  size_t count;
  uint64_t elements;
  bool too_large;
} plan_t;

/* A vlmc_model_tensor_fn: keeps the tensor unless the plan is already over its bounds. */
static void plan_add(void *ctx, const char *name, uint32_t rank, const int64_t *shape,
                     bool is_norm) {
  plan_t *p = ctx;
  assert(rank <= VLMC_IR_MAX_RANK && strlen(name) < NAME_CAP);
  uint64_t elements = 1;
  for (uint32_t i = 0; i < rank; ++i) {
    /* Left out: the builder, asking for it, must refuse the config by name. */
    if (shape[i] < 0) return;
    if (shape[i] && elements > UINT64_MAX / (uint64_t)shape[i]) {
      p->too_large = true;
      return;
    }
    elements *= (uint64_t)shape[i];
  }
  if (p->too_large || p->count == PLAN_MAX_TENSORS || elements > PLAN_MAX_ELEMENTS - p->elements) {
    p->too_large = true;
    return;
  }
  planned_t *t = &p->items[p->count++];
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);
  t->info.dtype = VLMC_DTYPE_BF16;
  t->info.rank = rank;
  memcpy(t->info.shape, shape, rank * sizeof *shape);
  p->elements += elements;
}

static bool plan_find(void *user, const char *name, vlmc_model_tensor_info_t *out) {
  plan_t *p = user;
  for (size_t i = 0; i < p->count; ++i)
    if (strcmp(p->items[i].name, name) == 0) {
      p->items[i].used = true;
      *out = p->items[i].info;
      return true;
    }
  return false;
}

static void build_with_grid(const vlmc_model_family_t *family, const vlmc_model_config_t *config,
                            const vlmc_model_tensors_t *tensors) {
  /* One image of 2x2 merge units: the smallest grid every config with a merge size accepts. */
  int64_t merge = config->vision.spatial_merge_size;
  if (merge <= 0 || merge > 8) return;
  int64_t grid[3] = {1, 2 * merge, 2 * merge};
  vlmc_model_build_options_t options = {.grid = grid, .num_images = 1, .taps = true};
  vlmc_module_t *module = NULL;
  vlmc_status_t status = family->build(config, tensors, &options, &module);
  assert((status == NULL) == (module != NULL));
  vlmc_status_free(status);
  vlmc_module_destroy(module);
}

static bool find_nothing(void *user, const char *name, vlmc_model_tensor_info_t *out) {
  return false;
}

/* A config too large to plan still goes through the builder's checks of the config and
 * everything it computes before its first weight; the empty table then stops it, cheaply. */
static void build_without_tensors(const vlmc_model_family_t *family,
                                  const vlmc_model_config_t *config) {
  vlmc_model_tensors_t none = {.find = find_nothing, .source = "no tensors"};
  vlmc_module_t *module = NULL;
  vlmc_status_t status = family->build(config, &none, NULL, &module);
  assert(status != NULL && module == NULL);
  vlmc_status_free(status);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const vlmc_model_family_t *family = NULL;
  vlmc_model_config_t config;
  vlmc_status_t status =
      vlmc_model_family_parse_config((const char *)data, size, "config.json", &family, &config);
  if (status && getenv("VLMC_FUZZ_VERBOSE"))
    fprintf(stderr, "fuzz_model_build: %s\n", vlmc_status_message(status));
  if (status) {
    assert(strstr(vlmc_status_message(status), "config.json") != NULL);
    vlmc_status_free(status);
    return 0;
  }
  if (!family->plan_tensors) return 0;
  static plan_t plan;
  memset(&plan, 0, sizeof plan);
  status = family->plan_tensors(&config, plan_add, &plan);
  if (status) {
    /* What build would refuse: refused with build's message, naming the file. */
    assert(strstr(vlmc_status_message(status), "config.json") != NULL);
    vlmc_status_free(status);
    build_without_tensors(family, &config);
    return 0;
  }
  if (plan.too_large) {
    build_without_tensors(family, &config);
    return 0;
  }
  vlmc_model_tensors_t tensors = {.find = plan_find, .user = &plan, .source = "the plan"};
  vlmc_module_t *module = NULL;
  status = family->build(&config, &tensors, NULL, &module);
  /* VLMC_FUZZ_VERBOSE=1: what each input came to, for keeping the seeds meaningful. */
  if (getenv("VLMC_FUZZ_VERBOSE"))
    fprintf(stderr, "fuzz_model_build: %s\n", status ? vlmc_status_message(status) : "built");
  assert((status == NULL) == (module != NULL));
  vlmc_module_destroy(module);
  if (status) {
    vlmc_status_free(status);
    return 0;
  }
  for (size_t i = 0; i < plan.count; ++i) assert(plan.items[i].used);
  build_with_grid(family, &config, &tensors);
  return 0;
}
