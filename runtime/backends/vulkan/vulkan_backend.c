/* The `vulkan` backend: runs the artifact's SPIR-V kernels (section kernels.vulkan, table
 * kernels.vulkan.json; the ABI is docs/vulkan.md) on a Vulkan device through a loader opened
 * at run time (vk_loader.h). Buffers are device-local VkBuffers; bytes move through one
 * host-visible staging buffer. Dispatches are recorded into one command buffer and submitted
 * together when the walker needs a result on the host (download) or the call ends
 * (synchronize): never a submit-and-wait per dispatch. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "artifact/kernel_table.h"
#include "ir/dispatch.h"
#include "runtime/backend.h"
#include "runtime/backends/vulkan/device.h"
#include "runtime/backends/vulkan/kernels.h"
#include "runtime/backends/vulkan/pipeline_cache.h"
#include "runtime/backends/vulkan/vk_loader.h"

extern const vlmc_backend_iface_t vlmc_backend_vulkan;

enum {
  MAX_BINDINGS = VLMC_KERNEL_MAX_INPUTS + 2, /* the inputs, the output, a split kernel's scratch */
  MAX_GROUPS_X = 65535,          /* every device's maxComputeWorkGroupCount[0] at least */
  STAGING_CHUNK = 64 << 20,      /* bytes moved per staging copy */
  BUFFER_ALIGN = 16,
  SETS_PER_POOL = 256,
  DESCRIPTORS_PER_POOL = 4096,
  PROFILE_DISPATCHES = 1024, /* VLMC_VULKAN_PROFILE: timed dispatches per batch */
  /* Freed buffers kept for reuse (a decode step's token, positions and logits each call),
   * up to this many bytes in all, each at most REUSE_MAX: vkAllocateMemory is slow. */
  REUSE_BYTES = 256 << 20,
  REUSE_MAX = 64 << 20,
  REUSE_SLOTS = 64,
  /* Uploads of at most this many bytes go through the upload ring, copied in the pending
   * batch (no submit and wait of their own); the ring holds UPLOAD_RING bytes a batch. */
  SMALL_UPLOAD = 64 << 10,
  UPLOAD_RING = 1 << 20,
  HAZARD_SLOTS = 32, /* buffers tracked between barriers (more: a barrier) */
  /* A batch goes to the queue in chunks as it is recorded, so that the device starts on a
   * decode step's first layers while the host records the rest: the first chunk of a batch
   * is CHUNK_FIRST dispatches, each next one twice as many, up to CHUNK_MAX (a 3B decode
   * step of 508 dispatches: 6 submits). Measured on an H100 (bench/README.md, 2026-12-07):
   * whole batches 97.6 tok/s, fixed chunks of 32 / 96 / 256 dispatches 101 / 102 / 121 (the
   * small ones many submits; the device idled while the host recorded a whole batch).
   * VLMC_VULKAN_CHUNK=N: fixed chunks of N; N+: growing from N; 0: whole batches. */
  CHUNK_FIRST = 32,
  CHUNK_MAX = 1024,
  CHUNK_RING = 4, /* command buffers: a chunk waits only when this many are still running */
};
/* A fence wait longer than this is reported as a hang (a kernel that never ends). */
static const uint64_t kFenceTimeoutNs = 600ull * 1000000000ull;

struct vlmc_buffer_s {
  VkBuffer buffer;
  VkDeviceMemory memory;
  size_t size;     /* bytes asked for */
  size_t capacity; /* bytes the VkBuffer has (size rounded up, or a reused larger buffer) */
};

typedef struct {
  vlmc_vk_kernel_info_t info;
  vlmc_dtype_t *inputs;
  uint32_t num_inputs;
  vlmc_dtype_t output;
  uint32_t syms[VLMC_KERNEL_MAX_SYMS]; /* module symbol ids */
  uint32_t num_syms;
  VkShaderModule shader;
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout layout;
  VkPipeline pipeline;
  /* A split kernel's stage 2 (info.split > 0): the same layout, its own module. */
  VkShaderModule combine_shader;
  VkPipeline combine_pipeline;
  uint64_t calls; /* VLMC_VULKAN_PROFILE: dispatches and device seconds */
  double seconds;
  double stage1_seconds; /* a split kernel's: the part before its combine */
} kernel_t;

typedef struct {
  const kernel_t *kernel; /* NULL: no entry */
  vlmc_dim_t work;
  int64_t scale;
  /* A kv_cache_append without epilogue reading its cache as region input cache_input (-1:
   * any other region): it may grow the cache's buffer in place (take_grown_cache). */
  int cache_input;
} dispatch_t;

typedef struct {
  const vlmc_func_t *func;
  vlmc_dispatch_set_t regions;
  dispatch_t *by_id;
  uint32_t max_id;
} func_table_t;

typedef struct {
  vlmc_backend_t base;
  const char *source;
  const vlmc_module_t *module;
  vlmc_vk_t vk;
  VkInstance instance;
  vlmc_vk_device_info_t *devices;
  uint32_t num_devices;
  const vlmc_vk_device_info_t *dev;
  VkDevice device;
  VkQueue queue;
  VkCommandPool command_pool;
  VkCommandBuffer cmd; /* the one being recorded: ring[current] */
  VkFence fence;       /* its fence: fences[current] */
  VkCommandBuffer ring_cmds[CHUNK_RING];
  VkFence fences[CHUNK_RING];
  bool submitted[CHUNK_RING]; /* chunks of the pending batch on the queue, not yet waited for */
  uint32_t current;
  /* this chunk's dispatches and its size; the first chunk's size (0: no chunks), and
   * whether each next chunk doubles */
  uint32_t chunk_dispatches, chunk_size, chunk_first;
  bool chunk_grows;
  bool full_barriers; /* VLMC_VULKAN_FULL_BARRIERS=1: dispatches wait on transfers too */
  VkQueryPool timestamps; /* VK_NULL_HANDLE: the queue has no timestamps */
  /* VLMC_VULKAN_PROFILE=1: two timestamps around every dispatch, summed per kernel and
   * printed to stderr when the backend closes. */
  VkQueryPool profile_pool;
  kernel_t *profiled[PROFILE_DISPATCHES]; /* this batch's dispatches, in order */
  VkPhysicalDeviceMemoryProperties memory;
  bool push_descriptors;
  vlmc_buffer_t staging;
  void *staging_map;
  vlmc_buffer_t *empty; /* bound for values without elements */
  kernel_t *kernels;
  size_t num_kernels, num_dispatches;
  /* Per table kernel: the kernel that runs in its place (itself, or for a main kernel the
   * variant chosen for this device: pick_variants), and whether it is loaded. */
  uint32_t *runs_as;
  bool *loaded;
  const char *variant_class; /* the device class variants were picked for; NULL: none */
  size_t num_variants_used;
  func_table_t *funcs;
  VkDescriptorPool *pools; /* without push descriptors: reset after every batch */
  size_t num_pools, cap_pools, current_pool;
  vlmc_buffer_t **deferred; /* freed while a batch that may use them is pending */
  size_t num_deferred, cap_deferred;
  vlmc_buffer_t *reuse[REUSE_SLOTS]; /* freed buffers no batch uses, for vk_buffer_alloc */
  size_t num_reuse, reuse_bytes;
  vlmc_buffer_t ring; /* host-visible: small uploads of the pending batch */
  void *ring_map;
  size_t ring_used;
  bool recording;
  bool lost;
  /* The buffers the dispatches since the last barrier wrote and read: a dispatch that touches
   * none of them in a conflicting way (read after write, write after read or write) needs no
   * barrier, and may overlap on the device with the ones before it (a decode step's q, k and
   * v projections; its two ropes and two KV appends). */
  VkBuffer written[HAZARD_SLOTS], read[HAZARD_SLOTS];
  uint32_t num_written, num_read;
  bool hazards_lost; /* more accesses than the slots hold since the last barrier: barrier */
  /* Split kernels' partial results (binding n + 1), grown to the largest dispatch's need;
   * their stage 1 writes it and stage 2 reads it, tracked like any buffer. */
  vlmc_buffer_t *scratch;
  uint32_t batch_dispatches;
  vlmc_vk_pipeline_cache_t cache;
  uint64_t calls, submits;
  double wait_seconds, gpu_seconds, record_seconds;
} vk_backend_t;

static void vk_destroy(vlmc_backend_t *base);

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *device_name(const vk_backend_t *b) {
  return b->dev ? b->dev->props.deviceName : "?";
}

static vlmc_status_t vk_error(const vk_backend_t *b, VkResult r, const char *what) {
  if (r == VK_ERROR_DEVICE_LOST)
    return vlmc_status_make(VLMC_INTERNAL, "vulkan: device %s lost (VK_ERROR_DEVICE_LOST) "
                            "during %s: a kernel faulted or the driver reset the device; the "
                            "session cannot continue", device_name(b), what);
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "vulkan: out of %s memory during %s on %s",
                            r == VK_ERROR_OUT_OF_DEVICE_MEMORY ? "device" : "host", what,
                            device_name(b));
  return vlmc_status_make(VLMC_INTERNAL, "vulkan: %s failed on %s (%s)", what, device_name(b),
                          vlmc_vk_result_name(r));
}

#define VK_CHECK(b, call, what)                          \
  do {                                                   \
    VkResult vk_check_result_ = (call);                  \
    if (vk_check_result_ != VK_SUCCESS)                  \
      return vk_error((b), vk_check_result_, (what));    \
  } while (0)

/* ---- memory ---- */

static int memory_type(const vk_backend_t *b, uint32_t allowed, VkMemoryPropertyFlags want) {
  for (uint32_t i = 0; i < b->memory.memoryTypeCount; ++i)
    if ((allowed & (1u << i)) && (b->memory.memoryTypes[i].propertyFlags & want) == want)
      return (int)i;
  return -1;
}

static vlmc_status_t buffer_create(vk_backend_t *b, size_t bytes, bool staging,
                                   vlmc_buffer_t *out) {
  memset(out, 0, sizeof *out);
  size_t size = (bytes + BUFFER_ALIGN - 1) / BUFFER_ALIGN * BUFFER_ALIGN;
  if (size < BUFFER_ALIGN) size = BUFFER_ALIGN;
  VkBufferCreateInfo info = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .size = size,
                             .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  VK_CHECK(b, b->vk.vkCreateBuffer(b->device, &info, NULL, &out->buffer), "vkCreateBuffer");
  VkMemoryRequirements req;
  b->vk.vkGetBufferMemoryRequirements(b->device, out->buffer, &req);
  VkMemoryPropertyFlags want = staging ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                             VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                                       : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  int type = memory_type(b, req.memoryTypeBits, want);
  if (type < 0 && !staging) type = memory_type(b, req.memoryTypeBits, 0);
  if (type < 0) {
    b->vk.vkDestroyBuffer(b->device, out->buffer, NULL);
    out->buffer = VK_NULL_HANDLE;
    return vlmc_status_make(VLMC_UNSUPPORTED, "vulkan: device %s has no %s memory type for "
                            "buffers", device_name(b), staging ? "host-visible coherent" : "");
  }
  VkMemoryAllocateInfo alloc = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                .allocationSize = req.size,
                                .memoryTypeIndex = (uint32_t)type};
  VkResult r = b->vk.vkAllocateMemory(b->device, &alloc, NULL, &out->memory);
  if (r == VK_SUCCESS) r = b->vk.vkBindBufferMemory(b->device, out->buffer, out->memory, 0);
  if (r != VK_SUCCESS) {
    if (out->memory) b->vk.vkFreeMemory(b->device, out->memory, NULL);
    b->vk.vkDestroyBuffer(b->device, out->buffer, NULL);
    memset(out, 0, sizeof *out);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
      uint32_t heap = b->memory.memoryTypes[type].heapIndex;
      return vlmc_status_make(VLMC_OUT_OF_MEMORY, "vulkan: out of %s memory allocating %.1f MB "
                              "for a %s buffer on %s (heap %u: %.0f MB)",
                              r == VK_ERROR_OUT_OF_DEVICE_MEMORY ? "device" : "host",
                              (double)req.size / (1 << 20), staging ? "staging" : "device",
                              device_name(b), heap,
                              (double)b->memory.memoryHeaps[heap].size / (1 << 20));
    }
    return vk_error(b, r, "vkAllocateMemory");
  }
  out->size = bytes;
  out->capacity = size;
  return NULL;
}

static void buffer_destroy(vk_backend_t *b, vlmc_buffer_t *buf) {
  if (buf->buffer) b->vk.vkDestroyBuffer(b->device, buf->buffer, NULL);
  if (buf->memory) b->vk.vkFreeMemory(b->device, buf->memory, NULL);
  memset(buf, 0, sizeof *buf);
}

/* A kept buffer of at least `bytes` and at most twice that (plus a page), or NULL. */
static vlmc_buffer_t *take_reusable(vk_backend_t *b, size_t bytes) {
  for (size_t i = 0; i < b->num_reuse; ++i) {
    vlmc_buffer_t *buf = b->reuse[i];
    if (buf->capacity < bytes || buf->capacity > 2 * bytes + 4096) continue;
    b->reuse[i] = b->reuse[--b->num_reuse];
    b->reuse_bytes -= buf->capacity;
    buf->size = bytes;
    return buf;
  }
  return NULL;
}

/* Keeps a buffer no batch uses for reuse, or destroys it. */
static void release_buffer(vk_backend_t *b, vlmc_buffer_t *buf) {
  if (b->num_reuse < REUSE_SLOTS && buf->capacity <= REUSE_MAX &&
      b->reuse_bytes + buf->capacity <= REUSE_BYTES) {
    b->reuse[b->num_reuse++] = buf;
    b->reuse_bytes += buf->capacity;
    return;
  }
  buffer_destroy(b, buf);
  free(buf);
}

/* One allocation per buffer (simple; a suballocator would cut vkAllocateMemory calls, which
 * matter on drivers with a low maxMemoryAllocationCount, not on lavapipe), unless a freed one
 * can be taken again. */
static vlmc_status_t vk_buffer_alloc(vlmc_backend_t *base, size_t bytes, vlmc_buffer_t **out) {
  vk_backend_t *b = (vk_backend_t *)base;
  if ((*out = take_reusable(b, bytes)) != NULL) return NULL;
  vlmc_buffer_t *buf = calloc(1, sizeof *buf);
  if (!buf) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  vlmc_status_t st = buffer_create(b, bytes, false, buf);
  if (st) {
    free(buf);
    return st;
  }
  *out = buf;
  return NULL;
}

static void vk_buffer_free(vlmc_backend_t *base, vlmc_buffer_t *buf) {
  vk_backend_t *b = (vk_backend_t *)base;
  if (!buf) return;
  if (b->recording) { /* the pending batch may use it: free it when the batch is done */
    if (b->num_deferred == b->cap_deferred) {
      size_t cap = b->cap_deferred ? 2 * b->cap_deferred : 64;
      vlmc_buffer_t **grown = realloc(b->deferred, cap * sizeof *grown);
      if (grown) {
        b->deferred = grown;
        b->cap_deferred = cap;
      }
    }
    if (b->num_deferred < b->cap_deferred) {
      b->deferred[b->num_deferred++] = buf;
      return;
    }
    b->vk.vkDeviceWaitIdle(b->device); /* out of memory for the list: wait instead */
    buffer_destroy(b, buf);
    free(buf);
    return;
  }
  release_buffer(b, buf);
}

/* ---- the batch: one command buffer, submitted at download / synchronize ---- */

static void full_barrier(vk_backend_t *b) {
  b->num_written = b->num_read = 0;
  b->hazards_lost = false;
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                         VK_ACCESS_TRANSFER_READ_BIT |
                                         VK_ACCESS_TRANSFER_WRITE_BIT};
  VkPipelineStageFlags stages =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  b->vk.vkCmdPipelineBarrier(b->cmd, stages, stages, 0, 1, &mb, 0, NULL, 0, NULL);
}

/* Between two dispatches: the later one's shader reads and writes wait for the earlier
 * one's shader writes. Transfers never need it: every copy has a full barrier on each side
 * (upload_in_batch, vk_download, take_grown_cache). */
static void dispatch_barrier(vk_backend_t *b) {
  if (b->full_barriers) {
    full_barrier(b);
    return;
  }
  b->num_written = b->num_read = 0;
  b->hazards_lost = false;
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
  b->vk.vkCmdPipelineBarrier(b->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
}

static vlmc_status_t begin_commands(vk_backend_t *b) {
  VkCommandBufferBeginInfo info = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  VK_CHECK(b, b->vk.vkBeginCommandBuffer(b->cmd, &info), "vkBeginCommandBuffer");
  b->chunk_dispatches = 0;
  return NULL;
}

static vlmc_status_t begin_batch(vk_backend_t *b) {
  if (b->lost)
    return vlmc_status_make(VLMC_INTERNAL, "vulkan: device %s was lost earlier in this "
                            "session", device_name(b));
  if (b->recording) return NULL;
  VLMC_RETURN_IF_ERROR(begin_commands(b));
  b->chunk_size = b->chunk_first;
  if (b->timestamps) {
    b->vk.vkCmdResetQueryPool(b->cmd, b->timestamps, 0, 2);
    b->vk.vkCmdWriteTimestamp(b->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, b->timestamps, 0);
  }
  if (b->profile_pool)
    b->vk.vkCmdResetQueryPool(b->cmd, b->profile_pool, 0, 3 * PROFILE_DISPATCHES);
  /* Writes of the previous batch (or upload) before anything this batch does. */
  full_barrier(b);
  b->recording = true;
  b->batch_dispatches = 0;
  return NULL;
}

static void read_timestamps(vk_backend_t *b) {
  uint64_t t[2];
  if (!b->timestamps ||
      b->vk.vkGetQueryPoolResults(b->device, b->timestamps, 0, 2, sizeof t, t, sizeof t[0],
                                  VK_QUERY_RESULT_64_BIT) != VK_SUCCESS)
    return;
  uint64_t mask = b->dev->timestamp_bits >= 64 ? ~0ull : (1ull << b->dev->timestamp_bits) - 1;
  uint64_t ticks = (t[1] - t[0]) & mask;
  b->gpu_seconds += (double)ticks * (double)b->dev->props.limits.timestampPeriod * 1e-9;
}

static void read_profile(vk_backend_t *b) {
  uint32_t n = b->batch_dispatches;
  if (!b->profile_pool || !n) return;
  uint64_t *t = calloc(2 * (size_t)n, sizeof *t), *mid = calloc(n, sizeof *mid);
  if (t && mid &&
      b->vk.vkGetQueryPoolResults(b->device, b->profile_pool, 0, 2 * n, 2 * n * sizeof *t, t,
                                  sizeof *t, VK_QUERY_RESULT_64_BIT) == VK_SUCCESS) {
    uint64_t mask = b->dev->timestamp_bits >= 64 ? ~0ull : (1ull << b->dev->timestamp_bits) - 1;
    double period = (double)b->dev->props.limits.timestampPeriod * 1e-9;
    for (uint32_t i = 0; i < n; ++i) {
      kernel_t *k = b->profiled[i];
      k->calls++;
      k->seconds += (double)((t[2 * i + 1] - t[2 * i]) & mask) * period;
      if (k->info.split &&
          b->vk.vkGetQueryPoolResults(b->device, b->profile_pool, 2 * PROFILE_DISPATCHES + i, 1,
                                      sizeof *mid, mid + i, sizeof *mid,
                                      VK_QUERY_RESULT_64_BIT) == VK_SUCCESS)
        k->stage1_seconds += (double)((mid[i] - t[2 * i]) & mask) * period;
    }
  }
  free(mid);
  free(t);
}

static int by_seconds(const void *x, const void *y) {
  const kernel_t *a = *(const kernel_t *const *)x, *c = *(const kernel_t *const *)y;
  return a->seconds < c->seconds ? 1 : a->seconds > c->seconds ? -1 : 0;
}

static void print_profile(const vk_backend_t *b) {
  kernel_t **order = calloc(b->num_kernels + 1, sizeof *order);
  if (!order) return;
  double total = 0;
  for (size_t i = 0; i < b->num_kernels; ++i) {
    order[i] = &b->kernels[i];
    total += b->kernels[i].seconds;
  }
  qsort(order, b->num_kernels, sizeof *order, by_seconds);
  fprintf(stderr, "vulkan profile: %.1f ms of device time in %llu dispatches; ", total * 1e3,
          (unsigned long long)b->calls);
  if (b->variant_class)
    fprintf(stderr, "%zu kernel%s run as the variant for %s devices\n", b->num_variants_used,
            b->num_variants_used == 1 ? "" : "s", b->variant_class);
  else
    fprintf(stderr, "main kernels only (VLMC_KERNEL_VARIANTS=main)\n");
  for (size_t i = 0; i < b->num_kernels && order[i]->calls; ++i) {
    fprintf(stderr, "  %-6s %-16s %8llu calls %10.2f ms %5.1f%%", order[i]->info.symbol,
            order[i]->info.template_name, (unsigned long long)order[i]->calls,
            order[i]->seconds * 1e3, total > 0 ? 100 * order[i]->seconds / total : 0);
    if (order[i]->info.split) /* its stage 1, the barrier and the combine, apart */
      fprintf(stderr, " (split %u: stage 1 %.2f ms)", order[i]->info.split,
              order[i]->stage1_seconds * 1e3);
    fputc('\n', stderr);
  }
  free(order);
}

static void after_batch(vk_backend_t *b) {
  for (size_t i = 0; i < b->num_deferred; ++i) release_buffer(b, b->deferred[i]);
  b->num_deferred = 0;
  b->ring_used = 0;
  for (size_t i = 0; i < b->num_pools; ++i)
    b->vk.vkResetDescriptorPool(b->device, b->pools[i], 0);
  b->current_pool = 0;
}

/* A fence wait's result as a status (a timeout is a hang: the device is taken as lost). */
static vlmc_status_t fence_status(vk_backend_t *b, VkResult r) {
  if (r == VK_TIMEOUT) {
    b->lost = true;
    return vlmc_status_make(VLMC_INTERNAL, "vulkan: a batch of %u dispatches on %s did not "
                            "finish in %llu s (a kernel that never ends?)", b->batch_dispatches,
                            device_name(b), (unsigned long long)(kFenceTimeoutNs / 1000000000ull));
  }
  if (r != VK_SUCCESS) {
    if (r == VK_ERROR_DEVICE_LOST) b->lost = true;
    return vk_error(b, r, "a batch of dispatches");
  }
  return NULL;
}

/* Ends the command buffer being recorded and puts it on the queue (fence: fences[current]). */
static VkResult submit_current(vk_backend_t *b) {
  VkResult r = b->vk.vkEndCommandBuffer(b->cmd);
  VkSubmitInfo submit = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                         .commandBufferCount = 1,
                         .pCommandBuffers = &b->cmd};
  if (r == VK_SUCCESS) r = b->vk.vkQueueSubmit(b->queue, 1, &submit, b->fence);
  if (r == VK_SUCCESS) {
    b->submitted[b->current] = true;
    b->submits++;
  }
  return r;
}

/* Waits for ring slot i's chunk (if on the queue) and makes its fence ready again. */
static vlmc_status_t wait_slot(vk_backend_t *b, uint32_t i) {
  if (!b->submitted[i]) return NULL;
  double start = now_seconds();
  VkResult r = b->vk.vkWaitForFences(b->device, 1, &b->fences[i], VK_TRUE, kFenceTimeoutNs);
  b->wait_seconds += now_seconds() - start;
  VLMC_RETURN_IF_ERROR(fence_status(b, r));
  b->submitted[i] = false;
  VK_CHECK(b, b->vk.vkResetFences(b->device, 1, &b->fences[i]), "vkResetFences");
  return NULL;
}

/* Selects ring slot i as the command buffer to record. */
static void use_slot(vk_backend_t *b, uint32_t i) {
  b->current = i;
  b->cmd = b->ring_cmds[i];
  b->fence = b->fences[i];
}

/* The pending batch's dispatches so far go to the queue (no wait); recording goes on in the
 * next command buffer of the ring, after a barrier (submission order: the barrier orders it
 * after everything submitted before). Buffers freed meanwhile, the upload ring and the
 * descriptor pools stay as they are until the whole batch is done (flush). */
static vlmc_status_t submit_chunk(vk_backend_t *b) {
  VkResult r = submit_current(b);
  if (r != VK_SUCCESS) {
    b->recording = false;
    return fence_status(b, r);
  }
  if (b->chunk_grows) b->chunk_size = b->chunk_size * 2 < CHUNK_MAX ? b->chunk_size * 2 : CHUNK_MAX;
  uint32_t next = (b->current + 1) % CHUNK_RING;
  VLMC_RETURN_IF_ERROR(wait_slot(b, next)); /* only when the ring is full of running chunks */
  use_slot(b, next);
  VLMC_RETURN_IF_ERROR(begin_commands(b));
  full_barrier(b);
  return NULL;
}

/* Submits the pending batch and waits for it (every chunk of it). */
static vlmc_status_t flush(vk_backend_t *b) {
  if (!b->recording) return NULL;
  b->recording = false;
  if (b->timestamps)
    b->vk.vkCmdWriteTimestamp(b->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, b->timestamps, 1);
  VkResult r = submit_current(b);
  if (r != VK_SUCCESS) return fence_status(b, r);
  for (uint32_t i = 0; i < CHUNK_RING; ++i) VLMC_RETURN_IF_ERROR(wait_slot(b, i));
  use_slot(b, 0);
  read_timestamps(b);
  read_profile(b);
  after_batch(b);
  return NULL;
}

static vlmc_status_t ensure_staging(vk_backend_t *b, size_t bytes) {
  if (b->staging.buffer && b->staging.size >= bytes) return NULL;
  if (b->staging.buffer) {
    b->vk.vkUnmapMemory(b->device, b->staging.memory);
    buffer_destroy(b, &b->staging);
    b->staging_map = NULL;
  }
  VLMC_RETURN_IF_ERROR(buffer_create(b, bytes, true, &b->staging));
  VK_CHECK(b, b->vk.vkMapMemory(b->device, b->staging.memory, 0, VK_WHOLE_SIZE, 0,
                                &b->staging_map), "vkMapMemory (staging)");
  return NULL;
}

static size_t chunk_size(size_t bytes) { return bytes < STAGING_CHUNK ? bytes : STAGING_CHUNK; }

/* A small upload (a decode step's token and positions) copied in the pending batch from the
 * upload ring: no submit and wait of its own. The ring's bytes stay put until the batch is
 * done (after_batch empties it). */
static vlmc_status_t upload_in_batch(vk_backend_t *b, vlmc_buffer_t *dst, const void *src,
                                     size_t bytes) {
  if (!b->ring.buffer) {
    VLMC_RETURN_IF_ERROR(buffer_create(b, UPLOAD_RING, true, &b->ring));
    VK_CHECK(b, b->vk.vkMapMemory(b->device, b->ring.memory, 0, VK_WHOLE_SIZE, 0, &b->ring_map),
             "vkMapMemory (upload ring)");
  }
  size_t at = (b->ring_used + BUFFER_ALIGN - 1) / BUFFER_ALIGN * BUFFER_ALIGN;
  if (at + bytes > UPLOAD_RING) { /* full: this batch goes first */
    VLMC_RETURN_IF_ERROR(flush(b));
    at = 0;
  }
  memcpy((unsigned char *)b->ring_map + at, src, bytes);
  b->ring_used = at + bytes;
  VLMC_RETURN_IF_ERROR(begin_batch(b));
  full_barrier(b); /* dispatches recorded before may still read dst */
  VkBufferCopy region = {.srcOffset = at, .dstOffset = 0, .size = bytes};
  b->vk.vkCmdCopyBuffer(b->cmd, b->ring.buffer, dst->buffer, 1, &region);
  full_barrier(b); /* and the ones after read what it wrote */
  return NULL;
}

static vlmc_status_t vk_upload(vlmc_backend_t *base, vlmc_buffer_t *dst, const void *src,
                               size_t bytes) {
  vk_backend_t *b = (vk_backend_t *)base;
  if (bytes > dst->size)
    return vlmc_status_make(VLMC_INTERNAL, "vulkan: %zu bytes into a %zu-byte buffer", bytes,
                            dst->size);
  if (bytes == 0) return NULL;
  if (bytes <= SMALL_UPLOAD) return upload_in_batch(b, dst, src, bytes);
  /* Dispatches already recorded may still read the buffer: they run first. */
  VLMC_RETURN_IF_ERROR(flush(b));
  VLMC_RETURN_IF_ERROR(ensure_staging(b, chunk_size(bytes)));
  for (size_t done = 0; done < bytes;) {
    size_t n = chunk_size(bytes - done);
    memcpy(b->staging_map, (const unsigned char *)src + done, n);
    VLMC_RETURN_IF_ERROR(begin_batch(b));
    VkBufferCopy region = {.srcOffset = 0, .dstOffset = done, .size = n};
    b->vk.vkCmdCopyBuffer(b->cmd, b->staging.buffer, dst->buffer, 1, &region);
    VLMC_RETURN_IF_ERROR(flush(b));
    done += n;
  }
  return NULL;
}

static void host_read_barrier(vk_backend_t *b) {
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
  b->vk.vkCmdPipelineBarrier(b->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
}

static vlmc_status_t vk_download(vlmc_backend_t *base, vlmc_buffer_t *src, void *dst,
                                 size_t bytes) {
  vk_backend_t *b = (vk_backend_t *)base;
  if (bytes > src->size)
    return vlmc_status_make(VLMC_INTERNAL, "vulkan: %zu bytes from a %zu-byte buffer", bytes,
                            src->size);
  VLMC_RETURN_IF_ERROR(ensure_staging(b, chunk_size(bytes)));
  for (size_t done = 0; done < bytes;) {
    size_t n = chunk_size(bytes - done);
    /* The first chunk joins the pending dispatches: one submit for both. */
    VLMC_RETURN_IF_ERROR(begin_batch(b));
    full_barrier(b);
    VkBufferCopy region = {.srcOffset = done, .dstOffset = 0, .size = n};
    b->vk.vkCmdCopyBuffer(b->cmd, src->buffer, b->staging.buffer, 1, &region);
    host_read_barrier(b);
    VLMC_RETURN_IF_ERROR(flush(b));
    memcpy((unsigned char *)dst + done, b->staging_map, n);
    done += n;
  }
  return NULL;
}

static vlmc_status_t vk_synchronize(vlmc_backend_t *base) { return flush((vk_backend_t *)base); }

/* ---- descriptors ---- */

static vlmc_status_t new_pool(vk_backend_t *b) {
  if (b->num_pools == b->cap_pools) {
    size_t cap = b->cap_pools ? 2 * b->cap_pools : 4;
    VkDescriptorPool *grown = realloc(b->pools, cap * sizeof *grown);
    if (!grown) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
    b->pools = grown;
    b->cap_pools = cap;
  }
  VkDescriptorPoolSize size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, DESCRIPTORS_PER_POOL};
  VkDescriptorPoolCreateInfo info = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                     .maxSets = SETS_PER_POOL,
                                     .poolSizeCount = 1,
                                     .pPoolSizes = &size};
  VK_CHECK(b, b->vk.vkCreateDescriptorPool(b->device, &info, NULL, &b->pools[b->num_pools]),
           "vkCreateDescriptorPool");
  b->num_pools++;
  return NULL;
}

/* A set from this batch's pools (reset when the batch is done). */
static vlmc_status_t allocate_set(vk_backend_t *b, const kernel_t *k, VkDescriptorSet *out) {
  for (;;) {
    if (b->current_pool == b->num_pools) VLMC_RETURN_IF_ERROR(new_pool(b));
    VkDescriptorSetAllocateInfo info = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                        .descriptorPool = b->pools[b->current_pool],
                                        .descriptorSetCount = 1,
                                        .pSetLayouts = &k->set_layout};
    VkResult r = b->vk.vkAllocateDescriptorSets(b->device, &info, out);
    if (r == VK_SUCCESS) return NULL;
    if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL)
      return vk_error(b, r, "vkAllocateDescriptorSets");
    b->current_pool++;
  }
}

static vlmc_status_t bind_buffers(vk_backend_t *b, const kernel_t *k,
                                  vlmc_buffer_t *const *buffers, uint32_t count) {
  VkDescriptorBufferInfo infos[MAX_BINDINGS];
  VkWriteDescriptorSet writes[MAX_BINDINGS];
  VkDescriptorSet set = VK_NULL_HANDLE;
  if (!b->push_descriptors) VLMC_RETURN_IF_ERROR(allocate_set(b, k, &set));
  for (uint32_t i = 0; i < count; ++i) {
    infos[i] = (VkDescriptorBufferInfo){buffers[i]->buffer, 0, VK_WHOLE_SIZE};
    writes[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                       .dstSet = set,
                                       .dstBinding = i,
                                       .descriptorCount = 1,
                                       .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                       .pBufferInfo = &infos[i]};
  }
  if (b->push_descriptors) {
    b->vk.vkCmdPushDescriptorSetKHR(b->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, count,
                                    writes);
  } else {
    b->vk.vkUpdateDescriptorSets(b->device, count, writes, 0, NULL);
    b->vk.vkCmdBindDescriptorSets(b->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, 1, &set,
                                  0, NULL);
  }
  return NULL;
}

/* ---- dispatch ---- */

static func_table_t *func_table(vk_backend_t *b, const vlmc_func_t *func) {
  for (uint32_t i = 0; i < b->module->num_funcs; ++i)
    if (b->funcs[i].func == func) return &b->funcs[i];
  return NULL;
}

static const char *storage_name(vlmc_dtype_t d) { return vlmc_dtype_info(d)->name; }

static vlmc_status_t check_storage(const kernel_t *k, const vlmc_region_call_t *c) {
  if (c->num_inputs != k->num_inputs)
    return vlmc_status_make(VLMC_INTERNAL, "kernel %s takes %u inputs, got %u",
                            k->info.symbol, k->num_inputs, c->num_inputs);
  for (uint32_t i = 0; i < c->num_inputs; ++i)
    if (c->inputs[i]->dtype != k->inputs[i])
      return vlmc_status_make(VLMC_INTERNAL, "kernel %s (%s): input %u is %s, the kernel reads %s",
                              k->info.symbol, k->info.template_name, i,
                              storage_name(c->inputs[i]->dtype), storage_name(k->inputs[i]));
  if (c->out->dtype != k->output)
    return vlmc_status_make(VLMC_INTERNAL, "kernel %s (%s) writes %s, the program expects %s",
                            k->info.symbol, k->info.template_name, storage_name(k->output),
                            storage_name(c->out->dtype));
  return NULL;
}

/* Push constants: [work, syms...] as i32 (docs/vulkan.md). */
static vlmc_status_t push_words(const kernel_t *k, const vlmc_region_call_t *c, int64_t work,
                                int32_t *words) {
  if (work < 0 || work > INT32_MAX)
    return vlmc_status_make(VLMC_UNSUPPORTED, "kernel %s (%s): %lld work units, more than a "
                            "32-bit push constant holds", k->info.symbol, k->info.template_name,
                            (long long)work);
  words[0] = (int32_t)work;
  for (uint32_t i = 0; i < k->num_syms; ++i) {
    int64_t v = c->symbols[k->syms[i] - 1];
    if (v < INT32_MIN || v > INT32_MAX)
      return vlmc_status_make(VLMC_UNSUPPORTED, "kernel %s (%s): symbol value %lld does not "
                              "fit the kernel's 32-bit push constant", k->info.symbol,
                              k->info.template_name, (long long)v);
    words[1 + i] = (int32_t)v;
  }
  return NULL;
}

static int64_t leading_rows(const vlmc_rt_value_t *v) { return v->rank ? v->shape[0] : 1; }

/* A KV cache grown in place: moves the cache's buffer into *out (the cache's value loses it),
 * first copied into a buffer twice as large when out does not fit (doubling: a decode step
 * then allocates nothing, and the copy happens log2(tokens) times), and sets *work to the
 * units that write the new rows (the vulkan kv_cache_append kernel takes those first). Does
 * nothing when the cache's buffer is not the walker's to give or the shapes do not match. */
static vlmc_status_t take_grown_cache(vk_backend_t *b, vlmc_rt_value_t *cache, vlmc_rt_value_t *out,
                                      int64_t *work) {
  size_t have = 0, need = 0;
  int64_t old_rows = leading_rows(cache), new_rows = leading_rows(out);
  if (!cache->owned || !cache->buffer || cache->dtype != out->dtype || *work != new_rows ||
      old_rows > new_rows || !vlmc_rt_value_bytes(cache, &have) || !vlmc_rt_value_bytes(out, &need))
    return NULL;
  vlmc_buffer_t *buf = cache->buffer;
  if (buf->capacity < need) {
    size_t limit = b->dev->props.limits.maxStorageBufferRange;
    size_t grown = buf->capacity * 2 > need ? buf->capacity * 2 : need;
    if (grown > limit) grown = need > limit ? need : limit;
    vlmc_buffer_t *bigger;
    VLMC_RETURN_IF_ERROR(vk_buffer_alloc(&b->base, grown, &bigger));
    vlmc_status_t st = begin_batch(b);
    if (st) {
      vk_buffer_free(&b->base, bigger);
      return st;
    }
    if (have) {
      full_barrier(b);
      VkBufferCopy region = {.srcOffset = 0, .dstOffset = 0, .size = have};
      b->vk.vkCmdCopyBuffer(b->cmd, buf->buffer, bigger->buffer, 1, &region);
      full_barrier(b);
    }
    vk_buffer_free(&b->base, buf); /* after the batch */
    buf = bigger;
  }
  buf->size = need; /* the value's bytes now (the capacity may hold more) */
  out->buffer = buf;
  out->owned = true;
  cache->buffer = NULL;
  cache->owned = false;
  *work = new_rows - old_rows;
  return NULL;
}

static vlmc_status_t check_range(const vk_backend_t *b, const kernel_t *k,
                                 const vlmc_buffer_t *buf, uint32_t binding) {
  if (buf->size <= b->dev->props.limits.maxStorageBufferRange) return NULL;
  return vlmc_status_make(VLMC_UNSUPPORTED, "kernel %s (%s): binding %u is %.1f MB, more than "
                          "device %s binds at once (maxStorageBufferRange %.1f MB)",
                          k->info.symbol, k->info.template_name, binding,
                          (double)buf->size / (1 << 20), device_name(b),
                          (double)b->dev->props.limits.maxStorageBufferRange / (1 << 20));
}

static vlmc_status_t record_region(vk_backend_t *b, const vlmc_region_call_t *c);

static bool listed(const VkBuffer *list, uint32_t n, VkBuffer buf) {
  for (uint32_t i = 0; i < n; ++i)
    if (list[i] == buf) return true;
  return false;
}

/* Whether a dispatch reading buffers[0 .. num_inputs) and writing buffers[num_inputs] must
 * wait for the dispatches recorded since the last barrier. */
static bool needs_barrier(const vk_backend_t *b, vlmc_buffer_t *const *buffers, uint32_t num_inputs) {
  if (b->hazards_lost) return true;
  VkBuffer out = buffers[num_inputs]->buffer;
  if (listed(b->written, b->num_written, out) || listed(b->read, b->num_read, out)) return true;
  for (uint32_t i = 0; i < num_inputs; ++i)
    if (listed(b->written, b->num_written, buffers[i]->buffer)) return true;
  return b->num_written + 1 > HAZARD_SLOTS || b->num_read + num_inputs > HAZARD_SLOTS;
}

static void note_access(vk_backend_t *b, vlmc_buffer_t *const *buffers, uint32_t num_inputs) {
  if (b->num_written + 1 > HAZARD_SLOTS || b->num_read + num_inputs > HAZARD_SLOTS) {
    b->hazards_lost = true; /* the next dispatch waits for this one, whatever it touches */
    return;
  }
  b->written[b->num_written++] = buffers[num_inputs]->buffer;
  for (uint32_t i = 0; i < num_inputs; ++i) b->read[b->num_read++] = buffers[i]->buffer;
}

/* A scratch buffer of at least `bytes` for a split kernel's dispatch (the old one, if any,
 * freed after the batches that use it). */
static vlmc_status_t ensure_scratch(vk_backend_t *b, const kernel_t *k, int64_t work) {
  uint64_t bytes = (uint64_t)work * k->info.split * k->info.scratch_floats * sizeof(float);
  if (bytes > b->dev->props.limits.maxStorageBufferRange)
    return vlmc_status_make(VLMC_UNSUPPORTED, "kernel %s (%s): %.1f MB of partial results, more "
                            "than device %s binds at once", k->info.symbol, k->info.template_name,
                            (double)bytes / (1 << 20), device_name(b));
  if (b->scratch && b->scratch->size >= bytes) return NULL;
  vlmc_buffer_t *grown;
  VLMC_RETURN_IF_ERROR(vk_buffer_alloc(&b->base, (size_t)bytes, &grown));
  if (b->scratch) vk_buffer_free(&b->base, b->scratch);
  b->scratch = grown;
  return NULL;
}

/* vkCmdDispatch of `groups` workgroups as the ABI's 2-D grid (docs/vulkan.md, "Grid"). */
static vlmc_status_t dispatch_groups(vk_backend_t *b, const kernel_t *k, int64_t groups) {
  int64_t x = groups < MAX_GROUPS_X ? groups : MAX_GROUPS_X, y = (groups + x - 1) / x;
  if (y > b->dev->props.limits.maxComputeWorkGroupCount[1])
    return vlmc_status_make(VLMC_UNSUPPORTED, "kernel %s (%s): %lld workgroups, more than a "
                            "65535 x %u grid", k->info.symbol, k->info.template_name,
                            (long long)groups, b->dev->props.limits.maxComputeWorkGroupCount[1]);
  b->vk.vkCmdDispatch(b->cmd, (uint32_t)x, (uint32_t)y, 1);
  return NULL;
}

/* Records one dispatch (the host time it takes is --stats' "recording"). */
static vlmc_status_t vk_run_region(vlmc_backend_t *base, const vlmc_region_call_t *c) {
  vk_backend_t *b = (vk_backend_t *)base;
  double start = now_seconds();
  vlmc_status_t st = record_region(b, c);
  b->record_seconds += now_seconds() - start;
  return st;
}

static vlmc_status_t record_region(vk_backend_t *b, const vlmc_region_call_t *c) {
  func_table_t *t = func_table(b, c->func);
  const dispatch_t *d = t && c->region <= t->max_id ? &t->by_id[c->region] : NULL;
  if (!d || !d->kernel)
    return vlmc_status_make(VLMC_NOT_FOUND, "no vulkan kernel for @%s dispatch %u",
                            c->func->name, c->region);
  const kernel_t *k = d->kernel;
  VLMC_RETURN_IF_ERROR(check_storage(k, c));
  int64_t units = d->work.off;
  if (!vlmc_dim_is_static(d->work))
    VLMC_RETURN_IF_ERROR(vlmc_dim_eval(d->work, c->symbols, b->module->num_symbols, &units));
  int64_t work = units * d->scale;
  if (d->cache_input >= 0 && c->may_take[d->cache_input] && !c->out->buffer)
    VLMC_RETURN_IF_ERROR(take_grown_cache(b, c->inputs[d->cache_input], c->out, &work));
  int32_t words[VLMC_VK_MAX_PUSH_WORDS];
  VLMC_RETURN_IF_ERROR(push_words(k, c, work, words));
  VLMC_RETURN_IF_ERROR(vlmc_rt_value_ensure_buffer(&b->base, c->out));
  if (work == 0) return NULL;
  vlmc_buffer_t *buffers[MAX_BINDINGS];
  for (uint32_t i = 0; i <= c->num_inputs; ++i) {
    const vlmc_rt_value_t *v = i < c->num_inputs ? c->inputs[i] : c->out;
    buffers[i] = v->buffer ? v->buffer : b->empty;
    VLMC_RETURN_IF_ERROR(check_range(b, k, buffers[i], i));
  }
  uint32_t split = k->info.split, bindings = c->num_inputs + 1 + (split ? 1 : 0);
  if (split) {
    VLMC_RETURN_IF_ERROR(ensure_scratch(b, k, work));
    buffers[c->num_inputs + 1] = b->scratch;
  }
  /* stage 1 of a split kernel: its units are work x split */
  int64_t groups = (work * (split ? split : 1) + k->info.units_per_group - 1) / k->info.units_per_group;
  if (b->profile_pool && b->recording && b->batch_dispatches == PROFILE_DISPATCHES)
    VLMC_RETURN_IF_ERROR(flush(b)); /* the profile's queries are used up */
  VLMC_RETURN_IF_ERROR(begin_batch(b));
  /* A barrier only where this dispatch reads or writes what the ones since the last barrier
   * wrote, or writes what they read (needs_barrier); a split kernel's first stage writes the
   * scratch buffer instead of the output (and the output too, below, after a barrier). */
  vlmc_buffer_t *first[MAX_BINDINGS];
  memcpy(first, buffers, c->num_inputs * sizeof *first);
  first[c->num_inputs] = split ? b->scratch : buffers[c->num_inputs];
  if (needs_barrier(b, first, c->num_inputs) || (split && needs_barrier(b, buffers, c->num_inputs)))
    dispatch_barrier(b);
  b->vk.vkCmdBindPipeline(b->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipeline);
  VLMC_RETURN_IF_ERROR(bind_buffers(b, k, buffers, bindings));
  b->vk.vkCmdPushConstants(b->cmd, k->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                           4 * k->info.push_words, words);
  uint32_t slot = b->batch_dispatches;
  if (b->profile_pool)
    b->vk.vkCmdWriteTimestamp(b->cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, b->profile_pool,
                              2 * slot);
  VLMC_RETURN_IF_ERROR(dispatch_groups(b, k, groups));
  if (split && b->profile_pool)
    b->vk.vkCmdWriteTimestamp(b->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, b->profile_pool,
                              2 * PROFILE_DISPATCHES + slot);
  if (split) { /* stage 2 reads every part's partials: same layout, bindings and constants */
    dispatch_barrier(b);
    b->vk.vkCmdBindPipeline(b->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->combine_pipeline);
    VLMC_RETURN_IF_ERROR(dispatch_groups(b, k, work * k->info.combine_groups));
    b->calls++;
  }
  if (b->profile_pool) {
    b->vk.vkCmdWriteTimestamp(b->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, b->profile_pool,
                              2 * slot + 1);
    b->profiled[slot] = (kernel_t *)k;
  }
  note_access(b, buffers, c->num_inputs);
  if (split) { /* stage 2 read the scratch buffer: the next stage 1 waits for it */
    if (b->num_read < HAZARD_SLOTS) b->read[b->num_read++] = b->scratch->buffer;
    else b->hazards_lost = true;
  }
  b->batch_dispatches++;
  b->calls++;
  if (b->chunk_size && ++b->chunk_dispatches >= b->chunk_size) return submit_chunk(b);
  return NULL;
}

/* ---- the table and the pipelines ---- */

static vlmc_status_t get_sections(const vlmc_backend_open_params_t *p, const void **spirv,
                                  size_t *spirv_len, const char **table, size_t *table_len) {
  *spirv = p->section(p->section_ctx, "kernels.vulkan", spirv_len);
  *table = p->section(p->section_ctx, "kernels.vulkan.json", table_len);
  if (!*spirv || !*table)
    return vlmc_status_make(VLMC_UNSUPPORTED, "%s: backend vulkan: the artifact has no vulkan "
                            "kernels (compile it with --target vulkan)", p->source);
  return NULL;
}

/* Parses and checks the table and every module: shared by check and open. */
static vlmc_status_t read_table(const vlmc_backend_open_params_t *p, vlmc_kernel_table_t *table,
                                vlmc_vk_kernel_info_t **out_infos) {
  const void *spirv;
  const char *text;
  size_t spirv_len, text_len;
  *out_infos = NULL;
  VLMC_RETURN_IF_ERROR(get_sections(p, &spirv, &spirv_len, &text, &text_len));
  vlmc_status_t st = vlmc_kernel_table_parse(p->source, "vulkan", text, text_len, table);
  if (!st) st = vlmc_kernel_table_check(table, p->module);
  if (st) return st;
  *out_infos = calloc(table->num_kernels + 1, sizeof **out_infos);
  if (!*out_infos) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  return vlmc_vk_kernels_read(p->source, table, spirv, spirv_len, *out_infos);
}

static vlmc_status_t vk_check(const vlmc_backend_open_params_t *p) {
  vlmc_kernel_table_t table;
  vlmc_vk_kernel_info_t *infos = NULL;
  vlmc_status_t st = read_table(p, &table, &infos);
  free(infos);
  vlmc_kernel_table_deinit(&table);
  return st;
}

/* The highest SPIR-V 1.x minor a device of this Vulkan version takes. */
static uint32_t max_spirv_minor(uint32_t api) {
  if (api >= VK_API_VERSION_1_3) return 6;
  if (api >= VK_API_VERSION_1_2) return 5;
  return 3;
}

static vlmc_status_t check_kernel_fits(const vk_backend_t *b, const vlmc_vk_kernel_info_t *k) {
  const vlmc_vk_device_info_t *d = b->dev;
  const VkPhysicalDeviceLimits *l = &d->props.limits;
  uint32_t missing = k->features & ~d->features;
  if (missing) {
    unsigned bit = 0;
    while (!(missing & (1u << bit))) ++bit;
    bool f16 = (1u << bit) & (VLMC_VK_FEATURE_FLOAT16 | VLMC_VK_FEATURE_STORAGE16);
    return vlmc_status_make(VLMC_UNSUPPORTED, "device %s lacks %s, needed by kernel %s (%s)%s",
                            d->props.deviceName, vlmc_vk_feature_name(bit), k->symbol,
                            k->template_name, f16 ? "; recompile with --precision f32" : "");
  }
  if (k->spirv_minor > max_spirv_minor(d->props.apiVersion))
    return vlmc_status_make(VLMC_UNSUPPORTED, "kernel %s (%s) is SPIR-V 1.%u; device %s "
                            "(Vulkan %u.%u) takes at most 1.%u", k->symbol, k->template_name,
                            k->spirv_minor, d->props.deviceName,
                            VK_API_VERSION_MAJOR(d->props.apiVersion),
                            VK_API_VERSION_MINOR(d->props.apiVersion),
                            max_spirv_minor(d->props.apiVersion));
  uint32_t invocations = k->workgroup[0] * k->workgroup[1] * k->workgroup[2];
  if (invocations > l->maxComputeWorkGroupInvocations || k->workgroup[0] > l->maxComputeWorkGroupSize[0] ||
      k->workgroup[1] > l->maxComputeWorkGroupSize[1] || k->workgroup[2] > l->maxComputeWorkGroupSize[2])
    return vlmc_status_make(VLMC_UNSUPPORTED, "kernel %s (%s): workgroup %u x %u x %u is more "
                            "than device %s allows", k->symbol, k->template_name, k->workgroup[0],
                            k->workgroup[1], k->workgroup[2], d->props.deviceName);
  if (k->shared_bytes > l->maxComputeSharedMemorySize)
    return vlmc_status_make(VLMC_UNSUPPORTED, "kernel %s (%s) uses %u bytes of workgroup memory, "
                            "device %s has %u", k->symbol, k->template_name, k->shared_bytes,
                            d->props.deviceName, l->maxComputeSharedMemorySize);
  if (4 * k->push_words > l->maxPushConstantsSize)
    return vlmc_status_make(VLMC_UNSUPPORTED, "kernel %s (%s): %u push-constant bytes, device "
                            "%s has %u", k->symbol, k->template_name, 4 * k->push_words,
                            d->props.deviceName, l->maxPushConstantsSize);
  if (k->split && (k->combine_minor > max_spirv_minor(d->props.apiVersion) ||
                   k->combine_workgroup_x > l->maxComputeWorkGroupInvocations ||
                   k->combine_workgroup_x > l->maxComputeWorkGroupSize[0] ||
                   k->combine_shared_bytes > l->maxComputeSharedMemorySize))
    return vlmc_status_make(VLMC_UNSUPPORTED, "kernel %s (%s): its combine stage (SPIR-V 1.%u, "
                            "workgroup %u, %u bytes of workgroup memory) is more than device %s "
                            "takes", k->symbol, k->template_name, k->combine_minor,
                            k->combine_workgroup_x, k->combine_shared_bytes, d->props.deviceName);
  return NULL;
}

/* A compute pipeline of module bytes [offset, offset + size) of the section, entry `entry`,
 * on the kernel's layout. */
static vlmc_status_t create_stage(vk_backend_t *b, const kernel_t *k, const void *spirv,
                                  uint32_t offset, uint32_t size, const char *entry,
                                  VkShaderModule *shader, VkPipeline *pipeline) {
  /* vkCreateShaderModule wants 4-byte-aligned words; the section need not be aligned. */
  uint32_t *words = malloc(size);
  if (!words) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  memcpy(words, (const unsigned char *)spirv + offset, size);
  VkShaderModuleCreateInfo sm = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                 .codeSize = size,
                                 .pCode = words};
  VkResult r = b->vk.vkCreateShaderModule(b->device, &sm, NULL, shader);
  free(words);
  if (r != VK_SUCCESS) return vk_error(b, r, "vkCreateShaderModule");
  VkComputePipelineCreateInfo cp = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = *shader,
                .pName = entry},
      .layout = k->layout};
  r = b->vk.vkCreateComputePipelines(b->device, b->cache.cache, 1, &cp, NULL, pipeline);
  if (r != VK_SUCCESS) {
    char what[300];
    snprintf(what, sizeof what, "vkCreateComputePipelines for kernel %s (%s)", entry,
             k->info.template_name);
    return vk_error(b, r, what);
  }
  return NULL;
}

static vlmc_status_t create_pipeline(vk_backend_t *b, kernel_t *k, const void *spirv) {
  const vlmc_vk_kernel_info_t *info = &k->info;
  VkDescriptorSetLayoutBinding bindings[MAX_BINDINGS];
  uint32_t n = k->num_inputs + 1 + (info->split ? 1 : 0); /* a split kernel's scratch last */
  for (uint32_t i = 0; i < n; ++i)
    bindings[i] = (VkDescriptorSetLayoutBinding){.binding = i,
                                                 .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                 .descriptorCount = 1,
                                                 .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
  VkDescriptorSetLayoutCreateInfo sl = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
      .flags = b->push_descriptors ? VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR : 0,
      .bindingCount = n,
      .pBindings = bindings};
  VK_CHECK(b, b->vk.vkCreateDescriptorSetLayout(b->device, &sl, NULL, &k->set_layout),
           "vkCreateDescriptorSetLayout");
  VkPushConstantRange range = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 4 * info->push_words};
  VkPipelineLayoutCreateInfo pl = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                   .setLayoutCount = 1,
                                   .pSetLayouts = &k->set_layout,
                                   .pushConstantRangeCount = 1,
                                   .pPushConstantRanges = &range};
  VK_CHECK(b, b->vk.vkCreatePipelineLayout(b->device, &pl, NULL, &k->layout),
           "vkCreatePipelineLayout");
  VLMC_RETURN_IF_ERROR(create_stage(b, k, spirv, info->spirv_offset, info->spirv_size,
                                    info->symbol, &k->shader, &k->pipeline));
  if (!info->split) return NULL;
  char entry[300];
  snprintf(entry, sizeof entry, "%s_combine", info->symbol);
  return create_stage(b, k, spirv, info->combine_offset, info->combine_size, entry,
                      &k->combine_shader, &k->combine_pipeline);
}

static vlmc_status_t load_kernel(vk_backend_t *b, kernel_t *k,
                                 const vlmc_kernel_table_kernel_t *from,
                                 const vlmc_vk_kernel_info_t *info) {
  k->info = *info;
  k->info.symbol = strdup(from->symbol);
  k->info.template_name = strdup(from->template_name);
  k->inputs = calloc(from->num_inputs + 1, sizeof *k->inputs);
  if (!k->info.symbol || !k->info.template_name || !k->inputs)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  if (from->num_inputs) memcpy(k->inputs, from->inputs, from->num_inputs * sizeof *k->inputs);
  k->num_inputs = from->num_inputs;
  k->output = from->output;
  if (from->num_syms) memcpy(k->syms, from->sym_ids, from->num_syms * sizeof *k->syms);
  k->num_syms = from->num_syms;
  return NULL;
}

static vlmc_status_t place_dispatches(vk_backend_t *b, const vlmc_kernel_table_t *table) {
  b->funcs = calloc(b->module->num_funcs + 1, sizeof *b->funcs);
  if (!b->funcs) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  for (uint32_t i = 0; i < b->module->num_funcs; ++i) {
    func_table_t *t = &b->funcs[i];
    t->func = b->module->funcs[i];
    VLMC_RETURN_IF_ERROR(vlmc_dispatch_regions(t->func, &t->regions));
    for (uint32_t r = 0; r < t->regions.num_regions; ++r)
      if (t->regions.regions[r].id > t->max_id) t->max_id = t->regions.regions[r].id;
    t->by_id = calloc(t->max_id + 1, sizeof *t->by_id);
    if (!t->by_id) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  }
  for (size_t i = 0; i < table->num_dispatches; ++i) {
    const vlmc_kernel_table_dispatch_t *from = &table->dispatches[i];
    dispatch_t *d = &b->funcs[from->func_index].by_id[from->dispatch];
    d->kernel = &b->kernels[b->runs_as[from->kernel]];
    d->work = vlmc_kernel_table_work_dim(&from->work);
    d->scale = from->work.scale;
    /* The new rows may come through a prologue (an f16 program's cast to the cache's dtype). */
    d->cache_input = !strcmp(d->kernel->info.template_name, "kv_cache_append")
                         ? vlmc_dispatch_append_cache_input(vlmc_dispatch_find(
                               &b->funcs[from->func_index].regions, from->dispatch))
                         : -1;
  }
  b->num_dispatches = table->num_dispatches;
  return NULL;
}

/* VLMC_VULKAN_HIDE_FEATURES=shaderFloat16,...: the devices are taken to lack those features
 * (a test hook: lavapipe offers every feature a kernel may list, so the refusal by name is
 * tested this way). */
static void hide_features(vk_backend_t *b) {
  const char *hide = getenv("VLMC_VULKAN_HIDE_FEATURES");
  if (!hide || !*hide) return;
  for (unsigned bit = 0; bit < VLMC_VK_NUM_FEATURES; ++bit)
    if (strstr(hide, vlmc_vk_feature_name(bit)))
      for (uint32_t i = 0; i < b->num_devices; ++i) b->devices[i].features &= ~(1u << bit);
}

static vlmc_status_t pick_device(vk_backend_t *b, uint32_t index) {
  VLMC_RETURN_IF_ERROR(vlmc_vk_open(&b->vk));
  VLMC_RETURN_IF_ERROR(vlmc_vk_instance_create(&b->vk, &b->instance));
  VLMC_RETURN_IF_ERROR(vlmc_vk_devices(&b->vk, b->instance, &b->devices, &b->num_devices));
  hide_features(b);
  if (index >= b->num_devices) {
    char list[512] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < b->num_devices && used < sizeof list; ++i) {
      int n = snprintf(list + used, sizeof list - used, "%s%u: %s", i ? ", " : "", i,
                       b->devices[i].props.deviceName);
      if (n < 0) break;
      used += (size_t)n;
    }
    return vlmc_status_make(VLMC_INVALID_ARGUMENT, "--device %u: %u device%s (%s)", index,
                            b->num_devices, b->num_devices == 1 ? "" : "s", list);
  }
  b->dev = &b->devices[index];
  if (!b->dev->has_compute_queue)
    return vlmc_status_make(VLMC_UNSUPPORTED, "vulkan: device %s has no compute queue",
                            device_name(b));
  if (b->dev->props.apiVersion < VK_API_VERSION_1_1)
    return vlmc_status_make(VLMC_UNSUPPORTED, "vulkan: device %s is Vulkan 1.0; vlmc needs 1.1",
                            device_name(b));
  return NULL;
}

/* VLMC_VULKAN_CHUNK (see CHUNK_FIRST): unset or malformed, the default. */
static void chunk_setting(vk_backend_t *b, const char *text) {
  b->chunk_first = CHUNK_FIRST;
  b->chunk_grows = true;
  if (!text || !*text) return;
  char *end;
  unsigned long n = strtoul(text, &end, 10);
  bool grows = *end == '+';
  if (end == text || (grows ? end[1] : *end) != '\0' || n > CHUNK_MAX * 64ul) {
    fprintf(stderr, "vulkan: VLMC_VULKAN_CHUNK=%s is not N or N+ (N a count of dispatches); "
            "the default, chunks growing from %d\n", text, CHUNK_FIRST);
    return;
  }
  b->chunk_first = (uint32_t)n;
  b->chunk_grows = grows;
}

static vlmc_status_t create_queue_objects(vk_backend_t *b) {
  b->vk.vkGetDeviceQueue(b->device, b->dev->queue_family, 0, &b->queue);
  b->vk.vkGetPhysicalDeviceMemoryProperties(b->dev->handle, &b->memory);
  VkCommandPoolCreateInfo cp = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                .queueFamilyIndex = b->dev->queue_family};
  VK_CHECK(b, b->vk.vkCreateCommandPool(b->device, &cp, NULL, &b->command_pool),
           "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ca = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                    .commandPool = b->command_pool,
                                    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                    .commandBufferCount = CHUNK_RING};
  VK_CHECK(b, b->vk.vkAllocateCommandBuffers(b->device, &ca, b->ring_cmds), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  for (uint32_t i = 0; i < CHUNK_RING; ++i)
    VK_CHECK(b, b->vk.vkCreateFence(b->device, &fi, NULL, &b->fences[i]), "vkCreateFence");
  use_slot(b, 0);
  chunk_setting(b, getenv("VLMC_VULKAN_CHUNK"));
  const char *full = getenv("VLMC_VULKAN_FULL_BARRIERS");
  b->full_barriers = full && *full && strcmp(full, "0") != 0;
  if (b->dev->timestamp_bits) {
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                .queryCount = 2};
    if (b->vk.vkCreateQueryPool(b->device, &qi, NULL, &b->timestamps) != VK_SUCCESS)
      b->timestamps = VK_NULL_HANDLE; /* GPU time is then not measured */
    const char *profile = getenv("VLMC_VULKAN_PROFILE");
    qi.queryCount = 3 * PROFILE_DISPATCHES; /* start and end; a split kernel's stage 1 end */
    if (profile && *profile && strcmp(profile, "0") != 0 &&
        b->vk.vkCreateQueryPool(b->device, &qi, NULL, &b->profile_pool) != VK_SUCCESS)
      b->profile_pool = VK_NULL_HANDLE;
  }
  return vk_buffer_alloc(&b->base, BUFFER_ALIGN, &b->empty);
}

/* The device class whose kernel variants run (artifact/kernel_table.h, "Variants"): the
 * open parameter or VLMC_KERNEL_VARIANTS (tests, diagnosis), else the device's own ("cpu" for
 * a CPU device such as lavapipe, "gpu" for any other); NULL for "main": main kernels only. */
static const char *variant_class(const vk_backend_t *b, const vlmc_backend_open_params_t *p) {
  const char *want = p->kernel_variants ? p->kernel_variants : getenv("VLMC_KERNEL_VARIANTS");
  if (want && *want && strcmp(want, "auto") != 0) return strcmp(want, "main") ? want : NULL;
  return b->dev->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? "cpu" : "gpu";
}

/* For each main kernel, the first of its variants for the device's class that fits the
 * device, else itself; then every kernel that runs must fit (a named refusal otherwise). */
static vlmc_status_t pick_variants(vk_backend_t *b, const vlmc_backend_open_params_t *p,
                                   const vlmc_kernel_table_t *table,
                                   const vlmc_vk_kernel_info_t *infos) {
  size_t n = table->num_kernels;
  b->runs_as = calloc(n + 1, sizeof *b->runs_as);
  b->loaded = calloc(n + 1, sizeof *b->loaded);
  if (!b->runs_as || !b->loaded) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  b->variant_class = variant_class(b, p);
  for (size_t i = 0; i < n; ++i) b->runs_as[i] = (uint32_t)i;
  for (size_t i = 0; i < n; ++i) {
    const vlmc_kernel_table_kernel_t *v = &table->kernels[i];
    uint32_t main = v->variant_of;
    if (!v->is_variant || !b->variant_class || b->runs_as[main] != main ||
        !vlmc_kernel_table_variant_is_for(v, b->variant_class))
      continue;
    vlmc_status_t unfit = check_kernel_fits(b, &infos[i]);
    if (unfit) { /* the main kernel runs instead */
      vlmc_status_free(unfit);
      continue;
    }
    b->runs_as[main] = (uint32_t)i;
    ++b->num_variants_used;
  }
  for (size_t i = 0; i < n; ++i)
    if (!table->kernels[i].is_variant) b->loaded[b->runs_as[i]] = true;
  return NULL;
}

static vlmc_status_t open_device(vk_backend_t *b, const vlmc_backend_open_params_t *p,
                                 const vlmc_kernel_table_t *table,
                                 const vlmc_vk_kernel_info_t *infos) {
  VLMC_RETURN_IF_ERROR(pick_device(b, p->device));
  VLMC_RETURN_IF_ERROR(pick_variants(b, p, table, infos));
  uint32_t features = 0;
  for (size_t i = 0; i < table->num_kernels; ++i) {
    if (!b->loaded[i]) continue;
    VLMC_RETURN_IF_ERROR(check_kernel_fits(b, &infos[i]));
    features |= infos[i].features;
  }
  features &= ~(uint32_t)VLMC_VK_FEATURE_SUBGROUP_ARITH; /* a property, nothing to enable */
  const char *no_push = getenv("VLMC_VULKAN_NO_PUSH_DESCRIPTOR");
  if (no_push && *no_push && strcmp(no_push, "0") != 0)
    b->devices[b->dev - b->devices].push_descriptor = false; /* tests the descriptor pools */
  VLMC_RETURN_IF_ERROR(vlmc_vk_device_create(&b->vk, b->dev, features, &b->device));
  b->push_descriptors = b->dev->push_descriptor;
  return create_queue_objects(b);
}

static uint64_t kernels_hash(const vlmc_backend_open_params_t *p) {
  size_t n = 0;
  const void *s = p->section(p->section_ctx, "kernels.vulkan", &n);
  uint64_t h = vlmc_vk_hash(14695981039346656037ull, s, n);
  s = p->section(p->section_ctx, "kernels.vulkan.json", &n);
  return vlmc_vk_hash(h, s, n);
}

static vlmc_status_t load_pipelines(vk_backend_t *b, const vlmc_backend_open_params_t *p,
                                    const vlmc_kernel_table_t *table,
                                    const vlmc_vk_kernel_info_t *infos) {
  size_t spirv_len = 0;
  const void *spirv = p->section(p->section_ctx, "kernels.vulkan", &spirv_len);
  vlmc_vk_pipeline_cache_open(&b->vk, b->device, &b->dev->props, kernels_hash(p), &b->cache);
  b->kernels = calloc(table->num_kernels + 1, sizeof *b->kernels);
  if (!b->kernels) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  b->num_kernels = table->num_kernels;
  for (size_t i = 0; i < table->num_kernels; ++i) {
    VLMC_RETURN_IF_ERROR(load_kernel(b, &b->kernels[i], &table->kernels[i], &infos[i]));
    if (b->loaded[i]) VLMC_RETURN_IF_ERROR(create_pipeline(b, &b->kernels[i], spirv));
  }
  return NULL;
}

static vlmc_status_t vk_open(const vlmc_backend_open_params_t *p, vlmc_backend_t **out) {
  vlmc_kernel_table_t table;
  vlmc_vk_kernel_info_t *infos = NULL;
  vlmc_status_t st = read_table(p, &table, &infos);
  vk_backend_t *b = st ? NULL : calloc(1, sizeof *b);
  if (!st && !b) st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  if (b) {
    b->base.iface = &vlmc_backend_vulkan;
    b->source = p->source;
    b->module = p->module;
    st = open_device(b, p, &table, infos);
    if (!st) st = load_pipelines(b, p, &table, infos);
    if (!st) st = place_dispatches(b, &table);
  }
  free(infos);
  vlmc_kernel_table_deinit(&table);
  if (st) {
    if (b) vk_destroy(&b->base);
    return st;
  }
  *out = &b->base;
  return NULL;
}

static void destroy_kernels(vk_backend_t *b) {
  for (size_t i = 0; b->kernels && i < b->num_kernels; ++i) {
    kernel_t *k = &b->kernels[i];
    if (k->pipeline) b->vk.vkDestroyPipeline(b->device, k->pipeline, NULL);
    if (k->combine_pipeline) b->vk.vkDestroyPipeline(b->device, k->combine_pipeline, NULL);
    if (k->combine_shader) b->vk.vkDestroyShaderModule(b->device, k->combine_shader, NULL);
    if (k->layout) b->vk.vkDestroyPipelineLayout(b->device, k->layout, NULL);
    if (k->set_layout) b->vk.vkDestroyDescriptorSetLayout(b->device, k->set_layout, NULL);
    if (k->shader) b->vk.vkDestroyShaderModule(b->device, k->shader, NULL);
    free((char *)k->info.symbol);
    free((char *)k->info.template_name);
    free(k->inputs);
  }
  free(b->kernels);
}

static void destroy_device(vk_backend_t *b) {
  vlmc_status_free(flush(b));
  b->vk.vkDeviceWaitIdle(b->device);
  after_batch(b);
  if (b->profile_pool) {
    print_profile(b);
    b->vk.vkDestroyQueryPool(b->device, b->profile_pool, NULL);
  }
  destroy_kernels(b);
  vlmc_vk_pipeline_cache_close(&b->vk, b->device, &b->cache);
  if (b->empty) {
    buffer_destroy(b, b->empty);
    free(b->empty);
  }
  if (b->scratch) {
    buffer_destroy(b, b->scratch);
    free(b->scratch);
  }
  if (b->staging_map) b->vk.vkUnmapMemory(b->device, b->staging.memory);
  buffer_destroy(b, &b->staging);
  if (b->ring_map) b->vk.vkUnmapMemory(b->device, b->ring.memory);
  buffer_destroy(b, &b->ring);
  for (size_t i = 0; i < b->num_reuse; ++i) {
    buffer_destroy(b, b->reuse[i]);
    free(b->reuse[i]);
  }
  for (size_t i = 0; i < b->num_pools; ++i)
    b->vk.vkDestroyDescriptorPool(b->device, b->pools[i], NULL);
  if (b->timestamps) b->vk.vkDestroyQueryPool(b->device, b->timestamps, NULL);
  for (uint32_t i = 0; i < CHUNK_RING; ++i)
    if (b->fences[i]) b->vk.vkDestroyFence(b->device, b->fences[i], NULL);
  if (b->command_pool) b->vk.vkDestroyCommandPool(b->device, b->command_pool, NULL);
  b->vk.vkDestroyDevice(b->device, NULL);
}

static void vk_destroy(vlmc_backend_t *base) {
  vk_backend_t *b = (vk_backend_t *)base;
  if (!b) return;
  if (b->device) destroy_device(b);
  else free(b->kernels);
  for (uint32_t i = 0; b->funcs && i < b->module->num_funcs; ++i) {
    vlmc_dispatch_set_free(&b->funcs[i].regions);
    free(b->funcs[i].by_id);
  }
  free(b->funcs);
  free(b->runs_as);
  free(b->loaded);
  free(b->pools);
  free(b->deferred);
  free(b->devices);
  if (b->instance) b->vk.vkDestroyInstance(b->instance, NULL);
  vlmc_vk_close(&b->vk);
  free(b);
}

static void vk_counters(const vlmc_backend_t *base, vlmc_backend_counters_t *out) {
  const vk_backend_t *b = (const vk_backend_t *)base;
  memset(out, 0, sizeof *out);
  out->kernel_calls = b->calls;
  out->kernel_seconds = b->wait_seconds;
  out->device_seconds = b->gpu_seconds;
  out->submits = b->submits;
  out->record_seconds = b->record_seconds;
  out->num_kernels = b->num_kernels;
  out->num_dispatches = b->num_dispatches;
  out->num_variants_used = b->num_variants_used;
}

/* `vlmc-run --list-devices`: every device the loader finds, no artifact needed. */
static vlmc_status_t vk_list_devices(vlmc_strbuf_t *out) {
  vlmc_vk_t vk;
  VkInstance instance = VK_NULL_HANDLE;
  vlmc_vk_device_info_t *devices = NULL;
  uint32_t n = 0;
  vlmc_status_t st = vlmc_vk_open(&vk);
  if (st) return st;
  st = vlmc_vk_instance_create(&vk, &instance);
  if (!st) st = vlmc_vk_devices(&vk, instance, &devices, &n);
  if (!st) {
    vlmc_strbuf_printf(out, "vulkan (loader %s): %u device%s\n", vk.path, n, n == 1 ? "" : "s");
    for (uint32_t i = 0; i < n; ++i) vlmc_vk_device_describe(&devices[i], i, out);
  }
  free(devices);
  if (instance) vk.vkDestroyInstance(instance, NULL);
  vlmc_vk_close(&vk);
  return st;
}

static const vlmc_dtype_t kComputeDtypes[] = {VLMC_DTYPE_F32, VLMC_DTYPE_I64, VLMC_DTYPE_COUNT};
static const char *const kSections[] = {"program", "kernels.vulkan", "kernels.vulkan.json", NULL};

const vlmc_backend_iface_t vlmc_backend_vulkan = {
    .name = "vulkan",
    .summary = "the artifact's SPIR-V kernels on a Vulkan device (--device N, --list-devices)",
    .caps = VLMC_BACKEND_PRELOADS_PARAMS,
    .compute_dtypes = kComputeDtypes,
    .sections = kSections,
    .check = vk_check,
    .open = vk_open,
    .destroy = vk_destroy,
    .buffer_alloc = vk_buffer_alloc,
    .buffer_free = vk_buffer_free,
    .upload = vk_upload,
    .download = vk_download,
    .run_region = vk_run_region,
    .synchronize = vk_synchronize,
    .counters = vk_counters,
    .list_devices = vk_list_devices,
};
