/* The bounded SPIR-V walker (spirv_check.h). Every read is checked against the module's
 * size before it happens; a module is a sequence of instructions whose first word holds
 * (word count << 16 | opcode), and nothing here follows an id or an offset. */
#include "runtime/backends/vulkan/spirv_check.h"

#include <stdbool.h>
#include <string.h>

#include "runtime/backends/vulkan/kernels.h"

enum {
  SPIRV_MAGIC = 0x07230203u,
  SPIRV_MAGIC_SWAPPED = 0x03022307u,
  HEADER_WORDS = 5,
  MAX_BOUND = 1u << 22, /* ids; far above any kernel, and it keeps a driver's tables small */
  OP_EXTENSION = 10,
  OP_EXT_INST_IMPORT = 11,
  OP_MEMORY_MODEL = 14,
  OP_ENTRY_POINT = 15,
  OP_EXECUTION_MODE = 16,
  OP_CAPABILITY = 17,
  OP_EXECUTION_MODE_ID = 331,
  OP_DECORATE = 71,
  DECORATION_BINDING = 33,
  DECORATION_DESCRIPTOR_SET = 34,
  MODEL_GLCOMPUTE = 5,
  MODE_LOCAL_SIZE = 17,
  MODE_LOCAL_SIZE_ID = 38,
  ADDRESSING_LOGICAL = 0,
  MEMORY_GLSL450 = 1,
};

/* The capabilities a vlmc kernel may declare and the features each needs:
 * artifact/vulkan_abi.c (the target lists features from the same table). */
typedef vlmc_vk_capability_t capability_t;

/* Extensions the capabilities above come with. */
static const char *const kExtensions[] = {"SPV_KHR_storage_buffer_storage_class",
                                          "SPV_KHR_16bit_storage",
                                          "SPV_KHR_cooperative_matrix"};

typedef struct {
  const char *origin;
  const unsigned char *bytes;
  size_t num_words;
} module_t;

static uint32_t word_at(const module_t *m, size_t index) {
  const unsigned char *p = m->bytes + 4 * index;
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The literal string starting at word `first` of the instruction at `at` (`count` words),
 * copied into out (truncated to size - 1); false when it is not NUL-terminated inside it. */
static bool literal_string(const module_t *m, size_t at, uint32_t count, uint32_t first,
                           char *out, size_t size) {
  if (first >= count) return false;
  const unsigned char *s = m->bytes + 4 * (at + first);
  size_t max = 4 * (size_t)(count - first);
  const unsigned char *nul = memchr(s, 0, max);
  if (!nul) return false;
  size_t len = (size_t)(nul - s);
  if (len >= size) len = size - 1;
  memcpy(out, s, len);
  out[len] = '\0';
  return true;
}

/* The allowed capabilities' names, comma-separated, for the message that refuses another. */
static void capability_names(char *out, size_t size) {
  enum { MAX_CAPABILITIES = 64 };
  size_t count = 0;
  const capability_t *all = vlmc_vk_capabilities(&count);
  const char *names[MAX_CAPABILITIES];
  if (count > MAX_CAPABILITIES) count = MAX_CAPABILITIES;
  for (size_t i = 0; i < count; ++i) names[i] = all[i].name;
  vlmc_vk_join_names(names, count, out, size);
}

static const capability_t *find_capability(uint32_t id) { return vlmc_vk_capability(id); }

static int lowest_bit(uint32_t bits) {
  for (int i = 0; i < 32; ++i)
    if (bits & (1u << i)) return i;
  return -1;
}

static vlmc_status_t check_header(const module_t *m, vlmc_spirv_info_t *info) {
  if (m->num_words < HEADER_WORDS)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: SPIR-V of %zu bytes, shorter than its "
                            "20-byte header", m->origin, 4 * m->num_words);
  uint32_t magic = word_at(m, 0), version = word_at(m, 1), bound = word_at(m, 3);
  if (magic == SPIRV_MAGIC_SWAPPED)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: big-endian SPIR-V is not supported",
                            m->origin);
  if (magic != SPIRV_MAGIC)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: not SPIR-V (magic 0x%08x, expected "
                            "0x07230203)", m->origin, magic);
  info->version_major = version >> 16 & 0xff;
  info->version_minor = version >> 8 & 0xff;
  if ((version & 0xff0000ffu) || info->version_major != 1 || info->version_minor > 6)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: SPIR-V version word 0x%08x: expected 1.0 "
                            "to 1.6", m->origin, version);
  if (bound == 0 || bound > MAX_BOUND)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: SPIR-V id bound %u: expected 1 to %u",
                            m->origin, bound, (unsigned)MAX_BOUND);
  if (word_at(m, 4) != 0)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: SPIR-V schema word %u: expected 0",
                            m->origin, word_at(m, 4));
  return NULL;
}

typedef struct {
  uint32_t entry_id;
  uint32_t num_entries;
  bool memory_model;
  uint32_t local_size[3];
  uint32_t num_local_sizes;
  uint32_t features_needed;
  const char *needed_by; /* the capability that needs a feature the kernel does not list */
} walk_t;

static vlmc_status_t on_capability(const module_t *m, size_t at, uint32_t count,
                                   const vlmc_spirv_expect_t *expect, walk_t *w) {
  if (count != 2)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: OpCapability at word %zu has %u words, "
                            "expected 2", m->origin, at, count);
  uint32_t id = word_at(m, at + 1);
  const capability_t *cap = find_capability(id);
  if (!cap) {
    char allowed[512];
    capability_names(allowed, sizeof allowed);
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: SPIR-V capability %u is not one a vlmc "
                            "kernel uses (allowed: %s)", m->origin, id, allowed);
  }
  if (cap->feature & ~expect->features) {
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: declares capability %s, which needs "
                            "device feature %s, but the kernel's features do not list it",
                            m->origin, cap->name, vlmc_vk_feature_name((unsigned)lowest_bit(cap->feature)));
  }
  w->features_needed |= cap->feature;
  return NULL;
}

static vlmc_status_t on_named(const module_t *m, size_t at, uint32_t count, uint32_t opcode) {
  char name[128];
  const char *what = opcode == OP_EXTENSION ? "OpExtension" : "OpExtInstImport";
  /* OpExtension "name"; OpExtInstImport %result "name". */
  uint32_t first = opcode == OP_EXTENSION ? 1 : 2;
  if (!literal_string(m, at, count, first, name, sizeof name))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: %s at word %zu: unterminated string",
                            m->origin, what, at);
  if (opcode == OP_EXT_INST_IMPORT) {
    if (strcmp(name, "GLSL.std.450") != 0)
      return vlmc_status_make(VLMC_PARSE_ERROR, "%s: imports extended instruction set '%s' "
                              "(only GLSL.std.450 is allowed)", m->origin, name);
    return NULL;
  }
  for (size_t i = 0; i < sizeof kExtensions / sizeof kExtensions[0]; ++i)
    if (!strcmp(name, kExtensions[i])) return NULL;
  char allowed[256];
  vlmc_vk_join_names(kExtensions, sizeof kExtensions / sizeof kExtensions[0], allowed,
                     sizeof allowed);
  return vlmc_status_make(VLMC_PARSE_ERROR, "%s: SPIR-V extension '%s' is not allowed (only "
                          "%s)", m->origin, name, allowed);
}

static vlmc_status_t on_entry_point(const module_t *m, size_t at, uint32_t count,
                                    const vlmc_spirv_expect_t *expect, walk_t *w) {
  char name[128];
  if (count < 4 || !literal_string(m, at, count, 3, name, sizeof name))
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: OpEntryPoint at word %zu is malformed",
                            m->origin, at);
  if (word_at(m, at + 1) != MODEL_GLCOMPUTE)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: entry point '%s' has execution model %u, "
                            "expected GLCompute (5)", m->origin, name, word_at(m, at + 1));
  if (++w->num_entries > 1)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: more than one entry point ('%s' is the "
                            "second)", m->origin, name);
  if (strcmp(name, expect->entry) != 0)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: entry point '%s', the table says '%s'",
                            m->origin, name, expect->entry);
  w->entry_id = word_at(m, at + 2);
  return NULL;
}

static vlmc_status_t on_execution_mode(const module_t *m, size_t at, uint32_t count,
                                       uint32_t opcode, walk_t *w) {
  if (count < 3)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: OpExecutionMode at word %zu is malformed",
                            m->origin, at);
  uint32_t mode = word_at(m, at + 2);
  if (opcode == OP_EXECUTION_MODE_ID || mode == MODE_LOCAL_SIZE_ID) {
    if (mode == MODE_LOCAL_SIZE_ID)
      return vlmc_status_make(VLMC_PARSE_ERROR, "%s: LocalSizeId (a workgroup size from "
                              "constants): the table's LocalSize must be literal", m->origin);
    return NULL;
  }
  if (mode != MODE_LOCAL_SIZE) return NULL;
  if (count != 6)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: LocalSize at word %zu has %u words, "
                            "expected 6", m->origin, at, count);
  if (w->entry_id != word_at(m, at + 1)) /* entry points come first (the module layout) */
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: LocalSize for id %u, which is not the "
                            "entry point", m->origin, word_at(m, at + 1));
  w->num_local_sizes++;
  for (int i = 0; i < 3; ++i) w->local_size[i] = word_at(m, at + 3 + (size_t)i);
  return NULL;
}

static vlmc_status_t on_memory_model(const module_t *m, size_t at, uint32_t count, walk_t *w) {
  if (count != 3 || word_at(m, at + 1) != ADDRESSING_LOGICAL ||
      word_at(m, at + 2) != MEMORY_GLSL450)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: memory model must be Logical GLSL450",
                            m->origin);
  w->memory_model = true;
  return NULL;
}

/* A Binding or DescriptorSet decoration: set 0, bindings below the ones the backend's layout
 * has (a module reading past them would read whatever the driver left there). */
static vlmc_status_t on_decorate(const module_t *m, size_t at, uint32_t count,
                                 const vlmc_spirv_expect_t *expect) {
  if (count < 3)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: OpDecorate at word %zu is malformed",
                            m->origin, at);
  uint32_t decoration = word_at(m, at + 2);
  if (decoration != DECORATION_BINDING && decoration != DECORATION_DESCRIPTOR_SET) return NULL;
  if (count != 4)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: OpDecorate at word %zu is malformed",
                            m->origin, at);
  uint32_t value = word_at(m, at + 3);
  if (decoration == DECORATION_DESCRIPTOR_SET && value != 0)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: descriptor set %u (the kernel ABI has set 0 "
                            "only)", m->origin, value);
  if (decoration == DECORATION_BINDING && value >= expect->num_bindings)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: binding %u, but the kernel has %u (its "
                            "inputs, the output%s)", m->origin, value, expect->num_bindings,
                            expect->num_bindings ? ", a split kernel's scratch" : "");
  return NULL;
}

static vlmc_status_t on_instruction(const module_t *m, size_t at, uint32_t count,
                                    uint32_t opcode, const vlmc_spirv_expect_t *expect,
                                    walk_t *w) {
  switch (opcode) {
    case OP_CAPABILITY: return on_capability(m, at, count, expect, w);
    case OP_EXTENSION:
    case OP_EXT_INST_IMPORT: return on_named(m, at, count, opcode);
    case OP_MEMORY_MODEL: return on_memory_model(m, at, count, w);
    case OP_ENTRY_POINT: return on_entry_point(m, at, count, expect, w);
    case OP_EXECUTION_MODE:
    case OP_EXECUTION_MODE_ID: return on_execution_mode(m, at, count, opcode, w);
    case OP_DECORATE: return on_decorate(m, at, count, expect);
    default: return NULL;
  }
}

static vlmc_status_t check_walk(const module_t *m, const vlmc_spirv_expect_t *expect,
                                const walk_t *w) {
  if (!w->memory_model)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: no OpMemoryModel", m->origin);
  if (w->num_entries != 1)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: no entry point (expected GLCompute '%s')",
                            m->origin, expect->entry);
  if (w->num_local_sizes != 1)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: %u LocalSize execution modes for '%s', "
                            "expected 1", m->origin, w->num_local_sizes, expect->entry);
  if (memcmp(w->local_size, expect->local_size, sizeof w->local_size) != 0)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: LocalSize %u x %u x %u, the table says "
                            "%u x %u x %u", m->origin, w->local_size[0], w->local_size[1],
                            w->local_size[2], expect->local_size[0], expect->local_size[1],
                            expect->local_size[2]);
  return NULL;
}

vlmc_status_t vlmc_spirv_check(const char *origin, const void *bytes, size_t size,
                               const vlmc_spirv_expect_t *expect, vlmc_spirv_info_t *out_info) {
  vlmc_spirv_info_t info = {0, 0};
  if (size % 4)
    return vlmc_status_make(VLMC_PARSE_ERROR, "%s: SPIR-V of %zu bytes, not a whole number of "
                            "words", origin, size);
  module_t m = {origin, bytes, size / 4};
  VLMC_RETURN_IF_ERROR(check_header(&m, &info));
  walk_t w;
  memset(&w, 0, sizeof w);
  for (size_t at = HEADER_WORDS; at < m.num_words;) {
    uint32_t first = word_at(&m, at), count = first >> 16, opcode = first & 0xffff;
    if (count == 0)
      return vlmc_status_make(VLMC_PARSE_ERROR, "%s: instruction at word %zu has word count 0",
                              origin, at);
    if (count > m.num_words - at)
      return vlmc_status_make(VLMC_PARSE_ERROR, "%s: instruction at word %zu (opcode %u) has "
                              "%u words, past the module's end (%zu words)", origin, at,
                              opcode, count, m.num_words);
    VLMC_RETURN_IF_ERROR(on_instruction(&m, at, count, opcode, expect, &w));
    at += count;
  }
  VLMC_RETURN_IF_ERROR(check_walk(&m, expect, &w));
  if (out_info) *out_info = info;
  return NULL;
}
