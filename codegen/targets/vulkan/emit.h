/* The vulkan target's part of writing a kernel; the shared part (constants, dims, loads with
 * storage conversion, elementwise semantics, the epilogue) is codegen/kernel_emit.h and works
 * unchanged here: vlmc_kernel_emit_load, _finish_element, _store, _dim, _index, ... (the
 * vulkan hooks make dims read the push constants and bf16 inputs read 32-bit words).
 *
 * A kernel is a gpu.func (docs/vulkan.md, "The kernel ABI"):
 *
 *   gpu.func @NAME(%b0: memref<?xT0> {set 0, binding 0}, ..., %out: memref<?xTo> {binding n},
 *                  %push: !vk_push {push constants: word 0 = work units, words 1.. = syms})
 *       kernel attributes {spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [x, y, z]>}
 *
 * T is f32, f16, i64, or i32 for a bf16 input (its raw words, two bf16 each, widened by
 * vlmc_kernel_emit_load). Arithmetic is f32 / i64 as on the cpu; index is i32 in SPIR-V, so
 * every size and index must stay below 2^31 (the runtime checks the work count).
 *
 * What a template does (see README.md in this folder for a worked example):
 *   1. sets the template name (e->template_name, the same names as the cpu's: the runtime
 *      recomputes the work count from it) and the shape of its workgroups with
 *      vlmc_vk_emit_set_workgroup (x, y, z, units per group);
 *   2. finds its work units: one invocation per unit with vlmc_vk_emit_open_unit ... "}",
 *      or a whole workgroup on a range of units with vlmc_vk_emit_group_units;
 *   3. reads inputs with vlmc_kernel_emit_load, writes results with
 *      vlmc_kernel_emit_finish_element (or _store when there is no epilogue);
 *   4. cooperates inside a workgroup with vlmc_vk_emit_thread_id, vlmc_vk_emit_shared (workgroup
 *      memory), vlmc_vk_emit_barrier and vlmc_vk_emit_workgroup_reduce.
 * Rules (MLIR 19 -> SPIR-V pitfalls, /work/shared/MLIR_GPU.md): a zero-trip scf.for with
 * iter_args yields garbage (guard the result with arith.select, vlmc_vk_emit_guard_empty);
 * barriers and subgroup reductions only in control flow uniform over the workgroup; no
 * gpu.all_reduce, no gpu.lane_id, no gpu.shuffle, no memref<?x?x..>. */
#ifndef VLMC_CODEGEN_TARGETS_VULKAN_EMIT_H
#define VLMC_CODEGEN_TARGETS_VULKAN_EMIT_H

#include <stdint.h>

#include "artifact/vulkan_abi.h" /* VLMC_VK_MAX_COMBINE_GROUPS */
#include "codegen/kernel_emit.h"

enum { VLMC_VK_MAX_SHARED = 16 };

/* The vulkan part of one kernel being written (e->target points at it). */
typedef struct {
  int workgroup[3];       /* LocalSize; default 64, 1, 1 */
  int units_per_group;    /* work units one workgroup handles; default 64 */
  int64_t shared_bytes;   /* workgroup memory declared so far */
  int row_threads;        /* movement templates (kernel_movement.c): invocations copying one
                             row together (0 or 1: one invocation per row) */
  uint32_t wide_inputs;   /* bit i: binding i is declared memref<?xvector<4xi32>> (16-byte
                             loads, vlmc_vk_emit_load_words4); only read that way */
  uint32_t quad_inputs;   /* bit i: binding i (f32 or f16) is declared memref<?xvector<4xT>>
                             (vlmc_vk_emit_declare_quads): element loads extract from a quad */
  bool coop_matrix;       /* uses cooperative matrices: a SPIR-V 1.6 module (the mma helpers) */
  /* A split kernel (vlmc_vk_emit_set_split): its first stage runs `split` workgroup units per
   * work unit, writing `scratch_floats` floats each to the scratch binding; then `combine`
   * writes the second stage, which reads them and writes the output. 0 / NULL: one stage. */
  int split;
  int64_t scratch_floats;
  vlmc_status_t (*combine)(vlmc_kernel_emit_t *e);
  int combine_groups;     /* a combine stage's workgroups per work unit (0: one) */
  bool scratch;           /* declares the scratch binding (binding n + 1) */
  /* Workgroup memory the kernel may declare: 16384 (every Vulkan device), unless a variant
   * for GPUs raised it (vlmc_vk_emit_allow_shared: the backend runs the main kernel instead
   * on a device with less) */
  int64_t max_shared_bytes;
  int num_shared;
  struct { int ssa; const char *type; int64_t count; } shared[VLMC_VK_MAX_SHARED];
} vlmc_vk_emit_t;

/* Starts a vulkan kernel: vlmc_kernel_emit_init plus the vulkan hooks; vk is the caller's. */
vlmc_status_t vlmc_vk_emit_init(vlmc_kernel_emit_t *e, vlmc_vk_emit_t *vk,
                                const vlmc_module_t *module, const vlmc_func_t *func,
                                const vlmc_dispatch_region_t *region);
/* The vulkan state of a kernel (e->target). */
vlmc_vk_emit_t *vlmc_vk_emit_state(vlmc_kernel_emit_t *e);

/* ---- the workgroup's shape ---- */

/* Raises the kernel's workgroup-memory cap to `bytes` (at most 49152, what current GPUs
 * offer): for "gpu" variants only, whose main kernel runs where the device has less. */
void vlmc_vk_emit_allow_shared(vlmc_kernel_emit_t *e, int64_t bytes);

/* LocalSize x, y, z and the work units one workgroup handles (all >= 1; x*y*z <= 1024). */
void vlmc_vk_emit_set_workgroup(vlmc_kernel_emit_t *e, int x, int y, int z, int units_per_group);

/* ---- split kernels (docs/vulkan.md, "Split kernels") ----
 * A kernel of two stages: stage 1 runs work x split units (the table's units_per_group are
 * of these), each writing scratch_floats floats of partial results to the scratch buffer the
 * backend binds at binding n + 1 (unit u, part p at (u * split + p) * scratch_floats); after a
 * barrier, stage 2 (written by `combine` on a fresh emitter over the same region, the same
 * push constants and bindings) runs the work units, reads the partials and writes the output:
 * a workgroup per unit, or `groups` per unit (vlmc_vk_emit_set_combine_groups), so that a
 * step's few units spread over more of the GPU. Decode attention splits a step's few
 * (row, kv head) units over the keys this way, and combines them a workgroup per head. */

/* Called by a stage-1 template: split >= 2, scratch_floats >= 1. */
void vlmc_vk_emit_set_split(vlmc_kernel_emit_t *e, int split, int64_t scratch_floats,
                            vlmc_status_t (*combine)(vlmc_kernel_emit_t *e));
/* Called by a combine template: `groups` workgroups per work unit (1 to VLMC_VK_MAX_COMBINE_GROUPS). */
void vlmc_vk_emit_set_combine_groups(vlmc_kernel_emit_t *e, int groups);
/* A combine stage of n groups per unit (after vlmc_vk_emit_set_combine_groups): opens
 * `scf.if unit < work {` and returns the unit, group / n; *piece = group % n. */
int vlmc_vk_emit_open_combine_unit(vlmc_kernel_emit_t *e, int *piece);
/* Scratch element `index` (an f32) of either stage, and a store of f32 `value` there. */
int vlmc_vk_emit_scratch_load(vlmc_kernel_emit_t *e, int index);
void vlmc_vk_emit_scratch_store(vlmc_kernel_emit_t *e, int value, int index);

/* ---- ids (all : index; emitted where called, so call them in the function's top level
 * or wherever they are needed) ---- */

/* The dispatch's work units (push constant word 0). Entry block, memoized. */
int vlmc_vk_emit_work(vlmc_kernel_emit_t *e);
/* This workgroup's number over the 2-D grid: block_id.y * grid_dim.x + block_id.x. Memoized. */
int vlmc_vk_emit_group(vlmc_kernel_emit_t *e);
/* gpu.thread_id along axis 0 (x), 1 (y) or 2 (z). Memoized. */
int vlmc_vk_emit_thread_id(vlmc_kernel_emit_t *e, int axis);
/* gpu.subgroup_id and gpu.num_subgroups. Memoized. */
int vlmc_vk_emit_subgroup_id(vlmc_kernel_emit_t *e);
int vlmc_vk_emit_num_subgroups(vlmc_kernel_emit_t *e);

/* ---- work units ---- */

/* One invocation per unit (requires workgroup = [units_per_group, 1, 1]): the unit
 * group * units_per_group + thread_id.x; opens `scf.if unit < work {` and returns the unit.
 * The template closes it with vlmc_kernel_emit_line(e, "}"). */
int vlmc_vk_emit_open_unit(vlmc_kernel_emit_t *e);
/* A workgroup on units [*first, *end): first = group * units_per_group, end = min(first +
 * units_per_group, work) (end <= first for a group past the end: loops over the range then do
 * nothing, uniformly over the group, so barriers inside stay legal). */
void vlmc_vk_emit_group_units(vlmc_kernel_emit_t *e, int *first, int *end);

/* ---- wide loads ---- */

/* Declares region input `input` (a bf16 parameter) as 16-byte words and loads word4 `at`
 * (its elements 8 * at .. 8 * at + 7): a vector<4xi32> SSA. The binding is then read only
 * this way in the kernel (MLIR_GPU.md: the one 16-byte load MLIR 19 lowers to valid SPIR-V). */
int vlmc_vk_emit_load_words4(vlmc_kernel_emit_t *e, int input, int at);
/* The 8 bf16 elements of a vector<4xi32> from vlmc_vk_emit_load_words4, widened to f32. */
void vlmc_vk_emit_bf16x8(vlmc_kernel_emit_t *e, int words, int out[8]);

/* Quads: an f32 or f16 input read four elements per load (16 or 8 bytes; MLIR 19 lowers
 * memref<?xvector<4xT>> loads to valid SPIR-V). On llvmpipe every load in a loop is a per-lane
 * scalar loop whatever its width, so four elements per load is four times fewer of them.
 * Declare before the kernel's first load of the input; vlmc_kernel_emit_load of a declared
 * input then loads its quad and extracts the element, so every other load stays correct. */
bool vlmc_vk_emit_can_declare_quads(const vlmc_kernel_emit_t *e, int input);
void vlmc_vk_emit_declare_quads(vlmc_kernel_emit_t *e, int input);
/* Elements 4 quad .. 4 quad + 3 of a declared input, widened to f32 into out[]. */
void vlmc_vk_emit_load_quad(vlmc_kernel_emit_t *e, int input, int quad, int out[4]);
/* The same quad as loaded: a vector<4xf32> or vector<4xf16> SSA (the input's storage). */
int vlmc_vk_emit_load_quad_vector(vlmc_kernel_emit_t *e, int input, int quad);

/* The two bf16 elements of 32-bit word `word_at` of bf16 input `input` (elements 2 word_at
 * and 2 word_at + 1), widened to f32 into out[]; returns the word (an i32 SSA). */
int vlmc_vk_emit_load_bf16x2(vlmc_kernel_emit_t *e, int input, int word_at, int out[2]);
/* The two bf16 halves of an i32 word SSA widened to f32 (the low half is the even element). */
void vlmc_vk_emit_bf16_word(vlmc_kernel_emit_t *e, int word, int out[2]);

/* ---- workgroup cooperation ---- */

/* A workgroup-memory array of `count` elements of `type` ("f32", "i32", "i64", "f16",
 * "vector<4xf16>"), declared
 * once at the top of the kernel (memref.alloc in #spirv.storage_class<Workgroup>); counts
 * toward shared_bytes. Returns the memref SSA; read and write it with the two below. */
int vlmc_vk_emit_shared(vlmc_kernel_emit_t *e, const char *type, int64_t count);
int vlmc_vk_emit_shared_load(vlmc_kernel_emit_t *e, int shared, int index);
void vlmc_vk_emit_shared_store(vlmc_kernel_emit_t *e, int shared, int value, int index);
/* gpu.barrier (workgroup execution and memory). */
void vlmc_vk_emit_barrier(vlmc_kernel_emit_t *e);
/* gpu.subgroup_reduce OP value: op "add", "maxnumf" / "minnumf" (f32), "maxsi" (i64) ... */
int vlmc_vk_emit_subgroup_reduce(vlmc_kernel_emit_t *e, const char *op, int value,
                                 const char *type);
/* The reduction of `value` over the whole workgroup, the result in every invocation: a
 * subgroup reduction, one partial per subgroup in workgroup memory, a barrier, then every
 * invocation combines the partials (and a barrier, so it can be called again). `op` is an
 * arith op on `type` ("arith.addf"/"f32", "arith.maximumf"/"f32", "arith.maxsi"/"i64");
 * `sub_op` the matching gpu.subgroup_reduce kind ("add", "maximumf", "maxsi"); identity
 * its neutral element (an SSA of `type`). Must be reached by every invocation. */
int vlmc_vk_emit_workgroup_reduce(vlmc_kernel_emit_t *e, const char *op, const char *sub_op,
                                  const char *type, int value, int identity);
/* `arith.select (from < to), loop_result, init`: pitfall 4, a zero-trip scf.for with
 * iter_args gives garbage in MLIR 19's SPIR-V lowering. type: "f32", "i64", "index". */
int vlmc_vk_emit_guard_empty(vlmc_kernel_emit_t *e, int from, int to, int loop_result, int init,
                             const char *type);

/* ---- small arithmetic shared by the templates ---- */

/* arith.cmpi `pred` of two index values (an i1). */
int vlmc_vk_emit_cmp(vlmc_kernel_emit_t *e, const char *pred, int a, int b);
/* a && b of two i1 values. */
int vlmc_vk_emit_and(vlmc_kernel_emit_t *e, int a, int b);
/* cond ? a : b, of MLIR type `type` ("f32", "index"). */
int vlmc_vk_emit_select(vlmc_kernel_emit_t *e, int cond, int a, int b, const char *type);
/* a * b + c in f32 (math.fma). */
int vlmc_vk_emit_fma(vlmc_kernel_emit_t *e, int a, int b, int c);
/* An online softmax's weight exp(x - m), or 0 where x is -inf (a masked key, or the max
 * before any key). */
int vlmc_vk_emit_softmax_weight(vlmc_kernel_emit_t *e, int x, int m);
/* [*start, *end) of the keys attention query row i sees (q [S, ...], k [T, ...]): its segment
 * of cu (NULL: none; the last boundary <= i up to the next one, a binary search: cu sorted,
 * as the reference requires), cut at key i + T - S when causal, never reversed, inside
 * [0, T]; as the cpu kernel. */
void vlmc_vk_emit_key_range(vlmc_kernel_emit_t *e, const vlmc_value_t *q, const vlmc_value_t *k,
                            const vlmc_value_t *cu, bool causal, int i, int *start, int *end);
/* The union [*start, *end) of the key ranges of rows i0 .. i0 + rows - 1 (each clamped to
 * `last`, S - 1) for a static rows >= 2: the first row's start to the last row's end (both
 * ends never decrease with the row); from uniform values only, so loops over it are
 * uniform. */
void vlmc_vk_emit_rows_key_range(vlmc_kernel_emit_t *e, const vlmc_value_t *q, const vlmc_value_t *k,
                                 const vlmc_value_t *cu, bool causal, int i0, int last, int64_t rows,
                                 int *start, int *end);
/* ---- cooperative matrices (VK_KHR_cooperative_matrix through MLIR 19's gpu.subgroup_mma_*:
 * 16 x 16 tiles at subgroup scope, f16 operands, f32 accumulators; a kernel that uses them is
 * a SPIR-V 1.6 module needing the device feature "cooperativeMatrix") ---- */

/* The MLIR type of an accumulator: !gpu.mma_matrix<16x16xf32, "COp">. */
const char *vlmc_vk_mma_acc_type(void);
/* A zero accumulator. */
int vlmc_vk_emit_mma_zero(vlmc_kernel_emit_t *e);
/* The 16 x 16 f16 operand at element `index` of workgroup array `shared` (f16), rows `lead`
 * elements apart: an A operand (row-major), or with b_operand a B operand read transposed
 * (the array holds B's columns as rows: W [N, K] as it is). An array of "vector<4xf16>"
 * holds four f16 a slot (filled by 8-byte stores); its index and lead count slots. */
int vlmc_vk_emit_mma_load(vlmc_kernel_emit_t *e, int shared, int index, int64_t lead, bool b_operand);
/* The same for any use: "AOp", "BOp" (f16 arrays) or "COp" (an f32 array: an accumulator),
 * read transposed or not (a B operand held row-major as [K, N]: transpose false). */
int vlmc_vk_emit_mma_load_as(vlmc_kernel_emit_t *e, int shared, int index, int64_t lead,
                             const char *use, bool transpose);
/* a * b + c. */
int vlmc_vk_emit_mma(vlmc_kernel_emit_t *e, int a, int b, int c);

/* Accumulator c into workgroup array `shared` (f32) at `index`, rows `lead` apart. */
void vlmc_vk_emit_mma_store(vlmc_kernel_emit_t *e, int c, int shared, int index, int64_t lead);

/* "%r:n = scf.for %iv = from to to step step iter_args(%a0 = init[0], ...) -> (f32, ...) {"
 * with n (<= VLMC_VK_MAX_LOOP_VALUES) carried f32 values: fills *iv and inner[] (the names
 * inside the loop); returns %r (its results are %r#i). */
enum { VLMC_VK_MAX_LOOP_VALUES = 256 };
int vlmc_vk_emit_open_f32_loop(vlmc_kernel_emit_t *e, int from, int to, int step, int n,
                               const int *init, int *iv, int *inner);
/* "scf.yield values... : f32, ..." (the loop's closing brace is the caller's). */
void vlmc_vk_emit_yield_f32(vlmc_kernel_emit_t *e, int n, const int *values);
/* Yields values[0 .. n), closes the loop opened by vlmc_vk_emit_open_f32_loop (its results
 * %r), and sets out[i] to %r#i as a plain SSA (values and out may be the same array). */
void vlmc_vk_emit_close_f32_loop(vlmc_kernel_emit_t *e, int results, int n, const int *values,
                                 int *out);
/* An open group of units_per_group == 1 (a workgroup per unit): its unit, under
 * `scf.if unit < work {` (uniform over the workgroup; the template closes it with "}"). */
int vlmc_vk_emit_open_group_unit(vlmc_kernel_emit_t *e);
/* Whether v holds f16 values: f16 itself, or widened from f16 by casts (the f16 policy's
 * activations: what the cooperative-matrix variants take as exact f16 operands). */
bool vlmc_vk_holds_f16(const vlmc_value_t *v);
/* The rows of x (the product of its leading dims) when all are static, else -1. */
int64_t vlmc_vk_static_rows(const vlmc_type_t *xt);

/* ---- the driver's side ---- */

/* The whole module text (gpu.container_module, target env, the gpu.func @name); takes the
 * body. Returns the first error a helper recorded, if any. */
vlmc_status_t vlmc_vk_emit_finish(vlmc_kernel_emit_t *e, const char *name, vlmc_strbuf_t *out);

/* One template per anchor op kind (kernel_*.c in this folder, declared in kernels.h). */
typedef vlmc_status_t (*vlmc_vk_template_fn)(vlmc_kernel_emit_t *e);
/* The template for an anchor kind, or NULL when the vulkan target has none. */
vlmc_vk_template_fn vlmc_vk_template_for(vlmc_op_kind_t kind);
/* Templates written for other device classes than the main one's (artifact/kernel_table.h,
 * "Variants"; docs/vulkan.md): each region whose anchor has some gets those kernels too. */
typedef struct {
  const char *for_devices; /* "cpu": Vulkan devices that are CPUs (lavapipe); "gpu": others */
  vlmc_vk_template_fn fn;
  bool (*applies)(const vlmc_op_t *anchor); /* NULL: every region of the anchor kind */
} vlmc_vk_variant_t;
/* The anchor kind's variants, *out_count of them (0: none). */
const vlmc_vk_variant_t *vlmc_vk_variants_for(vlmc_op_kind_t kind, size_t *out_count);

#endif
