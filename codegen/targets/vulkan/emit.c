/* The vulkan target's kernel-writing helpers (codegen/targets/vulkan/emit.h): the hooks that
 * make the shared emitter write a gpu.func (push-constant symbols, bf16 read as 32-bit words),
 * ids, work units, workgroup memory and reductions. */
#include "codegen/targets/vulkan/emit.h"

#include <math.h>
#include <string.h>

/* The vulkan memo kinds, after the shared emitter's. */
enum {
  MEMO_WORK = VLMC_KERNEL_MEMO_TARGET,
  MEMO_GROUP,
  MEMO_THREAD,
  MEMO_SUBGROUP_ID,
  MEMO_NUM_SUBGROUPS,
  MEMO_I32,
  MEMO_FIRST_UNIT,
  MEMO_REDUCE_SLOTS, /* key: the element type's first letter */
};

/* The module's target environment: everything a kernel may use; spirv-update-vce then keeps
 * only what the kernel does use, which is what the table's features are read from. */
static const char kTargetEnv[] =
    "#spirv.target_env<#spirv.vce<v1.3, [Shader, Int64, Float16, StorageBuffer16BitAccess, "
    "GroupNonUniform, GroupNonUniformArithmetic], [SPV_KHR_storage_buffer_storage_class, "
    "SPV_KHR_16bit_storage]>, #spirv.resource_limits<>>";

/* The same for a kernel that uses cooperative matrices (vlmc_vk_emit_mma_*): MLIR 19 lowers
 * them to the KHR ops only, and only for SPIR-V 1.6 (MLIR_GPU.md, "Cooperative matrix"). */
static const char kCoopTargetEnv[] =
    "#spirv.target_env<#spirv.vce<v1.6, [Shader, Int64, Float16, StorageBuffer16BitAccess, "
    "GroupNonUniform, GroupNonUniformArithmetic, CooperativeMatrixKHR], "
    "[SPV_KHR_storage_buffer_storage_class, SPV_KHR_16bit_storage, SPV_KHR_cooperative_matrix]>, "
    "#spirv.resource_limits<subgroup_size = 32>>";

vlmc_vk_emit_t *vlmc_vk_emit_state(vlmc_kernel_emit_t *e) { return e->target; }

static int i32_constant(vlmc_kernel_emit_t *e, int32_t value) {
  int v = vlmc_kernel_emit_memo_find(e, MEMO_I32, value);
  if (v >= 0) return v;
  v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_entry_line(e, VLMC_SSA " = arith.constant %d : i32", v, (int)value);
  return vlmc_kernel_emit_memo_add(e, MEMO_I32, value, v);
}

/* Push constant word `word` as an index (entry block). */
static int push_word(vlmc_kernel_emit_t *e, int word) {
  int at = vlmc_kernel_emit_index(e, word);
  int raw = vlmc_kernel_emit_fresh(e), v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_entry_line(e, VLMC_SSA " = memref.load %%push[" VLMC_SSA "] : !vk_push", raw, at);
  vlmc_kernel_emit_entry_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : i32 to index", v, raw);
  return v;
}

/* ---- the hooks ---- */

static int read_symbol(vlmc_kernel_emit_t *e, uint32_t slot) { return push_word(e, (int)slot + 1); }

/* bf16 element `flat` of a buffer of 32-bit words: the word flat / 2, its low half for an
 * even element and its high half for an odd one (little-endian), moved to the top 16 bits. */
static int load_bf16(vlmc_kernel_emit_t *e, int input, int flat) {
  int one = vlmc_kernel_emit_index(e, 1);
  int word_at = vlmc_kernel_emit_index_op(e, "arith.shrui", flat, one);
  int word = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.load %%b%d[" VLMC_SSA "] : memref<?xi32>", word, input,
                        word_at);
  int odd = vlmc_kernel_emit_index_op(e, "arith.andi", flat, one);
  int odd32 = vlmc_kernel_emit_fresh(e), shift = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : index to i32", odd32, odd);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.muli " VLMC_SSA ", " VLMC_SSA " : i32", shift, odd32,
                        i32_constant(e, 16));
  int half = vlmc_kernel_emit_fresh(e), bits = vlmc_kernel_emit_fresh(e), v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.shrui " VLMC_SSA ", " VLMC_SSA " : i32", half, word, shift);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.shli " VLMC_SSA ", " VLMC_SSA " : i32", bits, half,
                        i32_constant(e, 16));
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.bitcast " VLMC_SSA " : i32 to f32", v, bits);
  return v;
}

static bool is_quads(const vlmc_kernel_emit_t *e, int input) {
  const vlmc_vk_emit_t *vk = e->target;
  return input >= 0 && input < 32 && (vk->quad_inputs >> input) & 1;
}

/* The quad of a declared input at index SSA `quad`: a vector<4xT> SSA. */
static int load_quad_vector(vlmc_kernel_emit_t *e, int input, int quad) {
  const char *st = vlmc_kernel_emit_storage_type(vlmc_kernel_emit_input_storage(e, (uint32_t)input));
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.load %%b%d[" VLMC_SSA "] : memref<?xvector<4x%s>>", v,
                        input, quad, st);
  return v;
}

/* Element `lane` (an index SSA, or a constant 0..3 when lane_ssa is false) of quad vector v,
 * as f32. */
static int quad_element(vlmc_kernel_emit_t *e, int input, int v, int lane, bool lane_ssa) {
  vlmc_dtype_t storage = vlmc_kernel_emit_input_storage(e, (uint32_t)input);
  const char *st = vlmc_kernel_emit_storage_type(storage);
  int x = vlmc_kernel_emit_fresh(e);
  if (lane_ssa)
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.extract " VLMC_SSA "[" VLMC_SSA "] : %s from vector<4x%s>", x,
                          v, lane, st, st);
  else
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.extract " VLMC_SSA "[%d] : %s from vector<4x%s>", x, v, lane,
                          st, st);
  if (storage != VLMC_DTYPE_F16) return x;
  int wide = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.extf " VLMC_SSA " : f16 to f32", wide, x);
  return wide;
}

static int load_input(vlmc_kernel_emit_t *e, int input, vlmc_dtype_t storage, int flat) {
  if (storage == VLMC_DTYPE_BF16) return load_bf16(e, input, flat);
  if (is_quads(e, input)) {
    int four = vlmc_kernel_emit_index(e, 4);
    int quad = vlmc_kernel_emit_index_op(e, "arith.divui", flat, four);
    int lane = vlmc_kernel_emit_index_op(e, "arith.remui", flat, four);
    return quad_element(e, input, load_quad_vector(e, input, quad), lane, true);
  }
  const char *st = vlmc_kernel_emit_storage_type(storage);
  int raw = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.load %%b%d[" VLMC_SSA "] : memref<?x%s>", raw, input,
                        flat, st);
  if (storage != VLMC_DTYPE_F16) return raw;
  int wide = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.extf " VLMC_SSA " : f16 to f32", wide, raw);
  return wide;
}

/* The buffer's element type in the kernel's signature: bf16 is read as 32-bit words, or as
 * 16-byte words where the template asked for wide loads. */
static const char *binding_type(const vlmc_kernel_emit_t *e, uint32_t i) {
  const vlmc_vk_emit_t *vk = e->target;
  if (i < 32 && (vk->wide_inputs >> i) & 1) return "vector<4xi32>";
  vlmc_dtype_t storage = vlmc_kernel_emit_input_storage(e, i);
  if (i < 32 && (vk->quad_inputs >> i) & 1)
    return storage == VLMC_DTYPE_F16 ? "vector<4xf16>" : "vector<4xf32>";
  return storage == VLMC_DTYPE_BF16 ? "i32" : vlmc_kernel_emit_storage_type(storage);
}

static vlmc_status_t write_function(vlmc_kernel_emit_t *e, const char *name,
                                    const char *trailing_params, vlmc_strbuf_t *out) {
  (void)trailing_params;
  const vlmc_vk_emit_t *vk = e->target;
  uint32_t n = e->region->num_inputs;
  vlmc_strbuf_printf(out, "!vk_push = memref<%uxi32, #spirv.storage_class<PushConstant>>\n",
                     1 + e->num_syms);
  vlmc_strbuf_printf(out, "module attributes {gpu.container_module, spirv.target_env = %s} {\n",
                     vk->coop_matrix ? kCoopTargetEnv : kTargetEnv);
  vlmc_strbuf_printf(out, "  gpu.module @kernels {\n    gpu.func @%s(", name);
  for (uint32_t i = 0; i < n; ++i)
    vlmc_strbuf_printf(out, "%%b%u: memref<?x%s> {spirv.interface_var_abi = "
                            "#spirv.interface_var_abi<(0, %u)>}, ",
                       i, binding_type(e, i), i);
  vlmc_strbuf_printf(out, "%%out: memref<?x%s> {spirv.interface_var_abi = "
                          "#spirv.interface_var_abi<(0, %u)>}, ",
                     vlmc_kernel_emit_type(vlmc_dispatch_output(e->region)->type.dtype), n);
  if (vk->scratch)
    vlmc_strbuf_printf(out, "%%scratch: memref<?xf32> {spirv.interface_var_abi = "
                            "#spirv.interface_var_abi<(0, %u)>}, ", n + 1);
  vlmc_strbuf_printf(out, "%%push: !vk_push {spirv.interface_var_abi = "
                          "#spirv.interface_var_abi<(0, %u)>})\n", n + 1 + (vk->scratch ? 1 : 0));
  vlmc_strbuf_printf(out, "        kernel attributes {spirv.entry_point_abi = "
                          "#spirv.entry_point_abi<workgroup_size = [%d, %d, %d]>} {\n",
                     vk->workgroup[0], vk->workgroup[1], vk->workgroup[2]);
  vlmc_kernel_emit_append_code(e, out);
  vlmc_strbuf_puts(out, "      gpu.return\n    }\n  }\n}\n");
  return NULL;
}

static const vlmc_kernel_emit_hooks_t kHooks = {
    .read_symbol = read_symbol,
    .load_input = load_input,
    .write_function = write_function,
    .expand_erf = true, /* convert-math-to-spirv has no math.erf */
    .round_f16_by_bits = true, /* NVIDIA drops arith.truncf + arith.extf (docs/vulkan.md) */
};

vlmc_status_t vlmc_vk_emit_init(vlmc_kernel_emit_t *e, vlmc_vk_emit_t *vk,
                                const vlmc_module_t *module, const vlmc_func_t *func,
                                const vlmc_dispatch_region_t *region) {
  memset(vk, 0, sizeof *vk);
  vk->workgroup[0] = 64;
  vk->workgroup[1] = vk->workgroup[2] = 1;
  vk->units_per_group = 64;
  vk->max_shared_bytes = 16384; /* Vulkan's guaranteed maxComputeSharedMemorySize */
  /* Scalar code: vector loads and stores do not lower to valid SPIR-V in MLIR 19. */
  VLMC_RETURN_IF_ERROR(vlmc_kernel_emit_init(e, module, func, region, 1));
  e->hooks = &kHooks;
  e->target = vk;
  return NULL;
}

void vlmc_vk_emit_allow_shared(vlmc_kernel_emit_t *e, int64_t bytes) {
  vlmc_vk_emit_t *vk = e->target;
  vk->max_shared_bytes = bytes < 16384 ? 16384 : bytes > 49152 ? 49152 : bytes;
}

void vlmc_vk_emit_set_workgroup(vlmc_kernel_emit_t *e, int x, int y, int z, int units_per_group) {
  vlmc_vk_emit_t *vk = e->target;
  if (x < 1 || y < 1 || z < 1 || units_per_group < 1 || (int64_t)x * y * z > 1024) {
    vlmc_kernel_emit_fail(e, "workgroup %dx%dx%d with %d units per group is out of range", x, y, z,
                          units_per_group);
    return;
  }
  vk->workgroup[0] = x;
  vk->workgroup[1] = y;
  vk->workgroup[2] = z;
  vk->units_per_group = units_per_group;
}

/* ---- split kernels ---- */

void vlmc_vk_emit_set_split(vlmc_kernel_emit_t *e, int split, int64_t scratch_floats,
                            vlmc_status_t (*combine)(vlmc_kernel_emit_t *e)) {
  vlmc_vk_emit_t *vk = e->target;
  if (split < 2 || scratch_floats < 1 || !combine) {
    vlmc_kernel_emit_fail(e, "a split kernel needs split >= 2 (%d), scratch floats >= 1 (%lld) "
                          "and a combine stage", split, (long long)scratch_floats);
    return;
  }
  vk->split = split;
  vk->scratch_floats = scratch_floats;
  vk->combine = combine;
  vk->scratch = true;
}

void vlmc_vk_emit_set_combine_groups(vlmc_kernel_emit_t *e, int groups) {
  vlmc_vk_emit_t *vk = e->target;
  if (groups < 1 || groups > VLMC_VK_MAX_COMBINE_GROUPS) {
    vlmc_kernel_emit_fail(e, "a combine stage takes 1 to %d workgroups per unit (%d)",
                          VLMC_VK_MAX_COMBINE_GROUPS, groups);
    return;
  }
  vk->combine_groups = groups;
}

int vlmc_vk_emit_open_combine_unit(vlmc_kernel_emit_t *e, int *piece) {
  const vlmc_vk_emit_t *vk = e->target;
  int n = vlmc_kernel_emit_index(e, vk->combine_groups > 0 ? vk->combine_groups : 1);
  int group = vlmc_vk_emit_group(e);
  int unit = vlmc_kernel_emit_index_op(e, "arith.divui", group, n);
  *piece = vlmc_kernel_emit_index_op(e, "arith.remui", group, n);
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", vlmc_vk_emit_cmp(e, "slt", unit, vlmc_vk_emit_work(e)));
  return unit;
}

int vlmc_vk_emit_scratch_load(vlmc_kernel_emit_t *e, int index) {
  vlmc_vk_emit_t *vk = e->target;
  vk->scratch = true;
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.load %%scratch[" VLMC_SSA "] : memref<?xf32>", v,
                        index);
  return v;
}

void vlmc_vk_emit_scratch_store(vlmc_kernel_emit_t *e, int value, int index) {
  vlmc_vk_emit_t *vk = e->target;
  vk->scratch = true;
  vlmc_kernel_emit_line(e, "memref.store " VLMC_SSA ", %%scratch[" VLMC_SSA "] : memref<?xf32>",
                        value, index);
}

/* ---- ids ---- */

int vlmc_vk_emit_work(vlmc_kernel_emit_t *e) {
  int v = vlmc_kernel_emit_memo_find(e, MEMO_WORK, 0);
  return v >= 0 ? v : vlmc_kernel_emit_memo_add(e, MEMO_WORK, 0, push_word(e, 0));
}

int vlmc_vk_emit_group(vlmc_kernel_emit_t *e) {
  int v = vlmc_kernel_emit_memo_find(e, MEMO_GROUP, 0);
  if (v >= 0) return v;
  int bx = vlmc_kernel_emit_fresh(e), by = vlmc_kernel_emit_fresh(e), gx = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_entry_line(e, VLMC_SSA " = gpu.block_id x", bx);
  vlmc_kernel_emit_entry_line(e, VLMC_SSA " = gpu.block_id y", by);
  vlmc_kernel_emit_entry_line(e, VLMC_SSA " = gpu.grid_dim x", gx);
  int row = vlmc_kernel_emit_fresh(e);
  v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_entry_line(e, VLMC_SSA " = arith.muli " VLMC_SSA ", " VLMC_SSA " : index", row, by, gx);
  vlmc_kernel_emit_entry_line(e, VLMC_SSA " = arith.addi " VLMC_SSA ", " VLMC_SSA " : index", v, row, bx);
  return vlmc_kernel_emit_memo_add(e, MEMO_GROUP, 0, v);
}

int vlmc_vk_emit_thread_id(vlmc_kernel_emit_t *e, int axis) {
  if (axis < 0 || axis > 2) axis = 0;
  int v = vlmc_kernel_emit_memo_find(e, MEMO_THREAD, axis);
  if (v >= 0) return v;
  v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_entry_line(e, VLMC_SSA " = gpu.thread_id %c", v, "xyz"[axis]);
  return vlmc_kernel_emit_memo_add(e, MEMO_THREAD, axis, v);
}

static int entry_op(vlmc_kernel_emit_t *e, int kind, const char *op) {
  int v = vlmc_kernel_emit_memo_find(e, kind, 0);
  if (v >= 0) return v;
  v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_entry_line(e, VLMC_SSA " = %s : index", v, op);
  return vlmc_kernel_emit_memo_add(e, kind, 0, v);
}

int vlmc_vk_emit_subgroup_id(vlmc_kernel_emit_t *e) {
  return entry_op(e, MEMO_SUBGROUP_ID, "gpu.subgroup_id");
}

int vlmc_vk_emit_num_subgroups(vlmc_kernel_emit_t *e) {
  return entry_op(e, MEMO_NUM_SUBGROUPS, "gpu.num_subgroups");
}

/* ---- work units ---- */

/* group * units_per_group (entry block). */
static int first_unit(vlmc_kernel_emit_t *e) {
  int v = vlmc_kernel_emit_memo_find(e, MEMO_FIRST_UNIT, 0);
  if (v >= 0) return v;
  const vlmc_vk_emit_t *vk = e->target;
  int group = vlmc_vk_emit_group(e), per = vlmc_kernel_emit_index(e, vk->units_per_group);
  v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_entry_line(e, VLMC_SSA " = arith.muli " VLMC_SSA ", " VLMC_SSA " : index", v, group, per);
  return vlmc_kernel_emit_memo_add(e, MEMO_FIRST_UNIT, 0, v);
}

int vlmc_vk_emit_open_unit(vlmc_kernel_emit_t *e) {
  const vlmc_vk_emit_t *vk = e->target;
  if (vk->workgroup[0] != vk->units_per_group || vk->workgroup[1] != 1 || vk->workgroup[2] != 1)
    vlmc_kernel_emit_fail(e, "one invocation per unit needs a workgroup of [units_per_group, 1, 1]");
  int group_start = first_unit(e);
  int unit = vlmc_kernel_emit_index_op(e, "arith.addi", group_start, vlmc_vk_emit_thread_id(e, 0));
  int ok = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi ult, " VLMC_SSA ", " VLMC_SSA " : index", ok, unit,
                        vlmc_vk_emit_work(e));
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", ok);
  return unit;
}

int vlmc_vk_emit_open_group_unit(vlmc_kernel_emit_t *e) {
  const vlmc_vk_emit_t *vk = e->target;
  if (vk->units_per_group != 1) vlmc_kernel_emit_fail(e, "a workgroup per unit needs units_per_group 1");
  int first, end;
  vlmc_vk_emit_group_units(e, &first, &end);
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", vlmc_vk_emit_cmp(e, "slt", first, end));
  return first;
}

void vlmc_vk_emit_group_units(vlmc_kernel_emit_t *e, int *first, int *end) {
  const vlmc_vk_emit_t *vk = e->target;
  *first = first_unit(e);
  int past = vlmc_kernel_emit_index_op(e, "arith.addi", *first,
                                       vlmc_kernel_emit_index(e, vk->units_per_group));
  *end = vlmc_kernel_emit_index_op(e, "arith.minui", past, vlmc_vk_emit_work(e));
}

/* ---- wide loads ---- */

int vlmc_vk_emit_load_words4(vlmc_kernel_emit_t *e, int input, int at) {
  vlmc_vk_emit_t *vk = e->target;
  vlmc_dtype_t storage = input < 0 ? VLMC_DTYPE_F32 : vlmc_kernel_emit_input_storage(e, (uint32_t)input);
  if (input < 0 || input >= 32 || (storage != VLMC_DTYPE_BF16 && storage != VLMC_DTYPE_U32)) {
    vlmc_kernel_emit_fail(e, "wide loads are for bf16 and packed u32 inputs 0..31 (input %d)", input);
    return vlmc_kernel_emit_f32(e, 0);
  }
  vk->wide_inputs |= 1u << input;
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.load %%b%d[" VLMC_SSA "] : memref<?xvector<4xi32>>", v,
                        input, at);
  return v;
}

bool vlmc_vk_emit_can_declare_quads(const vlmc_kernel_emit_t *e, int input) {
  if (input < 0 || input >= 32) return false;
  const vlmc_vk_emit_t *vk = e->target;
  vlmc_dtype_t storage = vlmc_kernel_emit_input_storage(e, (uint32_t)input);
  return (storage == VLMC_DTYPE_F32 || storage == VLMC_DTYPE_F16) && !((vk->wide_inputs >> input) & 1);
}

void vlmc_vk_emit_declare_quads(vlmc_kernel_emit_t *e, int input) {
  if (!vlmc_vk_emit_can_declare_quads(e, input)) {
    vlmc_kernel_emit_fail(e, "quad loads are for f32 and f16 inputs 0..31 not read as words (input %d)", input);
    return;
  }
  vlmc_vk_emit_t *vk = e->target;
  vk->quad_inputs |= 1u << input;
}

int vlmc_vk_emit_load_quad_vector(vlmc_kernel_emit_t *e, int input, int quad) {
  if (!is_quads(e, input)) {
    vlmc_kernel_emit_fail(e, "quad load of input %d, which was not declared as quads", input);
    return vlmc_kernel_emit_f32(e, 0);
  }
  return load_quad_vector(e, input, quad);
}

void vlmc_vk_emit_load_quad(vlmc_kernel_emit_t *e, int input, int quad, int out[4]) {
  int v = vlmc_vk_emit_load_quad_vector(e, input, quad);
  if (!is_quads(e, input)) { /* failed: v is a 0 */
    for (int i = 0; i < 4; ++i) out[i] = v;
    return;
  }
  for (int i = 0; i < 4; ++i) out[i] = quad_element(e, input, v, i, false);
}

/* The two bf16 halves of i32 word `word` widened to f32: the low half is the even element
 * (little-endian), the high half the odd one. */
void vlmc_vk_emit_bf16_word(vlmc_kernel_emit_t *e, int word, int out[2]) {
  int lo = vlmc_kernel_emit_fresh(e), hi = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.shli " VLMC_SSA ", " VLMC_SSA " : i32", lo, word, i32_constant(e, 16));
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i32", hi, word,
                        i32_constant(e, (int32_t)0xFFFF0000u));
  out[0] = vlmc_kernel_emit_fresh(e);
  out[1] = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.bitcast " VLMC_SSA " : i32 to f32", out[0], lo);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.bitcast " VLMC_SSA " : i32 to f32", out[1], hi);
}

void vlmc_vk_emit_bf16x8(vlmc_kernel_emit_t *e, int words, int out[8]) {
  for (int w = 0; w < 4; ++w) {
    int word = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = vector.extract " VLMC_SSA "[%d] : i32 from vector<4xi32>", word,
                          words, w);
    vlmc_vk_emit_bf16_word(e, word, out + 2 * w);
  }
}

int vlmc_vk_emit_load_bf16x2(vlmc_kernel_emit_t *e, int input, int word_at, int out[2]) {
  vlmc_vk_emit_t *vk = e->target;
  if (input < 0 || vlmc_kernel_emit_input_storage(e, (uint32_t)input) != VLMC_DTYPE_BF16 ||
      (input < 32 && (vk->wide_inputs >> input) & 1)) {
    vlmc_kernel_emit_fail(e, "word loads are for bf16 inputs read as 32-bit words (input %d)", input);
    out[0] = out[1] = vlmc_kernel_emit_f32(e, 0);
    return -1;
  }
  int word = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.load %%b%d[" VLMC_SSA "] : memref<?xi32>", word, input, word_at);
  vlmc_vk_emit_bf16_word(e, word, out);
  return word;
}

/* ---- workgroup cooperation ---- */

static int64_t type_bytes(const char *type) {
  if (!strcmp(type, "i64") || !strcmp(type, "f64")) return 8;
  if (!strcmp(type, "f16") || !strcmp(type, "i16")) return 2;
  if (!strcmp(type, "vector<4xf16>")) return 8;
  return 4;
}

int vlmc_vk_emit_shared(vlmc_kernel_emit_t *e, const char *type, int64_t count) {
  vlmc_vk_emit_t *vk = e->target;
  if (vk->num_shared == VLMC_VK_MAX_SHARED || count < 1) {
    vlmc_kernel_emit_fail(e, "a kernel declares at most %d workgroup arrays, each of >= 1 element",
                          VLMC_VK_MAX_SHARED);
    count = 1;
  }
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_entry_line(e, VLMC_SSA " = memref.alloc() : memref<%lldx%s, #spirv.storage_class<Workgroup>>",
                              v, (long long)count, type);
  if (vk->num_shared < VLMC_VK_MAX_SHARED) {
    vk->shared[vk->num_shared].ssa = v;
    vk->shared[vk->num_shared].type = type;
    vk->shared[vk->num_shared].count = count;
    vk->num_shared++;
  }
  vk->shared_bytes += count * type_bytes(type);
  return v;
}

/* The declaration of workgroup array `ssa`, or NULL. */
static const char *shared_type(vlmc_kernel_emit_t *e, int ssa, int64_t *count) {
  const vlmc_vk_emit_t *vk = e->target;
  for (int i = 0; i < vk->num_shared; ++i)
    if (vk->shared[i].ssa == ssa) {
      *count = vk->shared[i].count;
      return vk->shared[i].type;
    }
  vlmc_kernel_emit_fail(e, "%%v%d is not a workgroup array of this kernel", ssa);
  *count = 1;
  return "f32";
}

int vlmc_vk_emit_shared_load(vlmc_kernel_emit_t *e, int shared, int index) {
  int64_t count;
  const char *type = shared_type(e, shared, &count);
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = memref.load " VLMC_SSA "[" VLMC_SSA "] : memref<%lldx%s, "
                        "#spirv.storage_class<Workgroup>>", v, shared, index, (long long)count, type);
  return v;
}

void vlmc_vk_emit_shared_store(vlmc_kernel_emit_t *e, int shared, int value, int index) {
  int64_t count;
  const char *type = shared_type(e, shared, &count);
  vlmc_kernel_emit_line(e, "memref.store " VLMC_SSA ", " VLMC_SSA "[" VLMC_SSA "] : memref<%lldx%s, "
                        "#spirv.storage_class<Workgroup>>", value, shared, index, (long long)count, type);
}

void vlmc_vk_emit_barrier(vlmc_kernel_emit_t *e) { vlmc_kernel_emit_line(e, "gpu.barrier"); }

/* ---- cooperative matrices ---- */

bool vlmc_vk_holds_f16(const vlmc_value_t *v) {
  while (v->type.dtype == VLMC_DTYPE_F32 && v->def && v->def->kind == VLMC_OP_CAST)
    v = v->def->operands[0];
  return v->type.dtype == VLMC_DTYPE_F16;
}

static const char kAcc[] = "!gpu.mma_matrix<16x16xf32, \"COp\">";

const char *vlmc_vk_mma_acc_type(void) { return kAcc; }

int vlmc_vk_emit_mma_zero(vlmc_kernel_emit_t *e) {
  vlmc_vk_emit_t *vk = e->target;
  vk->coop_matrix = true;
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = gpu.subgroup_mma_constant_matrix " VLMC_SSA " : %s", v,
                        vlmc_kernel_emit_f32(e, 0), kAcc);
  return v;
}

int vlmc_vk_emit_mma_load_as(vlmc_kernel_emit_t *e, int shared, int index, int64_t lead,
                             const char *use, bool transpose) {
  vlmc_vk_emit_t *vk = e->target;
  vk->coop_matrix = true;
  int64_t count;
  const char *type = shared_type(e, shared, &count);
  /* a vector<4xf16> array holds f16 elements four to a slot; index and lead count slots */
  const char *element = !strcmp(type, "vector<4xf16>") ? "f16" : type;
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = gpu.subgroup_mma_load_matrix " VLMC_SSA "[" VLMC_SSA "] {leadDimension = "
                        "%lld : index%s} : memref<%lldx%s, #spirv.storage_class<Workgroup>> -> "
                        "!gpu.mma_matrix<16x16x%s, \"%s\">", v, shared, index, (long long)lead,
                        transpose ? ", transpose" : "", (long long)count, type, element, use);
  return v;
}

int vlmc_vk_emit_mma_load(vlmc_kernel_emit_t *e, int shared, int index, int64_t lead, bool b_operand) {
  return vlmc_vk_emit_mma_load_as(e, shared, index, lead, b_operand ? "BOp" : "AOp", b_operand);
}

int vlmc_vk_emit_mma(vlmc_kernel_emit_t *e, int a, int b, int c) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = gpu.subgroup_mma_compute " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA
                        " : !gpu.mma_matrix<16x16xf16, \"AOp\">, !gpu.mma_matrix<16x16xf16, \"BOp\"> -> %s",
                        v, a, b, c, kAcc);
  return v;
}

void vlmc_vk_emit_mma_store(vlmc_kernel_emit_t *e, int c, int shared, int index, int64_t lead) {
  int64_t count;
  const char *type = shared_type(e, shared, &count);
  vlmc_kernel_emit_line(e, "gpu.subgroup_mma_store_matrix " VLMC_SSA ", " VLMC_SSA "[" VLMC_SSA "] {leadDimension = "
                        "%lld : index} : %s, memref<%lldx%s, #spirv.storage_class<Workgroup>>", c, shared, index,
                        (long long)lead, kAcc, (long long)count, type);
}

int vlmc_vk_emit_subgroup_reduce(vlmc_kernel_emit_t *e, const char *op, int value,
                                 const char *type) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = gpu.subgroup_reduce %s " VLMC_SSA " : (%s) -> %s", v, op, value,
                        type, type);
  return v;
}

/* One slot per invocation: enough for any subgroup size (the partials of a reduction). */
static int reduce_slots(vlmc_kernel_emit_t *e, const char *type) {
  int v = vlmc_kernel_emit_memo_find(e, MEMO_REDUCE_SLOTS, type[0] * 256 + type[1]);
  if (v >= 0) return v;
  const vlmc_vk_emit_t *vk = e->target;
  int64_t threads = (int64_t)vk->workgroup[0] * vk->workgroup[1] * vk->workgroup[2];
  return vlmc_kernel_emit_memo_add(e, MEMO_REDUCE_SLOTS, type[0] * 256 + type[1],
                                   vlmc_vk_emit_shared(e, type, threads));
}

int vlmc_vk_emit_workgroup_reduce(vlmc_kernel_emit_t *e, const char *op, const char *sub_op,
                                  const char *type, int value, int identity) {
  int slots = reduce_slots(e, type);
  int partial = vlmc_vk_emit_subgroup_reduce(e, sub_op, value, type);
  /* gpu.lane_id has no SPIR-V lowering in MLIR 19: one elected lane per subgroup writes. */
  int first = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = spirv.GroupNonUniformElect <Subgroup> : i1", first);
  vlmc_kernel_emit_line(e, "scf.if " VLMC_SSA " {", first);
  vlmc_vk_emit_shared_store(e, slots, partial, vlmc_vk_emit_subgroup_id(e));
  vlmc_kernel_emit_line(e, "}");
  vlmc_vk_emit_barrier(e);
  /* num_subgroups >= 1: the loop is never zero-trip. */
  int k = vlmc_kernel_emit_fresh(e), acc = vlmc_kernel_emit_fresh(e), total = vlmc_kernel_emit_fresh(e);
  int zero = vlmc_kernel_emit_index(e, 0), subgroups = vlmc_vk_emit_num_subgroups(e);
  int one = vlmc_kernel_emit_index(e, 1);
  vlmc_kernel_emit_line(e, VLMC_SSA " = scf.for " VLMC_SSA " = " VLMC_SSA " to " VLMC_SSA " step " VLMC_SSA
                        " iter_args(" VLMC_SSA " = " VLMC_SSA ") -> (%s) {",
                        total, k, zero, subgroups, one, acc, identity, type);
  int p = vlmc_vk_emit_shared_load(e, slots, k);
  int next = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = %s " VLMC_SSA ", " VLMC_SSA " : %s", next, op, acc, p, type);
  vlmc_kernel_emit_line(e, "scf.yield " VLMC_SSA " : %s", next, type);
  vlmc_kernel_emit_line(e, "}");
  /* Nobody overwrites the slots (a next reduction) before everyone has read them. */
  vlmc_vk_emit_barrier(e);
  return total;
}

int vlmc_vk_emit_guard_empty(vlmc_kernel_emit_t *e, int from, int to, int loop_result, int init,
                             const char *type) {
  int ran = vlmc_kernel_emit_fresh(e), v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi slt, " VLMC_SSA ", " VLMC_SSA " : index", ran, from, to);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : %s", v, ran,
                        loop_result, init, type);
  return v;
}

vlmc_status_t vlmc_vk_emit_finish(vlmc_kernel_emit_t *e, const char *name, vlmc_strbuf_t *out) {
  return vlmc_kernel_emit_function(e, name, "", out);
}

/* ---- small arithmetic shared by the templates ---- */

int vlmc_vk_emit_cmp(vlmc_kernel_emit_t *e, const char *pred, int a, int b) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpi %s, " VLMC_SSA ", " VLMC_SSA " : index", v, pred, a, b);
  return v;
}

int vlmc_vk_emit_and(vlmc_kernel_emit_t *e, int a, int b) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.andi " VLMC_SSA ", " VLMC_SSA " : i1", v, a, b);
  return v;
}

int vlmc_vk_emit_select(vlmc_kernel_emit_t *e, int cond, int a, int b, const char *type) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.select " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : %s", v,
                        cond, a, b, type);
  return v;
}

int vlmc_vk_emit_fma(vlmc_kernel_emit_t *e, int a, int b, int c) {
  int v = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = math.fma " VLMC_SSA ", " VLMC_SSA ", " VLMC_SSA " : f32", v, a, b, c);
  return v;
}

int vlmc_vk_emit_softmax_weight(vlmc_kernel_emit_t *e, int x, int m) {
  int p = vlmc_kernel_emit_float_unary(e, "math.exp", vlmc_kernel_emit_float_op(e, "arith.subf", x, m, 0), 0);
  int masked = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.cmpf oeq, " VLMC_SSA ", " VLMC_SSA " : f32", masked, x,
                        vlmc_kernel_emit_f32(e, -INFINITY));
  return vlmc_vk_emit_select(e, masked, vlmc_kernel_emit_f32(e, 0), p, "f32");
}

/* The segment of row i: the scan over cu's boundaries narrows [*start, *end). */
/* Boundary w of cu (an index SSA; the caller keeps w inside cu) as an index. */
static int segment_bound(vlmc_kernel_emit_t *e, const vlmc_value_t *cu, int w) {
  int bound = vlmc_kernel_emit_fresh(e);
  vlmc_kernel_emit_line(e, VLMC_SSA " = arith.index_cast " VLMC_SSA " : i64 to index", bound,
                        vlmc_kernel_emit_load(e, cu, w));
  return bound;
}

/* Row i's segment [*start, *end) of cu (sorted, 0 first: the reference refuses any other):
 * the last boundary <= i and the one after it, found by a binary search (the vision's window
 * attention has ~170 boundaries at 1080p; a linear scan, a dependent load each, cost more than
 * the attention itself). Power-of-two steps from 2^30 down, each taken only when it stays
 * inside cu and its boundary is <= i; a step past cu loads nothing. Clamped into [0, *end]
 * (the keys), so a malformed cu reads no key outside k. */
static void emit_segment(vlmc_kernel_emit_t *e, const vlmc_value_t *cu, int i, int *start, int *end) {
  int zero = vlmc_kernel_emit_index(e, 0), one = vlmc_kernel_emit_index(e, 1);
  int count = vlmc_kernel_emit_dim(e, cu->type.dims[0]);
  int pos = zero;
  for (int k = 30; k >= 0; --k) {
    int next = vlmc_kernel_emit_index_op(e, "arith.addi", pos, vlmc_kernel_emit_index(e, (int64_t)1 << k));
    int inside = vlmc_vk_emit_cmp(e, "slt", next, count), taken = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = scf.if " VLMC_SSA " -> (index) {", taken, inside);
    int le = vlmc_vk_emit_cmp(e, "sle", segment_bound(e, cu, next), i);
    vlmc_kernel_emit_line(e, "scf.yield " VLMC_SSA " : index", vlmc_vk_emit_select(e, le, next, pos, "index"));
    vlmc_kernel_emit_line(e, "} else {");
    vlmc_kernel_emit_line(e, "scf.yield " VLMC_SSA " : index", pos);
    vlmc_kernel_emit_line(e, "}");
    pos = taken;
  }
  /* cu[pos] <= i < cu[pos + 1] (none past the last boundary: the keys' end) */
  int keys = *end, has = vlmc_vk_emit_cmp(e, "slt", zero, count);
  int first = vlmc_vk_emit_select(e, has, segment_bound(e, cu, vlmc_vk_emit_select(e, has, pos, zero, "index")),
                                  *start, "index");
  int after = vlmc_kernel_emit_index_op(e, "arith.addi", pos, one), more = vlmc_vk_emit_cmp(e, "slt", after, count);
  int last = vlmc_vk_emit_select(e, more, segment_bound(e, cu, vlmc_vk_emit_select(e, more, after, zero, "index")),
                                 keys, "index");
  *start = vlmc_kernel_emit_index_op(e, "arith.minsi", vlmc_kernel_emit_index_op(e, "arith.maxsi", first, zero), keys);
  *end = vlmc_kernel_emit_index_op(e, "arith.minsi", last, keys);
}

void vlmc_vk_emit_key_range(vlmc_kernel_emit_t *e, const vlmc_value_t *q, const vlmc_value_t *k,
                            const vlmc_value_t *cu, bool causal, int i, int *out_start, int *out_end) {
  int start = vlmc_kernel_emit_index(e, 0), end = vlmc_kernel_emit_dim(e, k->type.dims[0]);
  if (cu) emit_segment(e, cu, i, &start, &end);
  if (causal) { /* keys j <= i + T - S */
    int keys = vlmc_kernel_emit_dim(e, k->type.dims[0]);
    int t1 = vlmc_kernel_emit_index_op(e, "arith.addi", keys, vlmc_kernel_emit_index(e, 1));
    int i_t1 = vlmc_kernel_emit_index_op(e, "arith.addi", i, t1);
    int limit = vlmc_kernel_emit_index_op(e, "arith.subi", i_t1, vlmc_kernel_emit_dim(e, q->type.dims[0]));
    end = vlmc_kernel_emit_index_op(e, "arith.minsi", end, limit);
  }
  *out_start = start;
  *out_end = vlmc_kernel_emit_index_op(e, "arith.maxsi", end, start);
}

void vlmc_vk_emit_rows_key_range(vlmc_kernel_emit_t *e, const vlmc_value_t *q, const vlmc_value_t *k,
                                 const vlmc_value_t *cu, bool causal, int i0, int last, int64_t rows,
                                 int *start, int *end) {
  /* Both ends of a row's range never decrease with the row (sorted segments, a causal cut at
   * i + T - S): the union is [start of the first row, end of the last]. */
  int first_start, first_end, last_start, last_end;
  int i1 = vlmc_kernel_emit_index_op(e, "arith.minsi",
                                     vlmc_kernel_emit_index_op(e, "arith.addi", i0, vlmc_kernel_emit_index(e, rows - 1)),
                                     last);
  vlmc_vk_emit_key_range(e, q, k, cu, causal, i0, &first_start, &first_end);
  vlmc_vk_emit_key_range(e, q, k, cu, causal, i1, &last_start, &last_end);
  (void)first_end;
  (void)last_start;
  *start = first_start;
  *end = vlmc_kernel_emit_index_op(e, "arith.maxsi", last_end, first_start);
}

int vlmc_vk_emit_open_f32_loop(vlmc_kernel_emit_t *e, int from, int to, int step, int n,
                               const int *init, int *iv, int *inner) {
  int results = vlmc_kernel_emit_fresh(e);
  *iv = vlmc_kernel_emit_fresh(e);
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  vlmc_strbuf_printf(&line, "%%v%d:%d = scf.for %%v%d = %%v%d to %%v%d step %%v%d iter_args(", results,
                     n, *iv, from, to, step);
  for (int a = 0; a < n; ++a) {
    inner[a] = vlmc_kernel_emit_fresh(e);
    vlmc_strbuf_printf(&line, "%s%%v%d = %%v%d", a ? ", " : "", inner[a], init[a]);
  }
  vlmc_strbuf_puts(&line, ") -> (");
  for (int a = 0; a < n; ++a) vlmc_strbuf_puts(&line, a ? ", f32" : "f32");
  vlmc_strbuf_puts(&line, ") {");
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_strbuf_deinit(&line);
  return results;
}

void vlmc_vk_emit_yield_f32(vlmc_kernel_emit_t *e, int n, const int *values) {
  vlmc_strbuf_t line;
  vlmc_strbuf_init(&line);
  vlmc_strbuf_puts(&line, "scf.yield ");
  for (int a = 0; a < n; ++a) vlmc_strbuf_printf(&line, "%s%%v%d", a ? ", " : "", values[a]);
  vlmc_strbuf_puts(&line, " : ");
  for (int a = 0; a < n; ++a) vlmc_strbuf_puts(&line, a ? ", f32" : "f32");
  vlmc_kernel_emit_line(e, "%s", vlmc_strbuf_cstr(&line));
  vlmc_strbuf_deinit(&line);
}

void vlmc_vk_emit_close_f32_loop(vlmc_kernel_emit_t *e, int results, int n, const int *values,
                                 int *out) {
  vlmc_vk_emit_yield_f32(e, n, values);
  vlmc_kernel_emit_line(e, "}");
  int zero = vlmc_kernel_emit_f32(e, 0);
  for (int a = 0; a < n; ++a) { /* %r#i is not a name the helpers can take: copy it */
    out[a] = vlmc_kernel_emit_fresh(e);
    vlmc_kernel_emit_line(e, VLMC_SSA " = arith.addf %%v%d#%d, " VLMC_SSA " : f32", out[a], results, a,
                          zero);
  }
}

int64_t vlmc_vk_static_rows(const vlmc_type_t *xt) {
  int64_t rows = 1;
  for (uint32_t d = 0; d + 1 < xt->rank; ++d) {
    if (!vlmc_dim_is_static(xt->dims[d])) return -1;
    rows *= xt->dims[d].off;
  }
  return rows;
}
