/* The registry of runtime backends (runtime/backend.h). The one place that names them: each
 * backend's folder under runtime/backends/ defines its interface table, declared here by its
 * symbol alone (no backend header is included outside its folder). */
#include <stdio.h>
#include <string.h>

#include "runtime/backend.h"

extern const vlmc_backend_iface_t vlmc_backend_cpu;
extern const vlmc_backend_iface_t vlmc_backend_ref;
extern const vlmc_backend_iface_t vlmc_backend_null;
#ifdef VLMC_HAVE_VULKAN
extern const vlmc_backend_iface_t vlmc_backend_vulkan;
#endif
#ifdef VLMC_HAVE_METAL
extern const vlmc_backend_iface_t vlmc_backend_metal;
#endif

/* In order of preference: the generated cpu kernels when the artifact has them, then the
 * vulkan kernels (so vulkan is the default only for an artifact compiled for vulkan alone),
 * then the metal ones (macOS), else the interpreter. */
static const vlmc_backend_iface_t *const kBackends[] = {&vlmc_backend_cpu,
#ifdef VLMC_HAVE_VULKAN
                                                        &vlmc_backend_vulkan,
#endif
#ifdef VLMC_HAVE_METAL
                                                        &vlmc_backend_metal,
#endif
                                                        &vlmc_backend_ref, &vlmc_backend_null};
enum { NUM_BUILT_IN = sizeof kBackends / sizeof kBackends[0], MAX_EXTRA = 4 };

/* Backends a program registered (vlmc_backend_register): after the built-in ones. */
static const vlmc_backend_iface_t *extra[MAX_EXTRA];
static size_t num_extra;

bool vlmc_backend_register(const vlmc_backend_iface_t *iface) {
  if (!iface || num_extra == MAX_EXTRA || vlmc_backend_find(iface->name)) return false;
  extra[num_extra++] = iface;
  return true;
}

size_t vlmc_backend_count(void) { return NUM_BUILT_IN + num_extra; }

const vlmc_backend_iface_t *vlmc_backend_at(size_t index) {
  return index < NUM_BUILT_IN ? kBackends[index]
         : index < vlmc_backend_count() ? extra[index - NUM_BUILT_IN] : NULL;
}

const vlmc_backend_iface_t *vlmc_backend_find(const char *name) {
  for (size_t i = 0; name && i < vlmc_backend_count(); ++i)
    if (!strcmp(vlmc_backend_at(i)->name, name)) return vlmc_backend_at(i);
  return NULL;
}

void vlmc_backend_names(char *out, size_t size) {
  size_t used = 0;
  if (size) out[0] = '\0';
  for (size_t i = 0; i < vlmc_backend_count() && used < size; ++i) {
    int n = snprintf(out + used, size - used, "%s%s", i ? ", " : "", vlmc_backend_at(i)->name);
    if (n < 0) break;
    used += (size_t)n;
  }
}

const char *vlmc_backend_not_built(const char *name) {
  if (vlmc_backend_find(name)) return NULL; /* a program registered one of that name */
#ifndef VLMC_HAVE_VULKAN
  if (name && !strcmp(name, "vulkan"))
    return "this vlmc-run was built without the vulkan backend (-DVLMC_VULKAN=OFF, or "
           "vulkan/vulkan.h was not found at build time: install libvulkan-dev and rebuild)";
#endif
#ifndef VLMC_HAVE_METAL
  if (name && !strcmp(name, "metal"))
    return "the metal backend is built only on macOS (runtime/backends/metal); on this "
           "machine an artifact's metal kernels run only in the test emulation "
           "(vlmc-run-metal-emu, tests/metal/README.md)";
#endif
  (void)name;
  return NULL;
}

bool vlmc_backend_has_sections(const vlmc_backend_iface_t *backend,
                               vlmc_backend_section_fn section, void *section_ctx) {
  for (const char *const *name = backend->sections; name && *name; ++name) {
    size_t size = 0;
    if (!section(section_ctx, *name, &size)) return false;
  }
  return true;
}

const vlmc_backend_iface_t *vlmc_backend_pick_default(vlmc_backend_section_fn section,
                                                      void *section_ctx) {
  for (size_t i = 0; i < vlmc_backend_count(); ++i)
    if (!(vlmc_backend_at(i)->caps & VLMC_BACKEND_EXPLICIT_ONLY) &&
        vlmc_backend_has_sections(vlmc_backend_at(i), section, section_ctx))
      return vlmc_backend_at(i);
  return NULL;
}

/* ---- values ---- */

bool vlmc_rt_value_bytes(const vlmc_rt_value_t *v, size_t *out_bytes) {
  return vlmc_tensor_byte_size(v->dtype, v->rank, v->shape, out_bytes);
}

vlmc_status_t vlmc_rt_value_ensure_buffer(vlmc_backend_t *b, vlmc_rt_value_t *v) {
  if (v->buffer) return NULL;
  size_t bytes = 0;
  if (!vlmc_rt_value_bytes(v, &bytes))
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "an output of an invalid shape");
  VLMC_RETURN_IF_ERROR(b->iface->buffer_alloc(b, bytes, &v->buffer));
  v->owned = true;
  return NULL;
}

void vlmc_rt_value_release(vlmc_backend_t *b, vlmc_rt_value_t *v) {
  if (v->owned && v->buffer) b->iface->buffer_free(b, v->buffer);
  v->buffer = NULL;
  v->owned = false;
}

vlmc_tensor_t vlmc_rt_value_host_view(vlmc_backend_t *b, const vlmc_rt_value_t *v) {
  void *data = v->buffer ? b->iface->buffer_host(b, v->buffer) : NULL;
  return vlmc_tensor_view(v->dtype, v->rank, v->shape, data);
}
