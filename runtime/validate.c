/* vlmc_artifact_validate (runtime/validate.h): the artifact layer's checks, then each
 * backend's. It lives in the runtime because the backends' checks do. */
#include "runtime/validate.h"

#include <stdio.h>

#include "artifact/validate.h"
#include "runtime/backend.h"

static vlmc_status_t read_manifest(const vlmc_artifact_t *a, vlmc_manifest_t *out) {
  const vlmc_artifact_section_t *sec;
  VLMC_RETURN_IF_ERROR(vlmc_artifact_require(a, "manifest", "the runtime", &sec));
  return vlmc_manifest_from_json(vlmc_artifact_path(a), (const char *)sec->data,
                                 (size_t)sec->size, out);
}

static vlmc_status_t read_program(const vlmc_artifact_t *a, vlmc_module_t **out) {
  const vlmc_artifact_section_t *sec;
  VLMC_RETURN_IF_ERROR(vlmc_artifact_require(a, "program", "every backend", &sec));
  char name[512];
  snprintf(name, sizeof name, "%s: section 'program'", vlmc_artifact_path(a));
  vlmc_parse_options_t options = {.filename = name, .first_line = 1};
  VLMC_RETURN_IF_ERROR(vlmc_module_parse((const char *)sec->data, (size_t)sec->size, &options,
                                         out));
  return vlmc_module_verify(*out);
}

static const void *find_section(void *ctx, const char *name, size_t *out_size) {
  const vlmc_artifact_section_t *sec = vlmc_artifact_find(ctx, name);
  *out_size = sec ? (size_t)sec->size : 0;
  return sec ? sec->data : NULL;
}

/* Every backend that could run the artifact (its sections are there) checks them now: a
 * table that would be refused by `--backend cpu` is refused whichever backend runs. */
static vlmc_status_t check_backends(const vlmc_artifact_t *a, const vlmc_module_t *module) {
  vlmc_backend_open_params_t bp = {.source = vlmc_artifact_path(a), .module = module,
                                   .section = find_section, .section_ctx = (void *)a,
                                   .threads = 1};
  for (size_t i = 0; i < vlmc_backend_count(); ++i) {
    const vlmc_backend_iface_t *b = vlmc_backend_at(i);
    if (b->check && vlmc_backend_has_sections(b, find_section, (void *)a))
      VLMC_RETURN_IF_ERROR(b->check(&bp));
  }
  return NULL;
}

static vlmc_status_t validate(const vlmc_artifact_t *a, vlmc_manifest_t *manifest,
                              vlmc_module_t **module) {
  VLMC_RETURN_IF_ERROR(read_manifest(a, manifest));
  VLMC_RETURN_IF_ERROR(read_program(a, module));
  VLMC_RETURN_IF_ERROR(vlmc_artifact_check_params(a, manifest, *module));
  return check_backends(a, *module);
}

vlmc_status_t vlmc_artifact_validate(const vlmc_artifact_t *a, vlmc_manifest_t *out_manifest,
                                     vlmc_module_t **out_module) {
  vlmc_manifest_init(out_manifest);
  *out_module = NULL;
  vlmc_status_t st = validate(a, out_manifest, out_module);
  if (st) {
    vlmc_module_destroy(*out_module);
    *out_module = NULL;
    vlmc_manifest_deinit(out_manifest);
  }
  return st;
}
