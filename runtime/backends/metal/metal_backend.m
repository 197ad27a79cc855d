/* The metal backend (docs/metal.md): runs an artifact's metal kernels on an Apple GPU. Built
 * only on macOS (CMakeLists.txt: APPLE), Objective-C with manual reference counting
 * (-fno-objc-arc: the Metal objects live in C structs as retained pointers). Everything that is
 * not an Apple API call (the kernel table, the dispatch geometry, the push-constant words)
 * is C in runtime/metal_abi.c, shared with the Metal emulation that tests it on Linux
 * (tests/metal/emu_backend.c).
 *
 * NOT BUILT OR RUN HERE: the project's machines have no macOS. This file is written and
 * reviewed against Apple's documented API (the Metal framework reference: MTLDevice,
 * MTLLibrary, MTLComputePipelineState, MTLBuffer, MTLCommandBuffer,
 * MTLComputeCommandEncoder); docs/metal.md lists its limits and assumptions.
 *
 * Memory: Apple silicon memory is the host's (MTLResourceStorageModeShared), so the backend
 * has VLMC_BACKEND_HOST_MEMORY: weights are the artifact's mapped pages, wrapped without a
 * copy (newBufferWithBytesNoCopy over the page-rounded range); activations are shared
 * buffers. Work is queued: dispatches go into one command buffer (a serial compute encoder:
 * each dispatch sees the previous one's writes), committed and waited for when the host
 * touches a buffer (buffer_host) or the call ends (synchronize). */
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/backend.h"
#include "runtime/metal_abi.h"

extern const vlmc_backend_iface_t vlmc_backend_metal;

struct vlmc_buffer_s {
  void *mtl;     /* id<MTLBuffer>, retained */
  size_t offset; /* of the value inside it (a wrap of page-rounded host memory) */
  size_t bytes;
  bool borrowed; /* the host's pages (newBufferWithBytesNoCopy): they must outlive the GPU's use */
};

typedef struct {
  void *pipeline; /* id<MTLComputePipelineState>, retained; NULL until first use */
  void *combine;  /* a split kernel's second stage */
} pipelines_t;

typedef struct {
  vlmc_backend_t base;
  vlmc_metal_table_t table;
  void *device;  /* id<MTLDevice> */
  void *queue;   /* id<MTLCommandQueue> */
  void *pending; /* id<MTLCommandBuffer> being recorded, or NULL */
  void *encoder; /* id<MTLComputeCommandEncoder> of pending */
  void *empty;   /* a 16-byte buffer bound for a value without elements */
  void *scratch; /* a split kernel's scratch, grown on demand */
  size_t scratch_bytes;
  pipelines_t *pipelines;
  uint64_t calls, submits;
  double device_seconds;
} metal_backend_t;

/* Manual reference counting: OWN takes an object this code already owns (+1 from new...,
 * copy...), KEEP retains one it borrows (autoreleased, or an array's element); release
 * gives either back. */
#define OBJ(p) ((id)(p))
#define OWN(o) ((void *)(o))
#define KEEP(o) ((void *)[(o) retain])
static void release(void *p) {
  if (p) [(id)p release];
}

static vlmc_status_t ns_error(vlmc_status_code_t code, const char *what, NSError *error) {
  return vlmc_status_make(code, "metal: %s: %s", what,
                          error ? error.localizedDescription.UTF8String : "no reason given");
}

/* ---- submitting ---- */

/* Commits the pending command buffer and waits for it; a GPU error is the call's error. */
static vlmc_status_t flush(metal_backend_t *b) {
  if (!b->pending) return NULL;
  id<MTLCommandBuffer> cb = OBJ(b->pending);
  [(id<MTLComputeCommandEncoder>)OBJ(b->encoder) endEncoding];
  [cb commit];
  [cb waitUntilCompleted];
  b->submits++;
  vlmc_status_t st = NULL;
  if (cb.status == MTLCommandBufferStatusError)
    st = ns_error(VLMC_INTERNAL, "a command buffer failed on the GPU", cb.error);
  else if (cb.GPUEndTime > cb.GPUStartTime)
    b->device_seconds += cb.GPUEndTime - cb.GPUStartTime;
  release(b->encoder);
  release(b->pending);
  b->encoder = b->pending = NULL;
  return st;
}

static id<MTLComputeCommandEncoder> encoder(metal_backend_t *b) {
  if (!b->pending) {
    id<MTLCommandBuffer> cb = [(id<MTLCommandQueue>)OBJ(b->queue) commandBuffer];
    b->pending = KEEP(cb); /* it retains every resource it uses until it completes */
    b->encoder = KEEP([cb computeCommandEncoder]); /* serial: dispatches in order */
  }
  return OBJ(b->encoder);
}

static vlmc_status_t metal_synchronize(vlmc_backend_t *base) {
  return flush((metal_backend_t *)base);
}

/* ---- opening ---- */

static void metal_destroy(vlmc_backend_t *base) {
  metal_backend_t *b = (metal_backend_t *)base;
  if (!b) return;
  vlmc_status_free(flush(b));
  for (size_t i = 0; b->pipelines && i < b->table.table.num_kernels; ++i) {
    release(b->pipelines[i].pipeline);
    release(b->pipelines[i].combine);
  }
  free(b->pipelines);
  release(b->scratch);
  release(b->empty);
  release(b->queue);
  release(b->device);
  vlmc_metal_table_deinit(&b->table);
  free(b);
}

static vlmc_status_t metal_open(const vlmc_backend_open_params_t *p, vlmc_backend_t **out) {
  metal_backend_t *b = calloc(1, sizeof *b);
  if (!b) return vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  b->base.iface = &vlmc_backend_metal;
  vlmc_status_t st = vlmc_metal_table_init(p, &b->table);
  @autoreleasepool {
    NSArray<id<MTLDevice>> *all = st ? nil : MTLCopyAllDevices();
    if (!st && p->device >= all.count)
      st = vlmc_status_make(VLMC_NOT_FOUND, "metal: no device %u (this Mac has %u; "
                            "vlmc-run --list-devices names them)", p->device,
                            (unsigned)all.count);
    if (!st) {
      id<MTLDevice> device = all[p->device];
      b->device = KEEP(device);
      b->queue = OWN([device newCommandQueue]);
      b->empty = OWN([device newBufferWithLength:16 options:MTLResourceStorageModeShared]);
      if (!b->queue || !b->empty)
        st = vlmc_status_make(VLMC_INTERNAL, "metal: %s: no command queue or buffer",
                              device.name.UTF8String);
    }
    [all release];
  }
  size_t kernels = b->table.table.num_kernels;
  if (!st && !(b->pipelines = calloc(kernels ? kernels : 1, sizeof *b->pipelines)))
    st = vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
  if (st) {
    metal_destroy(&b->base);
    return st;
  }
  *out = &b->base;
  return NULL;
}

/* ---- pipelines: one library per translation unit, compiled at first use ---- */

/* The kernels assume what the vulkan target assumed (docs/vulkan.md): a SIMD group of 32
 * lanes, the threadgroup size they were written for, their threadgroup memory. */
static vlmc_status_t check_pipeline(metal_backend_t *b, id<MTLComputePipelineState> ps,
                                    const char *entry, const uint32_t threads[3]) {
  id<MTLDevice> device = OBJ(b->device);
  NSUInteger want = (NSUInteger)threads[0] * threads[1] * threads[2];
  if (ps.threadExecutionWidth != 32)
    return vlmc_status_make(VLMC_UNSUPPORTED, "metal: kernel %s: %s runs SIMD groups of %lu "
                            "threads; the kernels are written for 32", entry,
                            device.name.UTF8String, (unsigned long)ps.threadExecutionWidth);
  if (ps.maxTotalThreadsPerThreadgroup < want)
    return vlmc_status_make(VLMC_UNSUPPORTED, "metal: kernel %s needs %lu threads a "
                            "threadgroup; %s allows it %lu", entry, (unsigned long)want,
                            device.name.UTF8String,
                            (unsigned long)ps.maxTotalThreadsPerThreadgroup);
  if (ps.staticThreadgroupMemoryLength > device.maxThreadgroupMemoryLength)
    return vlmc_status_make(VLMC_UNSUPPORTED, "metal: kernel %s needs %lu bytes of "
                            "threadgroup memory; %s has %lu", entry,
                            (unsigned long)ps.staticThreadgroupMemoryLength,
                            device.name.UTF8String,
                            (unsigned long)device.maxThreadgroupMemoryLength);
  return NULL;
}

static vlmc_status_t make_pipeline(metal_backend_t *b, uint32_t kernel, int which,
                                   const uint32_t threads[3], void **out) {
  vlmc_metal_unit_t unit;
  if (!vlmc_metal_kernel_unit(&b->table, kernel, which, &unit))
    return vlmc_status_make(VLMC_INTERNAL, "metal: kernel %u has no unit %d", kernel, which);
  @autoreleasepool {
    id<MTLDevice> device = OBJ(b->device);
    MTLCompileOptions *options = [[MTLCompileOptions alloc] init];
    options.languageVersion = MTLLanguageVersion3_0;
    /* the kernels are checked without fast math (the emulation, against the reference) */
    options.fastMathEnabled = NO;
    NSString *source = [[NSString alloc] initWithBytes:unit.msl length:unit.len
                                              encoding:NSUTF8StringEncoding];
    NSError *error = nil;
    id<MTLLibrary> library = [device newLibraryWithSource:source options:options error:&error];
    [options release];
    [source release];
    if (!library) return ns_error(VLMC_INVALID_ARGUMENT, unit.entry, error);
    id<MTLFunction> fn = [library newFunctionWithName:@(unit.entry)];
    [library release];
    if (!fn)
      return vlmc_status_make(VLMC_NOT_FOUND, "metal: kernel %s: no such function in its MSL",
                              unit.entry);
    id<MTLComputePipelineState> ps = [device newComputePipelineStateWithFunction:fn
                                                                           error:&error];
    [fn release];
    if (!ps) return ns_error(VLMC_INVALID_ARGUMENT, unit.entry, error);
    vlmc_status_t st = check_pipeline(b, ps, unit.entry, threads);
    if (st) {
      [ps release];
      return st;
    }
    *out = (void *)ps; /* the +1 reference of new... */
  }
  return NULL;
}

/* ---- memory ---- */

static vlmc_buffer_t *buffer_of(id<MTLBuffer> mtl, size_t offset, size_t bytes, bool borrowed) {
  vlmc_buffer_t *buf = malloc(sizeof *buf);
  if (buf) *buf = (vlmc_buffer_t){(void *)mtl, offset, bytes, borrowed};
  else [mtl release];
  return buf;
}

static vlmc_status_t metal_buffer_alloc(vlmc_backend_t *base, size_t bytes, vlmc_buffer_t **out) {
  metal_backend_t *b = (metal_backend_t *)base;
  id<MTLDevice> device = OBJ(b->device);
  if (bytes > device.maxBufferLength)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "metal: a %zu-byte value is more than one "
                            "buffer of %s holds (%lu)", bytes, device.name.UTF8String,
                            (unsigned long)device.maxBufferLength);
  id<MTLBuffer> mtl = [device newBufferWithLength:(bytes ? bytes : 1)
                                          options:MTLResourceStorageModeShared];
  if (!mtl)
    return vlmc_status_make(VLMC_OUT_OF_MEMORY, "metal: out of memory for a %zu-byte value",
                            bytes);
  memset(mtl.contents, 0, bytes);
  *out = buffer_of(mtl, 0, bytes, false);
  return *out ? NULL : vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
}

/* Host memory without a copy: the pages holding it (mapped artifact pages, or the host's
 * large allocations); where Metal refuses them, a copy, which the host then reads back
 * through buffer_host (the walker never writes a wrapped value after wrapping it). */
static vlmc_status_t metal_buffer_wrap(vlmc_backend_t *base, void *host, size_t bytes,
                                       vlmc_buffer_t **out) {
  metal_backend_t *b = (metal_backend_t *)base;
  id<MTLDevice> device = OBJ(b->device);
  uintptr_t page = (uintptr_t)getpagesize();
  uintptr_t start = (uintptr_t)host & ~(page - 1);
  uintptr_t end = ((uintptr_t)host + bytes + page - 1) & ~(page - 1);
  if (bytes && end - start <= device.maxBufferLength) {
    id<MTLBuffer> mtl = [device newBufferWithBytesNoCopy:(void *)start
                                                  length:end - start
                                                 options:MTLResourceStorageModeShared
                                             deallocator:nil];
    if (mtl) {
      *out = buffer_of(mtl, (uintptr_t)host - start, bytes, true);
      return *out ? NULL : vlmc_status_make(VLMC_OUT_OF_MEMORY, "out of memory");
    }
  }
  VLMC_RETURN_IF_ERROR(metal_buffer_alloc(base, bytes, out));
  memcpy(((id<MTLBuffer>)OBJ((*out)->mtl)).contents, host, bytes);
  return NULL;
}

/* The pending command buffer keeps its own reference to every MTLBuffer it uses, so an
 * allocated buffer goes at once; borrowed host pages may be freed by their owner right after,
 * so queued work that may read them finishes first. */
static void metal_buffer_free(vlmc_backend_t *base, vlmc_buffer_t *buf) {
  if (!buf) return;
  if (buf->borrowed) vlmc_status_free(flush((metal_backend_t *)base));
  release(buf->mtl);
  free(buf);
}

/* The host is about to read or write the buffer: queued work finishes first. */
static void *metal_buffer_host(vlmc_backend_t *base, vlmc_buffer_t *buf) {
  metal_backend_t *b = (metal_backend_t *)base;
  vlmc_status_t st = flush(b);
  if (st) {
    fprintf(stderr, "vlmc: %s\n", vlmc_status_message(st)); /* the next call fails too */
    vlmc_status_free(st);
  }
  return (char *)((id<MTLBuffer>)OBJ(buf->mtl)).contents + buf->offset;
}

/* ---- dispatch ---- */

static vlmc_status_t ensure_scratch(metal_backend_t *b, size_t bytes) {
  if (bytes <= b->scratch_bytes) return NULL;
  VLMC_RETURN_IF_ERROR(flush(b));
  release(b->scratch);
  b->scratch = OWN([(id<MTLDevice>)OBJ(b->device) newBufferWithLength:bytes
                                                               options:MTLResourceStorageModePrivate]);
  b->scratch_bytes = b->scratch ? bytes : 0;
  return b->scratch ? NULL : vlmc_status_make(VLMC_OUT_OF_MEMORY, "metal: no scratch of %zu bytes",
                                              bytes);
}

static void bind(metal_backend_t *b, id<MTLComputeCommandEncoder> e, const vlmc_region_call_t *c,
                 const vlmc_metal_dispatch_t *d) {
  for (uint32_t i = 0; i <= c->num_inputs; ++i) {
    const vlmc_rt_value_t *v = i < c->num_inputs ? c->inputs[i] : c->out;
    if (v->buffer && v->buffer->bytes) [e setBuffer:OBJ(v->buffer->mtl) offset:v->buffer->offset atIndex:i];
    else [e setBuffer:OBJ(b->empty) offset:0 atIndex:i];
  }
  if (d->split) [e setBuffer:OBJ(b->scratch) offset:0 atIndex:c->num_inputs + 1];
  [e setBytes:d->words length:sizeof d->words[0] * d->num_words atIndex:d->words_index];
}

static vlmc_status_t metal_run_region(vlmc_backend_t *base, const vlmc_region_call_t *c) {
  metal_backend_t *b = (metal_backend_t *)base;
  vlmc_metal_dispatch_t d;
  VLMC_RETURN_IF_ERROR(vlmc_metal_plan(&b->table, c, &d));
  VLMC_RETURN_IF_ERROR(vlmc_rt_value_ensure_buffer(base, c->out));
  if (d.work == 0) return NULL;
  pipelines_t *k = &b->pipelines[d.kernel];
  if (!k->pipeline) VLMC_RETURN_IF_ERROR(make_pipeline(b, d.kernel, 0, d.threads, &k->pipeline));
  if (d.split && !k->combine)
    VLMC_RETURN_IF_ERROR(make_pipeline(b, d.kernel, 1, d.combine_threads, &k->combine));
  if (d.split) VLMC_RETURN_IF_ERROR(ensure_scratch(b, d.scratch_floats * sizeof(float)));
  @autoreleasepool {
    id<MTLComputeCommandEncoder> e = encoder(b);
    [e setComputePipelineState:OBJ(k->pipeline)];
    bind(b, e, c, &d);
    [e dispatchThreadgroups:MTLSizeMake(d.groups[0], d.groups[1], d.groups[2])
        threadsPerThreadgroup:MTLSizeMake(d.threads[0], d.threads[1], d.threads[2])];
    b->calls++;
    if (d.split) {
      [e setComputePipelineState:OBJ(k->combine)];
      [e dispatchThreadgroups:MTLSizeMake(d.combine_groups[0], d.combine_groups[1],
                                          d.combine_groups[2])
          threadsPerThreadgroup:MTLSizeMake(d.combine_threads[0], 1, 1)];
      b->calls++;
    }
  }
  return NULL;
}

static void metal_counters(const vlmc_backend_t *base, vlmc_backend_counters_t *out) {
  const metal_backend_t *b = (const metal_backend_t *)base;
  memset(out, 0, sizeof *out);
  out->kernel_calls = b->calls;
  out->submits = b->submits;
  out->device_seconds = b->device_seconds;
  out->num_kernels = b->table.table.num_kernels;
  out->num_dispatches = b->table.table.num_dispatches;
}

static vlmc_status_t metal_list_devices(vlmc_strbuf_t *out) {
  @autoreleasepool {
    NSArray<id<MTLDevice>> *all = MTLCopyAllDevices();
    vlmc_strbuf_printf(out, "metal: %lu device%s\n", (unsigned long)all.count,
                       all.count == 1 ? "" : "s");
    for (NSUInteger i = 0; i < all.count; ++i) {
      id<MTLDevice> d = all[i];
      vlmc_strbuf_printf(out, "  %lu: %s%s, max threadgroup memory %lu B, max buffer %lu B\n",
                         (unsigned long)i, d.name.UTF8String,
                         d.hasUnifiedMemory ? " (unified memory)" : "",
                         (unsigned long)d.maxThreadgroupMemoryLength,
                         (unsigned long)d.maxBufferLength);
    }
    [all release];
  }
  return NULL;
}

static const vlmc_dtype_t kComputeDtypes[] = {VLMC_DTYPE_F32, VLMC_DTYPE_F16, VLMC_DTYPE_I64,
                                              VLMC_DTYPE_COUNT};
static const char *const kSections[] = {"program", "kernels.metal", "kernels.metal.json", NULL};

const vlmc_backend_iface_t vlmc_backend_metal = {
    .name = "metal",
    .summary = "the artifact's metal kernels on an Apple GPU (macOS; not yet run on Apple "
               "hardware: docs/metal.md)",
    .caps = VLMC_BACKEND_HOST_MEMORY | VLMC_BACKEND_STREAMS_WEIGHTS,
    .compute_dtypes = kComputeDtypes,
    .sections = kSections,
    .check = vlmc_metal_table_check,
    .open = metal_open,
    .destroy = metal_destroy,
    .buffer_alloc = metal_buffer_alloc,
    .buffer_wrap = metal_buffer_wrap,
    .buffer_free = metal_buffer_free,
    .buffer_host = metal_buffer_host,
    .run_region = metal_run_region,
    .synchronize = metal_synchronize,
    .counters = metal_counters,
    .list_devices = metal_list_devices,
};
