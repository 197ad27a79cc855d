/* The built-in targets, in the order `vlmc compile --target help` lists them. A new target is
 * a folder under codegen/targets/ and one line here. */
#include <string.h>

#include "codegen/target.h"

static const vlmc_target_t *const kTargets[] = {
    &vlmc_target_ref,
    &vlmc_target_cpu,
    &vlmc_target_null,
    &vlmc_target_vulkan,
    &vlmc_target_metal,
};

size_t vlmc_target_count(void) { return sizeof kTargets / sizeof kTargets[0]; }

const vlmc_target_t *vlmc_target_at(size_t index) {
  return index < vlmc_target_count() ? kTargets[index] : NULL;
}

const vlmc_target_t *vlmc_target_find(const char *name) {
  for (size_t i = 0; name && i < vlmc_target_count(); ++i)
    if (!strcmp(kTargets[i]->name, name)) return kTargets[i];
  return NULL;
}

void vlmc_target_names(vlmc_strbuf_t *out) {
  for (size_t i = 0; i < vlmc_target_count(); ++i)
    vlmc_strbuf_printf(out, "%s%s", i ? ", " : "", kTargets[i]->name);
}
