/* The registry of model families (models/family.h). */
#include "models/family.h"

#include <string.h>

#include "models/qwen2_5_vl.h"
#include "support/strbuf.h"

/* Every family vlmc builds. A new family: its entry in its own models/<family>.c, one line
 * here. */
static const vlmc_model_family_t *const kFamilies[] = {
    &vlmc_qwen2_5_vl_family,
    &vlmc_qwen2_vl_family,
    &vlmc_qwen2_family,
    &vlmc_qwen3_vl_family,
    &vlmc_qwen3_family,
};
enum { FAMILY_COUNT = sizeof kFamilies / sizeof kFamilies[0] };

/* model_types that are known, but whose family is not built yet: named in the refusal, so
 * that a user with such a checkpoint learns that it is a planned family rather than an
 * unknown one. An entry goes when its family is registered above. */
static const struct {
  const char *model_type, *display_name;
} kPlanned[] = {
    {"qwen3_vl_moe", "Qwen3-VL-MoE"},
};

const vlmc_model_family_t *vlmc_model_family_at(size_t index) {
  return index < FAMILY_COUNT ? kFamilies[index] : NULL;
}

bool vlmc_model_family_accepts(const vlmc_model_family_t *family, const char *model_type) {
  for (const char *const *type = family->model_types; *type; ++type)
    if (strcmp(*type, model_type) == 0) return true;
  return false;
}

/* "qwen2_5_vl, ..." (every accepted model_type), or with the display names:
 * "qwen2_5_vl (Qwen2.5-VL), ..." */
static void append_supported(vlmc_strbuf_t *buf, bool display_names) {
  const char *sep = "";
  for (size_t i = 0; i < FAMILY_COUNT; ++i)
    for (const char *const *type = kFamilies[i]->model_types; *type; ++type) {
      vlmc_strbuf_printf(buf, "%s%s", sep, *type);
      if (display_names) vlmc_strbuf_printf(buf, " (%s)", kFamilies[i]->display_name);
      sep = ", ";
    }
}

static vlmc_status_t refuse(const char *model_type) {
  vlmc_strbuf_t buf;
  vlmc_strbuf_init(&buf);
  const char *planned = NULL;
  for (size_t i = 0; i < sizeof kPlanned / sizeof kPlanned[0]; ++i)
    if (strcmp(kPlanned[i].model_type, model_type) == 0) planned = kPlanned[i].display_name;
  if (planned) {
    vlmc_strbuf_printf(&buf, "model_type: '%s' (%s) is not supported yet; vlmc reads ",
                       model_type, planned);
    append_supported(&buf, true);
  } else {
    vlmc_strbuf_printf(&buf, "model_type '%.60s': not a supported model family; supported: ",
                       model_type);
    append_supported(&buf, false);
  }
  vlmc_status_t status = vlmc_status_make(VLMC_UNSUPPORTED, "%s", vlmc_strbuf_cstr(&buf));
  vlmc_strbuf_deinit(&buf);
  return status;
}

vlmc_status_t vlmc_model_family_find(const char *model_type,
                                     const vlmc_model_family_t **out_family) {
  *out_family = NULL;
  for (size_t i = 0; i < FAMILY_COUNT; ++i)
    if (vlmc_model_family_accepts(kFamilies[i], model_type)) {
      *out_family = kFamilies[i];
      return NULL;
    }
  return refuse(model_type);
}

vlmc_status_t vlmc_model_family_parse_config(const char *text, size_t len, const char *file,
                                             const vlmc_model_family_t **out_family,
                                             vlmc_model_config_t *out_config) {
  memset(out_config, 0, sizeof *out_config);
  char model_type[VLMC_MODEL_TYPE_MAX];
  const vlmc_model_family_t *family;
  VLMC_RETURN_IF_ERROR(vlmc_model_type_parse(text, len, file, model_type));
  VLMC_RETURN_IF_ERROR(
      vlmc_status_annotate(vlmc_model_family_find(model_type, &family), "%s: ", file));
  VLMC_RETURN_IF_ERROR(family->parse_config(text, len, file, out_config));
  if (out_family) *out_family = family;
  return NULL;
}

vlmc_status_t vlmc_model_family_open_checkpoint(const char *dir,
                                                const vlmc_model_family_t **out_family,
                                                vlmc_checkpoint_t **out_checkpoint) {
  *out_checkpoint = NULL;
  char model_type[VLMC_MODEL_TYPE_MAX];
  const vlmc_model_family_t *family;
  VLMC_RETURN_IF_ERROR(vlmc_checkpoint_model_type(dir, model_type));
  VLMC_RETURN_IF_ERROR(vlmc_status_annotate(vlmc_model_family_find(model_type, &family),
                                            "%s/config.json: ", dir));
  VLMC_RETURN_IF_ERROR(vlmc_checkpoint_open(dir, family->parse_config, out_checkpoint));
  if (out_family) *out_family = family;
  return NULL;
}
