/* The vulkan target's kernel-table fields (kernels.h): every field the backend will use is
 * checked here, once, with a message naming the kernel and the field. */
#include "runtime/backends/vulkan/kernels.h"

#include <stdio.h>
#include <string.h>

#include "runtime/backends/vulkan/spirv_check.h"


void vlmc_vk_join_names(const char *const *names, size_t count, char *out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < count && used < size; ++i) {
    int n = snprintf(out + used, size - used, "%s%s", i ? ", " : "", names[i]);
    if (n < 0) break;
    used += (size_t)n;
  }
}

void vlmc_vk_feature_names(char *out, size_t size) {
  const char *names[VLMC_VK_NUM_FEATURES];
  for (unsigned bit = 0; bit < VLMC_VK_NUM_FEATURES; ++bit) names[bit] = vlmc_vk_feature_name(bit);
  vlmc_vk_join_names(names, VLMC_VK_NUM_FEATURES, out, size);
}

typedef struct {
  char where[512]; /* "m.vlmc: section 'kernels.vulkan.json': kernels[3] (vk3, rms_norm)" */
  const vlmc_kernel_table_kernel_t *kernel;
} field_ctx_t;

static vlmc_status_t int_field(const field_ctx_t *c, const char *key, int64_t lo, int64_t hi,
                               uint32_t *out) {
  const vlmc_kernel_table_field_t *f = vlmc_kernel_table_kernel_field(c->kernel, key);
  if (!f)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: target.%s is missing", c->where, key);
  if (f->string)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: target.%s: expected an integer, got a "
                            "string", c->where, key);
  if (f->integer < lo || f->integer > hi)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: target.%s = %lld: expected %lld to %lld",
                            c->where, key, (long long)f->integer, (long long)lo, (long long)hi);
  *out = (uint32_t)f->integer;
  return NULL;
}

static vlmc_status_t string_field(const field_ctx_t *c, const char *key, const char **out) {
  const vlmc_kernel_table_field_t *f = vlmc_kernel_table_kernel_field(c->kernel, key);
  if (!f)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: target.%s is missing", c->where, key);
  if (!f->string)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: target.%s: expected a string, got an "
                            "integer", c->where, key);
  *out = f->string;
  return NULL;
}

/* "shaderFloat16,storageBuffer16BitAccess" -> bits; "" -> 0. */
static vlmc_status_t parse_features(const field_ctx_t *c, const char *text, uint32_t *out) {
  *out = 0;
  for (const char *p = text; *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    while (len && *p == ' ') ++p, --len;
    while (len && p[len - 1] == ' ') --len;
    unsigned bit = 0;
    while (bit < VLMC_VK_NUM_FEATURES && !(strlen(vlmc_vk_feature_name(bit)) == len &&
                                            !strncmp(vlmc_vk_feature_name(bit), p, len)))
      ++bit;
    if (bit == VLMC_VK_NUM_FEATURES) {
      char known[256];
      vlmc_vk_feature_names(known, sizeof known);
      return vlmc_status_make(VLMC_PARSE_ERROR, "%s: target.features: unknown feature "
                              "'%.*s' (known: %s)", c->where, (int)(len > 64 ? 64 : len), p,
                              known);
    }
    *out |= 1u << bit;
    if (!end) break;
    p = end + 1;
  }
  return NULL;
}

/* A module's range, target.<prefix>spirv_offset and <prefix>spirv_size, in the section. */
static vlmc_status_t module_range(const field_ctx_t *c, const char *prefix, size_t section_size,
                                  uint32_t *offset, uint32_t *size) {
  char key_offset[64], key_size[64];
  snprintf(key_offset, sizeof key_offset, "%sspirv_offset", prefix);
  snprintf(key_size, sizeof key_size, "%sspirv_size", prefix);
  VLMC_RETURN_IF_ERROR(int_field(c, key_offset, 0, INT32_MAX, offset));
  VLMC_RETURN_IF_ERROR(int_field(c, key_size, 24, INT32_MAX, size));
  if (*offset % 4 || *size % 4)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: target.%s %u and %s %u must be multiples "
                            "of 4", c->where, key_offset, *offset, key_size, *size);
  if ((uint64_t)*offset + *size > section_size)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: SPIR-V bytes %u .. %llu lie past the end of "
                            "section 'kernels.vulkan' (%zu bytes)", c->where, *offset,
                            (unsigned long long)*offset + *size, section_size);
  return NULL;
}

/* A split kernel's fields (all of them, or none: split absent). */
static vlmc_status_t read_split_fields(const field_ctx_t *c, size_t section_size,
                                       vlmc_vk_kernel_info_t *k) {
  if (!vlmc_kernel_table_kernel_field(c->kernel, "split")) return NULL;
  const char *entry;
  char expected[256];
  snprintf(expected, sizeof expected, "%s_combine", c->kernel->symbol);
  VLMC_RETURN_IF_ERROR(int_field(c, "split", 2, VLMC_VK_MAX_SPLIT, &k->split));
  VLMC_RETURN_IF_ERROR(int_field(c, "scratch_floats", 1, VLMC_VK_MAX_SCRATCH_FLOATS,
                                 &k->scratch_floats));
  VLMC_RETURN_IF_ERROR(string_field(c, "combine_entry", &entry));
  if (strcmp(entry, expected) != 0)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: target.combine_entry '%s', expected '%s'",
                            c->where, entry, expected);
  VLMC_RETURN_IF_ERROR(module_range(c, "combine_", section_size, &k->combine_offset,
                                    &k->combine_size));
  VLMC_RETURN_IF_ERROR(int_field(c, "combine_workgroup_x", 1, VLMC_VK_MAX_INVOCATIONS,
                                 &k->combine_workgroup_x));
  /* absent in artifacts written before it existed: a workgroup per unit */
  k->combine_groups = 1;
  if (vlmc_kernel_table_kernel_field(c->kernel, "combine_groups"))
    VLMC_RETURN_IF_ERROR(int_field(c, "combine_groups", 1, VLMC_VK_MAX_COMBINE_GROUPS,
                                   &k->combine_groups));
  return int_field(c, "combine_shared_bytes", 0, INT32_MAX, &k->combine_shared_bytes);
}

static vlmc_status_t read_fields(const field_ctx_t *c, size_t section_size,
                                 vlmc_vk_kernel_info_t *k) {
  const vlmc_kernel_table_kernel_t *from = c->kernel;
  const char *entry, *features;
  VLMC_RETURN_IF_ERROR(string_field(c, "entry", &entry));
  if (strcmp(entry, from->symbol) != 0)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: target.entry '%s' is not the kernel's "
                            "symbol", c->where, entry);
  VLMC_RETURN_IF_ERROR(module_range(c, "", section_size, &k->spirv_offset, &k->spirv_size));
  static const char *const kAxes[3] = {"workgroup_x", "workgroup_y", "workgroup_z"};
  uint64_t invocations = 1;
  for (int i = 0; i < 3; ++i) {
    VLMC_RETURN_IF_ERROR(int_field(c, kAxes[i], 1, VLMC_VK_MAX_INVOCATIONS, &k->workgroup[i]));
    invocations *= k->workgroup[i];
  }
  if (invocations > VLMC_VK_MAX_INVOCATIONS)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: workgroup %u x %u x %u = %llu invocations, "
                            "more than %d", c->where, k->workgroup[0], k->workgroup[1],
                            k->workgroup[2], (unsigned long long)invocations,
                            VLMC_VK_MAX_INVOCATIONS);
  VLMC_RETURN_IF_ERROR(int_field(c, "units_per_group", 1, INT32_MAX, &k->units_per_group));
  VLMC_RETURN_IF_ERROR(int_field(c, "push_words", 1, VLMC_VK_MAX_PUSH_WORDS, &k->push_words));
  if (k->push_words != 1 + from->num_syms)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: target.push_words %u, expected 1 + %u syms",
                            c->where, k->push_words, from->num_syms);
  VLMC_RETURN_IF_ERROR(int_field(c, "shared_bytes", 0, INT32_MAX, &k->shared_bytes));
  VLMC_RETURN_IF_ERROR(string_field(c, "features", &features));
  VLMC_RETURN_IF_ERROR(parse_features(c, features, &k->features));
  return read_split_fields(c, section_size, k);
}

static vlmc_status_t check_top(const char *source, const vlmc_kernel_table_t *t) {
  if (!t->abi || strcmp(t->abi, "vulkan-spirv-1") != 0)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: section 'kernels.vulkan.json': abi '%s', "
                            "this runtime runs 'vulkan-spirv-1' (recompile with this vlmc)",
                            source, t->abi ? t->abi : "(none)");
  const vlmc_kernel_table_field_t *v = vlmc_kernel_table_field(t, "spirv_version");
  unsigned minor = 0;
  char tail = 0;
  if (!v || !v->string || sscanf(v->string, "1.%u%c", &minor, &tail) != 1 || minor > 6)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: section 'kernels.vulkan.json': "
                            "spirv_version: expected a string \"1.0\" to \"1.6\"", source);
  return NULL;
}

vlmc_status_t vlmc_vk_kernels_read(const char *source, const vlmc_kernel_table_t *table,
                                   const void *spirv, size_t spirv_size,
                                   vlmc_vk_kernel_info_t *out) {
  VLMC_RETURN_IF_ERROR(check_top(source, table));
  for (size_t i = 0; i < table->num_kernels; ++i) {
    const vlmc_kernel_table_kernel_t *from = &table->kernels[i];
    field_ctx_t c = {.kernel = from};
    snprintf(c.where, sizeof c.where, "%s: section 'kernels.vulkan.json': kernels[%zu] (%s, %s)",
             source, i, from->symbol, from->template_name);
    vlmc_vk_kernel_info_t *k = &out[i];
    memset(k, 0, sizeof *k);
    k->symbol = from->symbol;
    k->template_name = from->template_name;
    VLMC_RETURN_IF_ERROR(read_fields(&c, spirv_size, k));
    char origin[600];
    snprintf(origin, sizeof origin, "%s: section 'kernels.vulkan': kernel %s (%s)", source,
             from->symbol, from->template_name);
    uint32_t bindings = from->num_inputs + 1 + (k->split ? 1 : 0); /* as create_pipeline's layout */
    vlmc_spirv_expect_t expect = {.entry = from->symbol, .features = k->features,
                                  .num_bindings = bindings};
    memcpy(expect.local_size, k->workgroup, sizeof expect.local_size);
    vlmc_spirv_info_t info;
    VLMC_RETURN_IF_ERROR(vlmc_spirv_check(origin, (const unsigned char *)spirv + k->spirv_offset,
                                          k->spirv_size, &expect, &info));
    k->spirv_minor = info.version_minor;
    if (!k->split) continue;
    char entry[256];
    snprintf(entry, sizeof entry, "%s_combine", from->symbol);
    snprintf(origin, sizeof origin, "%s: section 'kernels.vulkan': kernel %s (%s), its combine "
             "stage", source, from->symbol, from->template_name);
    vlmc_spirv_expect_t combine = {.entry = entry, .features = k->features,
                                   .local_size = {k->combine_workgroup_x, 1, 1},
                                   .num_bindings = bindings};
    VLMC_RETURN_IF_ERROR(vlmc_spirv_check(origin, (const unsigned char *)spirv + k->combine_offset,
                                          k->combine_size, &combine, &info));
    k->combine_minor = info.version_minor;
  }
  return NULL;
}
