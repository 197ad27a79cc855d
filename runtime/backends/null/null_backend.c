/* The `null` backend: a skeleton to copy when adding a backend (README.md beside this file).
 * Its memory is its own (not the host's), so the walker moves every byte a host step or the
 * caller needs through upload and download, as it would for a GPU; it has no kernels, so it
 * refuses every dispatch region by name. Programs without regions (host steps only) run on
 * it, which is what the unit test of the transfer accounting uses. */
#include <stdlib.h>
#include <string.h>

#include "ir/dispatch.h"
#include "runtime/backend.h"

extern const vlmc_backend_iface_t vlmc_backend_null;

/* A backend's buffer: here plain memory that only upload and download touch. A GPU backend
 * would hold its device allocation (a VkBuffer and its memory, an MTLBuffer) instead. */
struct vlmc_buffer_s {
  size_t size;
  unsigned char *bytes;
};

typedef struct {
  vlmc_backend_t base; /* first: the walker sees a vlmc_backend_t */
  const vlmc_module_t *module;
} null_backend_t;

static vlmc_status_t null_open(const vlmc_backend_open_params_t *params, vlmc_backend_t **out) {
  null_backend_t *b = calloc(1, sizeof *b);
  if (!b) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  b->base.iface = &vlmc_backend_null;
  b->module = params->module;
  *out = &b->base;
  return NULL;
}

static void null_destroy(vlmc_backend_t *b) { free(b); }

static vlmc_status_t null_buffer_alloc(vlmc_backend_t *b, size_t bytes, vlmc_buffer_t **out) {
  vlmc_buffer_t *buf = calloc(1, sizeof *buf);
  unsigned char *data = buf ? calloc(1, bytes ? bytes : 1) : NULL;
  if (!data) {
    free(buf);
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "backend null: out of memory for %zu bytes",
                            bytes);
  }
  *buf = (vlmc_buffer_t){bytes, data};
  *out = buf;
  return NULL;
}

static void null_buffer_free(vlmc_backend_t *b, vlmc_buffer_t *buf) {
  if (!buf) return;
  free(buf->bytes);
  free(buf);
}

static vlmc_status_t null_upload(vlmc_backend_t *b, vlmc_buffer_t *dst, const void *src,
                                 size_t bytes) {
  if (bytes > dst->size)
    return vlmc_status_make(VLMC_INTERNAL, "backend null: %zu bytes into a %zu-byte buffer",
                            bytes, dst->size);
  if (bytes) memcpy(dst->bytes, src, bytes);
  return NULL;
}

static vlmc_status_t null_download(vlmc_backend_t *b, vlmc_buffer_t *src, void *dst,
                                   size_t bytes) {
  if (bytes > src->size)
    return vlmc_status_make(VLMC_INTERNAL, "backend null: %zu bytes from a %zu-byte buffer",
                            bytes, src->size);
  if (bytes) memcpy(dst, src->bytes, bytes);
  return NULL;
}

/* A real backend looks up the region's kernel (loaded at open from its sections) and
 * enqueues it here. */
static vlmc_status_t null_run_region(vlmc_backend_t *base, const vlmc_region_call_t *call) {
  vlmc_dispatch_set_t set;
  VLMC_RETURN_IF_ERROR(vlmc_dispatch_regions(call->func, &set));
  const vlmc_dispatch_region_t *region = vlmc_dispatch_find(&set, call->region);
  const char *root = region ? vlmc_op_info(region->ops[region->num_ops - 1]->kind)->mnemonic : "?";
  vlmc_status_t st = vlmc_status_make(VLMC_UNSUPPORTED, "backend null: no kernel for @%s "
                                      "dispatch %u (rooted at %s): the null backend is a "
                                      "skeleton that runs no region", call->func->name, call->region, root);
  vlmc_dispatch_set_free(&set);
  return st;
}

static const vlmc_dtype_t kComputeDtypes[] = {VLMC_DTYPE_COUNT}; /* none */
static const char *const kSections[] = {"program", NULL};

const vlmc_backend_iface_t vlmc_backend_null = {
    .name = "null",
    .summary = "a skeleton with device memory of its own and no kernels (runtime/backends/null)",
    .caps = VLMC_BACKEND_EXPLICIT_ONLY,
    .compute_dtypes = kComputeDtypes,
    .sections = kSections,
    .open = null_open,
    .destroy = null_destroy,
    .buffer_alloc = null_buffer_alloc,
    .buffer_free = null_buffer_free,
    .upload = null_upload,
    .download = null_download,
    .run_region = null_run_region,
};
