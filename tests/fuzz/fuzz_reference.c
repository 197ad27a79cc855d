/* Fuzzes the reference executor: no verified module may crash it, whatever the inputs.
 *
 * First byte 0: "runtime inputs" mode. The rest picks a function of a fixed module (index
 * ops, gathers, segmented and windowed attention, caches, slices, casts, rope) and supplies
 * every argument's shape and data from the bytes, so indices, grids, cu_seqlens, positions and
 * shapes are hostile. The run either succeeds or returns an error; both are fine.
 * Any other first byte: "module" mode. The whole input is .vir text; when it parses and
 * verifies, each function runs on generated arguments (every symbol bound to 2, 3 or 4) with
 * generated parameters, under a small per-value size limit so that runs stay fast. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "reference/executor.h"

enum { MAX_BYTES = 64 * 1024, MAX_ARGS = 8 };

static const char *kRuntimeModule =
    "param @table : f32[6, 4]\n"
    "func @index(%grid: i64[N, 3]) -> (i64[M], i64[W], i64[F], i64[2, P], i64[M]) {\n"
    "  %o = window_order %grid {window = 112, patch = 14, merge = 2} : i64[M]\n"
    "  %w = window_segments %grid {window = 112, patch = 14, merge = 2} : i64[W]\n"
    "  %f = full_segments %grid : i64[F]\n"
    "  %p = vision_positions %grid {merge = 2} : i64[2, P]\n"
    "  %i = inverse_permutation %o : i64[M]\n"
    "  return %o, %w, %f, %p, %i\n"
    "}\n"
    "func @gathers(%x: f32[A, 4], %i: i64[B], %ids: i64[B], %pos: i64[B], %rows: f32[B, 4]) ->"
    " (f32[B, 4], f32[B, 4], f32[A, 4], i64[B]) {\n"
    "  %g = gather %x, %i {axis = 0} : f32[B, 4]\n"
    "  %t = param @table : f32[6, 4]\n"
    "  %e = embedding %t, %ids : f32[B, 4]\n"
    "  %s = scatter_rows %x, %rows, %pos : f32[A, 4]\n"
    "  %v = inverse_permutation %i : i64[B]\n"
    "  return %g, %e, %s, %v\n"
    "}\n"
    "func @segments(%q: f32[S, 2, 4], %k: f32[S, 1, 4], %cu: i64[K]) -> f32[S, 2, 4] {\n"
    "  %a = attention %q, %k, %k, %cu {causal = true} : f32[S, 2, 4]\n"
    "  return %a\n"
    "}\n"
    "func @window(%q: f32[P, 1, 4], %grid: i64[N, 3]) -> f32[P, 1, 4] {\n"
    "  %a = window_attention %q, %q, %q, %grid {window = 56, patch = 14, merge = 2} :"
    " f32[P, 1, 4]\n"
    "  return %a\n"
    "}\n"
    "func @cache(%c: f32[C, 2], %r: f32[1, 2], %q: f32[2, 1, 2]) -> (f32[C+1, 2], f32[2, 1, 2]) {\n"
    "  %n = kv_cache_append %c, %r : f32[C+1, 2]\n"
    "  %k = reshape %n : f32[C+1, 1, 2]\n"
    "  %a = attention %q, %k, %k {causal = true} : f32[2, 1, 2]\n"
    "  return %n, %a\n"
    "}\n"
    "func @misc(%x: f32[S, 1, 6], %pos: i64[3, S], %i: i64[S]) ->"
    " (f32[S, 1, 6], i32[S, 1, 6], f32[S-2, 1, 6], i64[S], i8[S]) {\n"
    "  %r = rope %x, %pos {layout = mrope_sectioned, theta = 10000.0, sections = [1, 1, 1]}"
    " : f32[S, 1, 6]\n"
    "  %c = cast %x {dtype = i32} : i32[S, 1, 6]\n"
    "  %s = slice %x {axis = 0, start = 2} : f32[S-2, 1, 6]\n"
    "  %d = div %i, %i : i64[S]\n"
    "  %w = cast %i {dtype = i8} : i8[S]\n"
    "  return %r, %c, %s, %d, %w\n"
    "}\n";

typedef struct {
  const uint8_t *data;
  size_t size, pos;
} bytes_t;

static uint8_t next_byte(bytes_t *b) { return b->pos < b->size ? b->data[b->pos++] : 0; }

static vlmc_status_t zero_params(void *ctx, const char *name, const vlmc_type_t *type,
                                 vlmc_tensor_t *out_view) {
  /* Static parameter shapes; data: a recognisable pattern, in the IR's own storage. */
  int64_t shape[VLMC_IR_MAX_RANK];
  for (uint32_t i = 0; i < type->rank; ++i) shape[i] = type->dims[i].off;
  size_t bytes;
  if (!vlmc_tensor_byte_size(type->dtype, type->rank, shape, &bytes) || bytes > MAX_BYTES)
    return vlmc_status_make(VLMC_OUT_OF_RANGE, "fuzz: parameter %s too large", name);
  vlmc_tensor_t t;
  VLMC_RETURN_IF_ERROR(vlmc_tensor_alloc(type->dtype, type->rank, shape, &t));
  for (size_t i = 0; i < bytes; ++i) ((uint8_t *)t.data)[i] = (uint8_t)(i * 37 + 11);
  if (type->dtype == VLMC_DTYPE_F32)
    for (int64_t i = 0, n = vlmc_tensor_count(&t); i < n; ++i)
      vlmc_tensor_f32(&t)[i] = (float)(i % 7) - 3.0f;
  *out_view = t; /* owned: the executor takes it */
  return NULL;
}

/* Storage for an argument of IR dtype `dtype`: f32 or i64 (or the quantized type itself). */
static vlmc_dtype_t arg_storage(vlmc_dtype_t dtype) {
  const vlmc_dtype_info_t *info = vlmc_dtype_info(dtype);
  if (info->is_quantized) return dtype;
  return info->is_float ? VLMC_DTYPE_F32 : VLMC_DTYPE_I64;
}

static void fill_from_bytes(vlmc_tensor_t *t, bytes_t *b, bool small_ints) {
  int64_t n = vlmc_tensor_count(t);
  if (t->dtype == VLMC_DTYPE_F32) {
    for (int64_t i = 0; i < n; ++i) vlmc_tensor_f32(t)[i] = (float)((int8_t)next_byte(b)) / 8.0f;
  } else if (t->dtype == VLMC_DTYPE_I64) {
    for (int64_t i = 0; i < n; ++i) {
      uint8_t v = next_byte(b);
      vlmc_tensor_i64(t)[i] = small_ints ? (int64_t)(v % 8) : (int64_t)(int8_t)v * 3;
    }
  } else {
    size_t bytes;
    if (vlmc_tensor_byte_size(t->dtype, t->rank, t->shape, &bytes))
      for (size_t i = 0; i < bytes; ++i) ((uint8_t *)t->data)[i] = next_byte(b);
  }
}

static void run_and_release(vlmc_executor_t *ex, const vlmc_func_t *func, vlmc_tensor_t *args) {
  vlmc_tensor_t results[VLMC_IR_MAX_RESULTS];
  vlmc_status_t st = vlmc_executor_run(ex, func->name, args, func->num_args, results,
                                       func->num_results);
  if (!st) {
    for (uint32_t i = 0; i < func->num_results; ++i) {
      assert(results[i].owned && results[i].rank == func->result_types[i].rank);
      vlmc_tensor_release(&results[i]);
    }
  }
  assert(!st || vlmc_status_message(st)[0] != '\0');
  vlmc_status_free(st);
  for (uint32_t i = 0; i < func->num_args; ++i) vlmc_tensor_release(&args[i]);
}

/* Runtime-inputs mode: shapes (0..7 per dim, or a byte's worth for some) and data from bytes. */
static void fuzz_runtime_inputs(bytes_t *b) {
  vlmc_module_t *module = NULL;
  vlmc_status_t st = vlmc_module_parse(kRuntimeModule, strlen(kRuntimeModule), NULL, &module);
  assert(!st);
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.get_param = zero_params;
  o.max_tensor_bytes = MAX_BYTES;
  o.emulate_low_precision = next_byte(b) & 1;
  vlmc_executor_t *ex = NULL;
  st = vlmc_executor_create(module, &o, &ex);
  assert(!st);
  const vlmc_func_t *func = module->funcs[next_byte(b) % module->num_funcs];
  vlmc_tensor_t args[MAX_ARGS];
  memset(args, 0, sizeof args);
  assert(func->num_args <= MAX_ARGS);
  for (uint32_t i = 0; i < func->num_args; ++i) {
    const vlmc_type_t *type = &func->args[i].type;
    int64_t shape[VLMC_IR_MAX_RANK];
    uint8_t wide = next_byte(b);
    for (uint32_t d = 0; d < type->rank; ++d) {
      /* Usually the type's static size; otherwise something small (or, rarely, larger). */
      uint8_t v = next_byte(b);
      shape[d] = vlmc_dim_is_static(type->dims[d]) && (v & 0x80) == 0 ? type->dims[d].off
                 : (wide & 1)                                        ? v % 64
                                                                     : v % 8;
    }
    if (vlmc_tensor_alloc(arg_storage(type->dtype), type->rank, shape, &args[i])) break;
    fill_from_bytes(&args[i], b, (wide & 2) != 0);
  }
  run_and_release(ex, func, args);
  vlmc_executor_destroy(ex);
  vlmc_module_destroy(module);
}

/* Module mode: every symbol bound to one small value; shapes that cannot be evaluated (a P/4
 * with P = 3) skip the function. */
static void fuzz_module(const uint8_t *data, size_t size) {
  vlmc_module_t *module = NULL;
  vlmc_status_t st = vlmc_module_parse((const char *)data, size, NULL, &module);
  if (st) {
    vlmc_status_free(st);
    return;
  }
  vlmc_executor_options_t o = vlmc_executor_options_default();
  o.get_param = zero_params;
  o.max_tensor_bytes = MAX_BYTES;
  o.emulate_low_precision = size % 2 == 0;
  o.threads = size % 3 == 0 ? 2 : 1;
  vlmc_executor_t *ex = NULL;
  st = vlmc_executor_create(module, &o, &ex); /* verifies */
  if (st) {
    vlmc_status_free(st);
    vlmc_module_destroy(module);
    return;
  }
  int64_t symbols[64];
  size_t num_symbols = module->num_symbols < 64 ? module->num_symbols : 64;
  bytes_t fill = {data, size, 0};
  for (int64_t value = 2; value <= 4; ++value) {
    for (size_t s = 0; s < num_symbols; ++s) symbols[s] = value;
    for (uint32_t f = 0; f < module->num_funcs && module->num_symbols <= 64; ++f) {
      const vlmc_func_t *func = module->funcs[f];
      vlmc_tensor_t args[MAX_ARGS];
      memset(args, 0, sizeof args);
      bool ok = func->num_args <= MAX_ARGS;
      for (uint32_t i = 0; ok && i < func->num_args; ++i) {
        const vlmc_type_t *type = &func->args[i].type;
        int64_t shape[VLMC_IR_MAX_RANK];
        for (uint32_t d = 0; ok && d < type->rank; ++d) {
          vlmc_status_t e = vlmc_dim_eval(type->dims[d], symbols, num_symbols, &shape[d]);
          ok = !e && shape[d] <= 4096;
          vlmc_status_free(e);
        }
        size_t bytes;
        ok = ok && vlmc_tensor_byte_size(arg_storage(type->dtype), type->rank, shape, &bytes) &&
             bytes <= MAX_BYTES && !vlmc_tensor_alloc(arg_storage(type->dtype), type->rank, shape,
                                                      &args[i]);
        if (ok) fill_from_bytes(&args[i], &fill, true);
      }
      if (ok) {
        run_and_release(ex, func, args);
      } else {
        for (uint32_t i = 0; i < MAX_ARGS; ++i) vlmc_tensor_release(&args[i]);
      }
    }
  }
  vlmc_executor_destroy(ex);
  vlmc_module_destroy(module);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  if (data[0] == 0) {
    bytes_t b = {data + 1, size - 1, 0};
    fuzz_runtime_inputs(&b);
  } else {
    fuzz_module(data, size);
  }
  return 0;
}
