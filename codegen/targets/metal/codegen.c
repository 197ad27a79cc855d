/* The metal target (vlmc_target_metal, codegen/target.h): Metal Shading Language kernels for a
 * macOS backend. Every dispatch region's kernel is the vulkan target's SPIR-V (same regions,
 * same templates, same work rules), translated to MSL 3.0 by SPIRV-Cross (the route IREE's
 * metal-spirv takes; Debian's libspirv-cross-c-shared). The vulkan target runs inside this one
 * through its public table (codegen/target.h), so nothing of its internals is shared.
 *
 * Metal kernels are generated, and executed on Linux in emulation (tests/metal/); not yet run
 * on Apple hardware.
 *
 * Sections (docs/metal.md): "kernels.metal", the MSL sources back to back (one per kernel,
 * each a whole translation unit, NUL-terminated), and "kernels.metal.json", the kernel table
 * (format 2; the vulkan table's main kernels and dispatches) whose kernels carry: entry,
 * msl_offset, msl_size, threadgroup_x/y/z, units_per_group, push_words, threadgroup_bytes,
 * buffers (the kernel's buffer count: its inputs, its output and a split kernel's scratch;
 * binding i is [[buffer(i)]], the push constants [[buffer(buffers)]]), and a split kernel's split, scratch_floats and
 * combine_* (its second kernel). The emitter checks Metal's limits on each: at most 1024
 * threads a threadgroup, 32 KB of threadgroup memory, one [[buffer(n)]] per index. */
#define _POSIX_C_SOURCE 200809L

#include <spirv_cross/spirv_cross_c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact/kernel_table.h"
#include "codegen/target.h"
#include "support/file.h"
#include "support/strbuf.h"

enum {
  METAL_MAX_THREADS = 1024,        /* threads per threadgroup (every Apple GPU) */
  METAL_MAX_THREADGROUP = 32768,   /* threadgroup memory bytes (Apple7+: 32 KB) */
  METAL_MSL_VERSION = 30000,       /* MSL 3.0: 64-bit integers in buffers need 2.3 */
};

static const char kAbi[] =
    "metal-msl-1: one MSL translation unit per kernel; binding i of the kernel's inputs and "
    "then its output is [[buffer(i)]] (device, or constant for the push-constant words at "
    "[[buffer(buffers)]]: word 0 the work units, then the kernel's symbols); threadgroups "
    "of threadgroup_x x y x z threads, a grid of ceil(work / units_per_group) threadgroups "
    "(x, then y past 65535), as the vulkan ABI (docs/vulkan.md)";

typedef struct {
  const vlmc_target_config_t *o;
  const vlmc_module_t *module;
  vlmc_target_config_t inner; /* the vulkan target's config: this one's, quiet, no dumps */
  void *vk;                   /* the vulkan target's state */
  vlmc_strbuf_t msl;
  char *table_json;
  size_t num_kernels, num_dispatches;
} codegen_t;

static void progress(const codegen_t *g, const char *line) {
  if (g->o->progress) g->o->progress(g->o->progress_user, line);
}

/* ---- SPIR-V -> MSL ---- */

static vlmc_status_t spvc_error(spvc_context ctx, const char *entry, const char *what) {
  return vlmc_status_make(VLMC_INTERNAL, "metal: kernel %s: SPIRV-Cross %s: %s", entry, what,
                          ctx ? spvc_context_get_last_error_string(ctx) : "no context");
}

/* One SPIR-V module (its `buffers` storage bindings in set 0, push constants) as an MSL
 * translation unit appended to `out`, NUL-terminated. */
static vlmc_status_t translate(const uint32_t *words, size_t count, const char *entry,
                               uint32_t buffers, vlmc_strbuf_t *out) {
  spvc_context ctx = NULL;
  if (spvc_context_create(&ctx) != SPVC_SUCCESS) return spvc_error(NULL, entry, "context");
  spvc_parsed_ir ir = NULL;
  spvc_compiler compiler = NULL;
  spvc_compiler_options options = NULL;
  const char *source = NULL;
  vlmc_status_t st = NULL;
  if (spvc_context_parse_spirv(ctx, words, count, &ir) != SPVC_SUCCESS)
    st = spvc_error(ctx, entry, "parse");
  if (!st && spvc_context_create_compiler(ctx, SPVC_BACKEND_MSL, ir,
                                          SPVC_CAPTURE_MODE_TAKE_OWNERSHIP,
                                          &compiler) != SPVC_SUCCESS)
    st = spvc_error(ctx, entry, "compiler");
  if (!st && (spvc_compiler_create_compiler_options(compiler, &options) != SPVC_SUCCESS ||
              spvc_compiler_options_set_uint(options, SPVC_COMPILER_OPTION_MSL_VERSION,
                                             METAL_MSL_VERSION) != SPVC_SUCCESS ||
              /* plain C arrays rather than a helper template overloaded on address spaces */
              spvc_compiler_options_set_bool(options, SPVC_COMPILER_OPTION_MSL_FORCE_NATIVE_ARRAYS,
                                             SPVC_TRUE) != SPVC_SUCCESS ||
              spvc_compiler_install_compiler_options(compiler, options) != SPVC_SUCCESS))
    st = spvc_error(ctx, entry, "options");
  /* The ABI's buffer indices, explicitly: binding i -> [[buffer(i)]], push constants next. */
  for (uint32_t b = 0; !st && b <= buffers; ++b) {
    spvc_msl_resource_binding r;
    spvc_msl_resource_binding_init(&r);
    r.stage = SpvExecutionModelGLCompute;
    r.desc_set = b < buffers ? 0 : SPVC_MSL_PUSH_CONSTANT_DESC_SET;
    r.binding = b < buffers ? b : SPVC_MSL_PUSH_CONSTANT_BINDING;
    r.msl_buffer = b;
    if (spvc_compiler_msl_add_resource_binding(compiler, &r) != SPVC_SUCCESS)
      st = spvc_error(ctx, entry, "binding");
  }
  if (!st && spvc_compiler_compile(compiler, &source) != SPVC_SUCCESS)
    st = spvc_error(ctx, entry, "compile");
  if (!st) {
    vlmc_strbuf_puts(out, source);
    vlmc_strbuf_append(out, "", 1);
    if (out->failed) st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  spvc_context_destroy(ctx);
  return st;
}

/* ---- the table ---- */

static int64_t int_field(const vlmc_kernel_table_kernel_t *k, const char *key, int64_t dflt) {
  const vlmc_kernel_table_field_t *f = vlmc_kernel_table_kernel_field(k, key);
  return f && !f->string ? f->integer : dflt;
}

/* Metal's limits, checked where the kernel is made: a kernel that breaks one is refused by
 * name rather than left for the Metal framework to reject at load. */
static vlmc_status_t check_limits(const char *entry, int64_t threads, int64_t tg_bytes,
                                  uint32_t buffers) {
  if (threads < 1 || threads > METAL_MAX_THREADS)
    return vlmc_status_make(VLMC_UNSUPPORTED, "metal: kernel %s: %lld threads a threadgroup; "
                            "Metal allows at most %d", entry, (long long)threads,
                            METAL_MAX_THREADS);
  if (tg_bytes < 0 || tg_bytes > METAL_MAX_THREADGROUP)
    return vlmc_status_make(VLMC_UNSUPPORTED, "metal: kernel %s: %lld bytes of threadgroup "
                            "memory; Metal allows at most %d", entry, (long long)tg_bytes,
                            METAL_MAX_THREADGROUP);
  if (buffers + 1 > 31) /* Metal's buffer argument table has 31 entries */
    return vlmc_status_make(VLMC_UNSUPPORTED, "metal: kernel %s: %u buffers and push "
                            "constants; Metal binds at most 31", entry, buffers);
  return NULL;
}

/* The range [offset, offset + size) of the vulkan section as SPIR-V words. */
static vlmc_status_t spirv_words(const vlmc_target_section_t *spirv, int64_t offset, int64_t size,
                                 const char *entry, const uint32_t **out, size_t *out_count) {
  if (offset < 0 || size <= 0 || size % 4 || (uint64_t)offset + (uint64_t)size > spirv->len ||
      offset % 4)
    return vlmc_status_make(VLMC_INTERNAL, "metal: kernel %s: SPIR-V range [%lld, +%lld) outside "
                            "the vulkan section", entry, (long long)offset, (long long)size);
  *out = (const uint32_t *)((const char *)spirv->data + offset);
  *out_count = (size_t)size / 4;
  return NULL;
}

/* Kernel k of the vulkan table as the metal table's kernel (its MSL appended to g->msl). */
static vlmc_status_t metal_kernel(codegen_t *g, const vlmc_target_section_t *spirv,
                                  const vlmc_kernel_table_kernel_t *vk,
                                  vlmc_kernel_table_kernel_t *out) {
  const char *entry = vk->symbol;
  /* the inputs, the output, and a split kernel's scratch (docs/vulkan.md) */
  uint32_t buffers = vk->num_inputs + 1 + (int_field(vk, "split", 0) > 0 ? 1 : 0);
  int64_t threads = int_field(vk, "workgroup_x", 1) * int_field(vk, "workgroup_y", 1) *
                    int_field(vk, "workgroup_z", 1);
  int64_t tg_bytes = int_field(vk, "shared_bytes", 0);
  VLMC_RETURN_IF_ERROR(check_limits(entry, threads, tg_bytes, buffers));
  *out = *vk; /* the common fields (borrowed strings); the target fields are new */
  out->fields = NULL;
  out->num_fields = 0;
  out->sym_ids = NULL;
  const uint32_t *words;
  size_t count;
  VLMC_RETURN_IF_ERROR(spirv_words(spirv, int_field(vk, "spirv_offset", -1),
                                   int_field(vk, "spirv_size", -1), entry, &words, &count));
  size_t at = g->msl.len;
  VLMC_RETURN_IF_ERROR(translate(words, count, entry, buffers, &g->msl));
  static const char *const kCopied[] = {"workgroup_x", "workgroup_y", "workgroup_z",
                                        "units_per_group", "push_words"};
  static const char *const kNamed[] = {"threadgroup_x", "threadgroup_y", "threadgroup_z",
                                       "units_per_group", "push_words"};
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_kernel_add_string_field(out, "entry", entry));
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_kernel_add_int_field(out, "msl_offset", (int64_t)at));
  VLMC_RETURN_IF_ERROR(
      vlmc_kernel_table_kernel_add_int_field(out, "msl_size", (int64_t)(g->msl.len - at)));
  for (size_t i = 0; i < sizeof kCopied / sizeof kCopied[0]; ++i)
    VLMC_RETURN_IF_ERROR(
        vlmc_kernel_table_kernel_add_int_field(out, kNamed[i], int_field(vk, kCopied[i], 0)));
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_kernel_add_int_field(out, "threadgroup_bytes", tg_bytes));
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_kernel_add_int_field(out, "buffers", buffers));
  if (int_field(vk, "split", 0) <= 0) return NULL;
  /* A split kernel's second kernel (the combine): its own translation unit. */
  char combine[80];
  snprintf(combine, sizeof combine, "%s_combine", entry);
  int64_t combine_threads = int_field(vk, "combine_workgroup_x", 1);
  int64_t combine_bytes = int_field(vk, "combine_shared_bytes", 0);
  VLMC_RETURN_IF_ERROR(check_limits(combine, combine_threads, combine_bytes, buffers));
  VLMC_RETURN_IF_ERROR(spirv_words(spirv, int_field(vk, "combine_spirv_offset", -1),
                                   int_field(vk, "combine_spirv_size", -1), combine, &words,
                                   &count));
  at = g->msl.len;
  VLMC_RETURN_IF_ERROR(translate(words, count, combine, buffers, &g->msl));
  const struct { const char *key; int64_t value; } kSplit[] = {
      {"split", int_field(vk, "split", 0)},
      {"scratch_floats", int_field(vk, "scratch_floats", 0)},
      {"combine_msl_offset", (int64_t)at},
      {"combine_msl_size", (int64_t)(g->msl.len - at)},
      {"combine_threadgroup_x", combine_threads},
      {"combine_groups", int_field(vk, "combine_groups", 1)},
      {"combine_threadgroup_bytes", combine_bytes},
  };
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_kernel_add_string_field(out, "combine_entry", combine));
  for (size_t i = 0; i < sizeof kSplit / sizeof kSplit[0]; ++i)
    VLMC_RETURN_IF_ERROR(vlmc_kernel_table_kernel_add_int_field(out, kSplit[i].key, kSplit[i].value));
  return NULL;
}

/* --dump-kernels: NAME.metal for every translation unit. */
static vlmc_status_t dump_sources(const codegen_t *g, const vlmc_kernel_table_t *t) {
  if (!g->o->dump_dir) return NULL;
  VLMC_RETURN_IF_ERROR(vlmc_file_mkdirs(g->o->dump_dir));
  static const char *const kUnits[][3] = {{"entry", "msl_offset", "msl_size"},
                                          {"combine_entry", "combine_msl_offset",
                                           "combine_msl_size"}};
  for (size_t i = 0; i < t->num_kernels; ++i)
    for (size_t u = 0; u < 2; ++u) {
      const vlmc_kernel_table_field_t *name = vlmc_kernel_table_kernel_field(&t->kernels[i], kUnits[u][0]);
      if (!name || !name->string) continue;
      int64_t at = int_field(&t->kernels[i], kUnits[u][1], 0);
      int64_t size = int_field(&t->kernels[i], kUnits[u][2], 0);
      char path[4096];
      snprintf(path, sizeof path, "%s/%s.metal", g->o->dump_dir, name->string);
      VLMC_RETURN_IF_ERROR(vlmc_file_write_all(path, g->msl.data + at, (size_t)(size - 1)));
    }
  return NULL;
}

/* The metal table from the vulkan one: its main kernels (a variant is another device class's
 * SPIR-V: lavapipe's, or cooperative matrices SPIRV-Cross 2021 cannot translate) and every
 * dispatch, renumbered. */
static vlmc_status_t build_table(codegen_t *g, const vlmc_target_section_t *spirv,
                                 const vlmc_kernel_table_t *vk, vlmc_kernel_table_t *t) {
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_set_abi(t, kAbi));
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_add_string_field(t, "msl_version", "3.0"));
  VLMC_RETURN_IF_ERROR(vlmc_kernel_table_add_string_field(
      t, "generated_from", "the vulkan target's SPIR-V 1.3, by SPIRV-Cross"));
  size_t *renumber = calloc(vk->num_kernels ? vk->num_kernels : 1, sizeof *renumber);
  if (!renumber) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_status_t st = NULL;
  size_t count = 0;
  for (size_t i = 0; !st && i < vk->num_kernels; ++i) {
    if (vk->kernels[i].is_variant) continue;
    vlmc_kernel_table_kernel_t k;
    st = metal_kernel(g, spirv, &vk->kernels[i], &k);
    if (!st) st = vlmc_kernel_table_add_kernel(t, &k);
    if (!st) renumber[i] = count++;
    vlmc_kernel_table_kernel_fields_free(&k);
  }
  for (size_t i = 0; !st && i < vk->num_dispatches; ++i) {
    vlmc_kernel_table_dispatch_t d = vk->dispatches[i];
    d.kernel = (uint32_t)renumber[d.kernel];
    st = vlmc_kernel_table_add_dispatch(t, &d);
  }
  free(renumber);
  g->num_kernels = count;
  g->num_dispatches = vk->num_dispatches;
  return st;
}

/* ---- the target's entries (codegen/target.h) ---- */

static bool metal_supports(const vlmc_dispatch_region_t *region, const vlmc_op_t *anchor) {
  return vlmc_target_vulkan.supports(region, anchor);
}

static void metal_destroy(void *state) {
  codegen_t *g = state;
  if (!g) return;
  if (g->vk) vlmc_target_vulkan.destroy(g->vk);
  vlmc_strbuf_deinit(&g->msl);
  free(g->table_json);
  free(g);
}

static void quiet(void *user, const char *line) {
  (void)user;
  (void)line;
}

static vlmc_status_t metal_create(const vlmc_target_config_t *config, const vlmc_module_t *module,
                                  void **out_state) {
  codegen_t *g = calloc(1, sizeof *g);
  if (!g) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  g->o = config;
  g->module = module;
  vlmc_strbuf_init(&g->msl);
  /* The vulkan target works for this one: no progress lines and no dumps of its own. */
  g->inner = *config;
  g->inner.dump_dir = NULL;
  g->inner.progress = quiet;
  vlmc_status_t st = vlmc_target_vulkan.create(&g->inner, module, &g->vk);
  if (st) {
    metal_destroy(g);
    return st;
  }
  progress(g, "compile: metal kernels (MSL 3.0 from the vulkan target's SPIR-V, by "
              "SPIRV-Cross; executed on Linux in emulation, not yet run on Apple hardware)");
  *out_state = g;
  return NULL;
}

static vlmc_status_t metal_emit_region(void *state, const vlmc_func_t *func,
                                       const vlmc_dispatch_region_t *region) {
  codegen_t *g = state;
  return vlmc_target_vulkan.emit_region(g->vk, func, region);
}

static vlmc_status_t metal_finish(void *state, vlmc_target_sections_t *out) {
  codegen_t *g = state;
  vlmc_target_sections_t vk_sections = {0};
  VLMC_RETURN_IF_ERROR(vlmc_target_vulkan.finish(g->vk, &vk_sections));
  const vlmc_target_section_t *spirv = NULL, *json = NULL;
  for (size_t i = 0; i < vk_sections.count; ++i) {
    if (!strcmp(vk_sections.items[i].name, "kernels.vulkan")) spirv = &vk_sections.items[i];
    if (!strcmp(vk_sections.items[i].name, "kernels.vulkan.json")) json = &vk_sections.items[i];
  }
  if (!spirv || !json)
    return vlmc_status_make(VLMC_INTERNAL, "metal: the vulkan target gave no kernels");
  vlmc_kernel_table_t vk, t;
  vlmc_status_t st = vlmc_kernel_table_parse("<vulkan target>", "vulkan", json->data, json->len, &vk);
  vlmc_status_t st2 = vlmc_kernel_table_init(&t, "metal");
  if (!st) st = st2;
  else vlmc_status_free(st2);
  if (!st) st = build_table(g, spirv, &vk, &t);
  if (!st) st = dump_sources(g, &t);
  vlmc_strbuf_t text;
  vlmc_strbuf_init(&text);
  if (!st) st = vlmc_kernel_table_to_json(&t, &text);
  if (!st) g->table_json = vlmc_strbuf_take(&text);
  vlmc_strbuf_deinit(&text);
  vlmc_kernel_table_deinit(&vk);
  vlmc_kernel_table_deinit(&t);
  VLMC_RETURN_IF_ERROR(st);
  char line[256];
  snprintf(line, sizeof line, "compile: metal: %zu dispatches, %zu kernels, %.1f KB of MSL%s%s",
           g->num_dispatches, g->num_kernels, (double)g->msl.len / 1e3,
           g->o->dump_dir ? "; sources dumped to " : "", g->o->dump_dir ? g->o->dump_dir : "");
  progress(g, line);
  out->items[0] = (vlmc_target_section_t){"kernels.metal", g->msl.data ? g->msl.data : "",
                                          g->msl.len, 16};
  out->items[1] = (vlmc_target_section_t){"kernels.metal.json", g->table_json,
                                          strlen(g->table_json), 8};
  out->count = 2;
  return NULL;
}

const vlmc_target_t vlmc_target_metal = {
    .name = "metal",
    .summary = "Metal Shading Language kernels (the vulkan kernels through SPIRV-Cross) for a "
               "macOS backend; executed on Linux in emulation, not yet run on Apple hardware",
    .options = NULL,
    .num_options = 0,
    .kernels_from = "vulkan",
    .precisions = "f32,f16",
    .precision_note = "metal kernels compute in f32, or in f16 (bf16 is storage only on Apple "
                      "GPUs), as the vulkan kernels they come from",
    .default_precision = "f32",
    .pipeline_tail = "fuse,memory-plan",
    .fusions = "norm-prologue", /* its kernels are the vulkan target's */
    .supports = metal_supports,
    .create = metal_create,
    .emit_region = metal_emit_region,
    .finish = metal_finish,
    .destroy = metal_destroy,
};
